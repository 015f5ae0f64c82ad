"""`Toolbox`: the tools of one run, their definitions, and concurrent dispatch of tool calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..core import BaseArtifact, ErrorArtifact, ToolAction, ToolDefinition
from .base_tool import BaseTool, FunctionTool
from .call_context import CallContext, set_call
from .mcp import MCPServer, MCPToolset


class Toolbox:
    """Tools addressed by native name (``Tool_activity`` or a function's name).

    Raises:
        ValueError: two tools offer the same native name.
    """

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self.tools = [as_tool(t) for t in tools]
        self._routes: dict[str, tuple[BaseTool, str]] = {}
        self._index()

    def _index(self) -> None:
        self._routes.clear()
        for tool in self.tools:
            for activity in tool.activities():
                native = tool.native_name(activity)
                if native in self._routes:
                    raise ValueError(f"two tools offer {native!r}; rename one (BaseTool(name=...))")
                self._routes[native] = (tool, activity)

    async def prepare(self) -> None:
        """Let tools that learn their activities at run time (MCP servers: start, list tools)
        do so, all at once, then route to what they offer.

        Raises:
            Whatever a tool's ``prepare()`` raises (`MCPServerError`: a server cannot start).
        """
        waiting = [prepare() for tool in self.tools if (prepare := getattr(tool, "prepare", None)) is not None]
        if waiting:
            await asyncio.gather(*waiting)
            self._index()

    async def refresh(self) -> bool:
        """Before a model turn: let tools whose activities changed since (an MCP server's
        ``tools/list_changed``) list them again, then route to what they offer; True if any did."""
        refreshing = [refresh() for tool in self.tools if (refresh := getattr(tool, "refresh", None)) is not None]
        changed = any(await asyncio.gather(*refreshing)) if refreshing else False
        if changed:
            self._index()
        return changed

    def __bool__(self) -> bool:
        return bool(self._routes)

    def names(self) -> list[str]:
        return list(self._routes)

    def definitions(self) -> list[ToolDefinition]:
        return [d for tool in self.tools for d in tool.tool_definitions()]

    def route(self, action: ToolAction) -> tuple[BaseTool, str] | None:
        return self._routes.get(action.native_name)

    def resolve(self, action: ToolAction) -> ToolAction:
        """`action` (changed in place) with `name` and `path` set to the `BaseTool` method it
        calls (``Calculator_add`` -> ``Calculator`` / ``add``); a function tool's, an MCP
        tool's (``server_tool``) or an unknown name stays whole."""
        route = self.route(action)
        if route is not None and not isinstance(route[0], (FunctionTool, MCPToolset)):
            action.name, action.path = route[0].name, route[1]
        return action

    async def run_one(self, action: ToolAction, position: int | None = None) -> tuple[BaseArtifact, float]:
        """(result artifact, seconds taken). An unknown tool gets an error naming the call (its
        `position` among the reply's calls, 1-based, when given, and its id) and the available tools."""
        started = time.monotonic()
        route = self.route(action)
        if route is None:
            which = f"tool call {position} (id {action.tag!r})" if position is not None else f"tool call {action.tag!r}"
            result: BaseArtifact = ErrorArtifact(
                value=f"{which} was not run: there is no tool {action.native_name!r}; "
                      f"available: {', '.join(self._routes) or 'none'}"
            )
        else:
            tool, activity = route
            result = await tool.run(activity, action)
        return result, time.monotonic() - started

    async def run_all(
        self, actions: list[ToolAction], refuse: Callable[[ToolAction], Awaitable[BaseArtifact | None]] | None = None,
        context: Callable[[ToolAction], CallContext] | None = None,
    ) -> list[tuple[BaseArtifact, float]]:
        """Run the calls of one model turn concurrently; (result, seconds) come back in call order.

        `refuse(action)`, when given, is awaited first for each call: an artifact it returns
        (approval denied) is the call's result, and the call is not run (0 seconds).
        `context(action)`, when given, is the call's reach into its run, `current_call()` in it.
        """

        async def one(position: int, action: ToolAction) -> tuple[BaseArtifact, float]:
            refusal = await refuse(action) if refuse is not None else None
            if refusal is not None:
                return refusal, 0.0
            set_call(context(action) if context is not None else None)  # this call's task only
            return await self.run_one(action, position)

        return list(await asyncio.gather(*(one(n, a) for n, a in enumerate(actions, 1))))


def as_tool(obj: Any) -> BaseTool:
    """A `BaseTool` as it is; an `MCPServer` as its `MCPToolset`; a function (marked with
    @activity or not) as a `FunctionTool`.

    Raises:
        TypeError: `obj` is neither.
    """
    if isinstance(obj, BaseTool):
        return obj
    if isinstance(obj, MCPServer):  # all of an MCP server's tools
        return obj.toolset()
    if isinstance(obj, type) and issubclass(obj, BaseTool):
        return obj()
    if callable(obj):
        return FunctionTool(obj)
    raise TypeError(f"{obj!r} is not a tool: use a BaseTool subclass instance or a function")
