"""Processes by PID, read from /proc (Linux): to check that no MCP server outlives its use."""

from __future__ import annotations

import os
from pathlib import Path

from .waiting import wait_until


def _state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``Z`` for a zombie ...), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def children(match: str, parent: int | None = None) -> list[int]:
    """Live (not zombie) child processes of `parent` (default: this one) whose command line holds `match`."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == parent and fields[0] != "Z" and match in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def gone(pid: int, timeout: float = 15.0) -> bool:
    """True once process `pid` has exited (gone, or a zombie), polling up to `timeout` seconds
    (looked at once at least: timeout=0 asks whether it has ended already)."""
    return wait_until(lambda: _state(pid) in (None, "Z"), timeout)
