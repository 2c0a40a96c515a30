# kerncap Triton shim: put first on PYTHONPATH by `kerncap run` (src/frontends/triton/shim.ts).
#
# Contract
#   reads   KERNCAP_OUT (folder to write into; the shim does nothing without it),
#           KERNCAP_TRITON ("0" disables the shim), KERNCAP_TRITON_LAUNCHES ("0": no launch events),
#           CUDA_INJECTION64_PATH (the capture library; used only to tell it about autotuner
#           benchmark launches when it exports kerncap_set_ignore_launches(int)).
#   writes  $KERNCAP_OUT/triton.jsonl, one JSON object a line, appended with one write(2) each
#           (several processes, e.g. Inductor compile workers, may append at once):
#             {"event": "compile", ...}   one per triton.compile() call, cache hits included
#             {"event": "autotune", ...}  the autotuner's chosen config for a key (once per key)
#             {"event": "launch", ...}    one per launch through Triton's launcher
#           $KERNCAP_OUT/triton-src/<sha16>-<name>: a copy of each kernel source file.
#   hooks   triton.knobs.compilation.listener (reports cache hits too, so a warm cache does not
#           hide a kernel), triton.knobs.runtime.launch_enter_hook, Autotuner.run/_bench,
#           and Inductor's Benchmarker*.benchmark_gpu (its config timing: benchmark launches).
#           Each hook chains to what was there before and never raises into the application.
#
# Triton is not imported here: a meta-path finder installs the hooks right after the application
# imports triton, so Python processes that never use Triton pay nothing.
import os
import sys


