"""``%%compare ... --over rows --batch``: the matrix through the provider's batch API (a local
fake one, `support.batch_servers`), and ``--batch`` only with ``--over``."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from ..support.batch_servers import BatchServer


def test_compare_over_rows_with_batch_sends_one_batch_and_binds_the_evaluation(ip, capsys) -> None:
    with BatchServer(polls=1) as server:  # ended at the first look: no wait between looks
        ip.run_line_magic("provider", f"--alias cheap openai:gpt-4o-mini --base-url {server.url}/v1 "
                                      "--price-as openai:gpt-4o-mini")
        ip.user_ns["rows"] = [f"question {n}" for n in range(12)]
        ip.run_cell_magic("compare", "cheap --over rows --batch --assert 'contains:answer' -o ev", "{{ row }}")
        assert server.created == 1
    ev = ip.user_ns["ev"]
    assert len(ev.results) == 12 and all(r.ok and r.passed for r in ev.results)
    assert str(ev.batch_progress).startswith("batch: 12 submitted · 0 in progress · 12 done · 0 failed")
    assert "12 of 12 runs, 12 passed" in capsys.readouterr().out
    for name in ("ev", "rows"):
        ip.user_ns.pop(name, None)


def test_batch_goes_with_over(ip) -> None:
    with pytest.raises(UsageError, match="--batch goes with --over VAR"):
        ip.run_cell_magic("compare", "openai:m --batch", "hello")
