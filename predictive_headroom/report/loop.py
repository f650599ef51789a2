"""The report's closed-loop section: what happened in the user's own cluster over the last 7 days.

Input is one pool's summary as the daemon keeps it (`LoopObserver.status`: headroom used, pods
that waited, node boots, the lead time in use). Plain words first, numbers after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from predictive_headroom.core.settings import SettingSource
from predictive_headroom.pages.format import fmt_duration, fmt_time

WEEK = 7 * 86400.0


def _period(loop: Mapping[str, Any], at: float) -> str:
    covered = at - float(loop.get("since", at - WEEK))
    return "Last week" if covered >= WEEK - 3600 else f"In the last {fmt_duration(covered)},"


def _pods(n: int) -> str:
    return f"{n} pod{'' if n == 1 else 's'}"


def loop_sentence(loop: Mapping[str, Any], at: float) -> str:
    """One plain sentence: how often warm capacity was used and how many pods still waited."""
    used = int(loop.get("headroom_used") or 0)
    text = f"{_period(loop, at)} {_pods(used)} landed on warm capacity"
    if loop.get("pods_watched"):
        waited = int(loop.get("pods_waited") or 0)
        if waited:
            total = fmt_duration(float(loop.get("pod_wait_total_seconds") or 0.0))
            text += f"; {waited} waited for a node, {total} in all."
        else:
            text += "; none waited for a node."
    else:
        text += " (pods waiting for a node are not watched: set closedLoop.podWaitNamespaces)."
    return text


def lead_sentence(loop: Mapping[str, Any]) -> str:
    """Where the lead time in use comes from, in words."""
    lead = loop.get("lead_time") or {}
    boots = int(loop.get("node_boots") or 0)
    seconds = lead.get("seconds")
    if seconds is None:
        return ""
    in_use = fmt_duration(float(seconds))
    if lead.get("source") == SettingSource.MEASURED:
        return (
            f"The lead time in use, {in_use}, is measured: node boot p90 "
            f"{fmt_duration(lead.get('node_boot_p90_seconds'))} plus placeholder start p90 "
            f"{fmt_duration(lead.get('placeholder_start_p90_seconds') or 0.0)}, "
            f"over {lead.get('samples', 0)} boots."
        )
    seen = f"{boots} node boot{'' if boots == 1 else 's'} seen"
    return f"The lead time in use, {in_use}, is configured ({seen})."


def loop_rows(loop: Mapping[str, Any]) -> list[list[str]]:
    """The section's numbers as table rows ([label, value])."""
    last = loop.get("headroom_last_used_at")
    lead = loop.get("lead_time") or {}
    rows = [
        ["headroom used (placeholders preempted)", str(int(loop.get("headroom_used") or 0))],
        ["last used", fmt_time(last) if last is not None else "never"],
    ]
    if loop.get("pods_watched"):
        rows += [
            ["pods that waited for a node", str(int(loop.get("pods_waited") or 0))],
            ["their total wait", fmt_duration(loop.get("pod_wait_total_seconds") or 0.0)],
            ["worst wait", fmt_duration(loop.get("pod_wait_worst_seconds"))],
        ]
    rows += [
        ["node boots measured", str(int(loop.get("node_boots") or 0))],
        ["node boot p50", fmt_duration(loop.get("node_boot_p50_seconds"))],
        ["node boot p90", fmt_duration(loop.get("node_boot_p90_seconds"))],
        ["placeholder start p90", fmt_duration(loop.get("placeholder_start_p90_seconds"))],
        [
            "lead time in use",
            f"{fmt_duration(lead.get('seconds'))} ({lead.get('source', 'configured')})"
            if lead
            else "n/a",
        ],
    ]
    return rows
