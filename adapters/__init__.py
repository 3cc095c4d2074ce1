"""sansrs.adapters: the only code that touches sockets, threads, selectors,
clocks and Spark. Installed as ``sansrs.adapters`` (folder ``adapters/``)."""

__all__: list[str] = []
