"""`ToolServer` (``%agent serve-mcp``): the notebook tools, over a fake notebook, served to an MCP
client of the official SDK on 127.0.0.1 behind a random bearer token."""

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.client.streamable_http import streamable_http_client

from ipyagent.tools import NotebookTools, ToolServer

from tests.support.fake_notebook import FakeNotebook


@pytest.fixture
def fake() -> FakeNotebook:
    return FakeNotebook([("markdown", "# Notes", []), ("code", "print(2 + 2)", ["4\n"])])


@pytest.fixture
def asked() -> list[str]:
    return []


@pytest.fixture
def served(fake: FakeNotebook, asked: list[str]) -> Iterator[ToolServer]:
    server = ToolServer(NotebookTools(fake), approve=lambda action: asked.append(action.native_name) or False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def session_with(server: ToolServer, token: str | None, work: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)


def test_a_client_with_the_token_lists_the_tools_and_reads_a_cell(served: ToolServer) -> None:
    async def work(session: ClientSession) -> Any:
        listed = await session.list_tools()
        read = await session.call_tool("notebook_read_cell", {"index": 1})
        return [t.name for t in listed.tools], read

    names, read = asyncio.run(session_with(served, served.token, work))
    assert names == ["notebook_list_cells", "notebook_read_cell", "notebook_insert_cell", "notebook_edit_cell",
                     "notebook_run_cell"]
    assert not read.is_error and read.content[0].text == "cell 1 (code)\nprint(2 + 2)\noutputs:\n4\n"
    assert served.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("token", [None, "not-the-token"])
def test_without_the_token_the_client_is_refused(served: ToolServer, token: str | None) -> None:
    async def work(session: ClientSession) -> Any:
        return await session.list_tools()

    with pytest.raises(BaseExceptionGroup) as failed:  # the SDK's task groups carry the failure
        asyncio.run(session_with(served, token, work))
    assert failed.group_contains(MCPError, match="error response")
    answer = httpx2.post(served.url, json={}, headers={"Authorization": f"Bearer {token}"} if token else {})
    assert answer.status_code == 401


def test_a_change_asks_the_same_approval_and_denied_changes_nothing(served: ToolServer, fake: FakeNotebook,
                                                                      asked: list[str]) -> None:
    async def work(session: ClientSession) -> Any:
        return await session.call_tool("notebook_insert_cell", {"index": 0, "source": "import os"})

    result = asyncio.run(session_with(served, served.token, work))
    assert asked == ["notebook_insert_cell"]
    assert result.is_error and "not approved" in result.content[0].text
    assert fake.changes == []
