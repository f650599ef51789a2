"""`predictive-headroom demo`: the whole product on bundled real data, no cluster or Prometheus needed.

It slices six weeks of the bundled NYC taxi series, then runs the real commands on it: the
forecast with its accuracy, the next 24 h plan, the backtest against static headroom, and the
HTML report, and prints where the pages are.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from predictive_headroom.cli import main
from predictive_headroom.commands import CommandError, iso, parse_time
from predictive_headroom.core.series import DAY_SECONDS, History
from predictive_headroom.sources.csvsource import read_csv_history

HELP = "run forecast, plan, backtest and report on bundled real traffic (no cluster, no Prometheus)"
DATA = "nab_nyc_taxi_30min.csv"
# Six weeks: two weeks of warm-up, then four scored weeks that include Thanksgiving.
START, END = "2014-11-10T00:00:00Z", "2014-12-22T00:00:00Z"
EXAMPLE = "predictive-headroom demo --out demo-out   # what make demo runs"
"""Shown at the end of `--help`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default="demo-out",
        help="directory for the data slice, report and backtest page (default demo-out)",
    )


def _slice(history: History, start: float, end: float) -> History:
    return history.since(start).until(end)


def write_csv(history: History, path: Path) -> None:
    """Write a series as `timestamp,value` CSV."""
    lines = ["timestamp,value"] + [
        f"{iso(t)},{v:g}" for t, v in zip(history.times, history.values, strict=False)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _copy_inputs(out: Path) -> tuple[History, Path, Path]:
    """Write the six-week data slice and the bundled policy into `out` (created if need be).

    Returns the slice, the CSV path and the policy path. Raises CommandError when `out` cannot be
    created.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create --out {out}: {exc}") from None
    package = resources.files("predictive_headroom") / "data"
    with (
        resources.as_file(package / DATA) as data_path,
        resources.as_file(package / "demo.yaml") as config_path,
    ):
        history = read_csv_history(data_path)
        sliced = _slice(history, parse_time(START), parse_time(END))
        data = out / "taxi-demand.csv"
        write_csv(sliced, data)
        config = out / "demo-policy.yaml"
        config.write_text(Path(config_path).read_text(encoding="utf-8"), encoding="utf-8")
    return sliced, data, config


def demo_steps(config: Path, data: Path, out: Path, now: str) -> list[tuple[str, list[str]]]:
    """The demo's commands in the order they run: (title, argv) with argv as `cli.main` takes it."""
    return [
        (
            "1. The forecast at the end of the data, and how it did on the last two held-back days",
            ["forecast", "--config", str(config), "--data", str(data)],
        ),
        (
            "2. The plan for the next 24 h (rows where it changes)",
            [
                "plan",
                "--config",
                str(config),
                "--data",
                str(data),
                "--at",
                now,
                "--horizon",
                "24h",
                "--step",
                "30m",
            ],
        ),
        (
            "3. Backtest: the last four weeks replayed minute by minute on a simulated cluster whose nodes take 3 minutes to boot.\n"
            "   Each row is a strategy. 'unserved pod-min' counts app pods left waiting for a node, 'overhead node-h' what the\n"
            "   spare room cost, and 'x vs static' how many times less unserved demand it leaves than always-on placeholders\n"
            "   costing the same ('inf': none left where static leaves some). The dial prices the burst quantile.",
            [
                "backtest",
                "--config",
                str(config),
                "--data",
                str(data),
                "--dial",
                "0.8,0.9,0.95,0.99",
                "--out",
                str(out / "backtest"),
            ],
        ),
        (
            "4. The forecast report",
            ["report", "--config", str(config), "--data", str(data), "--out", str(out / "report")],
        ),
    ]


HEARTBEAT_SECONDS = 10.0
"""A step silent this long prints a line saying it is still at work."""


class _Noticed:
    """A text stream that notes when it was last written to (for `heartbeat`)."""

    def __init__(self, stream: object, last: list[float]) -> None:
        self._stream, self._last = stream, last

    def write(self, text: str) -> int:
        self._last[0] = time.monotonic()
        return self._stream.write(text)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextmanager
def heartbeat(what: str, every: float = HEARTBEAT_SECONDS) -> Iterator[None]:
    """While the block runs, `  ... <what>: still at it (N s)` on stdout whenever nothing was
    printed (to stdout or stderr) for `every` seconds, so a log or a pipe never goes quiet."""
    last, began, stop = [time.monotonic()], time.monotonic(), threading.Event()
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Noticed(out, last), _Noticed(err, last)  # type: ignore[assignment]

    def beat() -> None:
        while not stop.wait(1.0):
            if time.monotonic() - last[0] >= every:
                last[0] = time.monotonic()
                print(f"  ... {what}: still at it ({last[0] - began:.0f} s)", file=out, flush=True)

    thread = threading.Thread(target=beat, name="demo-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.stdout, sys.stderr = out, err


def run(args: argparse.Namespace) -> int:
    """Copy the inputs into `--out`, run each demo step through the CLI and say where the pages are.

    Returns the first non-zero exit code of a step (the later steps are not run), else 0.
    """
    out = Path(args.out)
    sliced, data, config = _copy_inputs(out)
    began = time.perf_counter()
    now = iso(sliced.end)
    print(
        f"predictive-headroom demo: NYC taxi passengers per 30 min (NAB, MIT licence; see "
        f"predictive_headroom/data/SOURCES.md), {iso(sliced.start)} .. {now}, {len(sliced)} points,"
        f" {sliced.span_seconds / DAY_SECONDS:.0f} days.\nPolicy: {config}\n"
    )
    for title, argv in demo_steps(config, data, out, now):
        print(f"== {title}\n$ predictive-headroom {' '.join(argv)}", flush=True)
        with heartbeat(argv[0]):
            code = main(argv)
        if code:
            return code
        print(flush=True)
    print(f"Done in {time.perf_counter() - began:.0f} s. Open these in a browser:")
    print(f"  report:   {(out / 'report' / 'index.html').resolve()}")
    print(f"  backtest: {(out / 'backtest' / 'backtest.html').resolve()}")
    print(
        f"  data:     {data.resolve()} (try: predictive-headroom plan --config {config} --data {data} --at {now})"
    )
    return 0
