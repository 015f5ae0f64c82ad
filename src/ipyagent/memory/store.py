"""The run store: every run, request, message, tool call, tool result, off-prompt
artifact and failure as a row in SQLite (stdlib `sqlite3`, WAL mode), or in PostgreSQL
(psycopg 3) for a team's store shared by many kernels and CI jobs (`store_backends`): the
same tables, the same statements (every one of them here), the same behaviour.

Six tables. ``runs``: one row per run (thread, provider, model, status
``running | ok | failed | interrupted``, usage, cost, timings, error, and the
pid and host of the process writing it). ``nodes``: the run's pieces in order
(``seq``), each with a ``kind`` (``request``, ``message``, ``tool_call``,
``tool_result``, ``artifact``, ``failure``, ``notice``, ``transcript``), ``partial`` and
``failed`` flags, provider, model, usage, timings, retry metadata and a JSON
``data`` payload. ``grades``: a person's pass / fail and note on a run (an evaluation's
cell), one per run, apart from its automatic checks. ``evaluations``: what each evaluation
found per cell, under the name of the cell that ran it, so the next run of that cell can say
what changed. ``claims``: the cache keys whose request some process is sending now, so that a
process running the same matrix waits for that run rather than sending it again (`claim`).
``batches``: the cache keys sent in a provider's batch not yet collected, with the batch's id, so a
restarted kernel or another process collects that batch rather than sending them again. Nothing
secret is stored: no request headers, and any
secret passes the one redactor (`core.redact`).

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
import uuid
from pathlib import Path
from typing import Any

from ..core import current_forms, redact, redact_json
from .store_backends import is_url, open_backend, shown_location, store_errors

# 2: runs.cache_key (evaluation runs served from the cache); 3: grades, evaluations; 4: claims; 5: batches
SCHEMA_VERSION = 5
#: The default location, relative to the notebook's folder.
DEFAULT_PATH = Path(".ipyagent") / "runs.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    thread TEXT,
    session TEXT,
    provider TEXT,
    model TEXT,
    status TEXT NOT NULL DEFAULT 'running',
    prompt TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    duration_s REAL,
    usage TEXT,
    cost REAL,
    error TEXT,
    metadata TEXT,
    pid INTEGER,
    host TEXT
);
CREATE TABLE IF NOT EXISTS nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    turn INTEGER,
    kind TEXT NOT NULL,
    role TEXT,
    partial INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    provider TEXT,
    model TEXT,
    usage TEXT,
    latency_s REAL,
    ttft_s REAL,
    attempts INTEGER,
    retry TEXT,
    data TEXT,
    created_at REAL NOT NULL,
    updated_at REAL
);
CREATE INDEX IF NOT EXISTS nodes_by_run ON nodes(run_id, seq);
CREATE INDEX IF NOT EXISTS runs_by_thread ON runs(thread, started_at);
CREATE TABLE IF NOT EXISTS grades (
    run_id TEXT PRIMARY KEY,
    passed INTEGER NOT NULL,
    note TEXT,
    graded_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS evaluations (
    id TEXT PRIMARY KEY,
    name TEXT,
    created_at REAL NOT NULL,
    outcomes TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_by_name ON evaluations(name, created_at);
CREATE TABLE IF NOT EXISTS claims (
    cache_key TEXT PRIMARY KEY,
    pid INTEGER,
    host TEXT,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    cache_key TEXT PRIMARY KEY,
    batch_id TEXT NOT NULL,
    provider TEXT,
    submitted_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_by_id ON batches(batch_id);
"""
# Added in schema 2; a store made by schema 1 gains it when opened.
_CACHE_COLUMN = "ALTER TABLE runs ADD COLUMN cache_key TEXT"
_CACHE_INDEX = "CREATE INDEX IF NOT EXISTS runs_by_cache_key ON runs(cache_key, status)"


_NODE_FIELDS = ("turn", "role", "partial", "failed", "provider", "model", "usage", "latency_s", "ttft_s",
                "attempts", "retry", "data")
_RUN_FIELDS = (
    "status",
    "ended_at",
    "duration_s",
    "usage",
    "cost",
    "error",
    "metadata",
    "provider",
    "model",
    "cache_key",
)
_JSON_FIELDS = ("usage", "retry", "data", "error", "metadata")


def _dumps(value: Any, forms: tuple[str, ...] | None = None) -> str | None:
    return None if value is None else redact_json(value, forms)


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


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


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


def _evaluation_row(row: Any) -> dict[str, Any]:
    """An ``evaluations`` row as a dict, its ``outcomes`` JSON decoded."""
    return {**dict(row), "outcomes": json.loads(row["outcomes"]) if row["outcomes"] else None}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


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


