"""The run store's schema: its tables, the columns a write may set, and its version.

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
restarted kernel or another process collects that batch rather than sending them again.

A store made by an older schema gains what it lacks when opened (`MIGRATIONS`; the back end runs
them and sets the version, `store_backends`).
"""

from __future__ import annotations

import uuid
from typing import Any

from ..core import redact_json

# 2: runs.cache_key (evaluation runs served from the cache); 3: grades, evaluations; 4: claims; 5: batches
SCHEMA_VERSION = 5

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
#: What a store of an older schema is given when opened (the tables it lacks come from `_SCHEMA`).
MIGRATIONS = [_CACHE_COLUMN, _CACHE_INDEX]

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
    """A JSON column's text: `value` through the one redactor (`forms`: the secrets, read once)."""
    return None if value is None else redact_json(value, forms)


def new_run_id() -> str:
    """A new run's id: 12 hex digits."""
    return uuid.uuid4().hex[:12]
