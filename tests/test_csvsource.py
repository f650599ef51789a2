"""CsvSource and read_csv_history: real dataset files, every malformed case, and the no-peeking window."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from testdata import series_path, shipped_series

from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.protocols import SourceError
from predictive_headroom.sources.csvsource import CsvSource, read_csv_history

DAY = 86_400.0


def write(tmp_path: Path, text: str, name: str = "demand.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@pytest.mark.parametrize("dataset", shipped_series())
def test_reads_every_real_series_in_full(dataset: str):
    path = series_path(dataset)
    rows = path.read_text().splitlines()[1:]
    history = read_csv_history(path)
    assert len(history) == len(rows)
    first_time, first_value = rows[0].split(",")
    last_time, last_value = rows[-1].split(",")
    assert history.start == epoch(first_time) and history.values[0] == float(first_value)
    assert history.end == epoch(last_time) and history.values[-1] == float(last_value)
    assert history.source == str(path)


@pytest.mark.parametrize(
    ("body", "times", "values"),
    [
        (
            "timestamp,value\n2024-05-01T08:00:00Z,1.5\n2024-05-01T08:05:00Z,2\n",
            [1714550400, 1714550700],
            [1.5, 2],
        ),
        (
            "timestamp,value\n2024-05-01T10:00:00+02:00,1\n2024-05-01T08:05:00Z,3\n",
            [1714550400, 1714550700],
            [1, 3],
        ),
        ("timestamp,value\n1714550400,1\n1714550700.5,3\n", [1714550400, 1714550700.5], [1, 3]),
        ("\ufeffTimestamp , Value\n\n2024-05-01T08:00:00Z, 7\n\n", [1714550400], [7]),
        ('timestamp,value\n"2024-05-01T08:00:00Z","1e3"\n', [1714550400], [1000]),
    ],
    ids=["iso-z", "iso-offset", "epoch-seconds", "bom-case-spaces-blank-lines", "quoted"],
)
def test_accepted_formats(tmp_path: Path, body: str, times: list[float], values: list[float]):
    history = read_csv_history(write(tmp_path, body))
    np.testing.assert_array_equal(history.times, times)
    np.testing.assert_array_equal(history.values, values)


GOOD = "2024-05-01T08:00:00Z,1\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", "the file is empty"),
        ("timestamp,value\n", "no data rows"),
        ("time,val\n" + GOOD, ":1: header is 'time,val'; expected 'timestamp,value'"),
        (GOOD, ":1: missing header; the first line must be 'timestamp,value'"),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z\n",
            ":3: expected 2 fields 'timestamp,value', found 1",
        ),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z,1,2\n",
            ":3: expected 2 fields 'timestamp,value', found 3",
        ),
        (
            "timestamp,value\n" + GOOD + "yesterday,4\n",
            ":3: timestamp 'yesterday' is not an ISO-8601 time",
        ),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T08:05:00,4\n",
            ":3: timestamp '2024-05-01T08:05:00' has no UTC offset",
        ),
        (
            "timestamp,value\n1714550400,1\n2024-05-01T08:05:00Z,4\n",
            ":3: timestamp '2024-05-01T08:05:00Z' is not POSIX seconds",
        ),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z,abc\n",
            ":3: value 'abc' is not a number",
        ),
        ("timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z,\n", ":3: value '' is not a number"),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z,NaN\n",
            ":3: value 'NaN' is not a finite number",
        ),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z,inf\n",
            ":3: value 'inf' is not a finite number",
        ),
        (
            "timestamp,value\n" + GOOD + "\n2024-05-01T08:00:00Z,2\n",
            ":4: duplicate timestamp 2024-05-01T08:00:00Z (also on line 2)",
        ),
        (
            "timestamp,value\n" + GOOD + "2024-05-01T07:55:00Z,2\n",
            ":3: timestamp 2024-05-01T07:55:00Z is earlier than line 2; rows must be sorted oldest first",
        ),
    ],
    ids=[
        "empty",
        "header-only",
        "wrong-header",
        "missing-header",
        "too-few-fields",
        "too-many-fields",
        "bad-time",
        "naive-time",
        "mixed-formats",
        "bad-value",
        "empty-value",
        "nan",
        "inf",
        "duplicate",
        "descending",
    ],
)
def test_malformed_files_name_file_line_and_text(tmp_path: Path, body: str, expected: str):
    path = write(tmp_path, body)
    with pytest.raises(SourceError) as err:
        read_csv_history(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_many_bad_rows_are_reported_together_but_briefly(tmp_path: Path):
    rows = "".join(f"2024-05-01T08:{m:02d}:00Z,x{m}\n" for m in range(20))
    with pytest.raises(SourceError) as err:
        read_csv_history(write(tmp_path, "timestamp,value\n" + rows))
    message = str(err.value)
    assert (
        "20 bad row(s)" in message and ":2: value 'x0'" in message and ":6: value 'x4'" in message
    )
    assert "x5" not in message and "... and 15 more" in message


def test_missing_file(tmp_path: Path):
    with pytest.raises(SourceError, match=r"missing\.csv: file not found"):
        CsvSource(tmp_path / "missing.csv").full()


def test_history_is_the_window_up_to_end_and_nothing_after(tmp_path: Path):
    start = 1_714_521_600  # 2024-05-01T00:00:00Z
    body = "timestamp,value\n" + "".join(f"{start + i * 3600},{i}\n" for i in range(72))
    src = CsvSource(write(tmp_path, body))
    spec = ForecastSpec(query="csv", demand_per_replica=1, history="1d")
    end = start + 48 * 3600 + 1800  # between two rows
    part = src.history(spec, end)
    assert part.end == start + 48 * 3600 <= end
    assert part.start == start + 25 * 3600 >= end - DAY
    assert list(part.values) == list(range(25, 49))
    assert len(src.full()) == 72

    with pytest.raises(
        SourceError,
        match=r"no rows between .*; the file covers 2024-05-01T00:00:00Z to 2024-05-03T23:00:00Z",
    ):
        src.history(spec, start - 10 * DAY)


def test_a_changed_file_is_read_again(tmp_path: Path):
    path = write(tmp_path, "timestamp,value\n" + GOOD)
    src = CsvSource(path)
    assert len(src.full()) == 1
    path.write_text("timestamp,value\n" + GOOD + "2024-05-01T08:05:00Z,2\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    assert len(src.full()) == 2


def test_twenty_thousand_rows_are_read_in_seconds_not_minutes(tmp_path: Path):
    body = "timestamp,value\n" + "".join(
        f"{datetime.fromtimestamp(1_700_000_000 + i * 60, UTC):%Y-%m-%dT%H:%M:%SZ},{i * 0.25}\n"
        for i in range(20_000)
    )
    path = write(tmp_path, body)
    began = time.perf_counter()
    history = read_csv_history(path)
    elapsed = time.perf_counter() - began
    assert len(history) == 20_000 and history.values[-1] == 19_999 * 0.25
    # well under a second on a quiet machine; the bound only catches a per-row slowdown
    assert elapsed < 10.0, f"reading 20k rows took {elapsed:.2f}s"


def test_a_line_over_the_bound_is_refused_at_that_line_holding_no_more_of_it(tmp_path: Path):
    """Issue 55: a 1,000 MB file of one line (within the 1 GiB default) peaked at 2.24 GB of
    RSS. A line over `max_line` characters is refused at that line with the flag that raises the
    bound, and the reader never held more than the bound of it."""
    import tracemalloc

    from predictive_headroom.sources.csvsource import CsvOptions

    path = tmp_path / "one-line.csv"
    with path.open("w") as f:
        f.write("timestamp,value\n2024-05-01T08:00:00Z,1\n")
        for _ in range(40):  # 40 MiB in one line
            f.write("9" * (1 << 20))
        f.write(",1\n")
    tracemalloc.start()
    try:
        with pytest.raises(SourceError) as exc:
            read_csv_history(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(exc.value)
    assert f"{path}:3: the line is longer than 1,048,576 characters" in message
    assert "--max-csv-line" in message
    assert peak < 8 << 20  # a few MiB: the bound and the reader's buffers, never the line
    short = write(tmp_path, "timestamp,value\n2024-05-01T08:00:00Z,1\n" + "1" * 300 + ",2\n")
    with pytest.raises(SourceError) as exc:
        read_csv_history(short, CsvOptions(max_line=200))
    assert f"{short}:3: the line is longer than 200 characters" in str(exc.value)
    wide = "2024-05-01T08:00:01Z," + "0" * 200_000 + "1\n"  # over csv's own 128 Ki field cap
    long_ok = write(tmp_path, "timestamp,value\n2024-05-01T08:00:00Z,1\n" + wide, "wide.csv")
    assert list(read_csv_history(long_ok).values) == [1.0, 1.0]


def test_a_bad_value_is_echoed_cut_to_a_bound_with_its_length(tmp_path: Path):
    path = write(tmp_path, "timestamp,value\n2024-05-01T08:00:00Z," + "y" * 50_000 + "\n")
    with pytest.raises(SourceError) as exc:
        read_csv_history(path)
    message = str(exc.value)
    assert f"value '{'y' * 200}...(50,000 characters)' is not a number" in message
    assert len(message) < 1_000
