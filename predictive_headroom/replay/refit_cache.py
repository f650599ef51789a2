"""Walk-forward refits kept on disk across runs (`docs/promise.md`, "Refits kept across runs"),
so that `tune` and `backtest` on a history already replayed skip its refits and a history a day
longer refits only the new cut.

A refit (`walkforward.refit`) depends only on the history it reads (up to its cut, at most
`forecast.history`), the settings it fits for, the forecaster and the code: its key hashes exactly
these (the slice's timestamps and values as bytes, the rest through `joblib.hash`, the package's
version and a digest of its source files, so an edited checkout never reads a result of other
code). The quantiles a command sweeps are not in the key: a refit is kept with the model and
baseline at each quantile swept so far (`KeptRefit`, its burst models with their training set),
so `backtest` after `tune` reads `tune`'s refits and fits only the burst models at quantiles
`tune` did not sweep, and adds them to the entry.

The files are `replay.cache_store`'s: a directory only this user can write (anything else is
refused, naming the path and the fix, and the run goes on without the cache), entries signed with
a key only this user can read and checked before they are unpickled. Each entry is written to a
temporary file and renamed, so two runs at once never leave a half-written one; the least
recently used beyond `CacheSpec.max_bytes` are evicted after each run.

Nothing read is trusted: an entry that fails its check or to load (truncated, tampered with,
another version's classes) or is not a refit's result is dropped and refitted. A cache directory
that cannot be written warns once and the run goes on without it; so does a write that fails (a
full disk).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import pickle
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import joblib
import numpy as np

import predictive_headroom
from predictive_headroom import __version__
from predictive_headroom.core.series import Forecast, History, NoForecast
from predictive_headroom.core.settings import ModelSpec, PlanSettings
from predictive_headroom.protocols import Forecaster
from predictive_headroom.replay.cache_store import (
    KINDS,
    EntryStore,
    UnsafeCache,
    clear,
    safe_root,
    signing_key,
    usage,
)
from predictive_headroom.replay.walkforward import (
    RefitJob,
    Refitted,
    fit_refit,
    swept_at,
)

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
    bytes), its instant and horizon, the knobs and settings, the forecaster and baseline, how
    the curve is refitted and the key of the refit it starts from (`RefitJob.curve`,
    `RefitJob.after`) and the code (`code_digest`); not the quantiles it is swept at
    (`KeptRefit` keeps each)."""
    digest = hashlib.blake2b(code_digest().encode(), digest_size=20, person=b"refit")
    digest.update(np.ascontiguousarray(job.known.times, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(job.known.values, dtype=np.float64).tobytes())
    rest = (job.at, job.horizon, job.knobs, job.settings, job.forecaster, job.naive_fit)
    digest.update(f"{job.curve}:{job.after}".encode())
    digest.update(joblib.hash(rest).encode())
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

REFITS, FITS = KINDS
"""The two kinds of entry: walk-forward refits (`KeptRefit`) and the daemon's own fits."""


@dataclass(frozen=True)
class KeptRefit:
    """A refit as kept: `base` (`walkforward.fit_refit`: the fit and baseline at the pool's
    quantile, `swept` empty) and the model and baseline at each quantile swept so far. Its burst
    models keep their training set, so a quantile not yet swept is read from the same fit."""

    base: Refitted
    swept: dict[float, tuple[Forecast | NoForecast, Forecast]]

    def refitted(self, quantiles: Sequence[float]) -> Refitted:
        """The refit swept at `quantiles` (each one kept), as `walkforward.refit` makes it."""
        return replace(self.base, swept=tuple(self.swept[q] for q in quantiles))

    def sweeping(self, job: RefitJob) -> KeptRefit:
        """This refit with every quantile of `job` swept (`walkforward.swept_at`)."""
        missing = [q for q in job.quantiles if q not in self.swept]
        more = {q: swept_at(job, self.base.model, q) for q in missing}
        return replace(self, swept={**self.swept, **more}) if more else self


def _pickled(out: object) -> bytes:
    return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


def _loaded(store: EntryStore, kind: str, key: str, kinds: tuple[type, ...]) -> object | None:
    """What `store` keeps under `key` if it is one of `kinds`, else None: none kept, or one that
    failed its check (never unpickled), failed to load or holds something else (each dropped,
    to be made again and rewritten)."""
    try:
        read = store.read(kind, key)
        out = None if read is None else pickle.loads(read[1])
    except Exception as exc:  # Tampered (not unpickled), a truncated pickle: never trusted
        logger.warning("refit cache: dropped an entry that failed to load (%s)", exc)
        store.drop(kind, key)
        return None
    if out is not None and not isinstance(out, kinds):
        logger.warning("refit cache: dropped an entry holding %s", type(out).__name__)
        store.drop(kind, key)
        return None
    return out


def stored_refit(store: EntryStore, keyed: tuple[str, RefitJob]) -> tuple[Refitted, bool]:
    """Refit `keyed`'s job, or read the refit kept under its key and sweep the quantiles it
    lacks, and keep it there (in a worker process); True when kept (False: the write failed,
    a full disk)."""
    key, job = keyed
    kept = _loaded(store, REFITS, key, (KeptRefit,))
    was = kept if isinstance(kept, KeptRefit) else None
    out = (was or KeptRefit(fit_refit(job), {})).sweeping(job)
    ok = True
    if out is not was:
        ok = store.write(REFITS, key, {"quantiles": sorted(out.swept)}, _pickled(out))
    return out.refitted(job.quantiles), ok


class RefitCache:
    """The refits kept in `spec.location` (`open` it: None when it cannot be used)."""

    def __init__(self, spec: CacheSpec, store: EntryStore) -> None:
        self.spec = spec
        self.store = store
        self._warned = False

    @classmethod
    def open(cls, spec: CacheSpec, *, quiet: bool = False) -> RefitCache | None:
        """The cache at `spec`, or None after one warning when its directory is not safely this
        user's (`cache_store.safe_root`: the warning names it and the fix) or cannot be made or
        written (the run goes on without it; `quiet`: no warning, this run said it already)."""
        try:
            root = safe_root(spec.location)
            with tempfile.NamedTemporaryFile(dir=root / REFITS, prefix=".probe-"):
                pass
            return cls(spec, EntryStore(root, signing_key(root)))
        except UnsafeCache as exc:
            if not quiet:
                logger.warning(
                    "refit cache: refusing %s: it %s; running without the cache (to use it: %s; "
                    "or pass --no-cache)",
                    exc.path,
                    exc.why,
                    exc.fix,
                )
        except OSError as exc:
            if not quiet:
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

    def kept(self, key: str) -> frozenset[float] | None:
        """The quantiles the refit kept under `key` is swept at, read from its checked header
        without unpickling it (None: none kept, or one that failed its check: dropped)."""
        try:
            read = self.store.read(REFITS, key)
            return None if read is None else frozenset(map(float, read[0]["quantiles"]))
        except Exception as exc:  # Tampered, a header of another shape: never trusted
            logger.warning("refit cache: dropped an entry that failed to load (%s)", exc)
            self.store.drop(REFITS, key)
            return None

    def load(self, key: str, quantiles: Sequence[float]) -> Refitted | None:
        """The refit kept under `key` swept at `quantiles`, or None: none kept, one without
        every one of them, or one that failed to load (dropped, to be refitted and rewritten)."""
        kept = _loaded(self.store, REFITS, key, (KeptRefit,))
        if not isinstance(kept, KeptRefit) or not set(quantiles) <= set(kept.swept):
            return None
        return kept.refitted(quantiles)

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
        out = _loaded(self.store, FITS, key, (Forecast, NoForecast))
        if isinstance(out, Forecast | NoForecast):
            return out
        made = forecaster.fit(history, model, settings, now)
        self.stored(self.store.write(FITS, key, {}, _pickled(made)))
        return made

    def storing(self) -> Callable[[tuple[str, RefitJob]], tuple[Refitted, bool]]:
        """The job the workers run: refit (or sweep a kept refit) and store (`stored_refit`)."""
        return functools.partial(stored_refit, self.store)

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
            self.store.trim(self.spec.max_bytes)
        except OSError as exc:
            logger.warning("refit cache: could not trim %s: %s", self.spec.location, exc)


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
    return usage(location)


def clear_cache(location: Path) -> tuple[int, int]:
    """Remove every refit kept under `location`; returns what was there (`cache_usage`). Raises
    `UnsafeCache` for a directory that is not safely this user's, OSError when it cannot."""
    return clear(location)


__all__ = [
    "CACHE_DIR_ENV",
    "CACHE_SIZE_ENV",
    "CacheSpec",
    "KeptFits",
    "KeptRefit",
    "RefitCache",
    "UnsafeCache",
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
