"""Run a command and report what its whole process tree used: wall seconds, CPU seconds and peak
memory, worker processes included (`/usr/bin/time -v` gives the largest single process only).

Usage: python bench/process_tree.py [--every 0.5] -- COMMAND [ARG...]

Every `--every` seconds it reads /proc for the command and all its descendants: the resident set
summed over them (RSS: shared pages, Python and its libraries, counted once per process, so an
over-count) and the proportional set summed (PSS: a shared page split between the processes that
map it, so close to what a container's memory limit charges), and prints the peaks. On a machine
shared with other processes of the same virtualenv a library's file pages are split with them too,
which lowers PSS below what a container would be charged; the last figure counts the tree's
anonymous pages split within it plus the largest file-backed RSS of its processes (forked workers
map the same libraries), an estimate that does not depend on the neighbours. CPU seconds
are each process's own plus those of the children it reaped (Stan's optimiser), as last read, and
the command's own from `wait4` when larger (what it reaped after the last reading).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, the process's own CPU seconds, those of the children it reaped), None when
    gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return int(fields[1]), (utime + stime) / TICKS, (cutime + cstime) / TICKS


def _memory(pid: int) -> tuple[int, int, int, int]:
    """(RSS, PSS, anonymous PSS, file-backed RSS) in kB, zeros when gone."""
    fields = {"Rss:": 0, "Pss:": 0, "Pss_Anon:": 0, "Anonymous:": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(" ")
            if name in fields:
                fields[name] = int(rest.split()[0])
    except OSError:
        pass
    rss = fields["Rss:"]
    return rss, fields["Pss:"], fields["Pss_Anon:"], rss - fields["Anonymous:"]


def _children(pid: int) -> list[int]:
    """The children of `pid` (every thread's), from /proc/PID/task/TID/children."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        with contextlib.suppress(OSError):
            out.extend(int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
    return out


def tree(root: int) -> dict[int, tuple[int, float, float]]:
    """Every live process under `root` (itself included): `_stat`."""
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        got = _stat(pid)
        if got is not None and pid not in found:
            found[pid] = got
            frontier.extend(_children(pid))
    return found


class Ledger:
    """CPU seconds of a process tree from repeated readings: each process's own, plus what it
    reaped less the processes seen here that it reaped (already counted as themselves)."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[int, float, float]] = {}
        self.counted_in: dict[int, float] = {}

    def read(self, members: dict[int, tuple[int, float, float]]) -> None:
        for pid, (ppid, own, reaped) in list(self.last.items()):
            if pid not in members and ppid in members and pid not in self.counted_in:
                self.counted_in[pid] = own + reaped  # reaped by its parent since the last reading
        self.last.update(members)

    def total(self, root: int, waited: float) -> float:
        out = 0.0
        for pid, (_, own, reaped) in self.last.items():
            if pid == root:
                # wait4's figure is its own and all it reaped, the workers it forked included:
                # take off every child seen here (each is counted as itself).
                own, reaped = min(own, waited), max(0.0, waited - own)
                gone = sum(
                    self.counted_in.get(c, o + r)
                    for c, (p, o, r) in self.last.items()
                    if p == pid and c != pid
                )
            else:
                gone = sum(
                    self.counted_in.get(c, 0.0) for c, (p, _, _) in self.last.items() if p == pid
                )
            out += own + max(0.0, reaped - gone)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    began = time.perf_counter()
    child = subprocess.Popen(command)
    cpu = Ledger()
    peak_rss = peak_pss = peak_one = peak_own = most = 0
    while True:
        done, status, usage = os.wait4(child.pid, os.WNOHANG)
        if done:
            break
        members = tree(child.pid)
        cpu.read(members)
        memory = [_memory(pid) for pid in members]
        peak_rss = max(peak_rss, sum(m[0] for m in memory))
        peak_pss = max(peak_pss, sum(m[1] for m in memory))
        peak_one = max([peak_one, *(m[0] for m in memory)])
        # Its own charge: anonymous pages split within the tree, library files counted once (on a
        # shared machine the PSS of a file page is also split with processes outside the tree).
        own = sum(m[2] for m in memory) + max((m[3] for m in memory), default=0)
        peak_own = max(peak_own, own)
        most = max(most, len(members))
        time.sleep(args.every)
    wall = time.perf_counter() - began
    # The command's own and what it reaped, from wait4 (it may reap after the last reading).
    total = cpu.total(child.pid, usage.ru_utime + usage.ru_stime)
    print(
        f"process tree: exit {os.waitstatus_to_exitcode(status)}, {wall:.1f} s wall, "
        f"{total:.1f} s CPU; peak memory summed over up to {most} processes: "
        f"PSS {peak_pss / 1024:.0f} MB, RSS {peak_rss / 1024:.0f} MB; "
        f"largest process RSS {peak_one / 1024:.0f} MB; anonymous PSS plus the largest "
        f"file-backed RSS (files once) {peak_own / 1024:.0f} MB",
        file=sys.stderr,
    )
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    raise SystemExit(main())
