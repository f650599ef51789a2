"""The simulated cluster of the backtest: invariants on small hand-made series."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from testdata import series_path

from predictive_headroom.core.series import History
from predictive_headroom.replay.simulator import (
    ClusterSpec,
    app_pods,
    minute_grid,
    oracle_placeholders,
    score,
    simulate,
)
from predictive_headroom.sources.csvsource import read_csv_history

AZURE = series_path("azure_v2_vm_cpu_total_5min")


def bursty(minutes: int = 3000, seed: int = 1) -> np.ndarray:
    """App pods with a daily wave and random bursts."""
    rng = np.random.default_rng(seed)
    t = np.arange(minutes)
    demand = (
        20
        + 8 * np.sin(2 * np.pi * t / 1440)
        + rng.gamma(1.0, 3.0, minutes) * (rng.random(minutes) < 0.05)
    )
    return app_pods(demand, 1.0)


def test_app_pods_rise_at_once_and_fall_after_five_minutes():
    demand = np.array([1, 1, 9, 1, 1, 1, 1, 1, 1], dtype=float)
    assert app_pods(demand, 2.0).tolist() == [1, 1, 5, 5, 5, 5, 5, 1, 1]


def test_minute_grid_interpolates_coarse_series():
    h = History(np.array([0.0, 600.0]), np.array([0.0, 10.0]))
    times, values = minute_grid(h)
    assert times.tolist() == [60.0 * i for i in range(11)]
    assert values.tolist() == pytest.approx(list(range(11)))


@pytest.mark.parametrize("delay", [0, 10])
def test_without_lag_reactive_serves_everything(delay):
    pods = bursty()
    run = simulate(
        pods, np.zeros(pods.size, dtype=int), ClusterSpec(lag_minutes=0, scale_down_minutes=delay)
    )
    assert score(run).unserved_pod_minutes == 0


@pytest.mark.parametrize("lag", [1, 3, 7])
def test_oracle_leaves_nothing_unserved_and_reactive_does(lag):
    pods = bursty()
    cluster = ClusterSpec(lag_minutes=lag, scale_down_minutes=10)
    assert score(simulate(pods, np.zeros(pods.size, dtype=int), cluster)).unserved_pod_minutes > 0
    assert score(simulate(pods, oracle_placeholders(pods, lag), cluster)).unserved_pod_minutes == 0


def test_more_static_placeholders_never_increase_unserved_demand():
    pods = bursty(seed=7)
    cluster = ClusterSpec(node_slots=4, lag_minutes=3, scale_down_minutes=5)
    unserved = [
        score(simulate(pods, np.full(pods.size, n), cluster)).unserved_pod_minutes
        for n in range(12)
    ]
    assert all(b <= a for a, b in itertools.pairwise(unserved))
    assert unserved[0] > unserved[-1]


def test_node_hours_with_scale_down_delay_hand_computed():
    # 8 slots per node; W needs 2 nodes for minutes 0-9 and 1 node after. The second node is
    # unneeded from minute 10, removed after 10 minutes: present through minute 19.
    pods = np.array([16] * 10 + [8] * 50)
    run = simulate(
        pods,
        np.zeros(60, dtype=int),
        ClusterSpec(node_slots=8, lag_minutes=3, scale_down_minutes=10),
    )
    assert run.ready.tolist() == [2] * 20 + [1] * 40
    m = score(run)
    assert m.node_hours == pytest.approx((2 * 20 + 40) / 60)
    assert m.unserved_pod_minutes == 0


def test_scale_up_waits_for_the_lag_and_counts_cold_starts():
    pods = np.array([8] * 5 + [20] * 10)
    run = simulate(
        pods,
        np.zeros(15, dtype=int),
        ClusterSpec(node_slots=8, lag_minutes=3, scale_down_minutes=10),
    )
    # 20 pods need 3 nodes; they arrive 3 minutes after minute 5: 12 pods short for 3 minutes.
    assert run.ready.tolist() == [1] * 8 + [3] * 7
    m = score(run)
    assert (m.unserved_pod_minutes, m.cold_starts) == (36, 3)
    assert score(run, start=8).unserved_pod_minutes == 0


def test_placeholders_are_preempted_and_keep_nodes_warm():
    pods = np.array([8] * 5 + [14] * 5)
    cluster = ClusterSpec(node_slots=8, lag_minutes=3, scale_down_minutes=10)
    run = simulate(pods, np.full(10, 8), cluster)
    assert run.ready.tolist() == [2] * 5 + [2] * 3 + [3] * 2  # placeholders refill after preemption
    assert score(run).unserved_pod_minutes == 0


def test_feedback_strategy_matches_the_same_array():
    pods = bursty(seed=3)
    cluster = ClusterSpec(lag_minutes=3, scale_down_minutes=10)
    p = (np.arange(pods.size) // 37) % 5
    fixed = simulate(pods, p, cluster)
    fed = simulate(pods, lambda i, nodes: int(p[i]), cluster)
    assert fixed.ready.tolist() == fed.ready.tolist()
    assert fixed.unserved.tolist() == fed.unserved.tolist()


@pytest.mark.parametrize(
    "cluster",
    [
        ClusterSpec(),
        ClusterSpec(node_slots=4, lag_minutes=1, scale_down_minutes=0),
        ClusterSpec(lag_minutes=0, scale_down_minutes=0),
        ClusterSpec(lag_minutes=5, scale_down_minutes=4),
        ClusterSpec(lag_minutes=6, scale_down_minutes=2),
    ],
    ids=[
        "8 slots, 3m lag",
        "4 slots, 1m lag, no delay",
        "no lag, no delay",
        "delay one under the lag (closed form)",
        "delay shorter still (loop)",
    ],
)
def test_the_array_fast_path_is_the_general_loop(cluster: ClusterSpec):
    """Placeholders known ahead take the array fast path (in closed form where the scale-down
    delay is at least the lag minus a minute, else a plain loop); asked step by step they take
    the general loop. On 28 days of a real series both give the same ready nodes and unserved
    pods."""
    _, demand = minute_grid(read_csv_history(AZURE))
    pods = app_pods(demand[: 28 * 1440], float(np.quantile(demand, 0.9)) / 100)
    rng = np.random.default_rng(5)
    unserved = []
    for p in (
        np.zeros(pods.size, dtype=np.int64),
        np.full(pods.size, 1),
        rng.integers(-3, 15, pods.size),
        oracle_placeholders(pods, cluster.lag_minutes),
    ):
        fast = simulate(pods, p, cluster)
        general = simulate(pods, lambda i, nodes, p=p: int(p[i]), cluster)
        assert np.array_equal(fast.ready, general.ready)
        assert np.array_equal(fast.unserved, general.unserved)
        unserved.append(int(fast.unserved.sum()))
    # the runs compared scale up, wait and scale down: reactive leaves pods waiting, more
    # placeholders leave fewer; without a boot lag nothing waits
    if cluster.lag_minutes:
        assert unserved[0] > unserved[1] > 0
    else:
        assert unserved == [0, 0, 0, 0]


def test_bad_cluster_settings_say_which():
    with pytest.raises(ValueError, match="node_slots"):
        ClusterSpec(node_slots=0)
    with pytest.raises(ValueError, match="lag_minutes"):
        ClusterSpec(lag_minutes=-1)


# --- interruptions -----------------------------------------------------------------------------


def test_without_interruptions_the_interrupted_simulator_is_the_plain_one():
    from predictive_headroom.replay.simulator import Interruptions

    pods, cluster = bursty(), ClusterSpec()
    for strategy in (np.zeros(pods.size, dtype=np.int64), np.full(pods.size, 5)):
        plain = simulate(pods, strategy, cluster)
        calm = simulate(pods, strategy, cluster, Interruptions(0.0))
        assert np.array_equal(plain.ready, calm.ready)
        assert np.array_equal(plain.unserved, calm.unserved)
        assert int(calm.interrupted.sum()) == 0


def test_interruptions_are_seeded_and_hit_every_strategy_at_the_same_instants():
    from predictive_headroom.replay.simulator import Interruptions

    pods, cluster = bursty(), ClusterSpec()
    spec = Interruptions(0.1 / 60, notice_minutes=2, seed=7, max_nodes=40)
    a = simulate(pods, np.zeros(pods.size, dtype=np.int64), cluster, spec)
    b = simulate(pods, np.zeros(pods.size, dtype=np.int64), cluster, spec)
    assert np.array_equal(a.unserved, b.unserved) and a.interrupted.sum() > 5
    other = simulate(
        pods, np.zeros(pods.size, dtype=np.int64), cluster, Interruptions(0.1 / 60, 2, 8, 40)
    )
    assert not np.array_equal(a.interrupted, other.interrupted)
    # a bigger cluster (more placeholders, more nodes) is hit at least as often
    big = simulate(pods, np.full(pods.size, 16), cluster, spec)
    assert big.interrupted.sum() >= a.interrupted.sum()


def test_room_for_the_leaving_pods_ordered_at_the_notice_cuts_the_waiting():
    """A node interrupted with 2 minutes' notice and a 3-minute node lag: without headroom its pods
    wait when it goes; asking for their room at the notice brings the replacement 2 minutes sooner."""
    from predictive_headroom.replay.simulator import Interruptions

    pods = np.full(600, 16, dtype=np.int64)  # two full nodes of 8
    cluster = ClusterSpec(node_slots=8, lag_minutes=3, scale_down_minutes=10)
    spec = Interruptions(0.2 / 60, notice_minutes=2, seed=0, max_nodes=4)
    blind = simulate(pods, np.zeros(pods.size, dtype=np.int64), cluster, spec)
    aware = simulate(pods, lambda i, nodes, leaving=0: leaving, cluster, spec)
    hits = int(blind.interrupted.sum())
    assert hits >= 2
    # each interruption leaves a node's 8 pods waiting for the full lag, or for lag - notice
    assert blind.unserved.sum() == hits * 8 * 3
    assert aware.unserved.sum() == hits * 8 * 1
    assert np.array_equal(blind.interrupted, aware.interrupted)
