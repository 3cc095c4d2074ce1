"""How the load-balanced client (:mod:`.balancer`) picks a target: the
statistics it keeps per target and two strategies. Pure: time (``now``,
monotonic seconds) and randomness are arguments.

- :class:`RoundRobinStrategy`: the next available target in turn.
- :class:`WeightedStrategy`: rsocket-java's weighted load balancing (after
  Finagle's): pick two available targets at random and take the heavier,
  where weight = availability / (1 + latency * (pending + 1)), the
  predicted latency being stretched or shrunk when it leaves the band
  between the lower and higher latency quantiles, so a target that turns
  slow (or fast) is noticed before its average moves.

:class:`TargetStats`: per target, requests pending, streaming estimates
of round-trip percentiles, the predicted latency and availability (see
its docstring).
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "BalancerConfig",
    "Ewma",
    "FrugalQuantile",
    "RoundRobinStrategy",
    "Strategy",
    "TargetStats",
    "WeightedStrategy",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BalancerConfig:
    """Limits and constants of the load-balanced client (seconds for times).

    ``backoff_initial`` / ``backoff_max`` / ``backoff_multiplier``: the wait
    before reconnecting a target after consecutive failures (``initial *
    multiplier ** (failures - 1)``, capped, with +-``backoff_jitter`` of
    it randomly); ``refresh_interval``: how often a callable ``targets`` is
    asked again; ``latency_half_life`` / ``availability_half_life``: how
    fast the statistics forget; ``initial_latency``: the predicted latency
    of a target without samples (it gets tried); ``pair_attempts``: the
    weighted strategy's tries at finding an available pair."""

    backoff_initial: float = 0.1
    backoff_max: float = 10.0
    backoff_multiplier: float = 2.0
    backoff_jitter: float = 0.2
    refresh_interval: float = 5.0
    connect_timeout: float = 5.0
    latency_half_life: float = 10.0
    availability_half_life: float = 5.0
    pair_attempts: int = 5

    def __post_init__(self) -> None:
        if self.backoff_initial <= 0 or self.backoff_max < self.backoff_initial:
            raise ValueError("need 0 < backoff_initial <= backoff_max")
        if self.backoff_multiplier < 1 or not 0 <= self.backoff_jitter < 1:
            raise ValueError("need backoff_multiplier >= 1 and 0 <= backoff_jitter < 1")
        if min(self.refresh_interval, self.latency_half_life, self.availability_half_life) <= 0:
            raise ValueError("intervals and half-lives must be positive")
        if self.pair_attempts < 1:
            raise ValueError("pair_attempts must be >= 1")

    def backoff(self, failures: int, rnd: _random.Random) -> float:
        """Seconds to wait after ``failures`` consecutive failures (>= 1)."""
        base = min(
            self.backoff_max, self.backoff_initial * self.backoff_multiplier ** (failures - 1)
        )
        return base * (1 + self.backoff_jitter * (2 * rnd.random() - 1))


class Ewma:
    """An exponentially weighted moving average over time: a sample's weight
    halves every ``half_life`` seconds."""

    __slots__ = ("_at", "half_life", "value")

    def __init__(self, half_life: float, initial: float) -> None:
        self.half_life = half_life
        self.value = initial
        self._at: float | None = None

    def insert(self, sample: float, now: float) -> None:
        if self._at is None:
            self.value = sample
        else:
            elapsed = max(0.0, now - self._at)
            keep = math.exp(-elapsed * math.log(2) / self.half_life)
            self.value = self.value * keep + sample * (1 - keep)
        self._at = now


class FrugalQuantile:
    """A streaming estimate of the ``q`` quantile in O(1) memory (Ma,
    Muthukrishnan and Sandler, "Frugal Streaming for Estimating Quantiles",
    2013): a sample above the estimate moves it up with probability ``q``, one
    below moves it down with probability ``1 - q``; the step grows by
    ``increment`` while the estimate keeps moving the same way and starts
    again at 1 when it turns. Units are the caller's (microseconds here)."""

    __slots__ = ("_sign", "_step", "increment", "q", "value")

    def __init__(self, q: float, increment: float = 1.0) -> None:
        self.q = q
        self.increment = increment
        self.value = 0.0
        self._step = 1.0
        self._sign = 0  # 0: no sample yet

    def insert(self, sample: float, rnd: _random.Random) -> None:
        if self._sign == 0:
            self.value = sample
            self._sign = 1
            return
        v = rnd.random()
        if sample > self.value and v > 1 - self.q:
            self._step += self._sign * self.increment
            estimate = self.value + (self._step if self._step > 0 else 1)
            if estimate > sample:
                self._step += sample - estimate
                estimate = sample
            if self._sign < 0:
                self._step = 1.0
            self._sign = 1
            self.value = estimate
        elif sample < self.value and v > self.q:
            self._step -= self._sign * self.increment
            estimate = self.value - (self._step if self._step > 0 else 1)
            if estimate < sample:
                self._step += estimate - sample
                estimate = sample
            if self._sign > 0:
                self._step = 1.0
            self._sign = -1
            self.value = estimate


