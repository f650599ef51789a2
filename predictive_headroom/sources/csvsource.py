"""Demand history from a `timestamp,value` CSV file (offline use, the demo and the backtest).

Timestamps are ISO-8601 with a UTC offset (`2024-05-01T08:00:00Z`, `...+02:00`) or POSIX seconds;
rows must be sorted oldest first, each timestamp once, each value a finite number within
`core.series.MAX_SAMPLE` (larger ones overflow the arithmetic). A file over
`CsvOptions.max_bytes` is refused before it is read, one over `max_rows` data rows as soon as the
reader passes that many, one with a line over `max_line` characters at that line, having held no
more than that of it (each with the size and the flag that raises the bound); a read that takes
longer than a moment shows a progress bar on the stream given.
"""

from __future__ import annotations

import csv
import math
import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from tqdm import tqdm

from predictive_headroom.core.series import MAX_SAMPLE, History, iso_utc
from predictive_headroom.policy.config import ForecastSpec
from predictive_headroom.policy.echo import cut
from predictive_headroom.protocols import SourceError

HEADER = ["timestamp", "value"]
SHOWN_PROBLEMS = 5
_ISO_EXAMPLE = "an ISO-8601 time with a UTC offset, e.g. 2024-05-01T08:00:00Z"
_EPOCH_EXAMPLE = "POSIX seconds like the first row, e.g. 1714550400"


