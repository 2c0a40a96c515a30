"""`python -m kerncap ARGS...`: runs the installed kerncap executable with ARGS, in place of this
interpreter (exec), so its exit status, signals, stdin and terminal are kerncap's own."""

import os
import sys

from kerncap import find_kerncap_bin


def main():
    try:
        exe = find_kerncap_bin()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
