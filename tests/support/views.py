"""What view tests share: a completed model turn, a stream that says it is a terminal, and an
HTML parser that collects tags and text."""

from __future__ import annotations

import io
from html.parser import HTMLParser

from ipyagent.core import Message, ModelCompleted, StopReason, TextBlock, Usage

def completed(
    text: str, *, input: int = 14, output: int = 30, ttft: float = 0.05, latency: float = 1.25, kind: str = "end_turn"
) -> ModelCompleted:
    return ModelCompleted(
        message=Message(
            role="assistant", content=[TextBlock(text=text)], usage=Usage(input_tokens=input, output_tokens=output)
        ),
        usage=Usage(input_tokens=input, output_tokens=output),
        stop_reason=StopReason(kind=kind, raw="stop"),
        metadata={"ttft_s": ttft, "latency_s": latency, "attempts": 1},
    )


class Tty(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Collector(HTMLParser):
    """Every start tag with its attributes, and the decoded text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    @property
    def text(self) -> str:
        return "".join(self.data)


def parse(html: str) -> Collector:
    c = Collector()
    c.feed(html)
    c.close()
    return c
