"""What only a PostgreSQL run store has: a URL whose password is never shown (not by the store,
its errors, `%agent store`, an evaluation's ``store_path``) yet opens the database again in
this process, one clear line when psycopg is missing or the server cannot be reached, and the
``IPYAGENT_STORE`` / ``IPYAGENT_RUN_STORE`` variables naming a database."""

from __future__ import annotations

import json
import sys
from urllib.parse import urlsplit

import pytest

from ipyagent import Agent, evaluate
from ipyagent.memory import RunStore, StoreError, default_store_path, summary

from ..support.evaluation import CAPITALS, answering, capital_of
from ..support.stub_server import StubServer

PASSWORD = "pg-Secret-9f8e7d6c5b4a"


@pytest.fixture
def url(postgres) -> str:
    """A new database's URL with a password in it (the test cluster trusts 127.0.0.1, so any works)."""
    parts = urlsplit(postgres.new_database())
    return parts._replace(netloc=f"ipyagent:{PASSWORD}@{parts.hostname}:{parts.port}").geturl()


def test_the_password_is_never_shown_and_the_shown_url_opens_the_store_again(url: str) -> None:
    store = RunStore(url)
    try:
        shown = str(store.path)
        assert PASSWORD not in shown + repr(store) + summary(store) and shown.startswith("postgresql://")
        assert shown == url.replace(f"ipyagent:{PASSWORD}", "[redacted]")
        run_id = store.start_run(thread="t", provider="openai", model="m", prompt=f"connect with {url}")
        assert PASSWORD not in store.run(run_id)["prompt"]  # the password is a secret of the redactor now
    finally:
        store.close()
    again = RunStore(shown)  # what an evaluation keeps (`store_path`) opens the same database
    try:
        assert [r["id"] for r in again.runs()] == [run_id]
    finally:
        again.close()


def test_an_evaluation_on_a_database_grades_into_it_without_showing_the_password(url: str,
                                                                                  monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with StubServer(responder=answering(capital_of)) as server:
        ev = evaluate([Agent("openai:m", base_url=server.url)], "Capital of {{ row.country }}?", CAPITALS,
                      store=url, assertions=["contains:{{ row.capital }}"])
    assert ev.store_path is not None and PASSWORD not in ev.store_path + json.dumps(ev.to_json())
    ev.grade(0, ev.columns[0], False, "too terse")
    store = RunStore(url)
    try:
        assert store.grades([ev.cell(0, ev.columns[0]).run_id]).popitem()[1]["note"] == "too terse"
        assert store.count("runs") == 3
    finally:
        store.close()


@pytest.mark.parametrize("where", ["no_such_database", "no_server"])
def test_an_unreachable_database_is_one_line_without_the_password(postgres, where: str) -> None:
    port = postgres.port if where == "no_such_database" else 1  # nothing listens on port 1
    url = f"postgresql://ipyagent:{PASSWORD}@127.0.0.1:{port}/{where}"
    with pytest.raises(StoreError) as caught:
        RunStore(url, timeout=5)
    message = str(caught.value)
    assert message.startswith(f"cannot open the run store 'postgresql://[redacted]@127.0.0.1:{port}/{where}': ")
    assert PASSWORD not in message and "\n" not in message  # psycopg's own message is several lines


def test_without_psycopg_the_error_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(StoreError, match=r"needs psycopg 3: pip install 'ipyagent\[postgres\]'"):
        RunStore(f"postgresql://ipyagent:{PASSWORD}@127.0.0.1:1/db")


def test_the_variables_name_a_database(monkeypatch) -> None:
    monkeypatch.delenv("IPYAGENT_RUN_STORE")
    monkeypatch.setenv("IPYAGENT_STORE", " postgresql://u@db.example:5432/runs ")
    assert default_store_path() == "postgresql://u@db.example:5432/runs"
    monkeypatch.setenv("IPYAGENT_RUN_STORE", "off")  # the longer name wins
    assert default_store_path() is None


def test_the_agent_store_magic_takes_a_url_and_never_prints_its_password(ip, url: str, capsys) -> None:
    ip.run_line_magic("agent", f"store {url}")
    out = capsys.readouterr().out
    assert out.startswith("run store: postgresql://") and "0 runs, 0 evaluations, 0 artifacts" in out
    assert PASSWORD not in out
    ip.run_line_magic("agent", "store")
    assert PASSWORD not in capsys.readouterr().out
    ip.run_line_magic("agent", "store off")
