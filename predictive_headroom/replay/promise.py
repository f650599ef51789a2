"""Keeping the protection promise walk-forward (docs/design.md, cost at equal protection).

A pool asks for protection P: absorb at least P of the pod-minutes that would wait for a node
without headroom. The setting used on a day is chosen from the days before it, so what matters is
the protection kept on the days that follow, not the one reached on the days chosen from.

Candidates are a forecast setting (burst quantile, stabilisation window) plus a reserve of N
placeholders added to the forecast's count, or a reserve alone (static N). The replayed days are
summed per candidate and per period (a day) into a `Ledger`; the choice for a period reads only
the periods before it.

The rule (`choose`):

1. inner rule at strictness f: in each period use the cheapest candidate whose unserved
   pod-minutes over the `window` periods before it are at most f x (1 - P) x reactive's (its
   protection there at least 1 - f (1 - P)); none: the most protective one;
2. the strictness is learned from past shortfalls: for each f of `STRICTNESS` (1: the target as
   asked, down to 0.1) the inner rule's protection kept on the `lookback`
   periods before now (each of its choices made on the periods before it) is read, and the
   loosest f that kept P is used; when none kept P, the strictness that kept the most, and the
   choice says so (`short`): nothing the history shows reaches P at any price, this is the best
   it reached, with the reserve it needed;
   (and, the window having misjudged the days after it, it chooses on every day read instead,
   the tail-aware reserve of `replay.tail` counting as reaching P there: the cheapest wins).

Holding the setting in force until another is clearly cheaper (10%) changed nothing measurable
on elb and azure (docs/promise.md), so there is no hold: the daemon, which keeps no memory across
restarts, and the backtest make the same call on the same days.

The daily reserve (`reserve_walk_forward`) is the honest fixed-headroom yardstick: each day the
smallest static N that reached P over the 7 days before it (no margin: what a team would do by
hand with the same information).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

import numpy as np

from predictive_headroom.core.planner import with_reserve
from predictive_headroom.replay.simulator import ClusterSpec, Run, score, simulate
from predictive_headroom.replay.tuning import Setting, Walk

PROMISE_QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99)
"""The forecast's burst quantiles the rule chooses among (few candidates choose less luck): the
daemon's re-tune, `tune` and `backtest --protection` all choose among these."""
STRICTNESS = (1.0, 0.8, 0.6, 0.4, 0.25, 0.1)
"""Share of the allowed waiting (1 - P) the inner rule may leave on its window, loosest first."""
WINDOW = 7
"""Periods (days) each inner choice is made on."""
LOOKBACK = 7
"""Periods over which the strictness is judged by the protection it kept."""
RESERVE_WINDOW = 7
"""The daily reserve's window (periods)."""
UNTESTED_STRICTNESS = 0.6
"""With a single past period there is nothing to judge a strictness on: this middle one."""


class Status(StrEnum):
    """How a choice stands against the target: `kept` (the strictness used kept P on the
    lookback), `short` (no strictness kept P there: the cheapest reaching P over every day read,
    else the most protective), `untested` (one past period: nothing to judge a strictness on)."""

    KEPT = "kept"
    SHORT = "short"
    UNTESTED = "untested"
    FIXED = "fixed"
    """The forecast set aside for a fixed N (`replay.fallback`)."""


def reserve_sizes(pods: np.ndarray, tail: int | None = None) -> list[int]:
    """The reserves tried: 0, 1, 2, 3, then steps of about 1.6x up to half the peak app pods,
    and `tail` (the tail-aware reserve, `replay.tail`) when given."""
    peak = int(pods.max()) if pods.size else 0
    out, n = {0, 1, 2, 3}, 4
    while n <= peak // 2:
        out.add(n)
        n = int(round(n * 1.6))
    if tail is not None:
        out.add(tail)
    return sorted(out)


