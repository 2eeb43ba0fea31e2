"""``python -m perfcmp_tui`` is the same as the ``perfcmp-tui`` command."""

import sys

from .cli import main

sys.exit(main())
