"""The real series the tests read, all inside the repository (`tests/data/SOURCES.md` says where
each comes from and under which licence): `series_path(name)` is the one way tests find them."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
SERIES_DIRS = (TESTS / "data", TESTS.parent / "predictive_headroom" / "data")
"""Where series are looked for: the tests' own, then the demo's bundled data (the taxi series)."""


def series_path(name: str) -> Path:
    """The CSV of the real series `name` (its file name, with or without `.csv`); FileNotFoundError
    naming the series that are here when there is none of that name."""
    file = name if name.endswith(".csv") else f"{name}.csv"
    for directory in SERIES_DIRS:
        if (directory / file).is_file():
            return directory / file
    raise FileNotFoundError(
        f"no test series {file!r} in {' or '.join(str(d) for d in SERIES_DIRS)}; the series here: "
        f"{', '.join(shipped_series())}. A new one goes in tests/data with its source and licence "
        "in tests/data/SOURCES.md."
    )


def shipped_series() -> list[str]:
    """The file names of every series the tests can read, sorted."""
    return sorted({p.name for d in SERIES_DIRS for p in d.glob("*.csv")})
