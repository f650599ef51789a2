"""Property-based tests (hypothesis) for the three readers of outside input named by issue 39:
the Prometheus answer parser, the policy loader and the CSV reader. Whatever comes in, each either
returns a usable value or raises its own error type with a message; never another exception."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from predictive_headroom.policy.load import ConfigError, load_policy
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.csvsource import read_csv_history
from predictive_headroom.sources.prometheus_query import BadAnswer, parse_matrix

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1", "NaN", "+Inf", "-Inf", "1e400", "yesterday", "", "0x10", "5%"]),
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["metric", "values", "value", "job", "x"]), inner, max_size=4
        ),
    ),
    max_leaves=20,
)
points = st.lists(
    st.one_of(
        st.tuples(st.one_of(st.integers(), st.floats(), st.text(max_size=6)), scalars).map(list),
        json_like,
    ),
    max_size=5,
)
series = st.one_of(
    st.fixed_dictionaries(
        {"metric": st.one_of(st.dictionaries(st.text(max_size=4), scalars, max_size=3), json_like)},
        optional={"values": st.one_of(points, json_like), "value": json_like},
    ),
    json_like,
)


@SETTINGS
@given(st.one_of(st.lists(series, max_size=3), json_like))
def test_the_prometheus_answer_parser_returns_arrays_or_says_what_came_back(result: Any) -> None:
    try:
        parsed = parse_matrix(result)
    except BadAnswer as exc:
        assert str(exc)
        return
    for labels, (times, values) in parsed.items():
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in labels)
        assert times.shape == values.shape and np.isfinite(times).all()


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2**40),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=6,
    )
)
def test_every_well_formed_matrix_is_read_exactly(pairs: list[tuple[int, float]]) -> None:
    answer = [{"metric": {"job": "web"}, "values": [[t, repr(v)] for t, v in pairs]}]
    ((labels, (times, values)),) = parse_matrix(answer).items()
    assert labels == (("job", "web"),)
    assert times.tolist() == [float(t) for t, _ in pairs]
    assert np.array_equal(values, [v for _, v in pairs], equal_nan=True)


pool_fields = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["web", "Web", "", "a" * 70]), json_like),
        "target": st.one_of(
            st.fixed_dictionaries({"namespace": st.just("ns"), "name": st.just("ph")}), json_like
        ),
        "minReplicas": json_like,
        "maxReplicas": st.one_of(st.integers(-2, 50), json_like),
        "leadTime": st.one_of(st.sampled_from(["5m", "auto", "4", "-1m", ".nan"]), json_like),
        "protection": json_like,
        "scaleDownStabilization": json_like,
        "schedules": json_like,
        "proportional": st.one_of(
            st.fixed_dictionaries(
                {
                    "linear": st.dictionaries(
                        st.sampled_from(["coresPerReplica", "nodesPerReplica", "min", "max"]),
                        scalars,
                    )
                }
            ),
            json_like,
        ),
        "forecast": st.one_of(
            st.fixed_dictionaries(
                {"query": st.just("sum(x)"), "demandPerReplica": scalars},
                optional={"burstQuantile": scalars, "history": scalars, "step": scalars},
            ),
            json_like,
        ),
        "disruption": st.one_of(
            st.fixed_dictionaries({}, optional={"interruptionRate": scalars, "spot": scalars}),
            json_like,
        ),
        "placeholder": st.one_of(
            st.fixed_dictionaries(
                {"requests": st.dictionaries(st.sampled_from(["cpu", "memory"]), scalars)}
            ),
            json_like,
        ),
    },
)


@SETTINGS
@given(st.one_of(st.fixed_dictionaries({"pools": st.lists(pool_fields, max_size=2)}), json_like))
def test_the_policy_loader_accepts_or_names_the_problem(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(document))
    try:
        policy = load_policy(path)
    except ConfigError as exc:
        assert str(exc)
        return
    for pool in policy.pools:  # what loads plans with finite numbers only
        assert pool.min_replicas >= 0 and pool.max_replicas >= pool.min_replicas


csv_rows = st.lists(
    st.tuples(
        st.one_of(
            st.integers(min_value=0, max_value=2**34).map(str),
            st.sampled_from(["2024-05-01T08:00:00Z", "2024-05-01T08:00:00", "nan", "inf", "", "x"]),
            st.text(alphabet=string.printable, max_size=10),
        ),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True).map(repr),
            st.sampled_from(["1", "1e400", "NaN", "", "  3 ", "1,5"]),
            st.text(alphabet=string.printable, max_size=10),
        ),
    ),
    max_size=8,
)


@SETTINGS
@given(st.sampled_from(["timestamp,value", "time,value", "", "timestamp;value"]), csv_rows)
def test_the_csv_reader_reads_or_names_the_line(
    tmp_path: Path, header: str, rows: list[tuple[str, str]]
) -> None:
    path = tmp_path / "demand.csv"
    path.write_text("\n".join([header, *(f"{t},{v}" for t, v in rows)]) + "\n")
    try:
        history = read_csv_history(path)
    except SourceError as exc:
        assert str(path) in str(exc)
        return
    assert np.isfinite(history.values).all() and np.all(np.diff(history.times) > 0)
