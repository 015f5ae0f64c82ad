"""``%mcp resources``, ``%mcp prompts``, ``%mcp prompt`` and ``%mcp subscribe``, and the
context block of ``%%agent --with mcp:NAME/URI``: an MCP server's resources and prompts, for
the user (`tools.mcp_resources` does the reading).

What a server sends is untrusted: every line printed is redacted with its control characters
shown, not run (`core.visible_controls`), and a resource reaches the model only as a context
block (the same context rule and token budget as ``--with`` of a variable).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ...agent import run_sync
from ...core import redact, visible_controls
from ...memory import CHARS_PER_TOKEN, ContextBlock, context_block, keep_ends
from ...tools import (
    MCPServer,
    MCPServerError,
    get_prompt,
    list_prompts,
    list_resources,
    prompt_cell,
    read_resource,
    subscribe_resource,
)
from ..context.code_blocks import next_cell

#: The prefix of a ``--with`` name that is an MCP resource: ``mcp:NAME/URI``.
RESOURCE_PREFIX = "mcp:"


def _shown(text: Any, limit: int = 200) -> str:
    """A server's text as one printed line: redacted, controls shown (``␛``), cut to `limit` characters."""
    line = " ".join(visible_controls(redact(str(text or ""))).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _run(sub: str, work: Any) -> Any:
    try:
        return run_sync(work)
    except MCPServerError as exc:
        raise UsageError(f"%mcp {sub}: {exc}") from None


def print_resources(server: MCPServer) -> None:
    """``%mcp resources NAME``: its resources (URI, name, type, description), then its templates."""
    resources, templates = _run("resources", list_resources(server))
    if not resources and not templates:
        print(f"{server.name}: no resources")
        return
    print(f"{server.name}: {len(resources)} resource{'s' * (len(resources) != 1)}"
          f"{f', {len(templates)} template' + 's' * (len(templates) != 1) if templates else ''}"
          f" (%%agent --with mcp:{server.name}/URI)")
    for r in resources:
        kind = f" ({_shown(r.mime_type, 60)})" if r.mime_type else ""
        about = f": {_shown(r.description)}" if r.description else ""
        print(f"  {_shown(r.uri, 300)}  {_shown(r.name, 80)}{kind}{about}")
    for t in templates:
        about = f": {_shown(t.description)}" if t.description else ""
        print(f"  template {_shown(t.uri_template, 300)}  {_shown(t.name, 80)}{about}")


def print_prompts(server: MCPServer) -> None:
    """``%mcp prompts NAME``: its prompts, each with its arguments (``*``: required)."""
    prompts = _run("prompts", list_prompts(server))
    if not prompts:
        print(f"{server.name}: no prompts")
        return
    print(f"{server.name}: {len(prompts)} prompt{'s' * (len(prompts) != 1)} "
          f"(%mcp prompt {server.name} PROMPT [ARG=VALUE ...])")
    for p in prompts:
        args = ", ".join(f"{_shown(a.name, 40)}{'*' if a.required else ''}" for a in p.arguments or [])
        about = f": {_shown(p.description)}" if p.description else ""
        print(f"  {_shown(p.name, 80)}({args}){about}")


def prompt_into_cell(shell: Any, server: MCPServer, words: list[str]) -> None:
    """``%mcp prompt NAME PROMPT [ARG=VALUE ...]``: the prompt, filled in, as a new ``%%agent``
    cell below (not run: read it, then run it).

    Raises:
        UsageError: no prompt named, an argument without ``=``, the server refused.
    """
    if not words:
        raise UsageError("%mcp prompt: name the prompt\nusage: %mcp prompt NAME PROMPT [ARG=VALUE ...]")
    name, pairs = words[0], words[1:]
    arguments = {}
    for pair in pairs:
        key, found, value = pair.partition("=")
        if not found or not key:
            raise UsageError(f"%mcp prompt: an argument is ARG=VALUE, not {pair!r}")
        arguments[key] = value
    prompt = _run("prompt", get_prompt(server, name, arguments))
    body = redact(prompt_cell(prompt))
    next_cell(shell, f"%%agent\n{body}")
    print(f"mcp: prompt {_shown(name, 80)} of {server.name} ({len(prompt.messages)} message"
          f"{'s' * (len(prompt.messages) != 1)}) is in a new cell below: read it, then run it")


def subscribe(server: MCPServer, uri: str) -> None:
    """``%mcp subscribe NAME URI``: its updates are counted in ``%mcp list``."""
    _run("subscribe", subscribe_resource(server, uri))
    print(f"mcp: subscribed to {_shown(uri, 300)} of {server.name}; %mcp list counts its updates")


def resource_block(servers: dict[str, MCPServer], spec: str, budget: int, *, redacting: bool = True) -> ContextBlock:
    """The context block of ``--with mcp:NAME/URI``: resource URI of server NAME, its text within
    `budget` tokens (its first and last lines kept, `memory.keep_ends`), through the context rule
    like any block (`memory.context_block`; `redacting` False: the session turned it off).

    Raises:
        UsageError: not ``mcp:NAME/URI``, no such server, or it could not read the resource.
    """
    name, slash, uri = spec[len(RESOURCE_PREFIX):].partition("/")
    if not slash or not name or not uri:
        raise UsageError(f"--with {spec}: an MCP resource is mcp:NAME/URI (%mcp resources NAME lists them)")
    if name not in servers:
        known = ", ".join(servers) or "none yet (%mcp add NAME -- COMMAND)"
        raise UsageError(f"--with {spec}: no MCP server {name!r}; added: {known}")
    try:
        resource = run_sync(read_resource(servers[name], uri))
    except MCPServerError as exc:
        raise UsageError(f"--with {spec}: {exc}") from None
    text, truncated = keep_ends(resource.text.splitlines(), budget * CHARS_PER_TOKEN)
    return context_block(f"{name}/{uri}", "mcp", resource.mime_type or "text/plain", text, truncated,
                         redacting=redacting)
