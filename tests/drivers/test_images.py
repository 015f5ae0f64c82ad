"""Images in the user message: `Agent.run(images=...)`, `%%agent --image`, and models without vision."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import pytest
from IPython.core.error import UsageError

from ipyagent import Agent
from ipyagent.agent.inputs.images import image_block, image_blocks, sniff_mime
from ipyagent.core import ImageBlock
from ipyagent.drivers.protocols.anthropic import AnthropicPromptDriver
from ipyagent.drivers.protocols.gemini import GeminiPromptDriver
from ipyagent.drivers.protocols.ollama import OllamaPromptDriver
from ipyagent.drivers.protocols.openai_chat import OpenAIChatPromptDriver
from ipyagent.drivers.protocols.openai_responses import OpenAIResponsesPromptDriver

from ..support.stub_server import FIXTURES, Reply, StubServer

KEY = "sk-images-test"


def png(width: int = 3, height: int = 2, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid RGB PNG, built with zlib and struct."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- turning values into image blocks ---------------------------------------------------------


def test_bytes_paths_urls_become_image_blocks(tmp_path):
    data = png()
    path = tmp_path / "red.png"
    path.write_bytes(data)
    assert image_block(data) == ImageBlock(mime_type="image/png", data=b64(data))
    assert image_block(str(path)) == image_block(path) == image_block(data)
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 16
    assert image_block(jpeg).mime_type == "image/jpeg"
    assert sniff_mime(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    url = "https://example.com/cat.jpg?size=2"
    assert image_block(url) == ImageBlock(url=url, mime_type="image/jpeg")
    data_url = f"data:image/png;base64,{b64(data)}"
    assert image_block(data_url) == image_block(data)
    assert image_blocks(None) == [] and image_blocks(data) == [image_block(data)]


def test_bad_images_say_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        image_block(str(tmp_path / "missing.png"))
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP"):
        image_block(text)
    with pytest.raises(TypeError, match="file path, a URL, bytes, a PIL image or a matplotlib figure"):
        image_block(3.5)


def test_pil_image_is_sent_as_png():
    Image = pytest.importorskip("PIL.Image")
    image = Image.new("RGB", (4, 3), (10, 200, 10))
    block = image_block(image)
    assert block.mime_type == "image/png"
    import io

    back = Image.open(io.BytesIO(base64.b64decode(block.data)))
    assert back.size == (4, 3) and back.getpixel((0, 0)) == (10, 200, 10)
    assert image_block(Image.new("CMYK", (2, 2))).mime_type == "image/png"  # converted first


def test_matplotlib_figure_is_rendered_to_png():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1, 1))
    figure.add_subplot().plot([0, 1], [1, 0])
    block = image_block(figure)
    assert block.mime_type == "image/png" and base64.b64decode(block.data).startswith(b"\x89PNG")


# -- over HTTP, for each protocol ----------------------------------------------------------------


def _text_reply(provider: str) -> Reply:
    if provider == "ollama":
        lines = (FIXTURES / "ollama" / "chat-stream-text.ndjson").read_text().splitlines()
        return Reply(
            headers={"Content-Type": "application/x-ndjson"},
            pieces=[(line + "\n").encode() for line in lines if line.strip()],
        )
    folder = {
        "openai": "openai-chat",
        "openai-responses": "openai-responses",
        "anthropic": "anthropic",
        "gemini": "gemini",
    }[provider]
    name = "stream-text-include-usage.sse" if provider == "openai" else "stream-text.sse"
    return Reply.sse_file(FIXTURES / folder / name)


DRIVERS = {
    "openai": lambda url: OpenAIChatPromptDriver("gpt-4.1-mini", base_url=url, api_key=KEY),
    "openai-responses": lambda url: OpenAIResponsesPromptDriver("gpt-4.1-mini", base_url=url, api_key=KEY),
    "anthropic": lambda url: AnthropicPromptDriver("claude-sonnet-4-5", base_url=url, api_key=KEY),
    "gemini": lambda url: GeminiPromptDriver("gemini-2.5-flash", base_url=url, api_key=KEY),
    "ollama": lambda url: OllamaPromptDriver("llava", base_url=url),
}


def _user_parts(provider: str, body: dict[str, Any]) -> list[Any]:
    """The parts of the last user message, in the protocol's own shape."""
    if provider == "gemini":
        return body["contents"][-1]["parts"]
    if provider == "openai-responses":
        return body["input"][-1]["content"]
    message = body["messages"][-1]
    return [message["content"], *message.get("images", [])] if provider == "ollama" else message["content"]


@pytest.mark.parametrize("provider", list(DRIVERS))
def test_images_travel_in_each_protocols_user_message(provider, tmp_path):
    red, green = png(rgb=(200, 30, 30)), png(rgb=(30, 200, 30))
    path = tmp_path / "green.png"
    path.write_bytes(green)
    with StubServer(_text_reply(provider)) as server:
        result = Agent(DRIVERS[provider](server.url)).run("Which colours?", images=[red, path])
    assert result.ok, result.error
    parts = json.dumps(_user_parts(provider, server.requests[0]["body"]))
    assert "Which colours?" in parts
    assert parts.index(b64(red)) < parts.index(b64(green))  # both, in order
    assert result.messages[0].content[1:] == [image_block(red), image_block(green)]


def test_a_model_without_vision_fails_before_sending():
    with StubServer(_text_reply("openai-responses")) as server:
        result = Agent(OpenAIResponsesPromptDriver("o1-mini", base_url=server.url, api_key=KEY)).run(
            "What is it?", images=[png()]
        )
    assert server.requests == []
    assert result.error.type == "unsupported_capability"
    assert "o1-mini" in result.error.message and "vision" in result.error.message


def test_an_unreadable_image_raises_before_the_run(tmp_path):
    agent = Agent(OpenAIChatPromptDriver("gpt-4.1-mini", base_url="http://127.0.0.1:9", api_key=KEY))
    with pytest.raises(FileNotFoundError):
        agent.run("hi", images=[str(tmp_path / "nope.png")])
    assert agent.results == []


# -- %%agent --image ---------------------------------------------------------------------------------


def test_agent_magic_adds_images_from_variables_and_paths(ip, tmp_path, capsys):
    red, green = png(rgb=(200, 30, 30)), png(rgb=(30, 200, 30))
    path = tmp_path / "green.png"
    path.write_bytes(green)
    with StubServer(_text_reply("openai")) as server:
        ip.run_line_magic("provider", f"openai:gpt-4.1-mini --base-url {server.url}")
        ip.user_ns["pic"] = red
        ip.run_cell_magic("agent", f"--image pic --image {path} -o res", "Which colours?")
    content = server.requests[0]["body"]["messages"][-1]["content"]
    assert content == [
        {"type": "text", "text": "Which colours?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(red)}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(green)}"}},
    ]
    assert ip.user_ns["res"].ok
    with pytest.raises(UsageError, match="--image nope.png: .*not found"):
        ip.run_cell_magic("agent", "--image nope.png", "hi")
    capsys.readouterr()
