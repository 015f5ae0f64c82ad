"""``%agent evals`` lists what the run store keeps of each evaluation (issue 33, item 4), and
``ipyagent.load_evaluation`` gives a ``%%compare --over`` cell's evaluation back by the id it shows."""

from __future__ import annotations


import pytest

from ipyagent import load_evaluation

from ..support.evaluation import CAPITALS, answering, capital_of
from ..support.shell import KEY_VARS
from ..support.stub_server import StubServer

pd = pytest.importorskip("pandas")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS + ["OPENAI_BASE_URL"]:
        monkeypatch.delenv(var, raising=False)


def test_agent_evals_lists_the_stored_evaluations_and_each_comes_back_by_its_id(ip, capsys) -> None:
    ip.run_line_magic("agent", "evals")
    assert "no evaluations stored in" in capsys.readouterr().out
    clueless = answering(lambda q: "No idea.")
    with StubServer(responder=answering(capital_of)) as good, StubServer(responder=clueless) as bad:
        ip.run_line_magic("provider", f"--alias good openai:m1 --base-url {good.url}")
        ip.run_line_magic("provider", f"--alias bad openai:m2 --base-url {bad.url}")
        ip.user_ns["rows"] = CAPITALS
        ip.run_cell_magic("compare", "good bad --over rows --assert 'contains:{{ row.capital }}' -o ev",
                          "Capital of {{ row.country }}?")
    ev = ip.user_ns["ev"]
    out = capsys.readouterr().out
    assert f"evaluation {ev.id}" in out  # the id the output shows, to load it by
    ip.run_line_magic("agent", "evals")
    header, line, good, bad, hint = capsys.readouterr().out.strip().splitlines()
    assert header.split() == ["id", "when", "cell", "rows", "×", "columns", "×", "repeats", "runs"]
    assert line.startswith(f"{ev.id}  ") and " ".join(line.split()).endswith(" -o ev --over rows 3 × 2 × 1 6")
    # the columns named as the matrix names them, one per line
    assert (good, bad) == ("    pass  good (openai:m1)  100%", "    pass  bad (openai:m2)     0%")
    assert "load_evaluation(ID)" in hint
    loaded = load_evaluation(ev.id)
    pd.testing.assert_frame_equal(loaded.to_dataframe(), ev.to_dataframe())
