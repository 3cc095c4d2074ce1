"""Injected lifecycle hooks (``ResumeOptions.on_step``) that record every
step and can hold the thread that takes one until the test releases it: how
the interleaving tests force an order between an old transport's teardown
and a new transport's RESUME, without sleeping."""

from __future__ import annotations

import threading

WAIT = 20.0


class Steps:
    """Call it with a step name (it is the ``on_step`` callback)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seen: list[str] = []
        self._held: dict[str, tuple[list[int], threading.Event]] = {}

    def __call__(self, name: str) -> None:
        gate = None
        with self._cond:
            self.seen.append(name)
            self._cond.notify_all()
            held = self._held.get(name)
            if held is not None and held[0][0] > 0:
                held[0][0] -= 1
                gate = held[1]
        if gate is not None:
            assert gate.wait(WAIT), f"step {name!r} held for longer than {WAIT} s"

    def hold(self, name: str, times: int = 1) -> None:
        """The next ``times`` threads reaching ``name`` wait for :meth:`release`."""
        with self._cond:
            self._held[name] = ([times], threading.Event())

    def release(self, name: str) -> None:
        with self._cond:
            held = self._held.pop(name, None)
        if held is not None:
            held[1].set()

    def count(self, name: str) -> int:
        with self._cond:
            return self.seen.count(name)

    def wait(self, name: str, count: int = 1, timeout: float = WAIT) -> bool:
        """Wait until ``name`` was reached ``count`` times in all."""
        with self._cond:
            return self._cond.wait_for(lambda: self.seen.count(name) >= count, timeout)

    def index(self, name: str, occurrence: int = 1) -> int:
        """Where the ``occurrence``-th ``name`` is in the order of all steps."""
        with self._cond:
            found = [i for i, s in enumerate(self.seen) if s == name]
            return found[occurrence - 1]

    def release_all(self) -> None:
        with self._cond:
            held, self._held = list(self._held.values()), {}
        for _, gate in held:
            gate.set()