def carries_tail(settings: Iterable[Setting]) -> Setting:
    """The forecast setting the tail-aware reserve rides on: the cheapest (lowest burst
    quantile, then shortest window), since the reserve absorbs the growth alone."""
    return min(settings, key=lambda s: (s.quantile, s.window))


@dataclass(frozen=True)
class Candidate:
    """A forecast setting plus a reserve of `reserve` placeholders, or the reserve alone
    (`setting` None: static headroom)."""

    setting: Setting | None
    reserve: int

    def label(self) -> str:
        if self.setting is None:
            return f"static N={self.reserve}"
        base = self.setting.label()
        return base if self.reserve == 0 else f"{base} +{self.reserve}"


@dataclass(frozen=True)
class Ledger:
    """Per-period sums of replayed candidates: `unserved[c, k]` pod-minutes and
    `node_hours[c, k]` of candidate c in period k, `reactive[k]` reactive's unserved and
    `reactive_node_hours[k]` its node-hours."""

    candidates: tuple[Candidate, ...]
    unserved: np.ndarray
    node_hours: np.ndarray
    reactive: np.ndarray
    reactive_node_hours: np.ndarray

    @property
    def periods(self) -> int:
        return int(self.reactive.size)

    def upto(self, largest_reserve: int) -> Ledger:
        """Only the candidates whose reserve is at most `largest_reserve`."""
        return self._only(
            [i for i, c in enumerate(self.candidates) if c.reserve <= largest_reserve]
        )

    def among(self, reserves: Collection[int]) -> Ledger:
        """Only the candidates whose reserve is one of `reserves`."""
        allowed = set(reserves)
        return self._only([i for i, c in enumerate(self.candidates) if c.reserve in allowed])

    def _only(self, keep: list[int]) -> Ledger:
        """The candidates at the indexes `keep`, every period."""
        return Ledger(
            tuple(self.candidates[i] for i in keep),
            self.unserved[keep],
            self.node_hours[keep],
            self.reactive,
            self.reactive_node_hours,
        )

    def cut(self, first: int, stop: int) -> Ledger:
        """Periods [first, stop) only."""
        return Ledger(
            self.candidates,
            self.unserved[:, first:stop],
            self.node_hours[:, first:stop],
            self.reactive[first:stop],
            self.reactive_node_hours[first:stop],
        )


@dataclass(frozen=True)
class Choice:
    """What the rule holds for the next period and why."""

    candidate: Candidate
    status: Status
    strictness: float
    kept: float | None
    """Protection the strictness used kept on the lookback (None: no waiting demand to judge)."""
    expected: float
    """Protection of the candidate on the window it was chosen on."""
    overhead_node_hours: float
    """Its overhead node-hours over reactive on that window."""
    periods: int
    """Past periods read."""
    events: float
    """Reactive's waiting pod-minutes on the lookback (the evidence the strictness rests on)."""
    kept_overhead_node_hours: float = 0.0
    """Overhead node-hours over reactive of the choices that kept `kept`, on the same periods."""
    kept_periods: int = 0
    """The periods `kept` and `kept_overhead_node_hours` were read on (the judged lookback)."""


def ledger(
    runs: Mapping[Candidate, Run] | Iterable[tuple[Candidate, Run]],
    reactive: Run,
    bounds: Sequence[int],
    start: int,
) -> Ledger:
    """Sum each run per period: period k covers minutes [bounds[k], bounds[k + 1]) (clipped to
    `start`); `bounds` are the period starts shifted back by what is not yet known at them.
    `runs` may be (candidate, run) pairs made one at a time: each run is summed, then let go."""
    edges = [max(start, b) for b in bounds]

    def sums(values: np.ndarray) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
        return np.array([c[b] - c[a] for a, b in pairwise(edges)])

    cands: list[Candidate] = []
    unserved: list[np.ndarray] = []
    node_hours: list[np.ndarray] = []
    for candidate, run in runs.items() if isinstance(runs, Mapping) else runs:
        cands.append(candidate)
        unserved.append(sums(run.unserved))
        node_hours.append(sums(run.ready) / 60.0)
    return Ledger(
        tuple(cands),
        np.array(unserved).reshape(len(cands), -1),
        np.array(node_hours).reshape(len(cands), -1),
        sums(reactive.unserved),
        sums(reactive.ready) / 60.0,
    )


