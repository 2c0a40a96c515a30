#!/usr/bin/env python3
"""Build a platform wheel that carries the one kerncap executable (dist/kerncap), so that
`pip install kerncap-VERSION-py3-none-manylinux_2_NN_ARCH.whl` (or uv, pipx) puts `kerncap` on PATH.

The executable goes in the wheel's kerncap-VERSION.data/scripts/: an installer copies a script that
does not start with `#!python` as it is and makes it executable, so nothing of Python runs at run
time. Python's standard library only (zipfile, hashlib, base64): the RECORD lists every file with
its urlsafe-base64 SHA-256 and size (PEP 376, PEP 427; the binary distribution format spec at
packaging.python.org).

The platform tag is read from the executable itself (PEP 600): its ELF machine (x86_64, aarch64)
and the newest GLIBC_2.N symbol version that it or the capture library embedded in it asks for
(the library, built on the build machine, is loaded into the application's process there).

Usage: python3 scripts/build-wheel.py [--binary dist/kerncap] [--out dist] [--version V]
                                      [--compresslevel 0-9]
Prints the wheel's path.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ELF e_machine → the architecture in manylinux tags
MACHINES = {62: "x86_64", 183: "aarch64"}


def platform_tag(binary):
    """manylinux_2_N_ARCH from the ELF header and the GLIBC_2.N versions the file names."""
    with open(binary, "rb") as f:
        head = f.read(20)
        if head[:4] != b"\x7fELF":
            sys.exit(f"build-wheel: {binary} is not an ELF executable")
        machine = int.from_bytes(head[18:20], "little")
        if machine not in MACHINES:
            sys.exit(f"build-wheel: {binary} is for ELF machine {machine}; wheels are made for x86_64 and aarch64")
        f.seek(0)
        minors = [int(m) for m in re.findall(rb"GLIBC_2\.(\d+)", f.read())]
    if not minors:
        sys.exit(f"build-wheel: {binary} names no GLIBC version (a static executable is not what scripts/build.sh writes)")
    return f"manylinux_2_{max(minors)}_{MACHINES[machine]}"


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build(binary, out, version, level):
    tag = f"py3-none-{platform_tag(binary)}"
    name = "kerncap"
    dist_info = f"{name}-{version}.dist-info"
    readme = open(os.path.join(ROOT, "docs", "install.md"), encoding="utf-8").read()
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {name}",
            f"Version: {version}",
            "Summary: Pull one GPU kernel launch out of an application into a replayable, editable reproducer",
            "Requires-Python: >=3.7",
            "Description-Content-Type: text/markdown",
            "",
            readme,
        ]
    )
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: kerncap scripts/build-wheel.py", "Root-Is-Purelib: false", f"Tag: {tag}", ""])
    exe = open(binary, "rb").read()
    files = [
        (f"{name}-{version}.data/scripts/kerncap", exe, 0o755),
        (f"{dist_info}/METADATA", metadata.encode(), 0o644),
        (f"{dist_info}/WHEEL", wheel.encode(), 0o644),
    ]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{name}-{version}-{tag}.whl")
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as z:
            record = []
            for arc, data, mode in files:
                info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))  # fixed: the same inputs give the same wheel
                info.external_attr = (0o100000 | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data, compresslevel=level)
                record.append(record_line(arc, data))
            record.append(f"{dist_info}/RECORD,,")
            info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100644) << 16
            z.writestr(info, "\n".join(record) + "\n", compress_type=zipfile.ZIP_DEFLATED, compresslevel=level)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "dist", "kerncap"))
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"))
    ap.add_argument("--version", default=json.load(open(os.path.join(ROOT, "package.json")))["version"])
    ap.add_argument("--compresslevel", type=int, default=9, choices=range(10), metavar="0-9")
    a = ap.parse_args()
    if not os.path.isfile(a.binary):
        sys.exit(f"build-wheel: no executable at {a.binary}; build it first with bash scripts/build.sh")
    if not re.fullmatch(r"\d+(\.\d+)*([ab]\d+|rc\d+)?(\.post\d+)?(\.dev\d+)?", a.version):
        sys.exit(f"build-wheel: {a.version!r} is not a PEP 440 version")
    print(build(a.binary, a.out, a.version, a.compresslevel))


if __name__ == "__main__":
    main()
