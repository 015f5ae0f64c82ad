"""What a cell's options name in the user namespace, looked up for a run: tools (functions,
`BaseTool` objects, MCP servers), a schema, images and files, system blocks, the context blocks
of ``--error`` / ``--with`` / ``--cells``, and the code an answer offers as the next cell."""

from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError
from pydantic import BaseModel

from ...agent import AgentResult, RunOptions, current_default, document_block, image_blocks
from ...core import NextCell, SystemBlock
from ...memory import DEFAULT_BUDGET, ContextBlock, variable_block
from ...tools import ACTIVITY_ATTR, BaseTool, FunctionTool, MCPServer, Toolbox
from ..context.code_blocks import next_cell, pick_code
from ..context.notebook import cell_blocks, error_block
from .mcp import resolve_tools
from .mcp_read import RESOURCE_PREFIX, resource_block
from .options import builtin_names, print_error, settings_from_args, timeout_from_args


class CellInputs:
    """The lookups of one shell's cells. `added_servers`: the ``%mcp add`` servers by name (they win
    over ``MCPServer`` objects of the same name in the namespace)."""

    def __init__(self, shell: Any, added_servers: dict[str, MCPServer]) -> None:
        self.shell, self.added_servers = shell, added_servers

    def namespace_tools(self) -> dict[str, Any]:
        """Tools visible in the user namespace: BaseTool instances, BaseTool subclasses defined in
        the notebook (unless an instance is there too), and @activity functions."""
        found: dict[str, Any] = {}
        for name, value in self.shell.user_ns.items():
            if name.startswith("_"):
                continue
            if isinstance(value, (BaseTool, MCPServer)):
                found[name] = value
            elif isinstance(value, type):
                if (
                    issubclass(value, BaseTool)
                    and value not in (BaseTool, FunctionTool)
                    and value.__module__ == "__main__"
                ):
                    found[name] = value
            elif callable(value) and hasattr(value, ACTIVITY_ATTR):
                found[name] = value
        instances = {type(v) for v in found.values() if isinstance(v, BaseTool)}
        return {n: v for n, v in found.items() if not (isinstance(v, type) and v in instances)}

    def mcp_servers(self) -> dict[str, MCPServer]:
        """MCP servers by name: ``MCPServer`` objects in the namespace, then ``%mcp add`` ones (which win)."""
        found = {n: v for n, v in self.shell.user_ns.items() if isinstance(v, MCPServer) and not n.startswith("_")}
        return {**found, **self.added_servers}

    def toolbox(self, names: str | None) -> Toolbox:
        """The tools named in ``--tools``, looked up among MCP servers (``NAME``, ``NAME.tool``;
        they start here) and in the user namespace; ``*``: every tool in the namespace and every
        ``%mcp add`` server."""
        if not names:
            return Toolbox()
        if names.strip().strip("'\"") == "*":
            everything = [v for v in self.namespace_tools().values() if not isinstance(v, MCPServer)]
            toolsets, _ = resolve_tools(self.mcp_servers(), list(self.mcp_servers()))
            return Toolbox([*everything, *toolsets])
        toolsets, rest = resolve_tools(self.mcp_servers(), [n.strip() for n in names.split(",")])
        tools: list[Any] = list(toolsets)
        for name in rest:
            if name not in self.shell.user_ns:
                raise UsageError(f"--tools: {name!r} is not defined; define the function or tool in a cell first")
            value = self.shell.user_ns[name]
            if not (
                isinstance(value, BaseTool)
                or (isinstance(value, type) and issubclass(value, BaseTool))
                or callable(value)
            ):
                raise UsageError(
                    f"--tools: {name!r} is a {type(value).__name__}, not a tool: "
                    "use a function (optionally @activity) or a BaseTool"
                )
            tools.append(value)
        return Toolbox(tools)

    def run_options(self, args: Any) -> RunOptions:
        """The `RunOptions` of ``--tools``, ``--max-steps``, ``--react``, ``--schema``, ``--strategy`` and
        ``--image``, looked up in the user namespace.

        Raises:
            UsageError: a name that is not defined or not of the right kind.
        """
        schema = None
        if args.schema:
            schema = self.shell.user_ns.get(args.schema)
            if not (isinstance(schema, dict) or (isinstance(schema, type) and issubclass(schema, BaseModel))):
                what = "not defined" if args.schema not in self.shell.user_ns else f"a {type(schema).__name__}"
                raise UsageError(
                    f"--schema: {args.schema!r} is {what}; define a pydantic model class "
                    f"(class {args.schema}(BaseModel): ...) in a cell first"
                )
        elif args.strategy:
            raise UsageError("--strategy goes with --schema MODEL")
        images = []
        for item in args.image or ():
            try:
                images += image_blocks(self.shell.user_ns[item] if item in self.shell.user_ns else item)
            except (OSError, ValueError, TypeError) as exc:
                raise UsageError(f"--image {item}: {exc}") from None
        files = []
        for item in getattr(args, "file", None) or ():
            try:
                files.append(document_block(self.shell.user_ns[item] if item in self.shell.user_ns else item))
            except (OSError, ValueError, TypeError) as exc:
                raise UsageError(f"--file {item}: {exc}") from None
        try:
            toolbox = self.toolbox(getattr(args, "tools", None))
        except (ValueError, TypeError) as exc:  # a tool that cannot be declared (bad name, bad config)
            raise UsageError(f"--tools: {exc}") from None
        return RunOptions(
            tools=toolbox,
            builtin_tools=builtin_names(getattr(args, "builtin", None)),
            max_steps=args.max_steps,
            react=True if getattr(args, "react", False) else None,
            output_schema=schema,
            output_strategy=args.strategy,
            images=tuple(images),
            files=tuple(files),
            settings=settings_from_args(args),
            system_budget=getattr(args, "system_budget", None),
            timeout=timeout_from_args(args),
            max_tool_calls=getattr(args, "max_tool_calls", None),
        )

    def system_value(self, value: str) -> Any:
        """``--system``: a variable holding a `SystemBlock` (or a list of them and text) when it
        names one, else the text itself."""
        found = self.shell.user_ns.get(value) if value.isidentifier() else None
        if isinstance(found, SystemBlock) or (
            isinstance(found, (list, tuple)) and found and all(isinstance(b, (SystemBlock, str)) for b in found)
        ):
            return list(found) if isinstance(found, (list, tuple)) else [found]
        return value

    def context(self, args: Any) -> list[ContextBlock]:
        """The context blocks of ``--error``, ``--with`` and ``--cells``, in that order.

        Raises:
            TemplateError: no exception yet (``--error``).
            UsageError: a ``--with`` name that is not defined.
        """
        budget = args.context_budget or DEFAULT_BUDGET
        redacting = current_default().redact_context  # %agent settings redact_context=false: sent as they are
        blocks = [error_block(self.shell, budget, redacting=redacting)] if args.error else []
        for name in (n.strip() for group in args.with_ or () for n in group.split(",")):
            if not name:
                continue
            if name.startswith(RESOURCE_PREFIX):  # an MCP server's resource (mcp_read.py)
                blocks.append(resource_block(self.mcp_servers(), name, budget, redacting=redacting))
                continue
            blocks.append(variable_block(name, self.lookup(name), budget, redacting=redacting))
        if args.cells:
            blocks += cell_blocks(self.shell, args.cells, budget, redacting=redacting)
        return blocks

    def mcp_resource(self, server: str, uri: str, budget: int = DEFAULT_BUDGET) -> str:
        """A template's ``{{ mcp_resource("NAME", "URI") }}``: the resource as a context element
        (``<context source="mcp" ...>``), redacted and cut to `budget` tokens, like ``--with mcp:NAME/URI``."""
        block = resource_block(self.mcp_servers(), f"{RESOURCE_PREFIX}{server}/{uri}", budget,
                               redacting=current_default().redact_context)
        return block.to_text().strip()

    def lookup(self, name: str) -> Any:
        """A ``--with`` name: a variable, or an attribute path on one (``df.columns``); nothing is evaluated.

        Raises:
            UsageError: the variable or an attribute is missing.
        """
        base, *attributes = name.split(".")
        if base not in self.shell.user_ns:
            raise UsageError(f"--with: {base!r} is not defined; define it in a cell first (or check the spelling)")
        value = self.shell.user_ns[base]
        for attribute in attributes:
            if attribute.startswith("_") or not hasattr(value, attribute):
                raise UsageError(f"--with: {name!r}: {type(value).__name__} has no attribute {attribute!r}")
            value = getattr(value, attribute)
        return value

    def next_cell(self, result: AgentResult, language: str | None) -> NextCell | None:
        """``--code``: the answer's code into a new cell below (``set_next_input``); None when
        not asked for or when the answer has no such block (said in one line)."""
        if not language:
            return None
        language = re.sub(r"[^A-Za-z0-9+#._-]", "", language) or "python"
        code = pick_code(result.text, language)
        if code is None:
            what = "code block" if language == "all" else f"{language} code block"
            print_error(f"--code: the answer has no {what}; nothing was put in a new cell")
            return None
        next_cell(self.shell, code)
        return NextCell(language=language, source=code)
