"""A MemorySink that counts the stages it opens and how each ended, for
tests of the write protocol's bookkeeping: every stage opened ends in
``finish`` (published, held or a duplicate) or ``abort``."""

from __future__ import annotations

import threading
from typing import Any

from sansrs.adapters.spark import MemorySink, WriteHeader
from sansrs.adapters.spark.sink import Ack, Stage


class CountingSink(MemorySink):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.opened = 0
        self.finished = 0
        self._ended = threading.Condition()

    def open(self, header: WriteHeader) -> Stage:
        stage = super().open(header)
        with self._ended:
            self.opened += 1
        return stage

    def finish(self, stage: Stage) -> Ack:
        ack = super().finish(stage)
        with self._ended:
            self.finished += 1
            self._ended.notify_all()
        return ack

    def abort(self, stage: Stage) -> None:
        super().abort(stage)
        with self._ended:
            self._ended.notify_all()

    def settled(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every stage opened has ended:
        an abort runs on the channel's worker thread, after the writer has
        moved on."""
        with self._ended:
            return self._ended.wait_for(
                lambda: self.opened == self.finished + self.aborted, timeout
            )