class RunStore:
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
            self._db.set_up(_SCHEMA, [_CACHE_COLUMN, _CACHE_INDEX], SCHEMA_VERSION, time.monotonic() + timeout)
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

    def add_finished_runs(self, records: list[dict[str, Any]]) -> list[str]:
        """Write whole finished runs in one transaction (an evaluation's runs, written in batches).

        Each record: ``run`` (a dict of `runs` columns: provider, model, status, prompt,
        thread, session, usage, cost, error, metadata, duration_s, cache_key; ``id`` optional)
        and ``nodes`` (a list of dicts: ``kind`` plus node fields); ``claim`` optional, a cache key
        this process claimed for the run (`claim`), released in the same transaction. Returns the
        run ids.
        """
        ids: list[str] = []
        now = time.time()
        forms = current_forms()  # the secrets read once for the batch
        with self._lock, self._transaction() as conn:
            for record in records:
                run = dict(record["run"])
                run_id = run.pop("id", None) or new_run_id()
                ids.append(run_id)
                values = {
                    k: (
                        _dumps(v, forms)
                        if k in _JSON_FIELDS
                        else (redact(v, forms) if v else v)
                        if k == "prompt"
                        else v
                    )
                    for k, v in run.items()
                }
                values.setdefault("started_at", now - (run.get("duration_s") or 0.0))
                values.setdefault("ended_at", now)
                values.update(id=run_id, pid=self.pid, host=self.host)
                conn.execute(
                    f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                    tuple(values.values()),
                )
                for seq, node in enumerate(record.get("nodes") or (), 1):
                    fields = {
                        k: (_dumps(v, forms) if k in _JSON_FIELDS else int(v) if k in ("partial", "failed") else v)
                        for k, v in node.items()
                        if k != "kind"
                    }
                    conn.execute(
                        f"INSERT INTO nodes (run_id, seq, kind, created_at{''.join(', ' + k for k in fields)}) "
                        f"VALUES (?, ?, ?, ?{', ?' * len(fields)})",
                        (run_id, seq, node["kind"], now, *fields.values()),
                    )
                if record.get("claim"):
                    conn.execute("DELETE FROM claims WHERE cache_key = ? AND pid = ? AND host = ?",
                                 (record["claim"], self.pid, self.host))
        return ids

    def cached_runs(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The newest successful run for each cache key that has one: key -> run, with what serving
        it takes (``id``, ``cache_key``, ``usage``, ``cost``, ``duration_s``, ``metadata``; JSON decoded).
        A re-run of a matrix reads thousands: the other columns are left unread."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(k for k in keys if k))
        for start in range(0, len(unique), 500):  # SQLite's limit on bound parameters
            chunk = unique[start : start + 500]
            rows = self._db.execute(
                "SELECT id, cache_key, usage, cost, duration_s, metadata FROM runs "
                f"WHERE status = 'ok' AND cache_key IN ({', '.join('?' for _ in chunk)}) "
                "ORDER BY started_at",
                chunk,
            ).fetchall()
            for row in rows:  # newest last, so it wins
                found[row["cache_key"]] = self._row(row)
        return found

    # -- grades and evaluations ------------------------------------------------------------

    def set_grade(self, run_id: str, passed: bool | None, note: str = "") -> None:
        """A person's grade of run `run_id` (pass / fail and a note), replacing any earlier one;
        `passed` None removes it. Kept apart from the run's automatic checks."""
        if passed is None:
            self._write("DELETE FROM grades WHERE run_id = ?", (run_id,))
            return
        self._write("INSERT INTO grades (run_id, passed, note, graded_at) VALUES (?, ?, ?, ?) ON CONFLICT (run_id) "
                    "DO UPDATE SET passed = excluded.passed, note = excluded.note, graded_at = excluded.graded_at",
                    (run_id, int(bool(passed)), redact(note) if note else "", time.time()))

    def grades(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The grades of those of `run_ids` that have one: run id -> ``passed`` (bool), ``note``,
        ``graded_at`` (seconds since the epoch)."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(r for r in run_ids if r))
        for start in range(0, len(unique), 500):  # SQLite's limit on bound parameters
            chunk = unique[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            for row in self._db.execute(f"SELECT * FROM grades WHERE run_id IN ({marks})", chunk):
                found[row["run_id"]] = {"passed": bool(row["passed"]), "note": row["note"] or "",
                                        "graded_at": row["graded_at"]}
        return found

    def add_evaluation(self, evaluation_id: str, name: str | None, outcomes: Any) -> None:
        """Keep what an evaluation found (`outcomes`, JSON data), under `name` (what the next run
        of the same cell compares itself with: `previous_evaluation`)."""
        self._write("INSERT INTO evaluations (id, name, created_at, outcomes) VALUES (?, ?, ?, ?) ON CONFLICT (id) "
                    "DO UPDATE SET name = excluded.name, created_at = excluded.created_at, "
                    "outcomes = excluded.outcomes",
                    (evaluation_id, name, time.time(), _dumps(outcomes)))

    def previous_evaluation(self, name: str, *, before: str | None = None) -> dict[str, Any] | None:
        """The newest evaluation kept under `name` other than `before` (an id): ``id``, ``name``,
        ``created_at``, ``outcomes``; None when there is none."""
        row = self._db.execute("SELECT * FROM evaluations WHERE name = ? AND id != ? "
                                 "ORDER BY created_at DESC, rowid DESC LIMIT 1", (name, before or "")).fetchone()
        return None if row is None else _evaluation_row(row)

    def evaluation(self, evaluation_id: str) -> dict[str, Any]:
        """The evaluation kept under `evaluation_id` (or an id it starts): ``id``, ``name``,
        ``created_at``, ``outcomes`` (JSON decoded).

        Raises:
            KeyError: none, or a prefix that names several.
        """
        prefix = evaluation_id.strip()
        rows = self._db.execute("SELECT * FROM evaluations WHERE substr(id, 1, ?) = ? ORDER BY created_at",
                                (len(prefix), prefix)).fetchall() if prefix else []
        exact = [r for r in rows if r["id"] == prefix]
        if not rows:
            raise KeyError(f"no evaluation {evaluation_id!r} in {self.path} (%agent evals lists them)")
        if len(rows) > 1 and not exact:
            raise KeyError(f"{evaluation_id!r} names {len(rows)} evaluations; give more of the id")
        return _evaluation_row((exact or rows)[0])

    def evaluations(self, limit: int = 20) -> list[dict[str, Any]]:
        """The latest evaluations kept, newest first: ``id``, ``name``, ``created_at``, ``outcomes``."""
        rows = self._db.execute("SELECT * FROM evaluations ORDER BY created_at DESC, rowid DESC LIMIT ?",
                                (limit,)).fetchall()
        return [_evaluation_row(r) for r in rows]

    def runs_by_id(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """What runs gave, by id (those of `run_ids` the store has): ``id``, ``prompt``, ``status``,
        ``usage``, ``cost``, ``duration_s``, ``metadata`` (JSON decoded)."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(r for r in run_ids if r))
        for start in range(0, len(unique), 500):  # SQLite's limit on bound parameters
            chunk = unique[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            for row in self._db.execute("SELECT id, prompt, status, usage, cost, duration_s, metadata FROM runs "
                                        f"WHERE id IN ({marks})", chunk):
                found[row["id"]] = self._row(row)
        return found

    # -- claims: one process sends a request, the others wait for its run ---------------------

    def claim(self, key: str, lease_s: float) -> bool:
        """Claim cache key `key` for this process for `lease_s` seconds (the request it stands for is
        about to be sent here); True when it is ours: no claim held it, or one of this process, or one
        whose lease ran out, or one of a process of this host that no longer exists. False: another
        process is sending that request now; its run will be in the store (`cached_runs`) once it
        ends well, and its claim goes when it is committed (`add_finished_runs`) or released."""
        now = time.time()
        with self._lock, self._transaction() as db:
            holder = db.execute("SELECT pid, host FROM claims WHERE cache_key = ?", (key,)).fetchone()
            if holder is not None and holder["host"] == self.host and holder["pid"] != self.pid \
                    and not _pid_alive(holder["pid"]):
                db.execute("DELETE FROM claims WHERE cache_key = ?", (key,))
            taken = db.execute(
                "INSERT INTO claims (cache_key, pid, host, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (cache_key) "
                "DO UPDATE SET pid = excluded.pid, host = excluded.host, expires_at = excluded.expires_at "
                "WHERE claims.expires_at < ? OR (claims.pid = ? AND claims.host = ?)",
                (key, self.pid, self.host, now + lease_s, now, self.pid, self.host))
            return taken.rowcount == 1

    def release(self, keys: list[str]) -> None:
        """Give up this process's claims on `keys` (those of other processes stay)."""
        with self._lock, self._transaction() as db:
            for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
                chunk = keys[start:start + 500]
                db.execute(f"DELETE FROM claims WHERE cache_key IN ({', '.join('?' for _ in chunk)}) "
                           "AND pid = ? AND host = ?", (*chunk, self.pid, self.host))

    # -- batches: requests sent in a provider's batch, not collected yet -------------------------

    def add_batch(self, batch_id: str, provider: str, keys: list[str]) -> None:
        """Note that the requests of cache keys `keys` went in batch `batch_id` of `provider`
        (``provider:model``) (a key in an earlier batch moves to this one)."""
        now = time.time()
        with self._lock, self._transaction() as db:
            for key in keys:
                db.execute("INSERT INTO batches (cache_key, batch_id, provider, submitted_at) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (cache_key) DO UPDATE SET batch_id = excluded.batch_id, "
                           "provider = excluded.provider, submitted_at = excluded.submitted_at",
                           (key, batch_id, provider, now))

    def batched(self, keys: list[str]) -> dict[str, str]:
        """cache key -> the id of the batch its request went in, for those of `keys` in one not collected."""
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(k for k in keys if k))
        for start in range(0, len(unique), 500):  # SQLite's limit on bound parameters
            chunk = unique[start:start + 500]
            rows = self._db.execute(f"SELECT cache_key, batch_id FROM batches WHERE cache_key IN "
                                    f"({', '.join('?' for _ in chunk)})", chunk).fetchall()
            found.update((row["cache_key"], row["batch_id"]) for row in rows)
        return found

    def drop_batch(self, batch_id: str) -> None:
        """Forget batch `batch_id`: its answers are collected (stored as runs), or it ended unanswered."""
        with self._lock, self._transaction() as db:
            db.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))

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
