#!/usr/bin/env python3
"""Build a platform wheel that carries the one kerncap executable (dist/kerncap), so that
`pip install kerncap-VERSION-py3-none-manylinux_2_NN_ARCH.whl` (or uv, pipx) puts `kerncap` on PATH.

The executable goes in the wheel's kerncap-VERSION.data/scripts/: an installer copies a script that
does not start with `#!python` as it is and makes it executable, so nothing of Python runs at run
time. Python's standard library only (zipfile, hashlib, base64): the RECORD lists every file with
its urlsafe-base64 SHA-256 and size (PEP 376, PEP 427; the binary distribution format spec at
packaging.python.org).

The wheel also holds the manual page (docs/kerncap.1, into PREFIX/share/man/man1), the manual
(docs/*.md, into PREFIX/share/doc/kerncap), the small
Python package python/kerncap (`python -m kerncap ARGS` execs
the installed executable), the LICENSE, and metadata (Metadata-Version 2.1, core metadata spec at
packaging.python.org): summary and long description from README.md (its relative links made
absolute against the Source URL when one is known), licence, classifiers, project URLs.

The platform tag is read from the executable itself (PEP 600): its ELF machine (x86_64, aarch64)
and the newest GLIBC_2.N symbol version that it or the capture library embedded in it asks for
(the library, built on the build machine, is loaded into the application's process there; its
versions are pinned to 2.17 by c/common/kc_glibc.h). 2.17 and below are tagged
manylinux_2_17_ARCH.manylinux2014_ARCH (PEP 599's alias, for pip before 20.3), which installs on
glibc 2.17 and every later one (RHEL 7/8/9, Ubuntu 18.04 on; manylinux_2_28 systems included).

Project URLs: package.json's homepage, repository and bugs, then each --project-url LABEL=URL.

Usage: python3 scripts/build-wheel.py [--binary dist/kerncap] [--out dist] [--version V]
                                      [--compresslevel 0-9] [--project-url LABEL=URL]...
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
# the oldest glibc a tag names: manylinux2014 (x86_64's base versions are older, aarch64 starts here)
GLIBC_FLOOR = 17
CLASSIFIERS = [
    "Development Status :: 3 - Alpha",
    "Environment :: Console",
    "Environment :: GPU :: NVIDIA CUDA",
    "Intended Audience :: Developers",
    "Intended Audience :: Science/Research",
    "License :: OSI Approved :: MIT License",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: C",
    "Topic :: Software Development :: Debuggers",
    "Topic :: Software Development :: Testing",
    "Topic :: System :: Benchmark",
]


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
    arch = MACHINES[machine]
    newest = max(minors)
    if newest <= GLIBC_FLOOR:
        return f"manylinux_2_{GLIBC_FLOOR}_{arch}.manylinux2014_{arch}"
    return f"manylinux_2_{newest}_{arch}"


def project_urls(extra):
    """[(label, url)]: package.json's homepage, repository(.url) and bugs(.url), then LABEL=URL args."""
    pkg = json.load(open(os.path.join(ROOT, "package.json"), encoding="utf-8"))
    urls = []
    field = lambda v: v.get("url") if isinstance(v, dict) else v
    for key, label in (("homepage", "Homepage"), ("repository", "Source"), ("bugs", "Issues")):
        url = field(pkg.get(key))
        if isinstance(url, str) and url:
            urls.append((label, re.sub(r"^git\+|\.git$", "", url)))
    for arg in extra:
        label, sep, url = arg.partition("=")
        if not sep or not label or not re.match(r"https?://", url):
            sys.exit(f"build-wheel: --project-url {arg!r} is not LABEL=https://...")
        urls.append((label, url))
    return urls


INSTALL = """## Install

```
pip install ./kerncap-*.whl    # a release's wheel; or uv tool install, pipx install
kerncap --help                 # the executable, on the environment's PATH
python -m kerncap --version    # the same executable, where that bin/ is not on PATH
kerncap demo cap && kerncap inspect cap    # a built-in sample capture, no GPU needed
kerncap doctor                 # what this machine can do, with fixes
```

The wheel holds one executable (no Python runs at run time) for Linux with glibc 2.17 or later.
Capturing and replaying need an NVIDIA GPU with its driver, and CUPTI (the CUDA toolkit or the
`nvidia-cuda-cupti` wheels); rebuilding a CUDA reproducer needs nvcc.

"""