def _trailing(a: np.ndarray, window: int) -> np.ndarray:
    """out[..., k] = sum of a[..., k - window : k] (the `window` periods before k), k = 0..n."""
    c = np.concatenate([np.zeros((*a.shape[:-1], 1)), np.cumsum(a, axis=-1)], axis=-1)
    lo = np.maximum(np.arange(c.shape[-1]) - window, 0)
    return c - c[..., lo]


def inner_choices(
    book: Ledger, target: float, strictness: float, window: int, admitted: int | None = None
) -> np.ndarray:
    """The candidate index the inner rule uses in each period 0..n (n: the next one); -1 where
    no period before it was replayed. Candidates with reserve `admitted` meet the target
    whatever their window shows."""
    u = _trailing(book.unserved, window)
    cost = _trailing(book.node_hours, window) - _trailing(book.reactive_node_hours, window)
    r = _trailing(book.reactive, window)
    allowed = strictness * (1.0 - target) * r
    ok = u <= allowed + 1e-9
    if admitted is not None:
        ok[[c.reserve == admitted for c in book.candidates]] = True
    big = np.where(ok, cost, np.inf)
    cheapest = np.argmin(big, axis=0)
    # the most protective: least unserved, then cheapest
    order = np.lexsort((cost, u), axis=0)[0]
    out = np.where(ok.any(axis=0), cheapest, order)
    out[0] = -1
    return out


def _kept(book: Ledger, picks: np.ndarray, first: int, stop: int) -> tuple[float | None, float]:
    """Protection kept over periods [first, stop) using `picks`, and reactive's waiting there."""
    ks = np.arange(first, stop)
    ks = ks[picks[ks] >= 0]
    r = float(book.reactive[ks].sum())
    if r <= 0:
        return None, r
    u = float(book.unserved[picks[ks], ks].sum())
    return 1.0 - u / r, r


def _kept_cost(book: Ledger, picks: np.ndarray, first: int, stop: int) -> tuple[float, int]:
    """Overhead node-hours over reactive of `picks` on periods [first, stop), and how many."""
    ks = np.arange(first, stop)
    ks = ks[picks[ks] >= 0]
    cost = float(book.node_hours[picks[ks], ks].sum() - book.reactive_node_hours[ks].sum())
    return cost, int(ks.size)


