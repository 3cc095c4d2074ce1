"""``python -m sansrs.adapters.cli``: the ``sansrs`` command."""

import sys

from . import main

sys.exit(main())
