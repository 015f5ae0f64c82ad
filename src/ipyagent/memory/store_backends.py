"""The run store's two back ends: a SQLite file (stdlib `sqlite3`, WAL mode) and a PostgreSQL
database (psycopg 3, the ``postgres`` extra, imported only when a ``postgresql://`` store opens).

`RunStore` (store.py) holds every statement, written once with ``?`` placeholders; a back end
runs them: `execute` (``?`` becomes ``%s`` for psycopg), `transaction` (one short transaction
per write), `insert_id` (SQLite's ``lastrowid``, PostgreSQL's ``RETURNING id``), the schema's
types (`schema`: ``REAL`` is ``DOUBLE PRECISION``, an ``AUTOINCREMENT`` key a ``BIGSERIAL``, and
the ``rowid`` SQLite gives every table made explicit), and what only one of them has: size on
disk, VACUUM, the schema version. Rows read back behave alike: ``row["name"]``, ``row[0]``,
``dict(row)``, unpacking.

A PostgreSQL store is named by its URL (``postgresql://user:PASSWORD@host:5432/db``, or any
libpq URL: the password may come from ``PGPASSWORD`` or ``~/.pgpass`` instead); its `location`,
what is shown, is the URL through the one redactor (`core.redact`: ``postgresql://***@host/db``),
and the password is registered with it (`core.add_url`), so no message shows it.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

from ..core import add_url, redact

#: What a PostgreSQL run store's location starts with.
URL_SCHEMES = ("postgresql://", "postgres://")
_ROWID = "    id TEXT PRIMARY KEY,\n"


def store_errors() -> tuple[type[BaseException], ...]:
    """What opening or using a store may raise that is the store's fault, not the code's: SQLite's and
    psycopg's errors (psycopg's only once imported), OS errors, psycopg missing."""
    found: tuple[type[BaseException], ...] = (sqlite3.Error, OSError, ImportError)
    psycopg = sys.modules.get("psycopg")
    return found + ((psycopg.Error,) if psycopg is not None else ())


def is_url(location: Any) -> bool:
    """True when `location` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(location, str) and location.strip().lower().startswith(URL_SCHEMES)


class SQLiteBackend:
    """A SQLite file in WAL mode; a write waits up to `timeout` seconds for another process's lock."""

    dialect = "sqlite"

    def __init__(self, path: Path, timeout: float) -> None:
        self.location = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
        try:
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self.conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error:
            self.conn.close()
            raise

    def schema(self, ddl: str) -> str:
        return ddl

    def set_up(self, ddl: str, migrate: list[str], version: int, deadline: float) -> None:
        """WAL mode and the tables. Switching to WAL takes a lock for which SQLite does not
        always wait (two processes opening a new file at once), so "locked" is retried here."""
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                with self.transaction():
                    for statement in filter(str.strip, ddl.split(";")):
                        self.conn.execute(statement)
                    if "cache_key" not in {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}:
                        self.conn.execute(migrate[0])
                    for statement in migrate[1:]:
                        self.conn.execute(statement)
                    self.conn.execute(f"PRAGMA user_version = {version}")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def transaction(self) -> Iterator["SQLiteBackend"]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql, params)

    def insert_id(self, sql: str, params: Any) -> int:
        """Run an INSERT; the new row's id."""
        return self.conn.execute(sql, params).lastrowid or 0

    def size(self) -> int:
        """Bytes on disk: the file and its write-ahead log."""
        path = self.location
        return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())

    def live_bytes(self) -> int:
        """Bytes of the pages in use (the file's size once vacuumed): pages less free pages."""
        pages, free, size = (self.conn.execute(f"PRAGMA {name}").fetchone()[0]
                             for name in ("page_count", "freelist_count", "page_size"))
        return (pages - free) * size

    def vacuum(self) -> None:
        """Give the free pages back to the file system, and empty the write-ahead log."""
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass


class _Row(tuple):  # type: ignore[type-arg]
    """A row as `sqlite3.Row` is: by index, by column name, ``dict(row)``, unpacked."""

    _index: dict[str, int]

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        return tuple.__getitem__(self, self._index[key] if isinstance(key, str) else key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Any:
    """psycopg's rows as `_Row`; the explicit ``rowid`` column (SQLite's is hidden) left out."""
    names = [c.name for c in cursor.description or ()]
    keep = [n for n, name in enumerate(names) if name != "rowid"]
    index = {names[n]: i for i, n in enumerate(keep)}
    whole = len(keep) == len(names)

    def make(values: Any) -> _Row:
        row = _Row(values if whole else [values[n] for n in keep])
        row._index = index
        return row

    return make


#: Every connection's advisory lock key while it creates or upgrades the tables ("ipyagent").
_SCHEMA_LOCK = 0x6970796167656E74
#: PostgreSQL URLs of the stores opened in this process, by what is shown of them (the password masked),
#: so that a store named by its shown location (an evaluation's ``store_path``) opens again.
_URLS: dict[str, str] = {}
_URLS_LOCK = threading.Lock()


def real_url(url: str) -> str:
    """The URL a store opened in this process was given, from what is shown of it (else `url` itself)."""
    with _URLS_LOCK:
        return _URLS.get(url, url)


def shown_url(url: str) -> str:
    """`url` as it may be shown: its user-info masked by the one redactor, with which its password
    (not the user's name alone, which a database URL does not keep secret) is registered."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    add_url(url if parts.password or not parts.username else url.replace(f"{parts.username}@", "", 1))
    return redact(url)


class PostgresBackend:
    """A PostgreSQL database through psycopg 3, one connection in autocommit mode: a read is its own
    statement, a write its own ``BEGIN ... COMMIT`` (a process that dies mid-write leaves nothing
    half-written: the server rolls its open transaction back)."""

    dialect = "postgresql"

    def __init__(self, url: str, timeout: float) -> None:
        try:
            import psycopg
        except ImportError:
            raise ImportError("a PostgreSQL run store needs psycopg 3: pip install 'ipyagent[postgres]'") from None
        url = real_url(url)
        self.location = shown_url(url)
        with _URLS_LOCK:
            _URLS[self.location] = url
        self.timeout = timeout
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)),
                                    row_factory=_row_factory, application_name="ipyagent")

    def schema(self, ddl: str) -> str:
        ddl = ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
        ddl = re.sub(r"\bREAL\b", "DOUBLE PRECISION", ddl)
        return ddl.replace(_ROWID, _ROWID + "    rowid BIGSERIAL,\n")

    def set_up(self, ddl: str, migrate: list[str], version: int, deadline: float) -> None:
        """The tables, created once however many processes open the database at once (they queue on an
        advisory lock); `version` kept as the ``runs`` table's comment."""
        with self.transaction():
            self.conn.execute(f"SET LOCAL lock_timeout = '{int(max(1.0, deadline - time.monotonic()) * 1000)}ms'")
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in filter(str.strip, self.schema(ddl).split(";")):
                self.conn.execute(statement)
            self.conn.execute(migrate[0].replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"))
            for statement in migrate[1:]:
                self.conn.execute(statement)
            self.conn.execute(f"COMMENT ON TABLE runs IS 'ipyagent run store, schema {int(version)}'")

    @contextmanager
    def transaction(self) -> Iterator["PostgresBackend"]:
        with self.conn.transaction():
            yield self

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(sql.replace("?", "%s"), tuple(params))

    def insert_id(self, sql: str, params: Any) -> int:
        row = self.execute(sql + " RETURNING id", params).fetchone()
        return int(row[0]) if row else 0

    def size(self) -> int:
        """Bytes on disk of the store's tables with their indexes and TOAST data."""
        sql = ("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
               "WHERE c.relname IN ('runs', 'nodes', 'grades', 'evaluations', 'claims') "
               "AND c.relkind = 'r' AND pg_table_is_visible(c.oid)")
        return int(self.conn.execute(sql).fetchone()[0])

    def live_bytes(self) -> int:
        """Bytes of the rows in use (what deleting runs brings down at once; the files shrink later)."""
        total = 0
        for table in ("runs", "nodes", "grades", "evaluations"):
            query = f"SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM {table} t"
            total += int(self.conn.execute(query).fetchone()[0])
        return total

    def vacuum(self) -> None:
        """VACUUM (ANALYZE): dead rows' space reused; not FULL, which would lock out every other writer."""
        self.conn.execute("VACUUM (ANALYZE) runs, nodes, grades, evaluations, claims")

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - a connection already lost
            pass


def shown_location(location: str | Path) -> str | Path:
    """What is shown of a store's `location`: a SQLite file's path, a URL with its password masked."""
    return shown_url(real_url(str(location).strip())) if is_url(location) else Path(location)


def open_backend(location: str | Path, timeout: float) -> SQLiteBackend | PostgresBackend:
    """The back end `location` names: a ``postgresql://`` URL, else a SQLite file's path."""
    if is_url(location):
        return PostgresBackend(str(location).strip(), timeout)
    return SQLiteBackend(Path(location), timeout)