class TargetStats:
    """What the weighted strategy knows of one target (rsocket-java's
    ``BaseWeightedStats``, re-derived): latencies in microseconds.

    - the median and the 50th / 80th percentiles of round-trip times
      (:class:`FrugalQuantile`);
    - the predicted latency: 0 before any sample (a new target gets tried),
      a startup penalty while its first requests are pending, the median,
      or the load seen right now (time spent by the pending requests) when
      that is worse; after a quiet spell (no request for ``inactivity``
      mean inter-arrival times) the median decays towards 0, so a target
      once slow is tried again;
    - availability: an EWMA (``availability_half_life``) of request
      outcomes (1 ok, 0 the connection failed), reset towards 1 when the
      target has not been used for ``5 / ln 2`` half-lives; 0 while the
      target cannot be used at all (``usable`` False).
    """

    __slots__ = (
        "_busy",
        "_busy_since",
        "_last_start",
        "_rnd",
        "availability",
        "completed",
        "failed_requests",
        "higher",
        "inter_arrival",
        "lower",
        "median",
        "pending",
        "usable",
    )

    STARTUP_PENALTY = float(2**51)
    INACTIVITY = 500

    def __init__(self, config: BalancerConfig, rnd: _random.Random | None = None) -> None:
        self._rnd = rnd or _random.Random()
        self.pending = 0
        self.median = FrugalQuantile(0.5)
        self.lower = FrugalQuantile(0.5)
        self.higher = FrugalQuantile(0.8)
        self.inter_arrival = Ewma(config.latency_half_life * 6, 1e6)
        self.availability = Ewma(config.availability_half_life, 1.0)
        #: False while the target cannot take requests (backing off, removed).
        self.usable = True
        #: Requests that ended well / failed because of the connection.
        self.completed = 0
        self.failed_requests = 0
        self._last_start: float | None = None  # µs
        self._busy = 0.0  # µs spent by pending requests, up to _busy_since
        self._busy_since = 0.0

    def started(self, now: float) -> None:
        t = now * 1e6
        if self._last_start is not None:
            self.inter_arrival.insert(t - self._last_start, now)
        self._busy += max(0.0, t - self._busy_since) * self.pending
        self._busy_since = t
        self._last_start = t
        self.pending += 1

    def finished(self, started: float | None, ok: bool, now: float) -> None:
        """A request ended; ``started``: when (a round-trip sample), None for
        streams and failures; ``ok`` False when the connection failed."""
        t = now * 1e6
        self._busy += max(0.0, t - self._busy_since) * self.pending
        if started is not None:
            self._busy -= t - started * 1e6
        self._busy = max(0.0, self._busy)
        self._busy_since = t
        self.pending = max(0, self.pending - 1)
        if ok:
            self.completed += 1
        else:
            self.failed_requests += 1
        if started is not None and ok:
            rtt = t - started * 1e6
            for q in (self.median, self.lower, self.higher):
                q.insert(rtt, self._rnd)
        self.availability.insert(1.0 if ok else 0.0, now)

    def failed(self, now: float) -> None:
        """The connection failed (or could not be opened)."""
        self.availability.insert(0.0, now)

    def predicted_latency(self, now: float) -> float:
        t = now * 1e6
        prediction = self.median.value
        pending = self.pending
        if self.median._sign == 0:  # no sample yet
            return 0.0 if pending == 0 else self.STARTUP_PENALTY + pending
        idle = 0.0 if self._last_start is None else t - self._last_start
        if pending == 0 and idle > self.INACTIVITY * self.inter_arrival.value:
            self.median.insert(0.0, self._rnd)  # decay a stale prediction
            return self.median.value
        if pending == 0:
            return prediction
        instant = self._busy + (t - self._busy_since) * pending
        # the pending requests have already taken longer than predicted
        return instant / pending if prediction * pending < instant else prediction

    def current_availability(self, now: float) -> float:
        if not self.usable:
            return 0.0
        last = self._last_start
        if last is not None and now * 1e6 - last > self.availability.half_life / math.log(2) * 1e6:
            self.availability.insert(1.0, now)  # quiet for long: give it a chance
        return self.availability.value

    def weight(self, now: float) -> float:
        """rsocket-java's algorithmic weight (0: do not use)."""
        availability = self.current_availability(now)
        if availability <= 0.0:
            return 0.0
        latency = self.predicted_latency(now)
        low = self.lower.value
        high = max(self.higher.value, low * 1.001)
        band = max(high - low, 1.0)
        if latency < low:
            latency /= (1 + (low - latency) / band) ** 4
        elif latency > high:
            latency *= (1 + (latency - high) / band) ** 4
        return availability / (1.0 + latency * (self.pending + 1))


class Strategy(Protocol):
    """Picks the index of the target to use among ``stats`` (None: none is
    usable) at ``now``."""

    def select(
        self, stats: Sequence[TargetStats], now: float, rnd: _random.Random
    ) -> int | None: ...


class RoundRobinStrategy:
    """Each usable target in turn."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def select(self, stats: Sequence[TargetStats], now: float, rnd: _random.Random) -> int | None:
        n = len(stats)
        for k in range(n):
            i = (self._next + k) % n
            if stats[i].usable:
                self._next = i + 1
                return i
        return None


class WeightedStrategy:
    """Two random choices, the heavier wins (rsocket-java's
    ``WeightedLoadbalanceStrategy``); ``attempts`` pairs are drawn before
    falling back to the heaviest usable target."""

    __slots__ = ("attempts",)

    def __init__(self, attempts: int = 5) -> None:
        self.attempts = attempts

    def select(self, stats: Sequence[TargetStats], now: float, rnd: _random.Random) -> int | None:
        n = len(stats)
        if n == 0:
            return None
        if n == 1:
            return 0 if stats[0].weight(now) > 0 else None
        for _ in range(self.attempts):
            i, j = rnd.sample(range(n), 2)
            wi, wj = stats[i].weight(now), stats[j].weight(now)
            best, weight = (i, wi) if wi >= wj else (j, wj)
            if weight > 0:
                return best
        weights = [s.weight(now) for s in stats]
        best = max(range(n), key=weights.__getitem__)
        return best if weights[best] > 0 else None
