"""`tune`'s decision rule: what the history can keep, the forecast or fixed headroom
(docs/promise.md, "Tune's decision rule").

The rule (`RULE`) chooses on the first half of the scored days (seen, rounded down) and is judged
walk-forward, never on the days it chose on: on the second half (unseen, the single figure), and on
every unseen week, chosen on all the days before it (`backtest.weeks`, the range). Choosing on all
the scored days instead (`ChoiceRule.on_all_days`, as the range measures the rule) was measured
on every shared series and not adopted. On the days it chooses on, the rule recommends fixed
headroom when too few pod-minutes waited there to judge the forecast (`ChoiceRule.few_events`;
the protection asked when none waited); else it picks the highest protection level, up to the one
asked, that the promise kept walk-forward there, a level missed by at most 2 points counting as
kept (`ChoiceRule.tolerance`), and recommends `protection:` at that level unless it cost more than
`ChoiceRule.margin` (1.10) times static headroom at the protection it kept on the same days (the
forecast did not pay). Otherwise, when no level was kept or the forecast did not pay, it
recommends fixed headroom too. Fixed headroom is the fewest placeholders
that reached the asked protection on the seen part (how a user sizes a fixed Deployment from the
past), pasted as `minReplicas: N` with the forecast off. The single figure is what it kept on the
unseen part: the protection, its cost a day, and static headroom's cost at that protection; the
range (`decide` on the days before each unseen week, `backtest.weeks`) says how sure the promise
is (`Recommendation.weeks`). `bench/choose_on_bench.py` measures choosing on the first half
against choosing on all the days (docs/promise.md, "How sure the promise is");
`bench/choice_bench.py` measures the rule and its variants on every shared series.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from predictive_headroom.backtest.against_fixed import Judged, Recommended, Replays, Span, span
from predictive_headroom.backtest.results import FEW_EVENTS
from predictive_headroom.backtest.weeks import UnseenRange, unseen_weeks
from predictive_headroom.core.series import iso_utc
from predictive_headroom.policy.config import Pool
from predictive_headroom.replay.simulator import Run


@dataclass(frozen=True)
class ChoiceRule:
    """The rule's thresholds (docs/promise.md, "Tune's decision rule"); the defaults are issue
    44's rule, `RULE` the one `tune` uses."""

    margin: float = 1.10
    """Fixed headroom is recommended when the promise cost more than this times static
    headroom at the protection it kept on the seen part (the 10% the measure tolerates)."""
    few_events: float = FEW_EVENTS
    """Below this many waiting pod-minutes on the seen part nothing is judged: the protection
    asked is kept."""
    tolerance: float = 0.0
    """A level missed by at most this much on the seen part counts as kept there (0.02: the
    promise's own tolerance of 2 points; `bench/choice_bench.py` measures each)."""
    lower_levels: bool = True
    """Whether a level below the one asked may be pasted (False: the level asked, or fixed
    headroom)."""
    few_events_fixed: bool = False
    """On too few waiting pod-minutes to judge (but some), fixed headroom sized on the seen part
    instead of the protection asked."""
    on_all_days: bool = False
    """Paste the decision made on all the scored days (as the weekly range measures the rule)
    instead of the one made on the seen part; the single figure then judges the decision made
    on the seen part (`Recommendation.held_out`). Not adopted: on nab_twitter_fb it broke both
    figures that choosing on the first half met (docs/promise.md, "How sure the promise is")."""


RULE = ChoiceRule(tolerance=0.02, few_events_fixed=True)
"""The rule `tune` uses: on the shared series it meets both figures of `bench/choice_bench.py`
(kept at least P - 2 points and at most 1.10 times static headroom on the unseen days) on more of
them than issue 44's rule and breaks neither where that one met it (docs/promise.md, "Tune's
rule judged on what was asked")."""