# Long on purpose: the rule's three steps (try every strictness, judge them on the lookback,
# widen when short) read in the order the module docstring gives them.
def choose(
    book: Ledger,
    target: float,
    *,
    window: int | None = None,
    lookback: int | None = None,
    strictness: Sequence[float] | None = None,
    tail: int | None = None,
) -> Choice:
    """The candidate to hold in the period after the last of `book` (see the module docstring).
    Reads at most `window + lookback` periods (`WINDOW`, `LOOKBACK` by default). `tail`: the
    tail-aware reserve (`replay.tail`), one of the book's reserves, held when short if it is
    cheaper than what reached the target over every day read."""
    window = WINDOW if window is None else window
    strictness = STRICTNESS if strictness is None else strictness
    lookback = LOOKBACK if lookback is None else lookback
    n = book.periods
    if n == 0:
        raise ValueError("no replayed periods to choose from")
    book = book.cut(max(0, n - window - lookback), n)
    n = book.periods
    first = max(1, n - lookback)
    trials = []
    for f in strictness:
        picks = inner_choices(book, target, f, window)
        kept, events = _kept(book, picks, first, n)
        trials.append((f, picks, kept, events))
    judged = [t for t in trials if t[2] is not None]
    if n - first < 1 or not judged:
        # nothing waited on the lookback: every strictness kept it; the loosest is as good
        untested = next(t for t in trials if t[0] <= UNTESTED_STRICTNESS)
        f, picks, kept, events = trials[0] if n - first >= 1 else untested
        status = Status.KEPT if n - first >= 1 else Status.UNTESTED
    else:
        good = [t for t in judged if t[2] >= target - 1e-12]
        if good:
            f, picks, kept, events = good[0]
            status = Status.KEPT
        else:
            f, picks, kept, events = max(judged, key=lambda t: (t[2], -t[0]))
            status = Status.SHORT
    pick = int(picks[n])
    kept_cost, kept_periods = _kept_cost(book, picks, first, n)
    if status == Status.SHORT:
        # The window misjudged the days after it at every strictness: widen it to every day read
        # (the window and the lookback), the cheapest reaching the target there, else the most
        # protective, which is where the reserve closing the gap comes from.
        # The tail-aware reserve, sized on weeks of growth, counts as reaching it: a burst the
        # days read never showed is priced by the tail, and a record one does not set the
        # reserve alone.
        pick = int(inner_choices(book, target, 1.0, n, tail)[n])
    u = book.unserved[pick, -window:].sum()
    r = book.reactive[-window:].sum()
    cost = book.node_hours[pick, -window:].sum() - book.reactive_node_hours[-window:].sum()
    return Choice(
        book.candidates[pick],
        status,
        f,
        kept,
        1.0 if r <= 0 else 1.0 - float(u) / float(r),
        float(cost),
        n,
        float(events),
        kept_cost,
        kept_periods,
    )


@dataclass(frozen=True)
class WalkForward:
    """A rule replayed day by day: the choice held in each period and the spliced run."""

    target: float
    period_starts: list[int]
    choices: list[Choice | None]
    run: Run
    unserved_pod_minutes: float
    node_hours: float


def placeholders_of(
    candidate: Candidate, base: Mapping[Setting, np.ndarray], size: int, max_replicas: int
) -> np.ndarray:
    """The placeholder count per minute of `candidate`: its forecast setting's plus the reserve,
    capped at `max_replicas` by the planner's rule (`core.planner.with_reserve`); a reserve alone
    (static N) is N."""
    if candidate.setting is None:
        return np.full(size, candidate.reserve, dtype=np.int64)
    return with_reserve(base[candidate.setting], candidate.reserve, max_replicas)


def walk_forward(
    book: Ledger,
    base: Mapping[Setting, np.ndarray],
    walk: Walk,
    target: float,
    default: Candidate,
    *,
    tails: Sequence[int | None] | None = None,
    override: Callable[[int, Choice], Choice] | None = None,
    **rule: int,
) -> WalkForward:
    """Replay `choose` day by day on `walk`: period k uses the choice made on ledger periods
    before k (the first, with none, uses `default`), spliced and simulated once; a reserve is
    capped at `walk.max_replicas` as the planner caps it. `tails[k]`: period k's tail-aware
    reserve (its candidates in `book`), None where there is none. `override(k, choice)`: what
    period k holds instead of the rule's choice (`replay.fallback.fixed_override`: a fixed N)."""
    pods, cap = walk.pods, walk.max_replicas
    spliced = placeholders_of(default, base, pods.size, cap).copy()
    choices: list[Choice | None] = []
    # The reserves tried on a day are sized from the app pods of the days it reads, as the
    # daemon sizes them from its replay.
    span = (WINDOW + LOOKBACK) * 1440
    sizes = reserve_sizes(pods[walk.start :])
    for k, b in enumerate(walk.period_starts):
        largest = max(reserve_sizes(pods[max(0, b - span) : b]))
        tail = None if tails is None else tails[k]
        tried = [n for n in sizes if n <= largest] + ([] if tail is None else [tail])
        past = book.cut(0, k).among(tried)
        choice = choose(past, target, tail=tail, **rule) if k else None
        if choice is not None and override is not None:
            choice = override(k, choice)
        cand = default if choice is None else choice.candidate
        stop = walk.stop(k)
        spliced[b:stop] = placeholders_of(cand, base, pods.size, cap)[b:stop]
        choices.append(choice)
    return spliced_walk(walk, target, choices, spliced)


