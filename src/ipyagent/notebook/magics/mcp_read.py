"""``%mcp resources``, ``%mcp prompts``, ``%mcp prompt`` and ``%mcp subscribe``, the context
block of ``%%agent --with mcp:NAME/URI`` and the messages of ``%%agent --prompt NAME/PROMPT``:
an MCP server's resources and prompts, for the user (`tools.mcp_resources` does the reading).

What a server sends is untrusted: every line printed is redacted with its control characters
shown, not run (`core.visible_controls`), and a resource reaches the model only as a context
block (the same context rule and token budget as ``--with`` of a variable).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ...agent import run_sync
from ...core import Message, TextBlock, redact, visible_controls
from ...memory import CHARS_PER_TOKEN, ContextBlock, context_block, keep_ends
from ...tools import (
    MCPServer,
    MCPServerError,
    PromptText,
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
    return _run_as(f"%mcp {sub}", work)


def _run_as(where: str, work: Any) -> Any:
    try:
        return run_sync(work)
    except MCPServerError as exc:
        raise UsageError(f"{where}: {exc}") from None


def _server(servers: dict[str, MCPServer], name: str, where: str) -> MCPServer:
    """Server `name` of `servers` (``%mcp add`` ones and those in the namespace).

    Raises:
        UsageError: no such server (the added ones named).
    """
    if name not in servers:
        known = ", ".join(servers) or "none yet (%mcp add NAME -- COMMAND)"
        raise UsageError(f"{where}: no MCP server {name!r}; added: {known}")
    return servers[name]


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


def prompt_arguments(where: str, pairs: list[str]) -> dict[str, str]:
    """``ARG=VALUE`` words as a prompt's arguments (``%mcp prompt``, ``%%agent --prompt``).

    Raises:
        UsageError: a word without ``=`` or without a name (`where` begins the line).
    """
    arguments = {}
    for pair in pairs:
        key, found, value = pair.partition("=")
        if not found or not key:
            raise UsageError(f"{where}: an argument is ARG=VALUE, not {pair!r}")
        arguments[key] = value
    return arguments


def fill_prompt(server: MCPServer, name: str, arguments: dict[str, str], where: str) -> PromptText:
    """Prompt `name` of `server` filled with `arguments` (``prompts/list``, then ``prompts/get``).

    Raises:
        UsageError: the server cannot start or refused, has no such prompt (its prompts named), or a
            required argument is missing (named, with the prompt's arguments).
    """
    prompts = {p.name: p for p in _run_as(where, list_prompts(server))}
    if name not in prompts:
        known = ", ".join(_shown(n, 80) for n in prompts) or "none"
        raise UsageError(f"{where}: {server.name} has no prompt {_shown(name, 80)!r}; its prompts: {known}")
    declared = prompts[name].arguments or []
    missing = [a.name for a in declared if a.required and a.name not in arguments]
    if missing:
        listed = ", ".join(f"{_shown(a.name, 40)}{'*' if a.required else ''}" for a in declared)
        raise UsageError(f"{where}: prompt {_shown(name, 80)!r} needs {', '.join(map(repr, missing))}="
                         f"VALUE; its arguments: {listed} (* required)")
    return _run_as(where, get_prompt(server, name, arguments))


def prompt_into_cell(shell: Any, server: MCPServer, words: list[str]) -> None:
    """``%mcp prompt NAME PROMPT [ARG=VALUE ...]``: the prompt, filled in, as a new ``%%agent``
    cell below (not run: read it, then run it).

    Raises:
        UsageError: no prompt named, an argument without ``=``, no such prompt, a required argument
            missing, the server refused.
    """
    if not words:
        raise UsageError("%mcp prompt: name the prompt\nusage: %mcp prompt NAME PROMPT [ARG=VALUE ...]")
    name = words[0]
    prompt = fill_prompt(server, name, prompt_arguments("%mcp prompt", words[1:]), "%mcp prompt")
    body = redact(prompt_cell(prompt))
    next_cell(shell, f"%%agent\n{body}")
    print(f"mcp: prompt {_shown(name, 80)} of {server.name} ({len(prompt.messages)} message"
          f"{'s' * (len(prompt.messages) != 1)}) is in a new cell below: read it, then run it")


def prompt_messages(servers: dict[str, MCPServer], words: list[str], *,
                    redacting: bool = True) -> tuple[str, list[Message], int]:
    """``%%agent --prompt NAME/PROMPT [ARG=VALUE ...]``: (``NAME/PROMPT``, the prompt's messages in
    order as `Message` objects, values masked): each message's text through the context rule, as
    a context block's (`memory.context_block`; `redacting` False: the session turned it off).

    Raises:
        UsageError: not ``NAME/PROMPT``, no such server or prompt, a required argument missing, the
            server refused (one line).
    """
    spec = words[0] if words else ""
    name, slash, prompt_name = spec.partition("/")
    if not slash or not name or not prompt_name:
        raise UsageError(f"--prompt {spec}: a server prompt is NAME/PROMPT (%mcp prompts NAME lists them)")
    where = f"--prompt {spec}"
    server = _server(servers, name, where)
    prompt = fill_prompt(server, prompt_name, prompt_arguments(where, words[1:]), where)
    messages, masked = [], 0
    for role, text in prompt.messages:
        block = context_block(spec, "mcp", "text/plain", text, redacting=redacting)  # the context rule
        masked += block.masked
        messages.append(Message(role="assistant" if role == "assistant" else "user",
                                content=[TextBlock(text=block.text)]))
    return spec, messages, masked


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
    resource = _run_as(f"--with {spec}", read_resource(_server(servers, name, f"--with {spec}"), uri))
    text, truncated = keep_ends(resource.text.splitlines(), budget * CHARS_PER_TOKEN)
    return context_block(f"{name}/{uri}", "mcp", resource.mime_type or "text/plain", text, truncated,
                         redacting=redacting)