@dataclass(frozen=True)
class Recommendation:
    """What `tune` pastes and how it fared on the days it did not see."""

    kind: Recommended
    asked: float
    level: float | None
    """The protection pasted (kind `protection`)."""
    replicas: int | None
    """The fixed N pasted (kind `fixed`; also sized for the other kind, for comparison)."""
    seen_days: float
    unseen_days: float
    split_at: float
    """POSIX seconds where the unseen part starts."""
    seen: Judged
    """On the days it was chosen on (all the scored days for the rule's, the seen part for a
    budget's)."""
    unseen: Judged | None
    """On the unseen part, chosen before it (`held_out`); None when the history has under two
    scored days (nothing left unseen)."""
    product_whole: Judged
    """`protection:` as asked over all scored days (the headline)."""
    product_unseen: Judged | None
    """`protection:` as asked on the unseen part (what the recommendation is weighed against)."""
    why: str
    weeks: UnseenRange | None = None
    """The same rule on every unseen week, each chosen on the days before it (`backtest.weeks`;
    None: no whole week after the days it needs to choose on)."""
    held_out: str | None = None
    """What the same rule chose on the seen part, which `unseen` judges (None: the pasted choice
    itself, as for a budget's recommendation)."""

    def label(self) -> str:
        """`protection: 90%` or `fixed N=24`."""
        if self.kind == Recommended.FIXED:
            return f"fixed N={self.replicas}"
        assert self.level is not None
        return f"protection: {100 * self.level:g}%"

    def yaml(self, pool: Pool) -> list[str]:
        """The lines to paste into `pool`, each replacing the key it names: `protection: P`, or
        for fixed headroom `minReplicas: N` (with `maxReplicas: N` when the pool's is lower) and
        the pool's forecast turned off (its query kept); `remove` says what to delete."""
        if self.kind == Recommended.PROTECTION:
            assert self.level is not None
            return [f"protection: {100 * self.level:g}%"]
        assert self.replicas is not None and pool.forecast is not None
        lines = [f"minReplicas: {self.replicas}"]
        if pool.max_replicas < self.replicas:
            lines.append(f"maxReplicas: {self.replicas}")
        spec = pool.forecast
        query = json.dumps(spec.query)  # a JSON string is a YAML flow scalar
        off = f"forecast: {{enabled: false, query: {query}, demandPerReplica: {spec.demand_per_replica:g}}}"
        return [*lines, off]

    @property
    def remove(self) -> list[str]:
        """Keys of the pool to delete when pasting (fixed headroom keeps no promise)."""
        return ["protection"] if self.kind == Recommended.FIXED else []

    def says(self) -> str:
        """The recommendation and its unseen-part figures in one sentence."""
        text = f"recommended: {self.label()} ({self.why})"
        if self.unseen is not None:
            u = self.unseen
            static = (
                "no fixed N kept that"
                if u.static_per_day is None
                else f"static headroom needed {u.static_per_day:,.1f} at that protection"
            )
            who = "it" if self.held_out is None else "the same rule"
            if self.held_out is not None:
                chose = "" if self.held_out == self.label() else f": {self.held_out}"
                who += f", chosen on the {self.seen_days:.1f} days before them{chose},"
            text += (
                f"; on the last {self.unseen_days:.1f} days, which it did not see (from "
                f"{iso_utc(self.split_at)}), {who} kept {100 * u.kept:.1f}% for "
                f"{u.per_day:,.1f} overhead node-hours a day ({static})"
            )
        if self.weeks is not None:
            text += f"; {self.weeks.says()}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "label": self.label(),
            "asked": self.asked,
            "protection": self.level,
            "replicas": self.replicas,
            "seen_days": self.seen_days,
            "unseen_days": self.unseen_days,
            "unseen_from": iso_utc(self.split_at),
            "seen": self.seen.to_dict(),
            "unseen": None if self.unseen is None else self.unseen.to_dict(),
            "unseen_over_static": None
            if self.unseen is None or self.unseen.over_static is None
            else round(self.unseen.over_static, 3),
            "asked_unseen": None if self.product_unseen is None else self.product_unseen.to_dict(),
            "remove": self.remove,
            "why": self.why,
            "unseen_weeks": None if self.weeks is None else self.weeks.to_dict(),
            "unseen_chosen": self.held_out or self.label(),
            "says": self.says(),
        }


@dataclass(frozen=True)
class Decision:
    """What the rule chooses on some seen days: a protection level or fixed headroom, the fixed N
    sized there (for either kind, for comparison) and why."""

    kind: Recommended
    level: float | None
    replicas: int
    why: str

    def label(self) -> str:
        """`protection: 90%` or `fixed N=24`."""
        if self.kind == Recommended.FIXED:
            return f"fixed N={self.replicas}"
        return f"protection: {100 * (self.level or 0.0):g}%"

    def run(self, r: Replays) -> Run:
        """What it holds, replayed on `r`: the level's walk, or the fixed N all along."""
        if self.kind == Recommended.FIXED:
            return r.replayed.static_runs[self.replicas]
        assert self.level is not None
        return r.walks[self.level].run


