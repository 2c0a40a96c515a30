#!/usr/bin/env python3
"""Launch the captured Triton kernel through Triton's own JIT on the captured data.

Written by `kerncap export`; needs Python with Triton and PyTorch, nothing of kerncap. Each pointer
argument becomes a flat torch tensor of its element type over the captured region it points into
(from the pointer to the region's end: the capture records the pointer, not the tensor's shape),
filled from the before state; scalars take their captured values, constexprs and num_warps /
num_stages the captured (pinned) config. After one launch every region is compared with the app's
after state. Runs under TRITON_INTERPRET=1 (on the CPU too), pdb, proton.

Usage: python3 repro.py [--bench] [--no-verify]
  --bench: triton.testing.do_bench of the launch
  --no-verify: skip the check of the data files' checksums (it reads every stored byte once)
Exit: 0 match, 1 mismatch, 3 a data file damaged (its size or a checksum not the export's), 2 another error.
"""
import importlib.util
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
# kcdata from this folder by its path; then this folder leaves the import path, so the kernel file runs alone, as
# validate runs it: a module beside it (src/helper.py, a triton.py) is never imported in its place or by it unshown
_spec = importlib.util.spec_from_file_location("kcdata", os.path.join(here, "kcdata.py"))
kcdata = importlib.util.module_from_spec(_spec)
sys.modules["kcdata"] = kcdata
_spec.loader.exec_module(kcdata)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]

EXIT_ERROR, EXIT_DAMAGED = 2, 3


def uncaught(kind, value, tb):
    """Any error this script did not foresee is exit 2 (an error), never Python's 1, which is MISMATCH here.
    Its traceback quotes the kernel file's lines and the error's text: each line shown escaped (kcdata.shown)."""
    import traceback
    for line in "".join(traceback.format_exception(kind, value, tb)).splitlines():
        print(kcdata.shown(line), file=sys.stderr)
    sys.stderr.flush()
    os._exit(EXIT_ERROR)


sys.excepthook = uncaught


def warned(message, category, filename, lineno, file=None, line=None):
    """A warning (compile()'s SyntaxWarning quotes the kernel file's line) shown escaped, as an error is."""
    import warnings
    for text in warnings.formatwarning(message, category, filename, lineno, line).splitlines():
        print(kcdata.shown(text), file=sys.stderr)


import warnings  # noqa: E402

warnings.showwarning = warned


def fail(message):
    print(f"error: {kcdata.shown(message)}", file=sys.stderr)
    sys.exit(EXIT_ERROR)


ex = kcdata.Export(here)
if "--no-verify" not in sys.argv:
    try:
        ex.verify()
    except kcdata.Damaged as e:
        print(f"error: {e} (a damaged file would replay into a false MISMATCH)\n"
              "  Copy or unpack the export again from its source; `kerncap inspect data --verify` checks the capture in data/ the same way.", file=sys.stderr)
        sys.exit(EXIT_DAMAGED)
t = ex.doc["triton"]
if t["storedPointer"]:
    p = t["storedPointer"]
    print(f"note: region {p['region']} holds the VA {kcdata.shown(p['va'])} (offset {p['offset']}), inside a captured region: if the kernel "
          "follows pointers stored in memory, it needs the memory at the captured VAs, which tensors here do not have. "
          "The driver-API program replays at those VAs: make run (README.md).", file=sys.stderr)

try:
    import torch
    import triton
except Exception as e:  # noqa: BLE001
    fail(f"repro.py needs PyTorch and Triton ({type(e).__name__}: {e}); the kernel was captured with Triton {kcdata.shown(t['tritonVersion'])}")

interpret = os.environ.get("TRITON_INTERPRET") == "1"
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu" and not interpret:
    fail("no GPU: run with TRITON_INTERPRET=1 to interpret the kernel on the CPU")

