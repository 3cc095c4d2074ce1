"""The load balancer's statistics and strategies (pure: time and
randomness injected): rsocket-java's weighted strategy re-derived, round
robin, backoff."""

from __future__ import annotations

import random

import pytest
from sansrs.adapters.rsocket import BalancerConfig, RoundRobinStrategy, WeightedStrategy
from sansrs.adapters.rsocket.balancer_strategy import Ewma, FrugalQuantile, TargetStats

CONFIG = BalancerConfig()


def _stats(latency: float, samples: int = 200, rnd: random.Random | None = None) -> TargetStats:
    """A target that answered ``samples`` requests in ``latency`` seconds each."""
    stats = TargetStats(CONFIG, rnd or random.Random(0))
    now = 0.0
    for _ in range(samples):
        stats.started(now)
        stats.finished(now, True, now + latency)
        now += 0.01
    return stats


def test_frugal_quantile_converges_to_the_quantile() -> None:
    rnd = random.Random(42)
    median, high = FrugalQuantile(0.5), FrugalQuantile(0.8)
    for _ in range(20_000):
        x = rnd.uniform(0, 1000)
        median.insert(x, rnd)
        high.insert(x, rnd)
    assert 400 < median.value < 600
    assert 700 < high.value < 900


def test_ewma_sample_weight_halves_every_half_life() -> None:
    ewma = Ewma(10.0, 0.0)
    ewma.insert(100.0, 0.0)
    assert ewma.value == 100.0  # the first sample replaces the initial value
    ewma.insert(0.0, 10.0)
    assert ewma.value == pytest.approx(50.0)


def test_weight_falls_with_latency_and_pending() -> None:
    fast, slow = _stats(0.001), _stats(0.010)
    now = 2.0
    assert fast.weight(now) > slow.weight(now) > 0
    busy = _stats(0.001)
    for _ in range(10):
        busy.started(now)
    assert busy.weight(now) < fast.weight(now)


def test_weight_is_zero_when_unusable_or_unavailable() -> None:
    stats = _stats(0.001)
    stats.usable = False
    assert stats.weight(2.0) == 0.0
    failing = _stats(0.001)
    now = 2.0
    for _ in range(50):  # the connection fails request after request, for 25 s
        now += 0.5
        failing.started(now)
        failing.finished(None, False, now)
    assert failing.availability.value < 0.05
    assert failing.weight(now) < _stats(0.001).weight(2.0) / 10


def test_new_target_is_tried_then_penalised_while_its_first_requests_wait() -> None:
    fresh = TargetStats(CONFIG, random.Random(0))
    assert fresh.predicted_latency(0.0) == 0.0  # never used: try it
    fresh.started(0.0)
    assert fresh.predicted_latency(0.0) > 1e15  # pending without history: wait


def test_availability_recovers_after_a_quiet_spell() -> None:
    stats = _stats(0.001)
    for k in range(40):  # 20 s of requests failing with the connection
        stats.started(2.0 + k * 0.5)
        stats.finished(None, False, 2.0 + k * 0.5)
    assert stats.current_availability(22.0) < 0.1
    # unused for longer than 5 / ln 2 half-lives: worth trying again
    assert stats.current_availability(22.0 + CONFIG.availability_half_life / 0.69 + 30) > 0.9


def test_stale_latency_prediction_decays_when_idle() -> None:
    stats = _stats(0.050, samples=20)
    before = stats.predicted_latency(0.3)
    later = stats.predicted_latency(10_000.0)  # long after the last request
    assert later < before


def test_weighted_strategy_prefers_the_fast_target() -> None:
    rnd = random.Random(7)
    targets = [_stats(0.001), _stats(0.001), _stats(0.020)]
    picks = [0, 0, 0]
    strategy = WeightedStrategy()
    for _ in range(3000):
        index = strategy.select(targets, 2.0, rnd)
        assert index is not None
        picks[index] += 1
    assert picks[2] < picks[0] / 5 and picks[2] < picks[1] / 5


def test_weighted_strategy_skips_unusable_targets_and_gives_up_when_none() -> None:
    rnd = random.Random(3)
    targets = [_stats(0.001) for _ in range(4)]
    for t in targets[:3]:
        t.usable = False
    assert {WeightedStrategy().select(targets, 2.0, rnd) for _ in range(50)} == {3}
    targets[3].usable = False
    assert WeightedStrategy().select(targets, 2.0, rnd) is None
    assert WeightedStrategy().select([], 2.0, rnd) is None
    assert WeightedStrategy().select(targets[:1], 2.0, rnd) is None


def test_round_robin_takes_usable_targets_in_turn() -> None:
    rnd = random.Random(0)
    targets = [TargetStats(CONFIG) for _ in range(3)]
    strategy = RoundRobinStrategy()
    assert [strategy.select(targets, 0.0, rnd) for _ in range(4)] == [0, 1, 2, 0]
    targets[1].usable = False
    assert [strategy.select(targets, 0.0, rnd) for _ in range(3)] == [2, 0, 2]
    for t in targets:
        t.usable = False
    assert strategy.select(targets, 0.0, rnd) is None


def test_backoff_grows_exponentially_capped_with_bounded_jitter() -> None:
    config = BalancerConfig(backoff_initial=0.1, backoff_max=2.0, backoff_jitter=0.2)
    rnd = random.Random(5)
    for failures, base in [(1, 0.1), (2, 0.2), (3, 0.4), (6, 2.0), (30, 2.0)]:
        for _ in range(20):
            assert base * 0.8 <= config.backoff(failures, rnd) <= base * 1.2


@pytest.mark.parametrize(
    "bad",
    [
        {"backoff_initial": 0},
        {"backoff_max": 0.01},
        {"backoff_multiplier": 0.5},
        {"backoff_jitter": 1.0},
        {"refresh_interval": 0},
        {"pair_attempts": 0},
    ],
)
def test_balancer_config_refuses_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BalancerConfig(**bad)  # type: ignore[arg-type]
