"""Model lifecycles: the shipped table of shutdown dates (``drivers/catalog/lifecycle.json``), the notice a
model near or past its shutdown gets when chosen, ``%provider --models`` showing ``shutdown_date``
(OpenAI API reference, "Models: List models"; "Deprecations": ``shutdown_date`` is ``YYYY-MM-DD`` or
null), a 404 for a shut-down model, and no default, example or hint naming such a model."""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from pathlib import Path

import pytest

from ipyagent.agent import DEFAULT_PROVIDER
from ipyagent.drivers import create_driver, current_model, lifecycle, shutdown_notice
from ipyagent.drivers.catalog.lifecycle import WARN_DAYS, checked, driver_notice, replacement, retired_hint, table

from ..support.stub_server import Reply, StubServer

ROOT = Path(__file__).resolve().parents[2]
LISTS = Path(__file__).parent / "model_lists"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "providers"
DAY = date(2026, 12, 6)


def today() -> date:
    """The day the rules are checked against: the real one, never before the table was read."""
    return max(date.today(), checked())


def test_the_table_is_dated_sourced_and_well_formed():
    data = table()
    assert checked() >= date(2026, 12, 6)
    for row in data["models"]:
        assert row["provider"] in data["sources"] and row["ids"]
        shutdown = date.fromisoformat(row["shutdown"])
        if row.get("deprecated"):
            assert date.fromisoformat(row["deprecated"]) < shutdown
    ids = [(row["provider"], model) for row in data["models"] for model in row["ids"]]
    assert len(ids) == len(set(ids))  # one date per model


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic", "gemini"])
def test_the_current_model_of_each_provider_is_not_on_the_shutdown_list(provider):
    assert lifecycle(provider, current_model(provider)) is None
    assert shutdown_notice(provider, current_model(provider), today()) is None


def test_the_default_provider_is_the_tables_choice():
    assert DEFAULT_PROVIDER == f"openai:{current_model('openai')}"


@pytest.mark.parametrize("provider, model, shutdown", [
    ("openai", "gpt-4.1-mini", date(2027, 1, 14)),
    ("openai", "gpt-4.1-mini-2025-04-14", date(2027, 1, 14)),  # a dated snapshot of a listed id
    ("openai", "gpt-4-0613", date(2026, 10, 23)),
    ("openai", "gpt-4o-2024-05-13", date(2026, 10, 23)),  # its own row, not gpt-4o's
    ("openai", "gpt-4o", date(2027, 1, 14)),
    ("openai-responses", "gpt-5-mini", date(2026, 12, 11)),  # the Responses API serves OpenAI's models
    ("anthropic", "claude-sonnet-4-5-20250929", date(2026, 11, 30)),
    ("gemini", "models/gemini-2.5-flash", date(2026, 12, 1)),
    ("gemini", "gemini-2.0-flash-001", date(2026, 6, 1)),
])
def test_lookup(provider, model, shutdown):
    assert lifecycle(provider, model).shutdown == shutdown


@pytest.mark.parametrize("provider, model", [
    ("openai", "gpt-4.5-preview"),  # "gpt-4" is listed: a longer name is another model, not a snapshot
    ("openai", "gpt-4.1-mini-fast"), ("openai", "gpt-6-luna"),
    ("groq", "gpt-4.1-mini"),  # another provider's model of the same name: its own rules
    ("openai", ""),
])
def test_what_the_table_does_not_cover(provider, model):
    assert lifecycle(provider, model) is None


def test_a_recommended_replacement_that_was_shut_down_since_is_followed():
    assert lifecycle("openai", "gpt-4o-search-preview").replacement == "gpt-4.1-mini"
    assert replacement("openai", "gpt-4o-search-preview") == "gpt-6-luna"
    assert replacement("openai", "gpt-5.1") is None  # none named


def test_the_notice_says_the_date_and_the_replacement():
    assert shutdown_notice("openai", "gpt-4.1-mini", DAY) == \
        "openai:gpt-4.1-mini shuts down on 2027-01-14 (in 39 days); use openai:gpt-6-luna"
    assert shutdown_notice("gemini", "gemini-2.5-flash", DAY) == \
        "gemini:gemini-2.5-flash was shut down on 2026-12-01; use gemini:gemini-3.5-flash-lite"
    none_named = shutdown_notice("openai", "gpt-5.1", date(2027, 3, 1))
    assert none_named.endswith("; choose another model (%provider --models lists them)")


def test_the_notice_starts_sixty_days_before():
    shutdown = lifecycle("openai", "gpt-4.1-mini").shutdown
    assert shutdown_notice("openai", "gpt-4.1-mini", shutdown - timedelta(days=WARN_DAYS + 1)) is None
    assert "(in 60 days)" in shutdown_notice("openai", "gpt-4.1-mini", shutdown - timedelta(days=WARN_DAYS))
    assert "(in 1 day)" in shutdown_notice("openai", "gpt-4.1-mini", shutdown - timedelta(days=1))
    assert "shuts down today (2027-01-14)" in shutdown_notice("openai", "gpt-4.1-mini", shutdown)
    assert "was shut down on 2027-01-14" in shutdown_notice("openai", "gpt-4.1-mini", shutdown + timedelta(days=1))


def test_a_listed_shutdown_date_wins_over_the_table():
    assert shutdown_notice("openai", "gpt-6-luna", DAY, listed=date(2026, 12, 20)) == \
        "openai:gpt-6-luna shuts down on 2026-12-20 (in 14 days); choose another model (%provider --models lists them)"
    assert "2027-01-10" in shutdown_notice("openai", "gpt-4.1-mini", DAY, listed=date(2027, 1, 10))