_LEAP_SECOND = re.compile(r"[T ]\d{2}:\d{2}:60(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


def _encoding_problem(path: Path) -> str | None:
    """What to do about a file that is not UTF-8 but UTF-16 (Excel's "Unicode Text", PowerShell's
    default), or None when it is not that."""
    with path.open("rb") as f:
        head = f.read(64)
    if head.startswith(_UTF16_MARKS) or (len(head) >= 4 and b"\x00" in head[:4]):
        return (
            'the file is UTF-16, not UTF-8; save it as UTF-8 ("CSV UTF-8" in a spreadsheet) or '
            f"convert it: iconv -f UTF-16 -t UTF-8 {path} > utf8.csv"
        )
    return None


ROW_BYTES = 16
"""Memory a data row takes once read: its time and value as two float64."""


@dataclass(frozen=True)
class CsvOptions:
    """How a CSV is read: the bounds past which it is refused (`--max-csv-rows`,
    `--max-csv-bytes` and `--max-csv-line` raise them), and where a progress bar goes when a read takes over
    `progress_after` seconds (None: nowhere)."""

    max_rows: int = 20_000_000
    """20 million rows: 38 years of one-minute samples, 320 MB once read."""
    max_bytes: int = 1 << 30
    """1 GiB of text: about 37 million rows of `2024-05-01T08:00:00Z,123.45`."""
    max_line: int = 1 << 20
    """1 Mi characters in one line (a row is under 100): a longer line is refused at that line."""
    progress: TextIO | None = None
    progress_after: float = 2.0


class _BadRow(ValueError):
    """One field that cannot be read; the message says what was expected."""


def _iso_seconds(text: str) -> float:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        if _LEAP_SECOND.search(text):
            raise _BadRow(
                f"timestamp {cut(text)!r} is a leap second (second 60), which POSIX time, Python and "
                "Prometheus do not count; write :59 or drop the row"
            ) from None
        raise _BadRow(f"timestamp {cut(text)!r} is not {_ISO_EXAMPLE}") from None
    if when.tzinfo is None:
        raise _BadRow(
            f"timestamp {cut(text)!r} has no UTC offset; add 'Z' or an offset such as '+02:00'"
        )
    return when.timestamp()


def _epoch_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _BadRow(f"timestamp {cut(text)!r} is not {_EPOCH_EXAMPLE}") from None
    if not math.isfinite(value):
        raise _BadRow(f"timestamp {cut(text)!r} is not {_EPOCH_EXAMPLE}")
    return value


def _value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _BadRow(f"value {cut(text)!r} is not a number") from None
    if not math.isfinite(value):
        raise _BadRow(f"value {cut(text)!r} is not a finite number")
    if abs(value) > MAX_SAMPLE:
        raise _BadRow(
            f"value {cut(text)!r} is beyond {MAX_SAMPLE:.0e}, the largest demand sample read "
            "(larger ones overflow the arithmetic); check the column, or scale the series down"
        )
    return value


def _looks_like_epoch(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fail(path: Path, problems: list[str], total: int) -> SourceError:
    more = f"\n  ... and {total - len(problems)} more" if total > len(problems) else ""
    lines = "\n".join(f"  {path}:{p}" for p in problems)
    return SourceError(f"{path}: {total} bad row(s):\n{lines}{more}")


def write_csv_history(history: History, path: str | Path) -> None:
    """Write `history` as a `timestamp,value` file that `read_csv_history` reads back unchanged
    (ISO-8601 UTC times, values at full precision); OSError when it cannot be written."""
    rows = [",".join(HEADER)] + [
        f"{iso_utc(float(t))},{float(v)!r}"
        for t, v in zip(history.times, history.values, strict=True)
    ]
    Path(path).write_text("\n".join(rows) + "\n", encoding="utf-8")


def read_csv_history(path: str | Path, options: CsvOptions | None = None) -> History:
    """Read a whole `timestamp,value` file; raise SourceError naming the file, line and bad text,
    or the file's size and the flag to pass when it is over a bound of `options`.

    The file is read row by row into two float arrays (16 bytes a row; twice that for a moment
    when they grow), never whole into memory: at most about the size of a typical file, where
    the text read whole and split into lines held 8.5 times it."""
    p, options = Path(path), options or CsvOptions()
    try:
        with p.open(encoding="utf-8-sig", newline="") as f:
            size = os.fstat(f.fileno()).st_size
            if size > options.max_bytes:
                raise SourceError(
                    f"{p}: the file is {size:,} bytes, over the bound of {options.max_bytes:,}; "
                    f"pass --max-csv-bytes {size} (and --max-csv-rows, {ROW_BYTES} bytes of "
                    "memory a row) to read it, or cut it to the span you need"
                )
            with _progress_bar(p, size, options) as bar:
                lines = _counted(_bounded_lines(p, f, options.max_line), bar)
                # the csv module's own cap on a field (128 Ki) would refuse a line under the
                # bound, without its line or a flag: the line bound guards memory instead
                csv.field_size_limit(max(csv.field_size_limit(), options.max_line))
                return _read_rows(p, csv.reader(lines), options.max_rows)
    except FileNotFoundError:
        raise SourceError(
            f"{p}: file not found; pass a CSV file with a 'timestamp,value' header"
        ) from None
    except IsADirectoryError:
        raise SourceError(
            f"{p}: is a directory; pass a CSV file with a 'timestamp,value' header"
        ) from None
    except UnicodeDecodeError as exc:
        why = _encoding_problem(p) or f"it is not UTF-8 text ({exc}); save it as UTF-8"
        raise SourceError(f"{p}: cannot read the file: {why}") from None
    except OSError as exc:
        raise SourceError(f"{p}: cannot read the file: {exc}") from None
    except csv.Error as exc:
        raise SourceError(f"{p}: not a CSV file this reader can read: {exc}") from None


def _progress_bar(p: Path, size: int, options: CsvOptions) -> Any:
    """A byte-counting bar on `options.progress`, shown once the read took `progress_after` s."""
    return tqdm(
        total=size,
        desc=f"reading {p.name}",
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=options.progress,
        delay=options.progress_after,
        mininterval=1.0,
        disable=options.progress is None,
    )


def _bounded_lines(p: Path, f: TextIO, max_line: int) -> Iterator[str]:
    """The lines of `f`, each read holding at most `max_line` (and two) characters; SourceError
    at the first longer one, naming its line and the flag that raises the bound."""
    number = 0
    while line := f.readline(max_line + 2):
        number += 1
        if len(line.rstrip("\r\n")) > max_line:
            raise SourceError(
                f"{p}:{number}: the line is longer than {max_line:,} characters, the bound (a row "
                "is 'timestamp,value', under 100); is this the right file? Pass --max-csv-line "
                "with a larger number to read it"
            )
        yield line


def _counted(lines: Iterable[str], bar: Any, every: int = 1 << 16) -> Iterator[str]:
    """`lines`, adding their length to `bar` every `every` lines (and at the end)."""
    if bar.disable:
        yield from lines
        return
    read, count = 0, 0
    for line in lines:
        read, count = read + len(line), count + 1
        if count == every:
            bar.update(read)
            read, count = 0, 0
        yield line
    bar.update(read)


def _read_rows(p: Path, reader: Any, max_rows: int) -> History:
    """The rows of `reader` (after its header) as a History, checked as `read_csv_history` says;
    refused once it has more than `max_rows` data rows."""
    header = next(reader, None)
    if header is None:
        raise SourceError(
            f"{p}: the file is empty; expected a 'timestamp,value' header and data rows"
        )
    if any("\x00" in h for h in header) and (why := _encoding_problem(p)):
        raise SourceError(f"{p}: cannot read the file: {why}")
    if [h.strip().lower() for h in header] != HEADER:
        found = cut(",".join(header))
        if len(header) == 2 and _looks_like_epoch(header[1].strip()):
            raise SourceError(
                f"{p}:1: missing header; the first line must be 'timestamp,value', found data {found!r}"
            )
        raise SourceError(f"{p}:1: header is {found!r}; expected 'timestamp,value'")

    parse_time: Callable[[str], float] | None = None
    times, values = array("d"), array("d")
    order = _Order()
    problems: list[str] = []
    bad = 0
    for row in reader:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # blank lines carry nothing
        try:
            if len(row) != 2:
                raise _BadRow(
                    f"expected 2 fields 'timestamp,value', found {len(row)} in {cut(','.join(row))!r}"
                )
            stamp = row[0].strip()
            if parse_time is None:
                parse_time = _epoch_seconds if _looks_like_epoch(stamp) else _iso_seconds
            t, v = parse_time(stamp), _value(row[1].strip())
        except _BadRow as exc:
            bad += 1
            if len(problems) < SHOWN_PROBLEMS:
                problems.append(f"{reader.line_num}: {exc}")
            continue
        order.check(t, reader.line_num)
        if len(times) == max_rows:
            raise SourceError(
                f"{p}:{reader.line_num}: more than {max_rows:,} data rows, the bound; pass "
                f"--max-csv-rows with a larger number ({ROW_BYTES} bytes of memory a row) to "
                "read them all, or cut the file to the span you need"
            )
        times.append(t)
        values.append(v)
    if bad:
        raise _fail(p, problems, bad)
    if not times:
        raise SourceError(f"{p}: no data rows after the 'timestamp,value' header")
    if order.wrong:
        raise _fail(p, order.problems, order.wrong)
    return History(np.frombuffer(times), np.frombuffer(values), source=str(p))


class _Order:
    """Checks, row by row, that timestamps strictly ascend; remembers the first problems."""

    def __init__(self) -> None:
        self.last: tuple[float, int] | None = None
        self.wrong = 0
        self.problems: list[str] = []

    def check(self, t: float, line: int) -> None:
        last, self.last = self.last, (t, line)
        if last is None or t > last[0]:
            return
        self.wrong += 1
        if len(self.problems) >= SHOWN_PROBLEMS:
            return
        stamp = iso_utc(t)
        self.problems.append(
            f"{line}: duplicate timestamp {stamp} (also on line {last[1]}); each time must appear once"
            if t == last[0]
            else f"{line}: timestamp {stamp} is earlier than line {last[1]}; rows must be sorted oldest first"
        )


class CsvSource:
    """Demand history from a CSV file (implements `Source`); re-reads the file when it changes."""

    def __init__(self, path: str | Path, options: CsvOptions | None = None) -> None:
        self.path, self.options = Path(path), options or CsvOptions()
        self._cached: tuple[tuple[int, int], History] | None = None

    def full(self) -> History:
        """Return the whole file as a History."""
        try:
            stat = self.path.stat()
            key = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            return read_csv_history(self.path, self.options)  # raises the user-facing error
        if self._cached is None or self._cached[0] != key:
            self._cached = (key, read_csv_history(self.path, self.options))
        return self._cached[1]

    def history(self, spec: ForecastSpec, end: float) -> History:
        """Return the rows in [end - spec.history, end]: what was known at `end`, nothing after it."""
        full = self.full()
        part = full.until(end).since(end - spec.history.total_seconds())
        if not len(part):
            raise SourceError(
                f"{self.path}: no rows between {iso_utc(end - spec.history.total_seconds())} and {iso_utc(end)}; "
                f"the file covers {iso_utc(full.start)} to {iso_utc(full.end)}"
            )
        return part

    def recent(self, spec: ForecastSpec, end: float, span_seconds: float) -> History:
        """Return the rows in [end - span_seconds, end]: the latest observations at `end`."""
        full = self.full()
        part = full.until(end).since(end - span_seconds)
        if not len(part):
            raise SourceError(
                f"{self.path}: no rows between {iso_utc(end - span_seconds)} and {iso_utc(end)}"
            )
        return part