# the kernel file runs from its own bytes, as UTF-8: never from a bytecode cache beside it (src/__pycache__,
# which Python would load in its place, unchecked against the source), never under another encoding its
# coding line names (UTF-7 turns what reads as a comment into code): the text shown is the text that runs
sys.dont_write_bytecode = True
if not isinstance(t.get("kernelFile"), str):
    fail("kerncap-export.json names no kernel file (its triton.kernelFile): export the capture again")
path = os.path.join(here, t["kernelFile"])
with open(path, "rb") as f:
    source = f.read()
for line in source.splitlines()[:2]:
    cookie = re.match(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", line)
    if cookie and cookie.group(1).decode("ascii", "replace").lower().replace("_", "-") not in ("utf-8", "utf8", "utf-8-sig", "ascii", "us-ascii"):
        fail(f"{path}: its coding line names {cookie.group(1).decode('ascii', 'replace')}: the kernel file runs as UTF-8 only; save it as UTF-8 and remove the coding line")
    if line.strip() and not line.lstrip().startswith(b"#"):
        break
try:
    text = source.decode("utf-8-sig")
except UnicodeDecodeError as e:
    fail(f"{path}: not UTF-8 (byte {e.start}): the kernel file runs as UTF-8 only")
spec = importlib.util.spec_from_loader("kernel", loader=None, origin=path)
mod = importlib.util.module_from_spec(spec)
mod.__file__ = path
sys.modules["kernel"] = mod
exec(compile(text, path, "exec", dont_inherit=True), mod.__dict__)
fn = getattr(mod, t["fnName"])
# under TRITON_INTERPRET=1, @triton.jit makes an InterpretedFunction (no JITFunction): stop there too
while not (isinstance(fn, triton.runtime.jit.JITFunction) or type(fn).__name__ == "InterpretedFunction") and hasattr(fn, "fn"):
    fn = fn.fn  # an @triton.autotune / @triton.heuristics wrapper: the pinned config is given below

DTYPE = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i64": torch.int64,
         "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8, "i1": torch.bool}
regions = [torch.frombuffer(ex.region_bytes(i, "before"), dtype=torch.uint8).to(device) for i in range(len(ex.regions))]
args = []
for a in t["args"]:
    if a["kind"] == "tensor":
        size = kcdata.ELEMENT[a["dtype"]][1]
        args.append(regions[a["region"]][a["offset"]:a["offset"] + a["numel"] * size].view(DTYPE.get(a["dtype"], torch.uint8)))
    elif a["kind"] == "scalar":
        v = a["value"]
        args.append(int(v) if isinstance(v, str) else v)
    else:
        fail(f"argument {kcdata.shown(a['name'])} points at {kcdata.shown(a['va'])}, outside every captured region: the driver-API program (make run) replays it")
consts = {c["name"]: c["value"] if c["value"] is not None else eval(c["expr"], vars(mod)) for c in t["constexprs"]}


def launch():
    fn[tuple(t["grid"])](*args, **consts, **t["options"])


launch()
if device == "cuda":
    torch.cuda.synchronize()
tol = ex.doc["tolerance"]
bad = 0
for i, r in enumerate(ex.regions):
    verdict, detail = kcdata.judge(regions[i].cpu().numpy().tobytes(), ex.region_bytes(i, "after"), ex.region_bytes(i, "before"), r["changed"], r["dtype"], tol["atol"], tol["rtol"], r.get("multiset", False))
    if verdict != "bit-exact":
        print(f"  {verdict} region {kcdata.shown(r['va'])} ({r['size']} bytes, {kcdata.shown(r['dtype'])}){': ' + detail if detail else ''}")
    bad |= verdict == "mismatch"
if "--bench" in sys.argv and device == "cuda":
    print(f"  do_bench: {triton.testing.do_bench(launch) * 1000:.2f} us (the memory is not put back between launches)")
print(f"{'MISMATCH' if bad else 'MATCH'}: {len(ex.regions)} regions compared with the app's after state")
sys.exit(1 if bad else 0)
