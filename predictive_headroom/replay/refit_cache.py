"""Walk-forward refits kept on disk across runs (`docs/promise.md`, "Refits kept across runs"),
so that `tune` and `backtest` on a history already replayed skip its refits and a history a day
longer refits only the new cut.

A refit (`walkforward.refit`) depends only on the history it reads (up to its cut, at most
`forecast.history`), the settings it fits for, the forecaster, the swept quantiles and the code:
its key hashes exactly these (the slice's timestamps and values as bytes, the rest through
`joblib.hash`, the package's version and a digest of its source files, so an edited checkout never
reads a result of other code). The store is `joblib.Memory`: each result is written to a
temporary file and renamed, so two runs at once never leave a half-written entry; the least
recently used entries beyond `CacheSpec.max_bytes` are evicted after each run.

Nothing read is trusted: an entry that fails to load (truncated, another version's classes) or
is not a refit's result is dropped and refitted. A cache directory that cannot be written warns
once and the run goes on without it; so does a write that fails (a full disk).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import joblib
import numpy as np
from joblib.memory import MemorizedFunc

import predictive_headroom
from predictive_headroom import __version__
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.walkforward import RefitJob, Refitted, refit

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "PH_CACHE_DIR"
"""The cache's directory; `off` runs without one (the tests' default)."""
CACHE_SIZE_ENV = "PH_CACHE_SIZE"
"""The cache's bound in bytes (`2G`, `500M`, or a number)."""
OFF = "off"
DEFAULT_MAX_BYTES = 2 * 1024**3
UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


@dataclass(frozen=True)
class CacheSpec:
    """Where refits are kept and how many bytes of them at most."""

    location: Path
    max_bytes: int = DEFAULT_MAX_BYTES


def parse_size(text: str) -> int:
    """Bytes of `2G`, `500M`, `64K` or a plain number; ValueError saying the form otherwise."""
    t = text.strip().upper().removesuffix("B")
    factor = UNITS.get(t[-1:], 1)
    number = t[:-1] if t[-1:] in UNITS else t
    try:
        size = int(float(number) * factor)
    except ValueError:
        raise ValueError(f"{CACHE_SIZE_ENV}={text!r}: expected a size such as 2G or 500M") from None
    if size <= 0:
        raise ValueError(f"{CACHE_SIZE_ENV}={text!r}: the size must be positive")
    return size


def cache_spec(environ: Mapping[str, str]) -> CacheSpec | None:
    """The cache `environ` asks for: `PH_CACHE_DIR` (`off`: None), else
    `${XDG_CACHE_HOME:-~/.cache}/predictive-headroom/refits`, bounded by `PH_CACHE_SIZE`
    (default 2 GiB). Raises ValueError on a bad size."""
    where = environ.get(CACHE_DIR_ENV, "").strip()
    if where.lower() == OFF:
        return None
    if not where:
        base = environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
        where = str(Path(base) / "predictive-headroom" / "refits")
    size = environ.get(CACHE_SIZE_ENV)
    return CacheSpec(Path(where), parse_size(size) if size else DEFAULT_MAX_BYTES)


