"""``python -m kernels_env.guard --problem P.py --solution S.py [--policy strict] [--device cpu] [--json]``:
judge one solution with the standalone harness (every defence on)."""

import sys

from ._harness import main

sys.exit(main())
