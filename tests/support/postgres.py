"""A throwaway PostgreSQL cluster for the run-store tests: `initdb` into a temporary folder, then
`pg_ctl start` on 127.0.0.1 with a free port, trust authentication, no fsync; stopped (immediate
shutdown) and removed at the end.

The server binaries come from PATH, else Debian's ``/usr/lib/postgresql/N/bin``. PostgreSQL refuses
to run as root: as root, the cluster's folder belongs to ``nobody`` and the binaries run as that user
(``runuser``). Where the binaries, psycopg or that user are missing, or the server does not start,
`PostgresCluster.start` raises `Unavailable` with one line saying why (the tests skip with it).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


class Unavailable(RuntimeError):
    """PostgreSQL cannot be started here (the reason is the message)."""


def _binaries() -> Path:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb", path=str(Path(found).parent)):
        return Path(found).resolve().parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(folder, "pg_ctl").exists() and Path(folder, "initdb").exists():
            return Path(folder)
    raise Unavailable("PostgreSQL's server binaries (initdb, pg_ctl) are not installed: "
                      "apt-get install postgresql runs the PostgreSQL run-store tests")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """One cluster: `start`, `new_database` (a URL per test), `stop`."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.port = 0
        self._as: list[str] = []

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120, cwd=self.folder)

    def start(self) -> "PostgresCluster":
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise Unavailable("psycopg is not installed: pip install 'ipyagent[postgres]'") from None
        bin_dir = _binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="ipyagent-pg-"))
        if os.geteuid() == 0:  # PostgreSQL will not run as root
            try:
                user = pwd.getpwnam("nobody")
            except KeyError:
                raise Unavailable("running as root without a 'nobody' user to run PostgreSQL as") from None
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            runuser = shutil.which("runuser") or shutil.which("setpriv")
            if runuser is None:
                raise Unavailable("running as root without runuser or setpriv to run PostgreSQL as 'nobody'")
            self._as = ([runuser, "-u", "nobody", "--"] if runuser.endswith("runuser")
                        else [runuser, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"])
        self.port = _free_port()
        data = self.folder / "data"
        init = self._run(str(bin_dir / "initdb"), "-D", str(data), "-U", "ipyagent", "--auth=trust", "-E", "UTF8",
                         "--no-sync", "--no-instructions")
        if init.returncode:
            self.stop()
            raise Unavailable(f"initdb failed: {(init.stderr or init.stdout).strip().splitlines()[-1:]}")
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -F -c max_connections=50"
        started = self._run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "log"),
                            "-o", options, "-w", "-t", "60", "start")
        if started.returncode:
            log = (self.folder / "log").read_text(errors="replace") if (self.folder / "log").exists() else ""
            self.stop()
            raise Unavailable(f"PostgreSQL did not start: {(log or started.stderr).strip().splitlines()[-1:]}")
        self._pg_ctl = bin_dir / "pg_ctl"
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://ipyagent@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = "t" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if self.folder is None:
            return
        if getattr(self, "_pg_ctl", None) is not None:
            self._run(str(self._pg_ctl), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