def test_no_notice_for_another_host_or_a_replay(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    notice = driver_notice(create_driver("openai:gpt-4.1-nano"))
    assert notice.startswith("openai:gpt-4.1-nano was shut down on 2026-10-23")
    assert driver_notice(create_driver("openai:gpt-4.1-nano", base_url="http://127.0.0.1:9/v1")) is None
    cassette = tmp_path / "old.jsonl"
    api = "https://api.openai.com/v1"
    cassette.write_text(json.dumps({"provider": "openai", "model": "gpt-4.1-nano", "base_url": api,
                                    "request": {"method": "POST", "url": f"{api}/chat/completions", "body": {}},
                                    "response": {"status": 200, "headers": {}, "body": ""}}) + "\n")
    assert driver_notice(create_driver(f"replay:{cassette}")) is None


def test_choosing_a_model_near_its_shutdown_prints_one_line_once(ip, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ip.run_line_magic("provider", "openai:gpt-4.1-mini")
    out = capsys.readouterr().out.splitlines()
    notes = [line for line in out if line.startswith("note: ")]
    assert len(notes) == 1 and notes[0].startswith("note: openai:gpt-4.1-mini shuts down on 2027-01-14")
    assert notes[0].endswith("; use openai:gpt-6-luna")
    ip.run_line_magic("provider", "openai:gpt-4.1-mini")  # once a session
    assert "note: " not in capsys.readouterr().out
    ip.run_line_magic("provider", DEFAULT_PROVIDER)
    assert "note: " not in capsys.readouterr().out


def test_models_shows_the_lists_shutdown_date(ip, capsys):
    body = (LISTS / "openai-shutdown.json").read_bytes()
    with StubServer(Reply(headers={"Content-Type": "application/json"}, pieces=[body])) as server:
        ip.run_line_magic("provider", f"--models openai:x --base-url {server.url}")
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("model "))
    assert "shuts down" in header
    rows = {line.split()[0]: line for line in lines[2:]}
    assert rows["my-tuned-model"].split()[4] == "2026-12-20"  # the server's own date, for a model not in the table
    assert rows["gpt-4.1-mini"].split()[4] == "2027-01-14"
    assert len(rows["gpt-6-luna"].split()) == 4  # null: none announced


def test_models_of_the_providers_own_host_adds_the_tables_dates(monkeypatch):
    import asyncio

    body = (LISTS / "openai.json").read_bytes()
    with StubServer(Reply(headers={"Content-Type": "application/json"}, pieces=[body])) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        rows = {r.id: r for r in asyncio.run(create_driver("openai:*").list_models())}
    snapshot = rows["gpt-4o-2024-08-06"]
    assert snapshot.shutdown_date == date(2027, 1, 14) and snapshot.replacement == "gpt-6-luna"
    assert rows["text-embedding-3-small"].shutdown_date is None


def test_a_404_for_a_shut_down_model_says_so(monkeypatch):
    import asyncio

    from ipyagent.core import PromptStack

    body = (FIXTURES / "openai-chat" / "error-404-model-not-found.json").read_bytes()
    prompt = PromptStack()
    prompt.add_user_message("hi")

    def failed(model: str, **options) -> str:
        with StubServer(Reply(status=404, headers={"Content-Type": "application/json"}, pieces=[body])) as server:
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            if not options:
                monkeypatch.setenv("OPENAI_BASE_URL", server.url)
            else:
                options = {"base_url": server.url}
            driver = create_driver(f"openai:{model}", max_attempts=1, **options)
            events = asyncio.run(_events(driver, prompt))
        return events[-1].error.message

    message = failed("gpt-4.1-nano")
    assert message.endswith("(gpt-4.1-nano was shut down on 2026-10-23; use openai:gpt-5.6-luna)")
    assert "HTTP 404" in message
    assert "shut down" not in failed("gpt-6-luna")  # a 404 for a model the table does not retire: as the provider said
    assert "shut down" not in failed("gpt-4.1-nano", other_host=True)  # another host's 404 is about its own models
    assert retired_hint("openai", "gpt-4.1-mini", DAY) is None  # not yet shut down


async def _events(driver, prompt):
    try:
        return [event async for event in driver.stream(prompt)]
    finally:
        await driver.close()


# -- nothing the user reads names a model past its shutdown or within 60 days of it ----------------

_ID = re.compile(r"\b(openai|openai-responses|anthropic|gemini):([A-Za-z0-9][\w.\-]*[A-Za-z0-9])")


def _texts() -> dict[str, str]:
    """README, the notebooks' cells and every source file (the lifecycle module and table, which
    name shut-down models on purpose, left out)."""
    texts = {"README.md": (ROOT / "README.md").read_text()}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        texts[path.name] = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        texts[path.name] = path.read_text()
    for path in sorted((ROOT / "src" / "ipyagent").rglob("*.py")):
        if path.name != "lifecycle.py":
            texts[str(path.relative_to(ROOT))] = path.read_text()
    return texts


def test_no_example_default_or_hint_names_a_model_near_or_past_its_shutdown():
    named = {(where, m.group(0)) for where, text in _texts().items() for m in _ID.finditer(text)}
    assert len(named) > 20  # the scan sees the examples
    near = sorted(f"{where}: {name} ({shutdown_notice(*name.split(':', 1), today())})" for where, name in named
                  if shutdown_notice(*name.split(":", 1), today()))
    assert near == []


def test_the_readme_and_notebooks_name_no_listed_model_bare():
    listed = {m for row in table()["models"] for m in row["ids"]}
    texts = {k: v for k, v in _texts().items() if not k.startswith("src")}
    found = sorted((where, m) for where, text in texts.items() for m in listed
                   if re.search(rf"(?<![\w.\-:]){re.escape(m)}(?![\w.\-])", text))
    assert found == []
