"""Drivers are closed when the kernel shuts down (and on ``%unload_ext``): the local
server sees every connection close. Closing stays idempotent."""

from __future__ import annotations

import gc
import logging

import pytest

import ipyagent
from ipyagent.drivers.base import _OPEN
from ipyagent.notebook import extension

from ..support.stub_server import FIXTURES, Reply, StubServer
from ..support.replies import reflect

# Anthropic's stream is read to its end, so its connection goes back to the pool and stays open.
TEXT = FIXTURES / "anthropic" / "stream-text.sse"
OPENAI_TEXT = FIXTURES / "openai-chat" / "stream-text-include-usage.sse"


def _wait_closed(server: StubServer, timeout: float = 5.0) -> None:
    server.wait_for(lambda: server.closed_connections >= server.connections, timeout)


def test_a_stream_ended_by_its_stop_signal_leaves_the_connection_for_the_next_request() -> None:
    """OpenAI ends its stream with ``[DONE]``, where the parser stops: the rest of the body (here the
    chunked terminator) is still read, so the next request reuses the connection instead of opening one."""
    with StubServer(Reply.sse_file(OPENAI_TEXT)) as server:
        agent = ipyagent.Agent("openai:m", base_url=server.url)
        assert agent.run("one").ok and agent.run("two").ok
        assert len(server.requests) == 2 and server.connections == 1 and server.closed_connections == 0


def test_a_body_still_open_after_the_stop_signal_is_closed_not_waited_for(monkeypatch) -> None:
    from ipyagent.drivers import http

    monkeypatch.setattr(http, "DRAIN_S", 0.01)
    whole = b"".join(Reply.sse_file(OPENAI_TEXT).pieces)
    with StubServer(Reply(pieces=[whole, b": more after [DONE]\n\n"], delay=0.2)) as server:
        agent = ipyagent.Agent("openai:m", base_url=server.url)
        first = agent.run("one")
        assert first.ok and first.text and agent.run("two").ok
        assert server.connections == 2  # the first connection was given up, not kept waiting for its end


def test_a_paced_stream_read_to_its_stop_signal_closes_without_an_error(caplog) -> None:
    """The reader the parser leaves at ``[DONE]`` is closed by the loop's finalizer in a task of its
    own, while the drain still awaits the body: that close must not fail ("aclose(): asynchronous
    generator is already running" was logged, and printed into the cell as a traceback)."""
    from ..support.stub_server import openai_text_reply

    with StubServer(openai_text_reply("word " * 40, piece=6, delay=0.02)) as server:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            result = ipyagent.Agent("openai:m", base_url=server.url).run("one")
            gc.collect()
            ipyagent.Agent("openai:m", base_url=server.url).run("two")  # the loop runs the finalizer's task
    assert result.ok and result.text == "word " * 40
    assert not [r for r in caplog.records if "already running" in r.getMessage() + str(r.exc_info)]


def test_the_exit_hook_closes_every_open_driver_once(ip) -> None:
    with StubServer(Reply.sse_file(TEXT)) as server:
        ip.run_line_magic("provider", f"anthropic:m --base-url {server.url}")
        ip.run_cell_magic("agent", "", "from a cell")
        python_agent = ipyagent.Agent("anthropic:other", base_url=server.url)
        assert python_agent.run("from Python").ok
        assert server.connections == 2 and server.closed_connections == 0  # kept alive for the next request
        assert extension._exit_registered  # atexit runs it when the kernel process ends
        assert extension.close_drivers() >= 2  # (and any other test's still open)
        _wait_closed(server)
        assert server.closed_connections == 2
        assert extension.close_drivers() == 0 and not list(_OPEN)  # twice is fine
        assert python_agent.run("again").ok  # a closed driver opens a new client when used again


def test_unload_closes_python_agents_too(ip) -> None:
    with StubServer(Reply.sse_file(TEXT)) as server:
        agent = ipyagent.Agent("anthropic:m", base_url=server.url)
        assert agent.run("hi").ok
        ip.run_line_magic("unload_ext", "ipyagent")
        _wait_closed(server)
        assert server.connections == 1 and server.closed_connections == 1
        ip.run_line_magic("load_ext", "ipyagent")  # the fixture unloads it again


@pytest.mark.timeout(90)
def test_kernel_shutdown_closes_every_connection(monkeypatch) -> None:
    from jupyter_client.manager import start_new_kernel

    from ..support.kernels import wait_reply

    with StubServer(Reply.sse_file(TEXT)) as server:
        km, kc = start_new_kernel(kernel_name="python3")
        try:
            code = (
                f"%load_ext ipyagent\n%provider anthropic:m --base-url {server.url}\n"
                f"import ipyagent\nagent = ipyagent.Agent('anthropic:py', base_url='{server.url}')\nok = "
                "agent.run('hi').ok"
            )
            reply, _ = wait_reply(kc, kc.execute(code), 60)
            assert reply["content"]["status"] == "ok", reply["content"]
            reply, _ = wait_reply(kc, kc.execute("%%agent\nfrom a cell"), 60)
            assert reply["content"]["status"] == "ok", reply["content"]
            assert server.connections == 2 and server.closed_connections == 0
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)  # a shutdown request, as a front end sends
        _wait_closed(server, 15)
        assert server.closed_connections == server.connections == 2


def test_every_exchange_is_recorded_when_connections_are_reused(tmp_path) -> None:
    """A recording writes each exchange when its response closes; draining a body for the next
    request must not close it twice (one in ~60 exchanges went unrecorded when it did)."""
    from ipyagent.agent.loop_thread import background_loop

    def echo(text: str) -> str:
        """Echo the text."""
        return text

    errors: list[dict] = []
    loop = background_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    cassette = tmp_path / "reused.cassette.jsonl"
    try:
        with StubServer(respond=reflect) as server:
            for _ in range(60):  # a tool call, then the answer: two exchanges each
                assert ipyagent.Agent("openai:m", base_url=server.url, record=cassette, tools=[echo]).run("say it").ok
    finally:
        loop.set_exception_handler(previous)
    assert len(cassette.read_text().splitlines()) == len(server.requests) == 120
    assert not errors, errors[:1]