def long_description(urls):
    """README.md, with links to the repository's own files made absolute against the Source URL
    (PyPI shows the description away from the repository); without one, such links keep their text only."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    # the README's quick start builds from a clone; someone reading this has the wheel
    text = re.sub(r"^## Quick start\n.*?(?=^## )", INSTALL, text, count=1, flags=re.S | re.M)
    source = dict(urls).get("Source")

    def fix(m):
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+:|#", target):
            return m.group(0)
        return f"[{label}]({source.rstrip('/')}/blob/main/{target})" if source else label

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", fix, text)


def python_package():
    """[(path in the wheel, bytes)] of python/kerncap/*.py."""
    pkg = os.path.join(ROOT, "python", "kerncap")
    return [(f"kerncap/{n}", open(os.path.join(pkg, n), "rb").read()) for n in sorted(os.listdir(pkg)) if n.endswith(".py")]


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build(binary, out, version, level, extra_urls=()):
    tag = f"py3-none-{platform_tag(binary)}"
    name = "kerncap"
    dist_info = f"{name}-{version}.dist-info"
    urls = project_urls(extra_urls)
    summary = json.load(open(os.path.join(ROOT, "package.json"), encoding="utf-8"))["description"]
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {name}",
            f"Version: {version}",
            f"Summary: {summary}",
            "Keywords: cuda,gpu,kernel,reproducer,cupti,triton,replay,benchmark",
            "License: MIT",
            *(f"Classifier: {c}" for c in CLASSIFIERS),
            *(f"Project-URL: {label}, {url}" for label, url in urls),
            "Requires-Python: >=3.7",
            "Description-Content-Type: text/markdown",
            "",
            long_description(urls),
        ]
    )
    # a compressed tag set (a.b in the platform) is one Tag line per tag in WHEEL
    tags = [f"py3-none-{p}" for p in tag.split("-")[2].split(".")]
    wheel = "\n".join(["Wheel-Version: 1.0", "Generator: kerncap scripts/build-wheel.py", "Root-Is-Purelib: false", *(f"Tag: {t}" for t in tags), ""])
    exe = open(binary, "rb").read()
    files = [
        (f"{name}-{version}.data/scripts/kerncap", exe, 0o755),
        *((path, data, 0o644) for path, data in python_package()),
        (f"{dist_info}/LICENSE", open(os.path.join(ROOT, "LICENSE"), "rb").read(), 0o644),
        # the manual page (scripts/make-man.ts): installed as PREFIX/share/man/man1/kerncap.1
        (f"{name}-{version}.data/data/share/man/man1/kerncap.1", open(os.path.join(ROOT, "docs", "kerncap.1"), "rb").read(), 0o644),
        # the manual the man page and the messages point at (docs/*.md), as PREFIX/share/doc/kerncap/
        *(
            (f"{name}-{version}.data/data/share/doc/kerncap/{f}", open(os.path.join(ROOT, "docs", f), "rb").read(), 0o644)
            for f in sorted(os.listdir(os.path.join(ROOT, "docs")))
            if f.endswith(".md")
        ),
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
    ap.add_argument("--project-url", action="append", default=[], metavar="LABEL=URL")
    ap.add_argument("--check-args", action="store_true", help="only check the arguments (scripts/release.sh, before it builds)")
    a = ap.parse_args()
    if a.check_args:
        return
    if not os.path.isfile(a.binary):
        sys.exit(f"build-wheel: no executable at {a.binary}; build it first with bash scripts/build.sh")
    if not re.fullmatch(r"\d+(\.\d+)*([ab]\d+|rc\d+)?(\.post\d+)?(\.dev\d+)?", a.version):
        sys.exit(f"build-wheel: {a.version!r} is not a PEP 440 version")
    print(build(a.binary, a.out, a.version, a.compresslevel, a.project_url))


if __name__ == "__main__":
    main()