def spliced_walk(
    walk: Walk, target: float, choices: list[Choice | None], spliced: np.ndarray
) -> WalkForward:
    """The `WalkForward` of the placeholders `spliced` from each period's choice: simulated once
    on the walk's cluster and scored from its first scored minute."""
    run = simulate(walk.pods, spliced, walk.cluster)
    m = score(run, walk.start)
    return WalkForward(
        target, list(walk.period_starts), choices, run, m.unserved_pod_minutes, m.node_hours
    )


@dataclass(frozen=True)
class StaticRuns(Mapping[int, Run]):
    """Static headroom of N placeholders for each N of `ns`, simulated when read (a few
    milliseconds each) rather than held: a run is three arrays as long as the replay, and the
    static curve has up to a few hundred N."""

    pods: np.ndarray
    cluster: ClusterSpec
    ns: tuple[int, ...]

    def __getitem__(self, n: int) -> Run:
        if n not in self.ns:
            raise KeyError(n)
        return simulate(self.pods, np.full(self.pods.size, n, dtype=np.int64), self.cluster)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ns)

    def __len__(self) -> int:
        return len(self.ns)


@dataclass(frozen=True)
class ReserveBook:
    """The static runs summed per period for the daily reserve: the `RESERVE_WINDOW` periods
    before the first scored one (as far as the data goes back), then each scored period;
    `before` of them come before the first."""

    book: Ledger
    before: int


def reserve_book(static_runs: Mapping[int, Run], reactive: Run, walk: Walk) -> ReserveBook:
    """The `ReserveBook` of `static_runs` (read one at a time, in increasing N) over `walk`."""
    period_starts, known_lag = walk.period_starts, walk.known_lag
    first = period_starts[0] if period_starts else walk.start
    before = list(range(first - RESERVE_WINDOW * 1440, first, 1440))
    before = [b for b in before if b - known_lag >= 0]
    starts = before + list(period_starts)
    bounds = [b - known_lag for b in starts] + [walk.pods.size]
    pairs = ((Candidate(None, n), static_runs[n]) for n in sorted(static_runs))
    return ReserveBook(ledger(pairs, reactive, bounds, 0), len(before))


def reserve_walk_forward(
    static_runs: Mapping[int, Run],
    reactive: Run,
    walk: Walk,
    target: float,
    summed: ReserveBook | None = None,
) -> WalkForward:
    """The daily reserve on `walk`: each period the smallest static N whose unserved over the
    `RESERVE_WINDOW` days before it (the unscored warm-up included: a reserve needs no forecast)
    is within (1 - target) of reactive's (none: the largest); the first day with no past, 0.
    `summed`: `reserve_book` of the same arguments, when already made (one per target otherwise)."""
    if summed is None:
        summed = reserve_book(static_runs, reactive, walk)
    book = summed.book
    picks = inner_choices(book, target, 1.0, RESERVE_WINDOW)[summed.before :]
    spliced = np.zeros(walk.pods.size, dtype=np.int64)
    choices: list[Choice | None] = []
    for k, b in enumerate(walk.period_starts):
        n = 0 if picks[k] < 0 else book.candidates[int(picks[k])].reserve
        spliced[b : walk.stop(k)] = n
        choices.append(
            None
            if picks[k] < 0
            else Choice(Candidate(None, n), Status.KEPT, 1.0, None, 0.0, 0.0, k, 0.0)
        )
    return spliced_walk(walk, target, choices, spliced)
