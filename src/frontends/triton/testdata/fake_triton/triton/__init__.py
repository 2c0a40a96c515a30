"""A stand-in for Triton's Python API surface that kerncap's shim and repro.py touch (no GPU, no
compiler): knobs hooks, JITFunction, Autotuner, ASTSource, compile (calls the compilation listener
and "compiles" the source text to fake cubin bytes), GPUTarget. For tests only."""
import os as _os

__version__ = _os.environ.get("FAKE_TRITON_VERSION", "3.6.0")
from . import knobs  # noqa: E402
from . import language  # noqa: E402
from .runtime.jit import jit, JITFunction  # noqa: E402
from .runtime.autotuner import autotune, Config  # noqa: E402
from .compiler import compile  # noqa: E402
from . import runtime, compiler, backends  # noqa: E402,F401