def decide(r: Replays, seen: Span, asked: float, rule: ChoiceRule = RULE) -> Decision:
    """The rule of the module docstring on the days `seen` spans (`r`'s walks include `asked`)."""
    replicas = _fixed_n(seen, asked)
    level, why = _level(r, seen, asked, rule)
    if level is None:
        why += f"; {replicas} fixed placeholders reached it there"
        return Decision(Recommended.FIXED, None, replicas, why)
    return Decision(Recommended.PROTECTION, level, replicas, why)


def recommend_choice(
    r: Replays, asked: float, rule: ChoiceRule = RULE, *, weeks: bool = True
) -> Recommendation:
    """The rule of the module docstring on `r` (whose walks include `asked`): chosen on the seen
    part (on all the scored days with `rule.on_all_days`, the seen part's choice then judged on
    the unseen), with the range it kept on every unseen week (`backtest.weeks`; not with `weeks`
    False, where only the choice is held)."""
    res = r.result
    seen, unseen, split = seen_unseen(r)
    on = r.whole if rule.on_all_days else seen
    chosen = decide(r, on, asked, rule)
    before = decide(r, seen, asked, rule) if rule.on_all_days else chosen
    run, judged = chosen.run(r), before.run(r)
    asked_run = r.walks[asked].run

    def week(days: Span) -> tuple[str, Run]:
        made = decide(r, days, asked, rule)
        return made.label(), made.run(r)

    return Recommendation(
        chosen.kind,
        asked,
        chosen.level,
        chosen.replicas,
        seen.days,
        0.0 if unseen is None else unseen.days,
        float(res.times[min(split, res.pods.size - 1)]),
        on.judge(run),
        None if unseen is None else unseen.judge(judged),
        r.whole.judge(asked_run),
        None if unseen is None else unseen.judge(asked_run),
        chosen.why,
        unseen_weeks(r, asked, week) if weeks else None,
        before.label() if rule.on_all_days else None,
    )


def seen_unseen(r: Replays) -> tuple[Span, Span | None, int]:
    """The scored days split as the rule splits them: the seen part (the first half of the
    days, rounded down), the unseen part (None under two scored days) and the minute it starts
    at. Every recommendation judged on days it did not see reads this split."""
    res, starts = r.result, r.replayed.starts
    half = len(starts) // 2
    split = starts[half] if half >= 1 else res.pods.size
    seen = span(res, r.replayed, res.scored_from, split)
    unseen = span(res, r.replayed, split, res.pods.size) if split < res.pods.size else None
    return seen, unseen, split


def _fixed_n(seen: Span, asked: float) -> int:
    """The fewest fixed placeholders that reached `asked` on the seen span (the most of the
    curve when none did)."""
    for pt in sorted(seen.static, key=lambda p: int(p.label.removeprefix("N="))):
        if seen.reactive_unserved <= 0 or 1 - pt.unserved / seen.reactive_unserved >= asked - 1e-9:
            return int(pt.label.removeprefix("N="))
    return int(seen.static[-1].label.removeprefix("N="))


def _level(r: Replays, seen: Span, asked: float, rule: ChoiceRule) -> tuple[float | None, str]:
    """The protection level to paste, with why (None: fixed headroom instead)."""
    days = f"the first {seen.days:.1f} days"
    if seen.reactive_unserved < rule.few_events:
        sized = rule.few_events_fixed and seen.reactive_unserved > 0  # a fixed N to size
        return None if sized else asked, (
            f"only {seen.reactive_unserved:,.0f} pod-minutes waited without headroom on {days}: "
            "too few to judge the forecast against fixed headroom"
        )
    kept = {
        p: seen.judge(w.run)
        for p, w in r.walks.items()
        if p <= asked + 1e-9 and (rule.lower_levels or p >= asked - 1e-9)
    }
    held = [p for p, j in sorted(kept.items()) if j.kept >= p - rule.tolerance - 1e-9]
    if not held:
        return None, f"on {days} the promise kept none of {_levels(kept)} walk-forward"
    level, j = held[-1], kept[held[-1]]
    said = f"on {days} protection: {100 * level:g}% kept {100 * j.kept:.1f}% for {j.per_day:,.1f} a day"
    if j.static_per_day is not None and j.per_day > rule.margin * j.static_per_day + 1e-9:
        return None, (
            f"{said}, more than {rule.margin:g} times static headroom's {j.static_per_day:,.1f} "
            "at that protection: the forecast did not pay"
        )
    if j.kept < level - 1e-9:
        said += f" (within {100 * rule.tolerance:g} points of it: kept)"
    if level < asked:
        said += f" (the highest level kept; {100 * asked:g}% was not)"
    return level, said


def _levels(kept: dict[float, Judged]) -> str:
    return ", ".join(f"{100 * p:g}%" for p in sorted(kept))
