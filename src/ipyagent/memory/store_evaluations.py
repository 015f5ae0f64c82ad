"""What evaluations keep in the run store (`RunStore`'s part for them): whole finished runs
written in one transaction and served back by cache key, a person's grades, each evaluation's
outcomes, and the claims and batches by which processes sharing a store send each request once.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..core import current_forms, redact, redact_json_all
from .store_schema import _JSON_FIELDS, _dumps, new_run_id


def _evaluation_row(row: Any) -> dict[str, Any]:
    """An ``evaluations`` row as a dict, its ``outcomes`` JSON decoded."""
    return {**dict(row), "outcomes": json.loads(row["outcomes"]) if row["outcomes"] else None}


#: The columns of a cached run (`EvaluationTables.stored_runs`), in order.
CACHED_COLUMNS = ("id", "cache_key", "usage", "cost", "duration_s", "metadata")


def cached_run(row: tuple[Any, ...]) -> dict[str, Any]:
    """A row of `EvaluationTables.stored_runs` as `cached_runs` gives it: a dict, its JSON fields decoded."""
    run_id, key, usage, cost, duration_s, metadata = row
    # both texts in one decode (one call's overhead less a cell: a cached re-run decodes thousands)
    usage, metadata = json.loads(f"[{'null' if usage is None else usage},{'null' if metadata is None else metadata}]")
    return {"id": run_id, "cache_key": key, "usage": usage, "cost": cost, "duration_s": duration_s,
            "metadata": metadata}


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


def _rows(record: dict[str, Any], forms: tuple[str, ...]) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """A finished run's `runs` values and its nodes' (kind, `nodes` values) (`add_finished_runs`):
    the prompt redacted, every JSON field dumped through the redactor, the run's and its nodes'
    texts scanned once together (`redact_json_all`)."""
    run = dict(record["run"])
    nodes = [(node["kind"], {k: int(v) if k in ("partial", "failed") else v for k, v in node.items() if k != "kind"})
             for node in record.get("nodes") or ()]
    slots = [(run, k) for k in run if k in _JSON_FIELDS]
    slots += [(fields, k) for _, fields in nodes for k in fields if k in _JSON_FIELDS]
    for (fields, k), text in zip(slots, redact_json_all([fields[k] for fields, k in slots], forms)):
        fields[k] = text
    if run.get("prompt"):
        run["prompt"] = redact(run["prompt"], forms)
    return run, nodes


#: Claim a cache key for this process: no claim held it, or one of this process, or one whose lease ran out
#: (parameters: key, pid, host, expiry, now, pid, host).
_TAKE = ("INSERT INTO claims (cache_key, pid, host, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (cache_key) "
         "DO UPDATE SET pid = excluded.pid, host = excluded.host, expires_at = excluded.expires_at "
         "WHERE claims.expires_at < ? OR (claims.pid = ? AND claims.host = ?)")


class EvaluationTables:
    """A mixin of `RunStore`: the ``grades``, ``evaluations``, ``claims`` and ``batches`` tables, and
    the runs an evaluation writes and reads in bulk. Uses the store's `_db`, `_lock`, `_write`,
    `_transaction`, `_row`, `path`, `pid` and `host`."""

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
        rows = [_rows(record, forms) for record in records]  # dumped and redacted before the lock
        with self._lock, self._transaction() as conn:
            for record, (values, nodes) in zip(records, rows):
                run_id = values.pop("id", None) or new_run_id()
                ids.append(run_id)
                values.setdefault("started_at", now - (values.get("duration_s") or 0.0))
                values.setdefault("ended_at", now)
                values.update(id=run_id, pid=self.pid, host=self.host)
                conn.execute(
                    f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                    tuple(values.values()),
                )
                for seq, (kind, fields) in enumerate(nodes, 1):
                    conn.execute(
                        f"INSERT INTO nodes (run_id, seq, kind, created_at{''.join(', ' + k for k in fields)}) "
                        f"VALUES (?, ?, ?, ?{', ?' * len(fields)})",
                        (run_id, seq, kind, now, *fields.values()),
                    )
                if record.get("claim"):
                    conn.execute("DELETE FROM claims WHERE cache_key = ? AND pid = ? AND host = ?",
                                 (record["claim"], self.pid, self.host))
        return ids

    def cached_runs(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The newest successful run for each cache key that has one: key -> run, with what serving
        it takes (``id``, ``cache_key``, ``usage``, ``cost``, ``duration_s``, ``metadata``; JSON decoded)."""
        return {key: cached_run(row) for key, row in self.stored_runs(keys).items()}

    def stored_runs(self, keys: list[str]) -> dict[str, tuple[Any, ...]]:
        """`cached_runs` as stored: key -> (id, cache_key, usage, cost, duration_s, metadata), the JSON
        fields as text (`cached_run` decodes one). A re-run of a matrix reads thousands and decodes each
        as it serves it: no decoded copy of every run lives at once for the garbage collector to go over
        (a tuple of strings and numbers it leaves alone). The other columns are left unread."""
        found: dict[str, tuple[Any, ...]] = {}
        unique = list(dict.fromkeys(k for k in keys if k))
        for start in range(0, len(unique), 500):  # SQLite's limit on bound parameters
            chunk = unique[start : start + 500]
            rows = self._db.execute(
                f"SELECT {', '.join(CACHED_COLUMNS)} FROM runs "
                f"WHERE status = 'ok' AND cache_key IN ({', '.join('?' for _ in chunk)}) "
                "ORDER BY started_at",
                chunk,
            ).fetchall()
            for row in rows:  # newest last, so it wins
                found[row[1]] = tuple(row)
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
        if len(unique) > 500 and self._db.execute("SELECT 1 FROM grades LIMIT 1").fetchone() is None:
            return found  # none graded (most stores): one look, not a query per 500 ids (a matrix's end reads 30,000)
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
        return key in self.claim_many([(key, lease_s)])

    def claim_many(self, claims: list[tuple[str, float]]) -> set[str]:
        """`claim` for each ``(cache key, lease seconds)`` of `claims` (the runs an evaluation starts in
        one turn of its loop); the keys that are now this process's. In SQLite, one transaction for
        them all (one writer at a time: nothing to deadlock); in PostgreSQL, one claim at a time (a
        transaction holding several keys' locks could deadlock with another process's commit)."""
        now = time.time()
        if self._db.dialect == "sqlite" and len(claims) > 1:
            with self._lock, self._transaction() as db:
                return {key for key, lease_s in claims if self._take(db, key, now, lease_s)}
        taken: set[str] = set()
        for key, lease_s in claims:
            with self._lock:
                # the usual case, one statement (its own transaction): no claim, ours, or one that ran out
                if self._db.execute(_TAKE, self._claim_params(key, now, lease_s)).rowcount == 1:
                    taken.add(key)
                    continue
                with self._transaction() as db:
                    if self._take(db, key, now, lease_s):
                        taken.add(key)
        return taken

    def _take(self, db: Any, key: str, now: float, lease_s: float) -> bool:
        """Claim `key` within transaction `db`: no claim, ours, one that ran out, or one whose process
        (of this host) is gone."""
        params = self._claim_params(key, now, lease_s)
        if db.execute(_TAKE, params).rowcount == 1:
            return True
        holder = db.execute("SELECT pid, host FROM claims WHERE cache_key = ?", (key,)).fetchone()
        if holder is not None and (holder["host"] != self.host or _pid_alive(holder["pid"])):
            return False  # another process sends it now
        db.execute("DELETE FROM claims WHERE cache_key = ?", (key,))  # its process is gone (or none held it)
        return db.execute(_TAKE, params).rowcount == 1

    def _claim_params(self, key: str, now: float, lease_s: float) -> tuple[Any, ...]:
        return (key, self.pid, self.host, now + lease_s, now, self.pid, self.host)

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
