"""``python -m kernels_env <command> ...`` (see ``kernels_env.cli``)."""

import sys

from .cli import main

sys.exit(main())