def _kerncap_chain_sitecustomize():
    """Run the sitecustomize that this one shadows (the next one on sys.path), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved_path = list(sys.path)
    me = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    except Exception as e:  # the chained one failing must not stop the app
        sys.stderr.write(f"[kerncap] the application's sitecustomize raised {type(e).__name__}: {e}\n")
    finally:
        sys.path[:] = saved_path
        if "sitecustomize" not in sys.modules and me is not None:
            sys.modules["sitecustomize"] = me


_kerncap_chain_sitecustomize()

_OUT = os.environ.get("KERNCAP_OUT", "")
_ENABLED = bool(_OUT) and os.environ.get("KERNCAP_TRITON", "1") != "0"


def _kerncap_setup():
    import hashlib
    import json
    import threading

    out_file = os.path.join(_OUT, "triton.jsonl")
    src_dir = os.path.join(_OUT, "triton-src")
    tls = threading.local()
    state = {"launch_seq": 0, "copied": {}, "autotune_seen": {}, "ignore_fn": None, "lock": threading.Lock()}

    def warn(msg):
        if os.environ.get("KERNCAP_LOG") == "1":
            sys.stderr.write(f"[kerncap] triton shim: {msg}\n")

    def emit(obj):
        line = (json.dumps(obj, default=jsonable_default, separators=(",", ":")) + "\n").encode()
        fd = os.open(out_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def jsonable_default(x):
        import dataclasses

        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
        if isinstance(x, (set, frozenset)):
            return sorted(x, key=repr)
        if isinstance(x, bytes):
            return x.hex()
        if hasattr(x, "_asdict"):
            return x._asdict()
        v = getattr(x, "value", None)
        if v is not None and type(x).__name__ == "constexpr":
            return v
        return repr(x)

    def depth(name):
        return getattr(tls, name, 0)

    def bump(name, d):
        setattr(tls, name, depth(name) + d)

    # --- source of a JIT function and the @triton.jit helpers it calls -------------------------
    def unwrap_jit(obj, JIT):
        seen = 0
        while obj is not None and not isinstance(obj, JIT) and hasattr(obj, "fn") and seen < 8:
            obj = obj.fn
            seen += 1
        return obj if isinstance(obj, JIT) else None

    def fn_src(j):
        s = getattr(j, "src", None)
        if isinstance(s, str) and s.strip():
            return s
        import inspect
        import re
        import textwrap

        s = textwrap.dedent(inspect.getsource(j.fn))
        return s[re.search(r"^def\s+\w+\s*\(", s, re.MULTILINE).start():]

    def const_expr(v, tl, JIT, visit):
        """A Python expression that rebuilds a constexpr value in the generated kernel module."""
        if isinstance(v, tl.constexpr):
            return const_expr(v.value, tl, JIT, visit)
        if v is None or isinstance(v, (bool, int, str)):
            return repr(v)
        if isinstance(v, float):
            return repr(v) if v == v and v not in (float("inf"), float("-inf")) else f"float({str(v)!r})"
        if isinstance(v, tl.dtype):
            return f"tl.dtype({v.name!r})"
        if isinstance(v, tuple):
            return "(" + "".join(const_expr(x, tl, JIT, visit) + ", " for x in v) + ")"
        j = unwrap_jit(v, JIT)
        if j is not None:
            visit(j)
            return j.__name__
        raise ValueError(f"constexpr value of type {type(v).__name__} cannot be written as source")

    def kernel_module(jit, tl, JIT):
        """Standalone module text: imports, module constants, helpers, then the kernel."""
        import ast
        import builtins
        import types

        imports, consts, funcs, unresolved = {}, {}, [], []
        visited = set()

        def visit(j):
            if id(j) in visited:
                return
            visited.add(id(j))
            src = fn_src(j)
            g = getattr(j, "__globals__", None) or j.fn.__globals__
            tree = ast.parse(src)
            names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})
            for n in names:
                if n not in g:
                    continue  # a local, a parameter or a builtin
                v = g[n]
                if isinstance(v, types.ModuleType):
                    mod = v.__name__
                    imports[n] = f"import {mod}" if mod == n else f"import {mod} as {n}"
                    continue
                h = unwrap_jit(v, JIT)
                if h is not None:
                    visit(h)
                    if h.__name__ != n:
                        consts[n] = f"{n} = {h.__name__}"
                    continue
                if hasattr(builtins, n) and getattr(builtins, n) is v:
                    continue
                try:
                    consts[n] = f"{n} = " + (f"tl.constexpr({const_expr(v, tl, JIT, visit)})" if isinstance(v, tl.constexpr) else const_expr(v, tl, JIT, visit))
                    continue
                except ValueError:
                    pass
                mod = getattr(v, "__module__", None)
                name = getattr(v, "__name__", None)
                if mod and name and mod != "__main__":
                    imports[n] = f"from {mod} import {name}" + ("" if name == n else f" as {n}")
                else:
                    unresolved.append(n)
            deco = "@triton.jit" + ("(noinline=True)" if getattr(j, "noinline", None) else "")
            funcs.append(deco + "\n" + src.rstrip() + "\n")

        visit(jit)
        lines = ["import triton", "import triton.language as tl"]
        lines += [s for k, s in sorted(imports.items()) if s not in ("import triton", "import triton.language as tl")]
        lines += [""] + [consts[k] for k in sorted(consts)]
        text = "\n".join(lines) + "\n\n\n" + "\n\n".join(funcs)
        return text, sorted(set(unresolved))

    def copy_source_file(path):
        if not path or not os.path.isfile(path):
            return None
        if path in state["copied"]:
            return state["copied"][path]
        data = open(path, "rb").read()
        name = hashlib.sha256(data).hexdigest()[:16] + "-" + os.path.basename(path)
        os.makedirs(src_dir, exist_ok=True)
        dest = os.path.join(src_dir, name)
        if not os.path.exists(dest):
            tmp = f"{dest}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, dest)
        state["copied"][path] = name
        return name

    # --- the hooks ------------------------------------------------------------------------------
    def on_compile(src, metadata, metadata_group, cache_hit, triton):
        import inspect

        tl = triton.language
        JIT = triton.runtime.jit.JITFunction
        md = metadata if isinstance(metadata, dict) else dict(metadata)
        cubin_path = next((p for k, p in (metadata_group or {}).items() if str(k).endswith(".cubin")), None)
        rec = {
            "event": "compile",
            "pid": os.getpid(),
            "triton_version": getattr(triton, "__version__", "?"),
            "python": sys.executable,
            "cache_hit": bool(cache_hit),
            "during_autotune": depth("autotune") > 0,
            "during_benchmark": depth("bench") > 0,
            "name": md.get("name"),
            "metadata": md,
            "cubin_path": cubin_path,
            "cubin_sha256": hashlib.sha256(open(cubin_path, "rb").read()).hexdigest() if cubin_path else None,
        }
        fn = getattr(src, "fn", None)
        if fn is None:  # IRSource: a .ttgir/.ptx file compiled directly
            rec["ir_source"] = {"path": getattr(src, "path", None), "ext": getattr(src, "ext", None)}
            emit(rec)
            return
        arg_names = list(getattr(fn, "arg_names", []))
        rec["fn"] = {
            "name": fn.__name__,
            "qualname": getattr(fn, "__qualname__", fn.__name__),
            "module": getattr(fn, "__module__", None),
            "arg_names": arg_names,
        }
        try:
            path = inspect.getsourcefile(fn.fn)
            rec["source_file"] = os.path.abspath(path) if path else None
            rec["source_line"] = getattr(fn, "starting_line_number", None) or inspect.getsourcelines(fn.fn)[1]
            rec["source_copy"] = copy_source_file(rec["source_file"])
        except Exception as e:
            rec["source_error"] = f"{type(e).__name__}: {e}"
        rec["signature"] = {str(k): v for k, v in dict(getattr(src, "signature", {})).items()}
        consts = []
        helpers = []

        def visit_const_fn(j):
            helpers.append(j)

        for path, v in dict(getattr(src, "constants", {})).items():
            p = list(path) if isinstance(path, tuple) else [path]
            c = {"path": p, "name": arg_names[p[0]] if p and isinstance(p[0], int) and p[0] < len(arg_names) else str(path)}
            try:
                c["expr"] = const_expr(v, tl, JIT, visit_const_fn)
            except Exception as e:
                c["error"] = str(e)
            c["value"] = v
            consts.append(c)
        rec["constexprs"] = consts
        rec["attrs"] = [{"path": list(k) if isinstance(k, tuple) else [k], "attrs": v} for k, v in dict(getattr(src, "attrs", {}) or {}).items()]
        try:
            text, unresolved = kernel_module(fn, tl, JIT)
            extra = []
            for h in helpers:  # JIT functions passed as constexpr arguments
                if h is not fn:
                    t, u = kernel_module(h, tl, JIT)
                    extra.append(t.split("\n\n\n", 1)[1])
                    unresolved += u
            rec["kernel_module"] = text + ("\n\n" + "\n\n".join(extra) if extra else "")
            rec["unresolved_globals"] = unresolved
        except Exception as e:
            rec["kernel_module_error"] = f"{type(e).__name__}: {e}"
        emit(rec)

    def record_autotune(tuner, args, kwargs):
        cfg = getattr(tuner, "best_config", None)
        if cfg is None:
            return
        names = list(getattr(tuner, "arg_names", []))
        all_args = {**dict(zip(names, args)), **kwargs}
        key = [all_args[k] for k in getattr(tuner, "keys", []) if k in all_args]
        for v in all_args.values():
            if hasattr(v, "dtype"):
                key.append(str(v.dtype))
        key_json = json.loads(json.dumps(key, default=jsonable_default))
        seen_key = (id(tuner), json.dumps(key_json))
        config = {
            "kwargs": dict(getattr(cfg, "kwargs", {})),
            "num_warps": getattr(cfg, "num_warps", None),
            "num_stages": getattr(cfg, "num_stages", None),
            "num_ctas": getattr(cfg, "num_ctas", None),
            "maxnreg": getattr(cfg, "maxnreg", None),
        }
        if state["autotune_seen"].get(seen_key) == json.dumps(config, default=jsonable_default):
            return
        state["autotune_seen"][seen_key] = json.dumps(config, default=jsonable_default)
        base = getattr(tuner, "base_fn", None)
        emit({
            "event": "autotune",
            "pid": os.getpid(),
            "fn": getattr(base, "__name__", None),
            "key_names": list(getattr(tuner, "keys", [])),
            "key": key_json,
            "config": config,
            "configs": len(getattr(tuner, "configs", []) or []),
            # every config the autotuner chose among: kerncap tune's default space
            "config_list": [{
                "kwargs": dict(getattr(c, "kwargs", {})),
                "num_warps": getattr(c, "num_warps", None),
                "num_stages": getattr(c, "num_stages", None),
                "num_ctas": getattr(c, "num_ctas", None),
                "maxnreg": getattr(c, "maxnreg", None),
            } for c in (getattr(tuner, "configs", []) or [])],
        })

    def ignore_launches(on):
        """Tell the capture library that launches now are autotuner benchmarks (if it can hear it)."""
        f = state["ignore_fn"]
        if f is None:
            f = False
            lib = os.environ.get("CUDA_INJECTION64_PATH")
            if lib:
                try:
                    import ctypes

                    f = getattr(ctypes.CDLL(lib), "kerncap_set_ignore_launches", None) or False
                    if f:
                        f.argtypes = [ctypes.c_int]
                        f.restype = None
                except Exception:
                    f = False
            state["ignore_fn"] = f
        if f:
            f(1 if on else 0)

    def benchmarking(fn):
        """Wrap fn (an autotuner's timing of one config): its launches are benchmarks, not the app's.
        Marks the launch events (bench depth) and tells the capture library, so --dispatch skips them."""

        def wrapped(*args, **kwargs):
            bump("bench", 1)
            try:
                ignore_launches(True)
            except Exception:
                pass
            try:
                return fn(*args, **kwargs)
            finally:
                bump("bench", -1)
                if depth("bench") == 0:
                    try:
                        ignore_launches(False)
                    except Exception:
                        pass

        wrapped.__kerncap_wrapped__ = True
        return wrapped

    def install_inductor(mod):
        """Inductor times candidate configs (max-autotune templates, pointwise/reduction configs)
        through torch._inductor.runtime.benchmarking; every benchmark_gpu there is a benchmark."""
        base = getattr(mod, "Benchmarker", None)
        n = 0
        for obj in list(vars(mod).values()):
            if isinstance(obj, type) and base is not None and issubclass(obj, base):
                f = obj.__dict__.get("benchmark_gpu")
                if callable(f) and not getattr(f, "__kerncap_wrapped__", False):
                    setattr(obj, "benchmark_gpu", benchmarking(f))
                    n += 1
        if not n:
            warn("Inductor benchmarker hooks not installed: no Benchmarker.benchmark_gpu")

    def install(triton):
        knobs = getattr(triton, "knobs", None)
        if knobs is None:
            emit({"event": "unsupported", "pid": os.getpid(), "triton_version": getattr(triton, "__version__", "?"), "why": "triton.knobs is missing (Triton < 3.4)"})
            return
        emit({"event": "hello", "pid": os.getpid(), "triton_version": getattr(triton, "__version__", "?"), "python": sys.executable})
        comp = knobs.compilation
        prev = getattr(comp, "listener", None)

        def listener(*, src, metadata, metadata_group, times, cache_hit, **kw):
            try:
                on_compile(src, metadata, metadata_group, cache_hit, triton)
            except Exception as e:
                warn(f"compile record failed: {type(e).__name__}: {e}")
            if prev is not None:
                prev(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit, **kw)

        comp.listener = listener

        if os.environ.get("KERNCAP_TRITON_LAUNCHES", "1") != "0":

            def on_launch(metadata):
                try:
                    d = getattr(metadata, "data", metadata)
                    name = d.get("name") if isinstance(d, dict) else None
                    with state["lock"]:
                        seq = state["launch_seq"]
                        state["launch_seq"] += 1
                    emit({"event": "launch", "pid": os.getpid(), "seq": seq, "name": name, "bench": depth("bench") > 0})
                except Exception as e:
                    warn(f"launch record failed: {e}")

            rt = knobs.runtime
            hook = getattr(rt, "launch_enter_hook", None)
            if hook is not None and hasattr(hook, "add") and hasattr(hook, "calls"):
                hook.add(on_launch)  # HookChain
            else:
                prev_launch = hook

                def chained(metadata):
                    on_launch(metadata)
                    if prev_launch is not None:
                        prev_launch(metadata)

                rt.launch_enter_hook = chained

        try:
            from triton.runtime.autotuner import Autotuner

            orig_run, orig_bench = Autotuner.run, Autotuner._bench

            def run(self, *args, **kwargs):
                bump("autotune", 1)
                try:
                    return orig_run(self, *args, **kwargs)
                finally:
                    bump("autotune", -1)
                    try:
                        record_autotune(self, args, kwargs)
                    except Exception as e:
                        warn(f"autotune record failed: {e}")

            _bench = benchmarking(orig_bench)
            Autotuner.run, Autotuner._bench = run, _bench
        except Exception as e:
            warn(f"autotuner hooks not installed: {e}")

    class _Finder:
        """Installs a hook right after the module it watches has been executed (import hook)."""

        busy = False

        def __init__(self, hooks):
            self.hooks = hooks  # module name -> installer(module)

        def find_spec(self, name, path=None, target=None):
            if name not in self.hooks or self.busy:
                return None
            self.busy = True
            try:
                import importlib.util

                spec = importlib.util.find_spec(name)
            except Exception:
                return None
            finally:
                self.busy = False
            loader = getattr(spec, "loader", None) if spec else None
            if loader is None or not hasattr(loader, "exec_module"):
                return None
            orig = loader.exec_module
            hook = self.hooks.pop(name)

            def exec_module(module):
                orig(module)
                if not self.hooks:
                    try:
                        sys.meta_path.remove(finder)
                    except ValueError:
                        pass
                try:
                    hook(module)
                except Exception as e:
                    warn(f"hooks not installed in {name}: {type(e).__name__}: {e}")

            loader.exec_module = exec_module
            return spec

    hooks = {"triton": install, "torch._inductor.runtime.benchmarking": install_inductor}
    for name in list(hooks):
        if name in sys.modules:
            try:
                hooks.pop(name)(sys.modules[name])
            except Exception as e:
                warn(f"hooks not installed in {name}: {type(e).__name__}: {e}")
    finder = _Finder(hooks)
    if hooks:
        sys.meta_path.insert(0, finder)

if _ENABLED:
    try:
        _kerncap_setup()
    except Exception as _e:
        sys.stderr.write(f"[kerncap] triton shim disabled: {type(_e).__name__}: {_e}\n")
