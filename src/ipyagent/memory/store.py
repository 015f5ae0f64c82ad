"""The run store: every run, request, message, tool call, tool result, off-prompt
artifact and failure as a row in SQLite (stdlib `sqlite3`, WAL mode), or in PostgreSQL
(psycopg 3) for a team's store shared by many kernels and CI jobs (`store_backends`): the
same tables (`store_schema`), the same statements (every one of them here and in
`store_evaluations`, what evaluations keep), the same behaviour.

Nothing secret is stored: no request headers, and any secret passes the one redactor
(`core.redact`).

Each write is its own short transaction, so several kernels can write one
store at once (SQLite's WAL lets readers go on while one writer holds the lock;
others wait up to `timeout` seconds; PostgreSQL locks rows). A run whose process died mid-way stays
``running`` until a later `RunStore` on the same host sees the pid gone and
marks it ``interrupted`` (`mark_abandoned`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from ..core import redact
from .store_backends import is_url, open_backend, shown_location, store_errors
from .store_evaluations import EvaluationTables, _pid_alive
from .store_schema import (  # noqa: F401 - SCHEMA_VERSION: a name this module had
    _JSON_FIELDS,
    _NODE_FIELDS,
    _RUN_FIELDS,
    _SCHEMA,
    MIGRATIONS,
    SCHEMA_VERSION,
    _dumps,
    new_run_id,
)

#: The default location, relative to the notebook's folder.
DEFAULT_PATH = Path(".ipyagent") / "runs.sqlite"

#: Environment variable: the run store's path or PostgreSQL URL, or ``off`` to keep no store.
STORE_ENV = "IPYAGENT_RUN_STORE"
#: Its shorter name, read when `STORE_ENV` is not set.
STORE_ENV_ALIAS = "IPYAGENT_STORE"


def store_location(location: str | Path) -> str | Path:
    """`location` as a store is opened from: a PostgreSQL URL as given, a path with ``~`` expanded."""
    return str(location).strip() if is_url(location) else Path(location).expanduser()


def default_store_path() -> str | Path | None:
    """``$IPYAGENT_RUN_STORE`` (or ``$IPYAGENT_STORE``): a path or a ``postgresql://`` URL (``off``: None),
    else ``.ipyagent/runs.sqlite`` beside the notebook (Jupyter's ``JPY_SESSION_NAME`` says where it
    is), else in the working folder."""
    configured = os.environ.get(STORE_ENV) or os.environ.get(STORE_ENV_ALIAS)
    if configured:
        return None if configured.strip().lower() in ("off", "none", "0", "false") else store_location(configured)
    notebook = os.environ.get("JPY_SESSION_NAME")
    if notebook and notebook.endswith(".ipynb") and Path(notebook).parent.is_dir():
        return Path(notebook).parent / DEFAULT_PATH
    return Path.cwd() / DEFAULT_PATH


def _texts(value: Any) -> set[str]:
    """Every string in JSON-like `value` (keys and values), without recursion."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.add(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found



class StoreError(RuntimeError):
    """The run store cannot be opened or read (a bad path, a file that is not a run store)."""


def check_store_path(path: str | Path) -> str | Path:
    """`path` if it can be a run store: a new file in an existing folder, a SQLite file, or a
    ``postgresql://`` URL (checked when it is opened).

    Raises:
        StoreError: a folder, a file in a folder that does not exist, or a file that is not
            SQLite (a notebook, a CSV...); the message says which and what to give instead.
    """
    if is_url(path):
        return str(path).strip()
    path = Path(path).expanduser()
    if path.is_dir():
        raise StoreError(f"{str(path)!r} is a folder; give a file in it, e.g. {str(path / 'runs.sqlite')!r}")
    if not path.parent.is_dir():
        raise StoreError(f"the folder {str(path.parent)!r} does not exist; create it first or give another path")
    if path.exists() and path.stat().st_size:
        with path.open("rb") as f:
            head = f.read(16)
        if head != b"SQLite format 3\x00":
            raise StoreError(
                f"{str(path)!r} is not a SQLite file (it starts with {head[:12]!r}); "
                "give a new file name or an ipyagent run store"
            )
    return path


