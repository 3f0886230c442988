"""``python -m kernel_wheels``: the command line."""

import sys

if __name__ == "__main__":  # not when a process pool's child imports the main module
    try:
        from .cli import main

        code = main()
    except KeyboardInterrupt:  # Ctrl-C while the tool itself was still being imported
        print("kernel-wheels: interrupted", file=sys.stderr)
        code = 130
    raise SystemExit(code)
