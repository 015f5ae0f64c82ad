"""The first magic of a session loads only what it needs (issue 29: the first magic under 0.15 s,
measured by benchmarks/import_load.py). Each deferral is pinned here, in a fresh process: a
module imported once stays in `sys.modules`, so only a new interpreter shows what a first
``%provider`` imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIRST_PROVIDER = """
import json, sys
from IPython.terminal.interactiveshell import TerminalInteractiveShell
shell = TerminalInteractiveShell.instance()
shell.run_line_magic('load_ext', 'ipyagent')
shell.run_line_magic('provider', 'openai:m')
sys.stdout.write('\\n' + json.dumps(sorted(sys.modules)))
"""

#: What a first ``%provider openai:m`` leaves for later: the driver itself and the HTTP stack (made at
#: the first request: `choose_provider` checks the choice), the agent's magics, views and evaluations,
#: and the heavy libraries of a run drawn.
DEFERRED = (
    "ipyagent.drivers.base",
    "ipyagent.drivers.protocols",
    "ipyagent.drivers.protocols.openai_chat",
    "ipyagent.drivers.cassette",
    "httpx2",
    "httpcore2",
    "tenacity",
    "ipyagent.core.artifacts",
    "ipyagent.core.events",
    "ipyagent.core.messages",
    "ipyagent.core.prompt_stack",
    "ipyagent.core.transcript",
    "importlib.metadata",  # pydantic's plug-in scan at its first model built, and the registry's
    "ipyagent.notebook.magics.agent",
    "ipyagent.notebook.magics.compare",
    "ipyagent.notebook.magics.session",
    "ipyagent.notebook.magics.mcp",
    "ipyagent.notebook.views",
    "ipyagent.agent.agent",
    "ipyagent.agent.compare",
    "ipyagent.agent.evaluation",
    "ipyagent.memory",
    "ipyagent.tools",
    "ipyagent.drivers.protocols.anthropic",
    "ipyagent.drivers.protocols.gemini",
    "ipyagent.drivers.protocols.openai_responses",
    "ipyagent.drivers.protocols.ollama",
    "jinja2",
    "markdown_it",
    "nh3",
    "ipywidgets",
    "anywidget",
    "genai_prices",
)


def _modules_after(code: str, tmp_path: Any) -> set[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "IPYTHONDIR": str(tmp_path / "ipython")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_first_provider_magic_makes_no_driver_and_loads_no_http_stack(tmp_path) -> None:
    loaded = _modules_after(FIRST_PROVIDER, tmp_path)
    assert {"ipyagent.notebook.magics.provider", "ipyagent.drivers.registry"} <= loaded  # it did run
    assert [name for name in DEFERRED if name in loaded] == []


BUILT_MODELS = FIRST_PROVIDER.replace("sys.stdout.write", """import pydantic
built = sorted({f"{c.__module__}.{c.__name__}" for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("ipyagent.") for c in vars(m).values()
               if isinstance(c, type) and issubclass(c, pydantic.BaseModel) and c.__pydantic_complete__})
sys.stdout.write('\\n' + json.dumps(built))
sys.stdout.write""")


def test_a_first_provider_magic_builds_no_model(tmp_path) -> None:
    """The core's pydantic models are declared with ``defer_build``, and no settings are made without
    the validator (`core.settings.NO_SETTINGS`): a first ``%provider`` builds no validator or serializer
    (nor scans the installed packages for pydantic's plug-ins, which the first model built does)."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "IPYTHONDIR": str(tmp_path / "ipython")}
    done = subprocess.run([sys.executable, "-c", BUILT_MODELS], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    built = json.loads(done.stdout.strip().splitlines()[-2])
    assert built == []


def test_the_magics_loaded_after_a_provider_alone_share_it(ip: Any) -> None:
    """%provider loaded alone, then the other magics: `%%agent` reads the one `ProviderMagics`."""
    from ipyagent.notebook import extension

    ip.run_line_magic("provider", "openai:alone --base-url http://127.0.0.1:9/v1")
    assert id(ip) in extension._providers and id(ip) not in extension._registered
    extension._load_now(ip)
    assert extension._registered[id(ip)].providers is extension._providers[id(ip)]
    assert extension._providers[id(ip)].provider_id == "openai:alone"


def test_unload_after_a_provider_alone_removes_it_and_its_default(ip: Any) -> None:
    from ipyagent.agent import session_default
    from ipyagent.notebook import extension

    ip.run_line_magic("provider", "openai:alone --base-url http://127.0.0.1:9/v1")
    assert session_default().provider == "openai:alone"
    ip.run_line_magic("unload_ext", "ipyagent")
    assert id(ip) not in extension._providers
    assert "provider" not in ip.magics_manager.magics["line"]
    assert session_default().provider != "openai:alone"
    ip.run_line_magic("load_ext", "ipyagent")  # and loads again, as new


FIRST_RUN = """
import json, sys
sys.path.insert(0, {root!r})
from tests.support.stub_server import Reply, StubServer
from IPython.terminal.interactiveshell import TerminalInteractiveShell
import pydantic
shell = TerminalInteractiveShell.instance()
chunk = {{"choices": [{{"index": 0, "delta": {{"content": "Hello."}}, "finish_reason": "stop"}}]}}
reply = Reply(pieces=[f"data: {{json.dumps(chunk)}}\\n\\n".encode(), b"data: [DONE]\\n\\n"])
with StubServer(reply) as server:
    shell.run_line_magic('load_ext', 'ipyagent')
    shell.run_line_magic('provider', f'openai:m --base-url {{server.url}}/v1')
    shell.run_cell_magic('agent', '', 'Say hello.')
built = sorted({{f"{{c.__module__}}.{{c.__name__}}" for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("ipyagent.") for c in vars(m).values()
               if isinstance(c, type) and issubclass(c, pydantic.BaseModel) and c.__pydantic_complete__}})
named = sys.modules["ipyagent.core.redact"]._named_rules.cache_info().currsize
sys.stdout.write('\\n' + json.dumps({{"modules": sorted(sys.modules), "built": built, "named_rules": named}}))
"""


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What a fresh terminal's first ``%%agent`` run (a stub server's streamed answer) leaves
    loaded (``modules``), which of the package's pydantic models it built (``built``), and whether
    the redactor compiled its rules for secret-named values (``named_rules``: 1 if so)."""
    tmp_path = tmp_path_factory.mktemp("first_run")
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "IPYTHONDIR": str(tmp_path / "ipython")}
    code = FIRST_RUN.format(root=str(Path(__file__).parents[2]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "ipyagent.agent.loop" in found["modules"] and "Hello." in done.stdout  # it did run
    return found


def test_a_first_agent_cell_in_a_terminal_loads_no_evaluation_or_grading(first_run: dict[str, Any]) -> None:
    """Grading answers clicks in a kernel's page; a terminal's first ``%%agent`` run loads neither
    the grading nor the evaluation's checks, results and statistics it would bring (the cell's
    template loads `agent.evaluation.templates` alone)."""
    later = ("ipyagent.notebook.grading", "ipyagent.agent.evaluation.checks", "ipyagent.agent.evaluation.results",
             "ipyagent.agent.evaluation.statistics")
    assert [m for m in later if m in first_run["modules"]] == []


def test_a_first_agent_run_that_is_answered_loads_no_retry_machinery(first_run: dict[str, Any]) -> None:
    """tenacity is imported when a request's first try has failed (`drivers.turn`): it loads
    tornado's integration wherever tornado is installed, which a first answered run never needs."""
    assert [m for m in first_run["modules"] if m.split(".")[0] in ("tenacity", "tornado")] == []


