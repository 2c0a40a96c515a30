"""kerncap as installed from its wheel: the `kerncap` executable on PATH (the wheel's
kerncap-VERSION.data/scripts/), and this package, so that `python -m kerncap ...` runs the same
executable with the interpreter's environment (useful where the environment's bin/ is not on PATH).

The executable is the whole tool; nothing here imports it or reimplements any of it.
"""

import os
import sysconfig

__all__ = ["find_kerncap_bin"]


def _candidates():
    exe = "kerncap"
    # the scheme the installer used: the environment's scripts folder (a venv, the system, conda)
    yield os.path.join(sysconfig.get_path("scripts"), exe)
    # pip install --user: the user scheme's scripts folder
    user_scheme = {"posix": "posix_user", "nt": "nt_user"}.get(os.name)
    if user_scheme and user_scheme in sysconfig.get_scheme_names():
        yield os.path.join(sysconfig.get_path("scripts", scheme=user_scheme), exe)
    # pip install --target DIR: the package is DIR/kerncap, the scripts DIR/bin
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(os.path.dirname(here), "bin", exe)
    # a prefix install: PREFIX/lib/pythonX.Y/site-packages/kerncap → PREFIX/bin
    yield os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir, "bin", exe)


def find_kerncap_bin():
    """Path of the installed kerncap executable; raises FileNotFoundError naming where it looked."""
    tried = []
    for path in _candidates():
        path = os.path.normpath(path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        tried.append(path)
    raise FileNotFoundError(
        "kerncap: the executable was not found beside this package (looked at "
        + ", ".join(tried)
        + "); reinstall the wheel: pip install --force-reinstall kerncap"
    )