class RunStore(EvaluationTables):
    """A run store at `path`: a SQLite file (created with its folder when missing) or a
    ``postgresql://`` URL (the tables created when missing).

    Attributes:
        path: the SQLite file's `Path`, or the URL as it may be shown (its password masked); a
            URL shown so opens the same database again in this process.

    Args:
        path: the SQLite file, or the PostgreSQL database's URL.
        timeout: seconds a write waits for another process's lock (SQLite), or to connect and to
            create the tables (PostgreSQL).

    Raises:
        StoreError: the store cannot be opened or is not a run store (psycopg missing for a URL).
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = shown_location(path)
        self._lock = threading.Lock()
        self._db: Any = None
        try:
            self._db = open_backend(path, timeout)
            self._db.set_up(_SCHEMA, MIGRATIONS, SCHEMA_VERSION, time.monotonic() + timeout)
        except store_errors() as exc:
            if self._db is not None:  # opened, but not a run store: not left open
                self._db.close()
            why = redact(" ".join(str(exc).split()))
            raise StoreError(f"cannot open the run store {str(self.path)!r}: {why}") from None
        self.dialect: str = self._db.dialect
        self.host = socket.gethostname()
        self.pid = os.getpid()

    @property
    def _conn(self) -> Any:
        """The back end's own connection (`sqlite3.Connection` or psycopg's)."""
        return self._db.conn

    # -- writing -----------------------------------------------------------------------

    def _transaction(self) -> Any:
        return self._db.transaction()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock, self._transaction() as conn:
            conn.execute(sql, params)

    def start_run(
        self,
        *,
        thread: str | None,
        provider: str | None,
        model: str | None,
        prompt: str | None,
        session: str | None = None,
        metadata: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> str:
        """Insert a ``running`` run and return its id."""
        run_id = run_id or new_run_id()
        self._write(
            "INSERT INTO runs (id, thread, session, provider, model, status, prompt, started_at, metadata, pid, host) "
            "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            (
                run_id,
                thread,
                session,
                provider,
                model,
                redact(prompt) if prompt else prompt,
                time.time(),
                _dumps(metadata),
                self.pid,
                self.host,
            ),
        )
        return run_id

    def add_node(self, run_id: str, kind: str, **fields: Any) -> int:
        """Append a node to run `run_id` (next `seq`) and return its row id.

        `fields`: turn, role, partial, failed, provider, model, usage, latency_s, ttft_s,
        attempts, retry, data (usage, retry and data are JSON-encoded here)."""
        unknown = set(fields) - set(_NODE_FIELDS)
        if unknown:
            raise TypeError(f"unknown node fields {sorted(unknown)}")
        values = {
            k: (_dumps(v) if k in _JSON_FIELDS else int(v) if k in ("partial", "failed") else v)
            for k, v in fields.items()
        }
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        sql = (
            f"INSERT INTO nodes (run_id, seq, kind, created_at{', ' + columns if values else ''}) "
            "VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM nodes WHERE run_id = ?), ?, "
            f"?{', ' + marks if values else ''})"
        )
        with self._lock, self._transaction() as db:
            return db.insert_id(sql, (run_id, run_id, kind, time.time(), *values.values()))

    def update_node(self, node_id: int, **fields: Any) -> None:
        unknown = set(fields) - set(_NODE_FIELDS)
        if unknown:
            raise TypeError(f"unknown node fields {sorted(unknown)}")
        values = {
            k: (_dumps(v) if k in _JSON_FIELDS else int(v) if k in ("partial", "failed") else v)
            for k, v in fields.items()
        }
        sets = ", ".join(f"{k} = ?" for k in values)
        self._write(f"UPDATE nodes SET {sets}, updated_at = ? WHERE id = ?", (*values.values(), time.time(), node_id))

    def finish_run(self, run_id: str, status: str, **fields: Any) -> None:
        """Set the run's final `status` (``ok``, ``failed``, ``interrupted``) and figures
        (usage, cost, error, metadata, duration_s)."""
        unknown = set(fields) - set(_RUN_FIELDS)
        if unknown:
            raise TypeError(f"unknown run fields {sorted(unknown)}")
        values = {k: (_dumps(v) if k in _JSON_FIELDS else v) for k, v in fields.items()}
        values.setdefault("ended_at", time.time())
        sets = ", ".join(f"{k} = ?" for k in values)
        self._write(f"UPDATE runs SET status = ?, {sets} WHERE id = ?", (status, *values.values(), run_id))


    def mark_abandoned(self) -> list[str]:
        """Runs left ``running`` by a process of this host that no longer exists: marked
        ``interrupted`` with their partial nodes ``failed``. Returns their ids."""
        rows = self._db.execute(
            "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?", (self.host,)
        ).fetchall()
        gone = [r["id"] for r in rows if r["pid"] != self.pid and not _pid_alive(r["pid"])]
        if gone:
            with self._lock, self._transaction() as conn:
                error = json.dumps(
                    {"type": "cancelled", "message": "the process stopped mid-run (kernel killed or restarted)"}
                )
                for run_id in gone:
                    conn.execute(
                        "UPDATE runs SET status = 'interrupted', error = ? WHERE id = ? AND status = 'running'",
                        (error, run_id),
                    )
                    conn.execute("UPDATE nodes SET failed = 1 WHERE run_id = ? AND partial = 1", (run_id,))
        return gone

    # -- reading -----------------------------------------------------------------------

    @staticmethod
    def _row(row: Any) -> dict[str, Any]:
        out = dict(row)
        for key in _JSON_FIELDS:
            if out.get(key) is not None:
                out[key] = json.loads(out[key])
        return out

    def runs(self, *, thread: str | None = None, session: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The latest runs, newest first, optionally of one thread or session."""
        where, params = [], []
        if thread is not None:
            where.append("thread = ?")
            params.append(thread)
        if session is not None:
            where.append("session = ?")
            params.append(session)
        sql = (
            "SELECT * FROM runs"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        )
        return [self._row(r) for r in self._db.execute(sql, (*params, limit)).fetchall()]

    def run(self, run_id: str) -> dict[str, Any]:
        """The run whose id is (or starts with) `run_id`.

        Raises:
            KeyError: no such run, or a prefix that names several.
        """
        rows = self._db.execute(
            "SELECT * FROM runs WHERE id LIKE ? ORDER BY started_at", (run_id.strip() + "%",)
        ).fetchall()
        if not rows:
            raise KeyError(f"no run {run_id!r} in {self.path}")
        if len(rows) > 1 and rows[0]["id"] != run_id:
            raise KeyError(f"{run_id!r} names {len(rows)} runs; give more of the id")
        return self._row(rows[0])

    def nodes(self, run_id: str) -> list[dict[str, Any]]:
        return [
            self._row(r)
            for r in self._db.execute("SELECT * FROM nodes WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        ]

    def count(self, table: str = "nodes") -> int:
        if table not in ("runs", "nodes"):
            raise ValueError("table is runs or nodes")
        return self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]

    # -- size and pruning (store_admin.py decides what goes) ---------------------------------

    def size(self) -> int:
        """Bytes on disk: the SQLite file and its write-ahead log; PostgreSQL's tables and indexes."""
        return self._db.size()

    def live_bytes(self) -> int:
        """Bytes in use: SQLite's pages less its free pages (the file's size once vacuumed);
        PostgreSQL's live rows."""
        return self._db.live_bytes()

    def counts(self) -> dict[str, int]:
        """Rows: ``runs``, ``evaluations``, ``artifacts`` (off-prompt artifact nodes), ``nodes``, ``grades``."""
        queries = {"runs": "runs", "evaluations": "evaluations", "artifacts": "nodes WHERE kind = 'artifact'",
                   "nodes": "nodes", "grades": "grades"}
        count = "SELECT COUNT(*) FROM {}"
        return {name: self._db.execute(count.format(rows)).fetchone()[0] for name, rows in queries.items()}

    def finished_runs(self) -> list[tuple[str, float, int]]:
        """(id, started_at, bytes of its rows, roughly) of every run not ``running``, oldest first."""
        sql = ("SELECT r.id, r.started_at, COALESCE(LENGTH(r.prompt), 0) + COALESCE(LENGTH(r.metadata), 0) + "
               "COALESCE((SELECT SUM(COALESCE(LENGTH(n.data), 0) + COALESCE(LENGTH(n.usage), 0) + 64) FROM nodes n "
               "WHERE n.run_id = r.id), 0) + 128 FROM runs r WHERE r.status != 'running' "
               "ORDER BY r.started_at, r.rowid")
        return [(row[0], row[1], int(row[2])) for row in self._db.execute(sql)]

    def referenced_runs(self) -> set[str]:
        """Ids of the runs something else keeps: a grade, or an evaluation's saved outcomes naming it
        (any text in them equal to a run's id)."""
        kept = {row[0] for row in self._db.execute("SELECT run_id FROM grades")}
        ids = {row[0] for row in self._db.execute("SELECT id FROM runs")}
        for (outcomes,) in self._db.execute("SELECT outcomes FROM evaluations WHERE outcomes IS NOT NULL"):
            kept |= _texts(json.loads(outcomes)) & ids
        return kept

    def delete_runs(self, run_ids: list[str]) -> None:
        """Delete runs with their nodes and grades, in one transaction."""
        with self._lock, self._transaction() as conn:
            for start in range(0, len(run_ids), 500):  # SQLite's limit on bound parameters
                chunk = run_ids[start:start + 500]
                marks = ", ".join("?" for _ in chunk)
                for table, column in (("nodes", "run_id"), ("grades", "run_id"), ("runs", "id")):
                    conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)

    def vacuum(self) -> None:
        """SQLite: give the free pages back to the file system (VACUUM), and empty the write-ahead log;
        PostgreSQL: VACUUM, so the space of deleted rows is reused."""
        with self._lock:
            self._db.vacuum()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"<RunStore {self.path}>"