def test_a_first_agent_run_builds_no_prompt_stack_validator(first_run: dict[str, Any]) -> None:
    """A run's `PromptStack` is made of parts already checked (`AgentRun.compose`:
    ``model_construct``) and the user message is made alone (`Agent.user_message`), so the
    stack's validator (its nested message union: ~30 ms) is never built; the message's is."""
    assert "ipyagent.core.messages.Message" in first_run["built"]
    assert [m for m in first_run["built"] if m.startswith("ipyagent.core.prompt_stack.")] == []


EXIT_AFTER_PROVIDER = FIRST_PROVIDER.replace("sys.stdout.write", """from ipyagent.notebook import extension
extension._at_exit()
sys.stdout.write""")


def test_exit_after_a_provider_alone_loads_no_tools(tmp_path) -> None:
    """No MCP server can be open unless `tools.mcp` was loaded: the exit hook then closes none,
    rather than importing the tools (httpx2, the MCP client) to find none (~0.1 s at every exit)."""
    loaded = _modules_after(EXIT_AFTER_PROVIDER, tmp_path)
    assert "ipyagent.agent.loop_thread" in loaded  # the hook did run
    assert [m for m in ("ipyagent.tools", "ipyagent.tools.mcp", "httpx2") if m in loaded] == []


def test_exit_closes_the_mcp_servers_once_their_module_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    import ipyagent.agent
    from ipyagent.notebook import extension
    from ipyagent.tools import mcp

    closed: list[str] = []
    monkeypatch.setattr(mcp, "close_all_at_exit", lambda: closed.append("mcp"))
    monkeypatch.setattr(extension, "stop_background_runs", lambda: closed.append("runs") or 0)
    monkeypatch.setattr(extension, "close_drivers", lambda: closed.append("drivers") or 0)
    monkeypatch.setattr(ipyagent.agent, "stop_background_loop", lambda: closed.append("loop"))
    extension._at_exit()
    assert closed == ["runs", "mcp", "drivers", "loop"]


def test_a_first_agent_run_in_a_terminal_loads_no_html_transcript(first_run: dict[str, Any]) -> None:
    """The saved transcript (HTML, Markdown, a comparison's table) replaces a kernel page's live view,
    and ``%tools`` draws an HTML table: a terminal's run draws text only, so the magics take those
    names from `notebook.views` and `notebook.render` at first use."""
    html = ("ipyagent.notebook.views.transcript_output", "ipyagent.notebook.views.compare_view",
            "ipyagent.agent.compare", "ipyagent.notebook.render.transcript", "ipyagent.notebook.render.tool_table",
            "ipyagent.notebook.render.streamed_html", "statistics")
    assert "ipyagent.notebook.views.text_view" in first_run["modules"]  # the terminal's view drew it
    assert [m for m in html if m in first_run["modules"]] == []


def test_a_first_agent_run_masks_no_context_and_compiles_no_named_value_rules(first_run: dict[str, Any]) -> None:
    """The redactor's rules for values written under a secret name (``password: …``) serve the
    context sent to a model (`core.redact.redact_context`, `secret_name`): compiled at their first
    use (~3 ms), which a run without attached context never reaches."""
    assert first_run["named_rules"] == 0


def test_a_first_agent_run_loads_only_the_builtin_tool_every_run_has(first_run: dict[str, Any]) -> None:
    """Every run has its Task Memory tools (`tools.builtin.task_memory`); the calculator and the
    clock load when a cell or an agent names them (`tools.builtin` exports them lazily)."""
    assert "ipyagent.tools.builtin.task_memory" in first_run["modules"]
    assert [m for m in ("ipyagent.tools.builtin.calculator", "ipyagent.tools.builtin.clock")
            if m in first_run["modules"]] == []