@functools.cache
def code_digest() -> str:
    """The package's version and a digest of its source files: results of other code never match."""
    root = Path(predictive_headroom.__file__).parent
    digest = hashlib.blake2b(__version__.encode(), digest_size=16)
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def refit_key(job: RefitJob) -> str:
    """What a refit depends on, hashed: the history slice it reads (timestamps and values as
    bytes), its instant and horizon, the knobs and settings, the forecaster and baseline, the
    swept quantiles, how the curve is refitted and the key of the refit it starts from
    (`RefitJob.curve`, `RefitJob.after`) and the code (`code_digest`)."""
    digest = hashlib.blake2b(code_digest().encode(), digest_size=20)
    digest.update(np.ascontiguousarray(job.known.times, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(job.known.values, dtype=np.float64).tobytes())
    rest = (job.at, job.horizon, job.knobs, job.settings, job.forecaster, job.naive_fit)
    digest.update(f"{job.curve}:{job.after}".encode())
    digest.update(joblib.hash((rest, job.quantiles)).encode())
    return digest.hexdigest()


def fit_key(
    forecaster: Forecaster, history: History, model: ModelSpec, settings: PlanSettings, now: float
) -> str:
    """What one fit (`Forecaster.fit`) depends on, hashed: the history known at `now` (timestamps,
    values and source; the fit reads nothing later), `now`, the model and settings, the forecaster
    (its class and parameters) and the code (`code_digest`)."""
    known = history.until(now)
    digest = hashlib.blake2b(code_digest().encode(), digest_size=20, person=b"fit")
    digest.update(np.ascontiguousarray(known.times, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(known.values, dtype=np.float64).tobytes())
    digest.update(joblib.hash((known.source, now, model, settings, forecaster)).encode())
    return digest.hexdigest()


FitCall = tuple[Forecaster, tuple[History, ModelSpec, PlanSettings, float]]
"""A fit to make: the forecaster and the arguments of its `fit`."""


class Unknown(LookupError):
    """A cache entry asked for without its job (evicted between the check and the read)."""


def _keyed(key: str, job: RefitJob | None) -> bytes:
    """The refit of `job` pickled, memorised under `key` alone (`job` is not hashed). Kept as one
    pickle, read back by the C unpickler: joblib's own reads each array in Python, 20x slower."""
    if job is None:
        raise Unknown(key)
    return pickle.dumps(refit(job), protocol=pickle.HIGHEST_PROTOCOL)


def _fitted(key: str, call: FitCall | None) -> bytes:
    """The fit `call` makes, pickled, memorised under `key` alone (`call` is not hashed)."""
    if call is None:
        raise Unknown(key)
    forecaster, args = call
    return pickle.dumps(forecaster.fit(*args), protocol=pickle.HIGHEST_PROTOCOL)


def stored_refit(memo: MemorizedFunc, keyed: tuple[str, RefitJob]) -> tuple[Refitted, bool]:
    """Refit `keyed`'s job and store it under its key (in a worker process); True when stored
    (False: the write failed, a full disk)."""
    out, ok = _store(memo, *keyed)
    return cast(Refitted, out), ok


def _store(memo: MemorizedFunc, key: str, made_from: object) -> tuple[object, bool]:
    """Make what `memo` makes of `made_from` and keep it under `key`: (it, True when kept; False:
    the write failed, a full disk)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", joblib.memory.CacheWarning)
        out = pickle.loads(memo(key, made_from))
    return out, not any(issubclass(w.category, joblib.memory.CacheWarning) for w in caught)


class RefitCache:
    """The refits kept in `spec.location` (`open` it: None when it cannot be written)."""

    def __init__(self, spec: CacheSpec) -> None:
        self.spec = spec
        self.memory = joblib.Memory(str(spec.location), verbose=0)
        self.memo = self.memory.cache(_keyed, ignore=["job"])
        self.fits = self.memory.cache(_fitted, ignore=["call"])
        self._warned = False

    @classmethod
    def open(cls, spec: CacheSpec, *, quiet: bool = False) -> RefitCache | None:
        """The cache at `spec`, or None after one warning when its directory cannot be made or
        written (the run goes on without it; `quiet`: no warning, this run said it already)."""
        try:
            spec.location.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=spec.location, prefix=".probe-"):
                pass
            return cls(spec)
        except OSError as exc:
            if quiet:
                return None
            logger.warning(
                "refit cache: cannot write %s (%s); running without the cache (set %s to "
                "another directory, or pass --no-cache)",
                spec.location,
                exc.strerror or exc,
                CACHE_DIR_ENV,
            )
            return None

    def key(self, job: RefitJob) -> str:
        """`refit_key(job)`."""
        return refit_key(job)

    def holds(self, key: str) -> bool:
        """True when a result is stored under `key` (not yet read: `load` may still drop it)."""
        return _holds(self.memo, key)

    def load(self, key: str) -> Refitted | None:
        """The refit stored under `key`, or None: none stored, or one that failed to load or is
        not a refit's result (dropped, to be refitted and rewritten)."""
        out = _read(self.memo, key, (Refitted,))
        return out if isinstance(out, Refitted) else None

    def fitted(
        self,
        forecaster: Forecaster,
        history: History,
        model: ModelSpec,
        settings: PlanSettings,
        now: float,
    ) -> Forecast | NoForecast:
        """`forecaster.fit(history, model, settings, now)`, read from the cache when kept there
        under its `fit_key` (an entry that fails to load is dropped), else fitted and kept."""
        key = fit_key(forecaster, history, model, settings, now)
        out = _read(self.fits, key, (Forecast, NoForecast))
        if isinstance(out, Forecast | NoForecast):
            return out
        made, ok = _store(self.fits, key, (forecaster, (history, model, settings, now)))
        self.stored(ok)
        assert isinstance(made, Forecast | NoForecast)
        return made

    def storing(self) -> Callable[[tuple[str, RefitJob]], tuple[Refitted, bool]]:
        """The job the workers run: refit and store (`stored_refit`)."""
        return functools.partial(stored_refit, self.memo)

    def stored(self, ok: bool) -> None:
        """Note a refit's write: the first that failed warns (once), the run goes on."""
        if not ok and not self._warned:
            self._warned = True
            logger.warning(
                "refit cache: could not write to %s (disk full?); this run's refits are not kept",
                self.spec.location,
            )

    def trim(self) -> None:
        """Evict the least recently used entries beyond `spec.max_bytes`."""
        try:
            self.memory.reduce_size(bytes_limit=self.spec.max_bytes)
        except OSError as exc:
            logger.warning("refit cache: could not trim %s: %s", self.spec.location, exc)


def _holds(memo: MemorizedFunc, key: str) -> bool:
    try:
        return bool(memo.check_call_in_cache(key, None))
    except OSError:
        return False


def _read(memo: MemorizedFunc, key: str, kinds: tuple[type, ...]) -> object | None:
    """What `memo` keeps under `key` if it is one of `kinds`, else None: none kept, or one that
    failed to load or holds something else (dropped, to be made again and rewritten)."""
    if not _holds(memo, key):
        return None
    try:
        out = pickle.loads(memo.call_and_shelve(key, None).get())
    except Unknown:
        return None
    except Exception as exc:  # a truncated file, an unpickle error: never trusted
        logger.warning("refit cache: dropped an entry that failed to load (%s)", exc)
        _drop(memo, key)
        return None
    if not isinstance(out, kinds):
        logger.warning("refit cache: dropped an entry holding %s", type(out).__name__)
        _drop(memo, key)
        return None
    return out


def _drop(memo: MemorizedFunc, key: str) -> None:
    try:
        memo.call_and_shelve(key, None).clear()
    except Exception:  # already gone, or unwritable: the result overwrites it anyway
        logger.debug("refit cache: could not drop %s", key, exc_info=True)


@dataclass(frozen=True)
class KeptFits:
    """`forecaster` with its fits kept in `cache` (`RefitCache.fitted`): a fit already kept for
    the same history known at its instant, model, settings, forecaster and code is read back,
    so its forecast is the one `forecaster` makes."""

    forecaster: Forecaster
    cache: RefitCache

    def fit(
        self, history: History, model: ModelSpec, settings: PlanSettings, now: float
    ) -> Forecast | NoForecast:
        """`Forecaster.fit`, kept across runs."""
        return self.cache.fitted(self.forecaster, history, model, settings, now)


def kept_fits(forecaster: Forecaster, spec: CacheSpec | None) -> Forecaster:
    """`forecaster` with its fits kept in the cache at `spec` (`KeptFits`); `forecaster` itself
    without a cache (None, or one that cannot be written: the run that opened it first warned)."""
    cache = None if spec is None else RefitCache.open(spec, quiet=True)
    return forecaster if cache is None else KeptFits(forecaster, cache)


def cache_usage(location: Path) -> tuple[int, int]:
    """(entries, bytes) kept under `location` (0, 0 when there is none)."""
    entries, size = 0, 0
    for root, _, files in os.walk(location):
        for name in files:
            try:
                size += (Path(root) / name).stat().st_size
            except OSError:
                continue
            entries += name == "output.pkl"
    return entries, size


def clear_cache(location: Path) -> tuple[int, int]:
    """Remove every refit kept under `location`; returns what was there (`cache_usage`)."""
    was = cache_usage(location)
    if location.exists():
        joblib.Memory(str(location), verbose=0).clear(warn=False)
    return was


__all__ = [
    "CACHE_DIR_ENV",
    "CACHE_SIZE_ENV",
    "CacheSpec",
    "KeptFits",
    "RefitCache",
    "cache_spec",
    "cache_usage",
    "clear_cache",
    "code_digest",
    "fit_key",
    "kept_fits",
    "parse_size",
    "refit_key",
    "stored_refit",
]
