"""``python -m sansrs``: the ``sansrs`` command, which lives in the adapters
(``sansrs.adapters.cli``). A program entry point, not part of the core's
import graph: nothing in the core imports it, and it imports the adapters
only when run (by name: mypy checks ``adapters/`` as its own package)."""

import importlib
import sys

if __name__ == "__main__":
    sys.exit(importlib.import_module("sansrs.adapters.cli").main())
