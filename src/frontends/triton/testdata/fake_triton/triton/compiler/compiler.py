import hashlib
import json
import os
import tempfile
from collections import namedtuple

import triton
from triton.backends.compiler import CUDAOptions


class ASTSource:
    def __init__(self, fn, signature, constexprs=None, attrs=None):
        self.fn = fn
        self.name = fn.__name__
        self.signature = signature
        self.constants = dict(constexprs or {})
        self.attrs = dict(attrs or {})


class Backend:
    def parse_options(self, opts):
        return CUDAOptions(**{k: v for k, v in opts.items() if k in CUDAOptions.__dataclass_fields__})


def make_backend(target):
    return Backend()


class CompiledKernel:
    def __init__(self, metadata, cubin):
        self.metadata = namedtuple("KernelMetadata", sorted(metadata))(**metadata)
        self.asm = {"cubin": cubin}


_cache = os.environ.get("TRITON_CACHE_DIR") or tempfile.mkdtemp(prefix="fake-triton-cache-")


def compile(src, target=None, options=None):
    """Fake: the 'cubin' is a hash of the source text, the constexprs and the options."""
    if "FAIL" in src.fn.src:
        raise RuntimeError(f"at 3:4: fake Triton compile error in {src.name}")
    opts = Backend().parse_options(options or {})
    payload = json.dumps([src.fn.src, sorted((str(k), repr(v)) for k, v in src.constants.items()), repr(opts)])
    cubin = b"FAKECUBIN" + hashlib.sha256(payload.encode()).digest()
    md = {"name": src.name, "target": target, "shared": 0, **opts.__dict__, "hash": "h"}
    os.makedirs(_cache, exist_ok=True)
    path = os.path.join(_cache, hashlib.sha256(cubin).hexdigest()[:16] + ".cubin")
    cache_hit = os.path.exists(path)
    with open(path, "wb") as f:
        f.write(cubin)
    if triton.knobs.compilation.listener:
        triton.knobs.compilation.listener(src=src, metadata=md, metadata_group={src.name + ".cubin": path, src.name + ".json": path + ".json"}, times=None, cache_hit=cache_hit)
    return CompiledKernel(md, cubin)
