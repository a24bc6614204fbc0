"""``python -m kernels_env.tools compile|profile|sanitize|roofline ...`` until the lead wires the MAINS into
``python -m kernels_env``."""

import sys

from .cli import MAINS

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MAINS:
        names = "|".join(MAINS)
        print(f"usage: python -m kernels_env.tools {{{names}}} --reference REF.py --solution SOL [--json]")
        sys.exit(2)
    sys.exit(MAINS[sys.argv[1]](sys.argv[2:]))
