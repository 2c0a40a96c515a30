#!/usr/bin/env python3
"""Compile the pinned Triton kernel of a kerncap reproducer into a cubin; print its path last.

Reads pinned.json (written by kerncap at capture) and src/<kernel file>. No autotuning: the
signature, constexpr values, specialization attributes and compile options are the ones of the
launch that was captured. Exit 2 when the kernel does not compile, 3 when the toolchain is wrong.
"""
import importlib.util
import json
import os
import re
import sys
import traceback

# kerncap tune runs its own copy of this script: `repro.py --dir DIR --config JSON --out CUBIN`
# compiles one config ({"kwargs": {NAME: value}, "options": {"num_warps": …}}) instead of the
# pinned one, for the reproducer in DIR, to CUBIN (its launch metadata beside it, CUBIN.json)
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
here = args.get("--dir") or os.path.dirname(os.path.abspath(__file__))
tune = json.loads(args["--config"]) if "--config" in args else None
with open(os.path.join(here, "pinned.json")) as f:
    pin = json.load(f)


def one_line(text):
    """text as one line: controls and line separators escaped (pinned.json's names may hold a newline)."""
    return re.sub("[\x00-\x1f\x7f-\x9f\u2028\u2029]", lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}", str(text))


def fail(msg, code=2):
    sys.stderr.write(f"repro.py: {one_line(msg)}\n")
    sys.exit(code)


def tup(x):
    """JSON has no tuples; Triton's options and signatures use them."""
    return tuple(tup(v) for v in x) if isinstance(x, list) else x


try:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
except Exception as e:
    fail(f"no usable Triton in {os.environ.get('KERNCAP_PYTHON_USED') or sys.executable} ({type(e).__name__}: {e}); the capture ran {pin['python']} "
         f"with Triton {pin['tritonVersion']}. Set KERNCAP_PYTHON to a Python that has it.", 3)

if triton.__version__ != pin["tritonVersion"]:
    msg = (f"Triton version differs: captured with {pin['tritonVersion']}, {os.environ.get('KERNCAP_PYTHON_USED') or sys.executable} has {triton.__version__}")
    if os.environ.get("KERNCAP_FORCE") != "1":
        fail(msg + ". Another version can compile different code; pass --allow-version-mismatch to `kerncap validate` "
             "(or set KERNCAP_FORCE=1) to try anyway.", 3)
    sys.stderr.write(f"repro.py: warning: {one_line(msg)} (forced)\n")

path = os.path.join(here, "src", pin["kernelFile"])
# the kernel file runs from its own bytes, read here as UTF-8: never from a bytecode cache beside it
# (src/__pycache__, which Python would load in its place, unchecked against the source), and never
# under another encoding its coding line names (UTF-7 turns what reads as a comment into code): the
# text kerncap showed before --trust is the text that runs
sys.dont_write_bytecode = True
with open(path, "rb") as f:
    source = f.read()
for line in source.splitlines()[:2]:
    cookie = re.match(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", line)
    if cookie and cookie.group(1).decode("ascii", "replace").lower().replace("_", "-") not in ("utf-8", "utf8", "utf-8-sig", "ascii", "us-ascii"):
        fail(f"{path}: its coding line names {cookie.group(1).decode('ascii', 'replace')}: kerncap runs a kernel file as UTF-8 only "
             "(the text it shows is UTF-8); save it as UTF-8 and remove the coding line")
    if line.strip() and not line.lstrip().startswith(b"#"):
        break
try:
    text = source.decode("utf-8-sig")
except UnicodeDecodeError as e:
    fail(f"{path}: not UTF-8 (byte {e.start}): kerncap runs a kernel file as UTF-8 only")
spec = importlib.util.spec_from_loader("kerncap_kernel", loader=None, origin=path)
mod = importlib.util.module_from_spec(spec)
mod.__file__ = path
sys.modules["kerncap_kernel"] = mod
try:
    exec(compile(text, path, "exec", dont_inherit=True), mod.__dict__)
except SyntaxError as e:
    sys.stderr.write(f"repro.py: {one_line(f'{e.filename}:{e.lineno}:{e.offset or 0}: SyntaxError: {e.msg}')}\n    {one_line((e.text or '').rstrip())}\n")
    sys.exit(2)
except Exception:
    traceback.print_exc()
    fail(f"importing {path} failed")

fn = getattr(mod, pin["fnName"], None)
for _ in range(8):
    if fn is None or isinstance(fn, triton.runtime.jit.JITFunction):
        break
    fn = getattr(fn, "fn", None)
if not isinstance(fn, triton.runtime.jit.JITFunction):
    fail(f"{path} has no @triton.jit function named {pin['fnName']} (the replay launches that kernel)")

env = {"tl": tl, "triton": triton, **vars(mod)}
constexprs = {}
for c in pin["constexprs"]:
    if "expr" not in c:
        fail(f"constexpr {c['name']} could not be recorded at capture: {c.get('error')}")
    constexprs[tuple(c["path"])] = tune["kwargs"][c["name"]] if tune and c["name"] in tune["kwargs"] else eval(c["expr"], env)
signature = {k: tup(v) for k, v in pin["signature"].items()}
attrs = {tuple(a["path"]): a["attrs"] for a in pin["attrs"]}
t = pin["target"]
target = GPUTarget(t["backend"], t["arch"], t["warp_size"])
backend = make_backend(target)
fields = type(backend.parse_options({})).__dataclass_fields__
options = {k: tup(v) for k, v in pin["options"].items() if k in fields and v is not None}
if tune:
    unknown = set(tune["kwargs"]) - {c["name"] for c in pin["constexprs"]}
    if unknown:
        fail(f"the config sets {', '.join(sorted(unknown))}, which {pin['fnName']} has no constexpr parameter of")
    options.update({k: v for k, v in tune["options"].items() if k in fields})
if any(not os.path.exists(p) for _, p in options.get("extern_libs") or ()):
    options.pop("extern_libs")  # the capture's libdevice path is gone: Triton's default

try:
    kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options)
except Exception as e:
    sys.stderr.write(f"{type(e).__name__}: {e}\n")
    fail(f"Triton could not compile {pin['fnName']} from {path}")

md = kernel.metadata
if md.name != pin["kernelName"]:
    fail(f"the compiled kernel is named {md.name}, the capture launches {pin['kernelName']}; keep the function's name")
if pin.get("capturedSharedBytes") is not None and md.shared > pin["capturedSharedBytes"]:
    sys.stderr.write(f"repro.py: warning: the kernel now needs {md.shared} bytes of shared memory, "
                     f"the captured launch gave {pin['capturedSharedBytes']}\n")
if getattr(md, "global_scratch_size", 0) and not pin["options"].get("global_scratch_size"):
    sys.stderr.write("repro.py: warning: the kernel now needs global scratch memory; the captured launch passed none\n")
os.makedirs(os.path.join(here, "build"), exist_ok=True)
out = args.get("--out") or os.path.join(here, "build", pin["kernelName"] + ".cubin")
with open(out + ".tmp", "wb") as f:
    f.write(kernel.asm["cubin"])
os.replace(out + ".tmp", out)
# what the launch of this build needs: its block (num_warps) and dynamic shared memory (kerncap
# launches the rebuilt kernel with them: src/frontends/triton/launch.ts; kerncap tune, each config)
with open(out + ".json.tmp", "w") as f:
    json.dump({"shared": md.shared, "num_warps": md.num_warps, "num_ctas": getattr(md, "num_ctas", 1)}, f)
os.replace(out + ".json.tmp", out + ".json")
print(out)
