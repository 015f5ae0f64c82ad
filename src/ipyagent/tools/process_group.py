"""The processes of one stdio MCP server: its own process group, ended whole.

The SDK starts a stdio server in a new session (so a new process group led by the
server, POSIX ``setsid``) and, when closing, first closes its stdin and waits: only a
server still running after that grace gets the group killed. A wrapper that exits
on end of input (``sh -c``, ``npx`` -> ``node``, ``uvx`` -> ``python``) leaves the
rest of its group running. So `ServerProcesses` marks the server's environment
with a token of its own (`MARK`), which every process it starts inherits, finds the
group's leader by it once the server runs, and after every close ends what is
left of the group: SIGTERM, then SIGKILL after `GRACE` seconds (`end`, `end_all` at
interpreter exit). A process that left the group (a double fork with ``setsid``)
but still carries the token is not signalled: it is reported by PID (`left`).

Processes are read with psutil (imported when a server starts); a zombie (an exited
process nobody has reaped yet) counts as ended.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterable
from typing import Any

#: The environment variable marking a server's processes (its value: the server's token).
MARK = "IPYAGENT_MCP_SERVER"
#: Seconds between SIGTERM and SIGKILL.
GRACE = 2.0
#: Seconds between two looks at a group that is ending.
_POLL = 0.02


def _psutil() -> Any:
    import psutil

    return psutil


def _alive(process: Any) -> bool:
    psutil = _psutil()
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _marked(token: str) -> list[Any]:
    """Live processes of this user whose environment holds ``MARK=token``."""
    psutil = _psutil()
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARK) == token and _alive(process):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def _group_of(process: Any) -> int | None:
    try:
        return os.getpgid(process.pid)
    except OSError:
        return None


class ServerProcesses:
    """The processes of one stdio server (see the module docstring).

    Attributes:
        token: the value of `MARK` in the server's environment (this kernel's PID, the
            server's name and random hex: unique on the machine).
        leader: PID of the process ipyagent started (the group's leader), once found.
        started: a process was started with the token (nothing to end before).
        left: PIDs of processes that left the group and were still running when it ended.
    """

    def __init__(self, name: str) -> None:
        self.token = f"{os.getpid()}-{name}-{secrets.token_hex(6)}"
        self.leader: int | None = None
        self.left: list[int] = []
        self.started = False  # a process was started with the mark (`environment`)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with the mark added: the server's extra environment variables, as it starts."""
        self.started = True
        return {**env, MARK: self.token}

    def found(self) -> int | None:
        """Find the group's leader, the marked child of this process (call once the server
        runs); its PID, or None when it has already exited."""
        psutil = _psutil()
        for child in psutil.Process().children():
            try:
                if child.environ().get(MARK) == self.token:
                    self.leader = child.pid
                    return self.leader
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
                continue
        return None

    def members(self) -> tuple[list[Any], list[Any]]:
        """(live processes in the server's group, live marked processes outside it)."""
        marked = _marked(self.token)
        if self.leader is None:  # never seen running: every marked process is the server's
            return marked, []
        inside = [p for p in marked if _group_of(p) == self.leader]
        return inside, [p for p in marked if p not in inside]

    def signal(self, signum: int) -> list[Any]:
        """Send `signum` to the group (each marked process when the leader was never found);
        the live members it was sent to."""
        inside, _ = self.members()
        if self.leader is not None and inside:
            try:
                os.killpg(self.leader, signum)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            for process in inside:
                try:
                    process.send_signal(signum)
                except Exception:  # noqa: BLE001 - gone since
                    pass
        return inside

    def end(self, grace: float = GRACE) -> list[int]:
        """End the group: SIGTERM, then SIGKILL after `grace` seconds for what is left.
        Blocks up to `grace` seconds (run it in a thread from a loop). Returns `left`."""
        return end_all([self], grace) if self.started else []

    def check_left(self) -> list[int]:
        """PIDs of running processes that left the group (`left`, updated)."""
        _, outside = self.members()
        self.left = sorted(p.pid for p in outside)
        return self.left


def end_all(groups: Iterable[ServerProcesses], grace: float = GRACE) -> list[int]:
    """End several servers' groups at once (interpreter exit: bounded by `grace` seconds in all,
    not per server). Returns the PIDs of processes that left their group and still run."""
    groups = list(groups)
    if not groups:
        return []
    signalled = [p for g in groups for p in g.signal(signal.SIGTERM)]
    deadline = time.monotonic() + grace
    while signalled and time.monotonic() < deadline:
        signalled = [p for p in signalled if _alive(p)]
        if signalled:
            time.sleep(_POLL)
    if signalled:
        for group in groups:
            group.signal(signal.SIGKILL)
    return sorted(pid for g in groups for pid in g.check_left())
