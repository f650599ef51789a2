"""Issue 55 item 4: values from outside are echoed cut to a bound, with their length."""

from __future__ import annotations

import pytest

from predictive_headroom.policy.echo import ECHO_LIMIT, cut


@pytest.mark.parametrize(
    ("value", "limit", "shown"),
    [
        ("short", ECHO_LIMIT, "short"),
        ("x" * ECHO_LIMIT, ECHO_LIMIT, "x" * ECHO_LIMIT),
        ("x" * 10_556, 5, "xxxxx...(10,556 characters)"),
        (ValueError("a" * 12), 4, "aaaa...(12 characters)"),
    ],
)
def test_a_value_longer_than_the_bound_shows_its_start_and_its_length(value, limit, shown) -> None:
    assert cut(value, limit) == shown
