"""A bounded run store (issue 26): its size and counts, pruning oldest-first within a size or an
age, never a run something keeps (a grade, a saved evaluation, a live thread) unless asked,
the space given back, and a cap that warns once; on SQLite and on PostgreSQL (the `store` fixture)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ipyagent.memory import RunStore, human_size, prune, summary

#: Bytes of node data per run: incompressible text (SQLite does not compress, but keep it honest).
RUN_BYTES = 100_000


def fill(store: RunStore, runs: int, *, start: float = 1_000_000.0) -> list[str]:
    """`runs` finished runs of about `RUN_BYTES` each, a second apart from `start` (seconds since the epoch)."""
    records = [{"run": {"provider": "openai", "model": "m", "status": "ok", "prompt": f"run {n}",
                        "started_at": start + n, "ended_at": start + n + 0.5},
                "nodes": [{"kind": "message", "role": "assistant", "data": {"text": os.urandom(RUN_BYTES // 2).hex()}},
                          {"kind": "artifact", "data": {"n": n}}]}
               for n in range(runs)]
    return store.add_finished_runs(records)


def test_the_summary_names_the_file_its_size_and_counts(store: RunStore) -> None:
    fill(store, 3)
    store.add_evaluation("e1", "cell", {"rows": 1})
    line = summary(store)
    assert line.startswith(f"{store.path} · ") and line.endswith(" · 3 runs, 1 evaluations, 3 artifacts")
    assert human_size(store.size()) in line
    assert [human_size(n) for n in (512, 12_300, 50_000_000, 2_000_000_000)] == [
        "512 bytes",
        "12.3 kB",
        "50 MB",
        "2 GB",
    ]


def test_pruning_to_a_size_deletes_oldest_first_and_the_file_shrinks(store: RunStore) -> None:
    ids = fill(store, 300)  # about 30 MB
    before = store.size()
    assert before > 25_000_000 and store.live_bytes() > 25_000_000
    done = prune(store, max_size=10_000_000)
    kept = {r["id"] for r in store.runs(limit=1000)}
    assert store.live_bytes() <= 10_000_000 and done.size_after == store.size() and done.size_before == before
    if store.dialect == "sqlite":  # the file shrinks; PostgreSQL's VACUUM (not FULL) keeps the space for new rows
        assert store.size() <= 10_000_000 < before
    assert kept == set(ids[-len(kept):]) and 60 <= len(kept) < 100  # the newest, as many as fit
    assert done.deleted == 300 - len(kept) and store.counts()["nodes"] == 2 * len(kept)  # nodes go with their runs
    assert prune(store, max_size=10_000_000).deleted == 0  # under the size: nothing more


def test_pruning_by_age_keeps_the_newer_runs(store: RunStore) -> None:
    ids = fill(store, 10, start=time.time() - 40 * 86400)  # 40 days ago, a second apart
    newer = fill(store, 2, start=time.time() - 3600)
    done = prune(store, older_than=30 * 86400)
    assert done.deleted == 10 and {r["id"] for r in store.runs()} == set(newer) and not set(ids) & set(newer)


def test_what_something_keeps_is_never_pruned_unless_asked(store: RunStore) -> None:
    ids = fill(store, 6)
    store.set_grade(ids[0], True, "good")
    store.add_evaluation("e1", "cell", {"cells": [{"run_id": ids[1], "passed": True}]})
    store.start_run(thread="t", provider="openai", model="m", prompt="still going")  # running: never
    done = prune(store, max_size=0, keep={ids[2]})
    left = {r["id"] for r in store.runs()}
    assert left >= {ids[0], ids[1], ids[2]} and done.deleted == 3 and done.protected == 3
    assert "3 kept (graded, in a saved evaluation or a live thread; --all deletes them too)" in done.describe()
    everything = prune(store, max_size=0, everything=True)
    assert everything.deleted == 3 and [r["status"] for r in store.runs()] == ["running"]
    assert store.counts()["grades"] == 0


def test_the_agent_store_magic_shows_and_prunes_a_50_mb_store(ip, tmp_path: Path, capsys) -> None:
    path = tmp_path / "big.sqlite"
    big = RunStore(path)
    try:
        fill(big, 500)  # about 50 MB
    finally:
        big.close()
    size = path.stat().st_size + (path.with_name(path.name + "-wal").stat().st_size
                                  if path.with_name(path.name + "-wal").exists() else 0)
    assert size > 50_000_000
    ip.run_line_magic("agent", f"store {path}")
    out = capsys.readouterr().out
    assert out.startswith(f"run store: {path} · ") and "500 runs, 0 evaluations, 500 artifacts" in out
    ip.run_line_magic("agent", "store --prune --max-size 20MB")
    out = capsys.readouterr().out
    assert out.startswith("pruned ") and " MB -> " in out
    after = path.stat().st_size
    assert after <= 20_000_000 < size  # under the limit, and the file itself shrank (VACUUM)
    ip.run_line_magic("agent", "store off")


def test_the_cap_warns_once(ip, tmp_path: Path, capsys, connected) -> None:  # noqa: F811
    path = tmp_path / "capped.sqlite"
    ip.run_line_magic("agent", f"store {path}")
    ip.run_line_magic("agent", "settings store_max_size=1kB")
    capsys.readouterr()
    ip.run_cell_magic("agent", "", "Hi")
    err = capsys.readouterr().err
    assert f"ipyagent: the run store {path} is " in err and "past store_max_size=1 kB; %agent store --prune" in err
    ip.run_cell_magic("agent", "", "Hi again")
    assert "past store_max_size" not in capsys.readouterr().err  # once
    ip.run_line_magic("agent", "store off")


def test_a_word_that_is_no_store_file_never_moves_the_run_store(ip, tmp_path: Path, monkeypatch, capsys) -> None:
    """``%agent store prune`` (for ``--prune``) or ``on`` once made a new empty store file of that name
    and moved the session's runs, grades and cache there, without a word."""
    from IPython.core.error import UsageError

    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("agent", f"store {tmp_path / 'runs.sqlite'}")
    for word in ("prune", "on", "runs"):
        with pytest.raises(UsageError, match=r"there is no file .* ends in \.sqlite.*--prune deletes old runs"):
            ip.run_line_magic("agent", f"store {word}")
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith("runs.sqlite")]  # no file was made
    capsys.readouterr()
    ip.run_line_magic("agent", "store")
    assert capsys.readouterr().out.startswith(f"run store: {tmp_path / 'runs.sqlite'} · ")  # still where it was
    (tmp_path / "existing").write_bytes((tmp_path / "runs.sqlite").read_bytes())
    ip.run_line_magic("agent", "store existing")  # an existing store may be called anything
    assert capsys.readouterr().out.startswith("run store: existing · ")
    ip.run_line_magic("agent", "store off")
