import sys

try:
    from .cli import main

    code = main()
except KeyboardInterrupt:  # Ctrl-C while the tool itself was still being imported
    print("kernel-wheels: interrupted", file=sys.stderr)
    code = 130
raise SystemExit(code)
