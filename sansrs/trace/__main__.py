"""Entry point of ``python -m sansrs.trace``."""

import sys

from ._cli import main

sys.exit(main())
