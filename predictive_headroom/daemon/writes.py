"""Writing a pool's plan to its target, and remembering what was written.

`TargetWriter` is the last step of a reconcile on the leader: it reads the target (the placeholder
Deployment's /scale, or a CapacityBuffer) through the actuator, decides whether the plan may be
written, and writes it. Per pool it remembers the count it last wrote and the count it last
planned; that is how a change made by a person is told apart from its own.

Safety rules:
- only the pool's own target is written: one carrying the label `predictive-headroom.io/pool:
  <pool>`; any other is refused at every reconcile (outcome `refused`, its reason on /last-run),
  with one warning and one Warning Event (NotOwned) each time a refusal starts, and never written;
  so is a Deployment adopted as it is (`placeholder.existing`) that is not a pause placeholder
  (a container other than a pause image, or no PriorityClass below 0): the message names what
  was found; the PriorityClass's value is read at every reconcile and confirmed right before each
  write, so a class deleted or re-created at a value >= 0 is refused at once, never written to;
  when a refusal ends, the log names the check that passes again;
- a target paused with the kill-switch annotation is left alone, and what was written to it is
  forgotten;
- a placeholder adopted as it is (`placeholder.existing`) is taken over from its current count:
  the count found at the first reconcile that may write it is not lowered for the pool's
  `scaleDownStabilization` (reason `hold:takeover`), as if it had been the daemon's own plan;
- missing inputs never lower the count: with a missing input, a plan below the current replicas
  is held at the current replicas (reason `hold:<what is missing>`);
- a replica count changed by a person (not what was last written, while the plan's desired value
  is the same as last time) is left alone, with one warning, until the plan's desired value
  changes; but `maxReplicas` is a hard cap: a count above it, whoever set it, is brought back to
  the plan (and a hold for a missing input never holds above it);
- a target deleted and created again (a new uid) is a new object: what was written to the old one
  is forgotten and the new one is brought to the plan;
- a replica count no one sets (`spec.replicas` null on /scale, or below 0) is a warning and is
  brought to the plan, never taken for a person's change;
- in dry-run nothing is written: each change is sent once as a server-side dry run;
- it writes only while still leader, checked again right before the write (and the actuator's
  fence checks each attempt); the daemon calls `step_down()` while a follower, so a takeover
  starts afresh.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from predictive_headroom.core.planner import Plan
from predictive_headroom.core.vocabulary import PlanReason, PoolAction
from predictive_headroom.daemon.outcomes import PoolOutcome
from predictive_headroom.policy.adopt import PodTemplate, pause_problem, requests_mismatch
from predictive_headroom.policy.config import Pool
from predictive_headroom.policy.target import ownership_problem
from predictive_headroom.protocols import Actuator, TargetRefused, TargetState

logger = logging.getLogger(__name__)

_SETTLED = {
    "label": "its target now carries its label",
    "placeholder": (
        "its target passes the placeholder check again (pause containers only, a PriorityClass "
        "below 0, its value read now)"
    ),
}
"""What is said when a refusal ends, by the check that had refused the target."""


class TargetWriter:
    """Brings each pool's target to its plan on change, and keeps the per-pool write bookkeeping."""

    def __init__(self, actuator: Actuator, *, dry_run: bool, is_leader: Callable[[], bool]) -> None:
        self.actuator, self.dry_run, self.is_leader = actuator, dry_run, is_leader
        self._applied: dict[str, int] = {}
        """Replicas last written to (or found on) each pool's target."""
        self._planned: dict[str, int] = {}
        """Desired replicas of each pool's last plan."""
        self._overridden: set[str] = set()
        """Pools whose manual change has been warned about."""
        self._dry_reported: dict[str, tuple[int, int]] = {}
        """Per pool, the (current, desired) last sent as a dry run."""
        self._uids: dict[str, str] = {}
        """Per pool, the uid of the target object last read."""
        self._refused: dict[str, tuple[str, str]] = {}
        """Pools whose target is refused, with the check that refused it (`_SETTLED`'s keys) and
        the reason last given."""
        self._taken: dict[str, tuple[float, int]] = {}
        """Per adopted pool (`placeholder.existing`): when it was taken over, and the count found."""
        self._requests_warned: dict[str, str | None] = {}
        """Per adopted pool: the requests mismatch last warned about (None: none)."""

    def step_down(self) -> None:
        """Forget what was written and planned: whoever leads meanwhile owns the targets."""
        self._applied.clear()
        self._planned.clear()
        self._overridden.clear()

    def forget(self, pools: Iterable[str]) -> None:
        """Drop everything remembered about `pools` (removed from the config)."""
        for name in pools:
            self._applied.pop(name, None)
            self._planned.pop(name, None)
            self._dry_reported.pop(name, None)
            self._uids.pop(name, None)
            self._refused.pop(name, None)
            self._taken.pop(name, None)
            self._requests_warned.pop(name, None)
            self._overridden.discard(name)

    def _notice_recreated(self, pool: Pool, uid: str | None, target: str) -> None:
        """Forget what was written to `pool`'s target when it is a new object (another uid)."""
        if uid is None:
            return
        old = self._uids.get(pool.name)
        self._uids[pool.name] = uid
        if old is not None and old != uid:
            logger.info(
                "pool %s: %s was deleted and created again (uid %s -> %s); bringing it to the plan",
                pool.name,
                target,
                old,
                uid,
            )
            self._applied.pop(pool.name, None)
            self._planned.pop(pool.name, None)
            self._dry_reported.pop(pool.name, None)
            self._taken.pop(pool.name, None)
            self._overridden.discard(pool.name)

    def write(self, pool: Pool, plan: Plan, missing: str | None) -> PoolOutcome:
        """Bring `pool`'s target to `plan` unless a rule above says not to; return what was done,
        with the target's status conditions as read before the write.

        `missing` names an input the plan lacks (then the count is not lowered). Raises
        ActuatorError when the target cannot be read or written.
        """
        state = self.actuator.read(pool)
        refused = self._refusal(pool, plan, state)
        if refused is not None:
            refused.target_conditions = state.conditions
            return refused
        outcome = self._write(pool, plan, missing, state)
        outcome.target_conditions = state.conditions
        return outcome

    def _write(
        self, pool: Pool, plan: Plan, missing: str | None, state: TargetState
    ) -> PoolOutcome:
        target = f"{pool.target.namespace}/{pool.target.name}"
        self._notice_recreated(pool, state.uid, target)
        if state.paused:
            return self._leave_paused(pool, plan, state.replicas, target)
        plan = self._held_at_takeover(pool, plan, state.replicas)
        plan = held_for_missing(pool, plan, state.replicas, missing)
        planned_before = self._planned.get(pool.name)
        self._planned[pool.name] = plan.desired
        if state.replicas == plan.desired and state.odd is None:
            self._applied[pool.name] = plan.desired
            self._overridden.discard(pool.name)
            return PoolOutcome(pool.name, PoolAction.UNCHANGED, plan, state.replicas)
        if state.odd is not None:
            logger.warning(
                "pool %s: %s answered %s, which no person or controller sets; not taken for a "
                "manual change: bringing it to the plan (%d)",
                pool.name,
                target,
                state.odd,
                plan.desired,
            )
        elif self._left_to_person(pool, plan, state.replicas, planned_before, target):
            return PoolOutcome(pool.name, PoolAction.MANUAL_OVERRIDE, plan, state.replicas)
        return self._bring_to_plan(pool, plan, state.replicas)

    def _refusal(self, pool: Pool, plan: Plan, state: TargetState) -> PoolOutcome | None:
        """None when the target is the pool's own (and, for a placeholder declared existing, a
        pause placeholder: `policy.adopt`); else the `refused` outcome, saying why. A
        refusal that starts (or whose reason changes) is logged and recorded as a Warning Event on
        the target (not in dry-run: an Event is a write too); what was written to it is forgotten."""
        check, problem = "label", ownership_problem(pool.target, pool.name, state.pool_label)
        if problem is None and pool.placeholder.existing and state.template is not None:
            check, problem = "placeholder", pause_problem(pool.target, pool.name, state.template)
            self._check_requests(pool, state.template)
        if problem is None:
            was = self._refused.pop(pool.name, None)
            if was is not None:
                logger.info("pool %s: %s; serving it", pool.name, _SETTLED[was[0]])
            return None
        return self._refuse(pool, plan, state.replicas, check, problem)

    def _refuse(
        self, pool: Pool, plan: Plan, current: int, check: str, problem: str
    ) -> PoolOutcome:
        """The `refused` outcome for `problem` found by `check`: said (log, Event) when it starts
        or changes; what was written to the target is forgotten."""
        if self._refused.get(pool.name, ("", ""))[1] != problem:
            logger.warning("%s", problem)
            if not self.dry_run:
                self.actuator.record_refusal(pool, problem)
        self._refused[pool.name] = (check, problem)
        self._applied.pop(pool.name, None)
        self._planned.pop(pool.name, None)
        return PoolOutcome(pool.name, PoolAction.REFUSED, plan, current, error=problem)

    def _check_requests(self, pool: Pool, template: PodTemplate) -> None:
        """Warn once (per difference) when an adopted placeholder's pods request other than its
        `placeholder.requests` say: headroom is priced and shares counted with the policy's."""
        mismatch = requests_mismatch(pool.name, pool.placeholder.amounts, template)
        if mismatch is not None and self._requests_warned.get(pool.name) != mismatch:
            logger.warning("%s", mismatch)
        self._requests_warned[pool.name] = mismatch

    def _held_at_takeover(self, pool: Pool, plan: Plan, current: int) -> Plan:
        """`plan`, or for an adopted placeholder within `scaleDownStabilization` of its takeover a
        plan held at the count found then (at most `maxReplicas`), reason `hold:takeover`."""
        if not pool.placeholder.existing:
            return plan
        since, found = self._taken.setdefault(pool.name, (plan.at, current))
        held = min(found, pool.max_replicas)
        window = pool.scale_down_stabilization.total_seconds()
        if plan.at - since < window and plan.desired < held:
            if plan.at == since:
                logger.info(
                    "pool %s: took %s/%s over at %d replicas; not lowering it for %s "
                    "(scaleDownStabilization)",
                    pool.name,
                    pool.target.namespace,
                    pool.target.name,
                    found,
                    pool.scale_down_stabilization,
                )
            return dataclasses.replace(plan, desired=held, reason=PlanReason.HOLD_TAKEOVER)
        return plan

    def _leave_paused(self, pool: Pool, plan: Plan, current: int, target: str) -> PoolOutcome:
        """Leave a paused target at `current` replicas, forget what was written to it, and say so."""
        self._applied.pop(pool.name, None)
        logger.info(
            "pool %s: %s is paused (annotation predictive-headroom.io/paused=true); leaving it at %d "
            "replicas (plan: %d, %s)",
            pool.name,
            target,
            current,
            plan.desired,
            plan.reason,
        )
        return PoolOutcome(pool.name, PoolAction.PAUSED, plan, current)

    def _left_to_person(
        self, pool: Pool, plan: Plan, current: int, planned_before: int | None, target: str
    ) -> bool:
        """True when `current` differs from what was last written while the plan has not changed
        (a person scaled the target): warns once per override. A count above maxReplicas is never
        left alone (warned about, False)."""
        applied = self._applied.get(pool.name)
        if current > pool.max_replicas:
            logger.warning(
                "pool %s: %s has %d replicas, above maxReplicas %d; bringing it to the plan (%d)",
                pool.name,
                target,
                current,
                pool.max_replicas,
                plan.desired,
            )
            return False
        if applied is None or current == applied or plan.desired != planned_before:
            return False
        if pool.name not in self._overridden:
            logger.warning(
                "pool %s: %s was scaled to %d by someone else (we set %d); leaving it until the plan "
                "changes from %d",
                pool.name,
                target,
                current,
                applied,
                plan.desired,
            )
            self._overridden.add(pool.name)
        return True

    def _bring_to_plan(self, pool: Pool, plan: Plan, current: int) -> PoolOutcome:
        """Write `plan.desired` to the target now at `current`: once as a server-side dry run in
        dry-run, not at all when the Lease was lost during this cycle, else for real."""
        if self.dry_run:
            if self._dry_reported.get(pool.name) != (current, plan.desired):
                try:
                    self.actuator.scale(pool, plan.desired, plan.reason, dry_run=True)
                except TargetRefused as exc:
                    return self._refuse(pool, plan, current, "placeholder", str(exc))
                self._dry_reported[pool.name] = (current, plan.desired)
            return PoolOutcome(pool.name, PoolAction.DRY_RUN, plan, current)
        if not self.is_leader():  # lost the Lease during this cycle
            return PoolOutcome(pool.name, PoolAction.FOLLOWER, plan, current)
        try:
            self.actuator.scale(pool, plan.desired, plan.reason, dry_run=False)
        except TargetRefused as exc:  # a check confirmed right before the write failed
            return self._refuse(pool, plan, current, "placeholder", str(exc))
        self._applied[pool.name] = plan.desired
        self._overridden.discard(pool.name)
        return PoolOutcome(pool.name, PoolAction.SCALED, plan, current)


def held_for_missing(pool: Pool, plan: Plan, current: int, missing: str | None) -> Plan:
    """`plan`, or, when an input is `missing` and the plan would lower the count, a hold at the
    `current` replicas capped at `pool.max_replicas` (reason `hold:<missing>`). Pure."""
    held = min(current, pool.max_replicas)
    if missing and plan.desired < held:
        return dataclasses.replace(plan, desired=held, reason=f"hold:{missing}")
    return plan
