"""``python -m sansrs``: the ``sansrs`` command, which lives in the adapters
(``sansrs.adapters.cli``). A program entry point, not part of the core's
import graph: nothing in the core imports it, and it imports the adapters
only when run (by name: mypy checks ``adapters/`` as its own package).

Run from a source checkout whose ``sansrs`` is not installed, the adapters
are missing (the source tree keeps them in ``adapters/``, which only an
install maps to ``sansrs.adapters``): that says how to install, and exits 1."""

import importlib
import sys

NOT_INSTALLED = """\
error: sansrs.adapters is not importable: this Python runs the sansrs source tree
({where}) without an installed sansrs, and the adapters (adapters/ in the
source tree) exist as sansrs.adapters only once installed. Either:
  pip install .          (or pip install '.[ws]' for ws:// and Ditto), then python -m sansrs
  make venv              then .venv/bin/sansrs (or .venv/bin/python -m sansrs)"""


def _main() -> int:
    try:
        cli = importlib.import_module("sansrs.adapters.cli")
    except ModuleNotFoundError as exc:
        if exc.name != "sansrs.adapters":
            raise
        import sansrs

        print(NOT_INSTALLED.format(where=sansrs.__path__[0]), file=sys.stderr)
        return 1
    return int(cli.main())


if __name__ == "__main__":
    sys.exit(_main())
