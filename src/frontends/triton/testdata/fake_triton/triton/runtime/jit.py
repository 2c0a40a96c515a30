import inspect
import re
import textwrap

import triton


class JITFunction:
    def __init__(self, fn, noinline=None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__globals__ = fn.__globals__
        self.noinline = noinline
        self.arg_names = list(inspect.signature(fn).parameters)
        raw, self.starting_line_number = inspect.getsourcelines(fn)
        src = textwrap.dedent("".join(raw))
        self.src = src[re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE).start():]
        self.cache = {}

    def run(self, *args, grid=(1,), warmup=False, **kwargs):
        from triton.compiler import ASTSource, compile
        from triton.backends.compiler import GPUTarget

        bound = dict(zip(self.arg_names, args), **{k: v for k, v in kwargs.items() if k in self.arg_names})
        opts = {k: v for k, v in kwargs.items() if k not in self.arg_names}
        sig, consts, attrs = {}, {}, {}
        for i, n in enumerate(self.arg_names):
            v = bound[n]
            if n.isupper() or isinstance(v, triton.language.dtype):
                sig[n] = "constexpr"
                consts[(i,)] = v
            elif isinstance(v, FakeTensor):
                sig[n] = "*" + v.dtype_name
                attrs[(i,)] = [["tt.divisibility", 16]]
            else:
                sig[n] = "i32"
        key = repr((sig, sorted(consts.items()), sorted(opts.items())))
        k = self.cache.get(key)
        if k is None:
            k = self.cache[key] = compile(ASTSource(self, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=opts)
        triton.knobs.runtime.launch_enter_hook(LazyDict({"name": k.metadata.name, "function": 1, "stream": 0}))
        return k

    def __getitem__(self, grid):
        return lambda *a, **k: self.run(*a, grid=grid, **k)


class LazyDict:
    def __init__(self, data):
        self.data = data


class FakeTensor:
    def __init__(self, dtype_name="fp32"):
        self.dtype_name = dtype_name
        self.dtype = "torch.float32" if dtype_name == "fp32" else "torch." + dtype_name


def jit(fn=None, **kw):
    if fn is None:
        return lambda f: JITFunction(f, **kw)
    return JITFunction(fn)
