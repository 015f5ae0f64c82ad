"""Ollama's native chat API over NDJSON, for a local server or ollama.com.

Follows the Ollama API documentation, "Generate a chat completion"
(`POST /api/chat`, `stream: true`) and "Errors" (docs/api.md, docs/api/errors.mdx):

* the stream is newline-delimited JSON, one object per line, not SSE; the
  Content-Type is ``application/x-ndjson`` from a local server and
  ``application/json`` from ollama.com, so it is not checked;
* each object carries ``message.content`` / ``message.thinking`` pieces;
  ``message.tool_calls`` arrive whole, with ``arguments`` as a JSON object
  (ids only from Ollama 0.12.10 on);
* the last object has ``done: true``, ``done_reason`` (``stop`` even when the
  model called tools, ``length``) and the metrics ``prompt_eval_count`` /
  ``eval_count`` and ``*_duration`` (nanoseconds);
* an error after the stream started is a ``{"error": "..."}`` line (status
  stays 200); before that, an HTTP error with the same body.

`/api/generate` objects (``response`` instead of ``message.content``) parse
with the same code, so a recorded generate stream replays too.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any


from ...core import (
    DocumentBlock,
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    DeltaMessage,
    ImageBlock,
    Message,
    PromptStack,
    ProviderError,
    ReasoningBlock,
    ReasoningDelta,
    StopKind,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
    redact_head,
)
from ..catalog.models import parse_ollama
from ..base import BasePromptDriver, BlockIndex, Capabilities, StreamMeta, read_usage, wire_usage
from ..decode import StreamDecoder, reason_text, stream_json
from .openai_chat_request import system_message
from ..structured import output_tool
from ..tool_media import caption, result_text, tool_media

DONE_REASONS: dict[str, StopKind] = {
    "stop": StopKind.end_turn,
    "length": StopKind.max_tokens,
}

_UNSUPPORTED_RE = re.compile(r"does not support (\w+)")
_NOT_FOUND_RE = re.compile(r"\bmodel\b.*\bnot found\b", re.IGNORECASE)
_DATA_URL_RE = re.compile(r"^data:[^;,]*;base64,(.*)$", re.DOTALL)


def usage_from_ollama(final: dict[str, Any]) -> Usage:
    """Map the metrics of the final (``done: true``) object to `Usage`.

    `raw` keeps every count and duration (``total_duration``, ``load_duration``,
    ``prompt_eval_duration``, ``eval_duration``: nanoseconds).

    Raises:
        ValueError: a count that is not a whole number >= 0 (`read_usage` drops the usage).
    """
    raw = {k: v for k, v in final.items() if k.endswith("_count") or k.endswith("_duration")}
    return wire_usage(raw, input_tokens=final.get("prompt_eval_count") or 0, output_tokens=final.get("eval_count") or 0)


def classify_error(message: str) -> tuple[str | None, str | None]:
    """(code, error type) from an Ollama error text, or (None, None) when nothing is recognized.

    ``"... does not support tools"`` -> (``"tools"``, ``unsupported_capability``);
    ``"model 'x' not found"`` -> (None, ``not_found``).
    """
    match = _UNSUPPORTED_RE.search(message)
    if match:
        return match.group(1), "unsupported_capability"
    if _NOT_FOUND_RE.search(message):
        return None, "not_found"
    return None, None


def _stream_error(error: Any) -> ProviderError:
    """An ``{"error": ...}`` line inside a stream."""
    message = error.get("message") if isinstance(error, dict) else error
    message = str(message or error)
    code, etype = classify_error(message)
    return ProviderError(etype or "server", f"ollama stream error: {message}",  # type: ignore[arg-type]
                         code=code, raw=error)


class OllamaDecoder(StreamDecoder):
    """Ollama's NDJSON stream ("Generate a chat completion", streaming): one JSON object a line,
    its ``message`` (``/api/generate``: its ``response`` and ``thinking``); the object with
    ``done: true`` carries the counts and the done reason, and ends the reply."""

    def __init__(self, provider: str, call_ids: Iterator[int]) -> None:
        super().__init__()
        self.provider, self.call_ids = provider, call_ids
        self.index = BlockIndex()
        self.calls = 0

    def feed(self, line: str) -> Sequence[DeltaMessage]:
        if not line.strip():
            return ()
        chunk = stream_json(self.provider, line)
        if not isinstance(chunk, dict):
            return ()
        try:
            return self._chunk(chunk)
        except (AttributeError, TypeError, KeyError) as exc:
            raise ProviderError("invalid_response", f"{self.provider} sent an object of a shape Ollama's stream "
                                f"does not have ({type(exc).__name__}): {redact_head(line)!r}") from None

    def _chunk(self, chunk: dict[str, Any]) -> Sequence[DeltaMessage]:
        """The deltas of one parsed line; raises `ProviderError` for the stream's error."""
        error = chunk.get("error")
        if error:
            raise _stream_error(error)
        done = chunk.get("done") is True  # a boolean on the wire: "false", a string, is not the end
        if done:  # the counts noted first: billed, they count even when the rest of the object is unreadable
            self.note(read_usage(usage_from_ollama, chunk, model=chunk.get("model") or None))
        message = chunk.get("message")
        deltas = self._message(message) if message else self._generated(chunk)
        if done:
            reason = chunk.get("done_reason")
            reason = reason_text(reason) if reason else None
            if self.calls and reason in (None, "stop"):
                kind = StopKind.tool_use  # Ollama says "stop" after tool calls too
            else:
                kind = DONE_REASONS.get(reason or "stop", StopKind.end_turn)
            self.note(StreamMeta(stop_raw=reason, stop_kind=kind))
            self.done = True
        return deltas

    def _message(self, message: dict[str, Any]) -> list[DeltaMessage]:
        index, deltas = self.index, []
        thinking = message.get("thinking")
        if thinking:
            deltas.append(ReasoningDelta(index("reasoning"), thinking))
        text = message.get("content")
        if text:
            deltas.append(TextDelta(index["text"], text))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if arguments is None:
                arguments = {}
            deltas.append(
                ToolCallDelta(
                    index(("tool", self.calls)),
                    call.get("id") or f"call_{next(self.call_ids)}",
                    function.get("name") or None,
                    arguments if isinstance(arguments, str) else json.dumps(arguments),
                )
            )
            self.calls += 1
        return deltas

    def _generated(self, chunk: dict[str, Any]) -> list[DeltaMessage]:
        """The ``/api/generate`` shape."""
        deltas: list[DeltaMessage] = []
        thinking = chunk.get("thinking")
        if thinking:
            deltas.append(ReasoningDelta(self.index("reasoning"), thinking))
        text = chunk.get("response")
        if text:
            deltas.append(TextDelta(self.index("text"), text))
        return deltas

    def finish(self) -> Sequence[DeltaMessage]:
        """Nothing is left; raises `ProviderError` ``invalid_response`` when the body ended before
        the ``done`` object."""
        if not self.done:
            raise ProviderError(
                "invalid_response",
                f"{self.provider} stream ended before its final object (done: true)",
                retryable=False,
            )
        return ()


class OllamaPromptDriver(BasePromptDriver):
    """Prompt driver for `POST {base_url}/api/chat` with `stream: true`.

    Args: see `BasePromptDriver`. No API key is needed for a local server; when
    one is given (ollama.com) it is sent as ``Authorization: Bearer``.
    `provider_options`: ``options`` (the model options object: ``temperature``,
    ``num_ctx``, ``num_predict``, ...), ``keep_alive``, ``think``, ``format``.

    `ModelSettings` (Ollama API, "Generate a chat completion" and "Thinking"):
    ``options.temperature`` / ``top_p`` / ``num_predict`` / ``stop`` / ``seed``;
    ``reasoning`` as ``think``: an effort as ``"low" | "medium" | "high"``, a
    budget of 0 as ``false`` (Ollama takes no budget in tokens). Ollama has no
    tool choice and no switch for parallel calls: only ``tool_choice="auto"``
    passes. The prompt prefix is cached automatically (``cache=False`` fails).
    """

    protocol = "ollama"
    default_base_url = "http://localhost:11434"
    # NDJSON, or one JSON object on one line (a non-streamed reply): read alike.
    stream_types = ("application/x-ndjson", "application/json")
    framing = "lines"
    capabilities = Capabilities(vision=True, structured_output_native=True, reasoning=True)
    known_options = frozenset({"options", "keep_alive", "think", "format"})

    #: Ollama's default ``num_ctx`` (Ollama FAQ, "How can I specify the context window size?").
    DEFAULT_NUM_CTX = 4_096

    def __init__(self, model: str, **kw: Any) -> None:
        super().__init__(model, **kw)
        # Ollama before 0.12.10 sends tool calls without ids: number ours per driver,
        # so two turns of one conversation never share an id.
        self._call_ids = itertools.count()

    models_path = "/api/tags"

    @property
    def context_window(self) -> int:
        """Ollama cuts a prompt to the model option ``num_ctx`` (``provider_options["options"]``),
        `DEFAULT_NUM_CTX` unless set, whatever the model itself could take."""
        options = self.provider_options.get("options")
        num_ctx = options.get("num_ctx") if isinstance(options, dict) else None
        return num_ctx if isinstance(num_ctx, int) and num_ctx > 0 else self.DEFAULT_NUM_CTX

    def parse_models(self, data: dict[str, Any]) -> tuple[list[Any], dict[str, Any] | None]:
        """The local models (Ollama API, "List Local Models": ``GET /api/tags``)."""
        return parse_ollama(data)

    def headers(self) -> dict[str, str]:
        return self.bearer_headers("application/x-ndjson")

    def settings_fields(self, prompt_stack: PromptStack) -> tuple[dict[str, Any], dict[str, Any]]:
        """(model ``options`` fields, top-level fields) for `prompt_stack.settings`.

        Raises:
            ProviderError: ``unsupported_capability`` for a setting Ollama cannot take.
        """
        settings = prompt_stack.settings
        if settings.tool_choice not in (None, "auto"):
            raise self.unsupported("tool_choice", "Ollama has no tool choice (only auto)")
        if settings.parallel_tool_calls is False:
            raise self.unsupported("parallel_tool_calls", "Ollama has no switch for parallel tool calls")
        if settings.cache is False:
            raise self.unsupported("cache", "Ollama reuses the cached prompt prefix automatically")
        if settings.budget:
            raise self.unsupported(
                "reasoning", "Ollama's think takes an effort (low, medium, high) or off, not a budget in tokens"
            )
        model_options = {
            wire: getattr(settings, name)
            for name, wire in (
                ("temperature", "temperature"),
                ("top_p", "top_p"),
                ("max_output_tokens", "num_predict"),
                ("seed", "seed"),
            )
            if getattr(settings, name) is not None
        }
        if settings.stop is not None:
            model_options["stop"] = list(settings.stop)
        top: dict[str, Any] = {}
        if settings.reasoning is not None:
            top["think"] = settings.effort or False
        return model_options, top

    # -- request ------------------------------------------------------------------------

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        options = dict(self.provider_options)
        if "options" in options and not isinstance(options["options"], dict):
            raise ProviderError(
                "invalid_request",
                "ollama provider option 'options' must be an object (temperature, num_ctx, ...)",
                retryable=False,
            )
        body: dict[str, Any] = {
            "model": self.model,
            "messages": system_message(prompt_stack)
            + [m for message in prompt_stack.messages for m in self._messages(message)],
            "stream": True,
        }
        schema = prompt_stack.to_output_json_schema()
        strategy = self.output_strategy(prompt_stack)
        # Ollama has no tool_choice: with the tool strategy the output tool is offered, not forced.
        tools = list(prompt_stack.tools)
        tools += [output_tool(schema)] if strategy == "tool" else []  # type: ignore[arg-type]
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        model_options, top = self.settings_fields(prompt_stack)
        if model_options:
            merged = dict(options.get("options") or {})
            self.put_settings(merged, model_options, merged)
            options["options"] = merged
        self.put_settings(body, top, options)
        if strategy == "native":
            if "format" in options and options["format"] != schema:
                raise ProviderError(
                    "invalid_request",
                    "ollama: both an output schema and provider option 'format' were given; use one",
                    retryable=False,
                )
            body["format"] = schema
        body.update(options)
        return "/api/chat", body

    def _results(self, message: Message) -> list[dict[str, Any]]:
        """The ``tool`` messages of `message`'s results, then one user message with the images the
        tools returned (its text naming each call), which a ``tool`` message does not carry."""
        results: list[dict[str, Any]] = []
        captions: list[str] = []
        images: list[str] = []
        for b in message.content:
            if not isinstance(b, ActionResultBlock):
                continue
            sent, notes = tool_media(self, b)
            text = result_text(b, notes, len(sent))
            results.append({"role": "tool", "content": f"Error: {text}" if b.is_error else text,
                            "tool_name": b.action.native_name, "tool_call_id": b.action.tag})
            if sent:
                captions.append(f"{caption(b)} {len(sent)} image{'s' if len(sent) > 1 else ''}")
                images += [self._image(m) for m in sent]  # type: ignore[arg-type]
        return results + ([{"role": "user", "content": "\n".join(captions), "images": images}] if images else [])

    def _messages(self, message: Message) -> list[dict[str, Any]]:
        results = self._results(message)
        if message.role == "tool":
            return results
        text: list[str] = []
        thinking: list[str] = []
        images: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                text.append(block.text)
            elif isinstance(block, DocumentBlock):  # text documents as text (a PDF is refused before sending)
                text.append(("\n\n" if text else "") + block.as_text())
            elif isinstance(block, ReasoningBlock):
                if block.text:
                    thinking.append(block.text)
            elif isinstance(block, ImageBlock):
                images.append(self._image(block))
            elif isinstance(block, ActionCallBlock):
                calls.append(
                    {
                        "id": block.action.tag,
                        "function": {"name": block.action.native_name, "arguments": block.action.input},
                    }
                )
            elif isinstance(block, AudioBlock):
                raise ProviderError(
                    "unsupported_capability",
                    f"{self.provider} does not take audio input; remove the audio from the request",
                    code="audio",
                    retryable=False,
                )
        if results and not (text or thinking or images or calls):
            return results
        out: dict[str, Any] = {"role": message.role, "content": "".join(text)}
        if thinking:
            out["thinking"] = "".join(thinking)
        if images:
            out["images"] = images
        if calls:
            out["tool_calls"] = calls
        return results + [out]

    def _image(self, block: ImageBlock) -> str:
        """The base64 text of an image; Ollama takes no image URLs."""
        if block.data:
            return block.data
        match = _DATA_URL_RE.match(block.url or "")
        if match:
            return match.group(1)
        raise ProviderError(
            "unsupported_capability",
            f"{self.provider} takes images only as base64 data, not as a URL ({(block.url or '')[:80]}); "
            "download the image and send its bytes",
            code="image_url",
            retryable=False,
        )

    # -- response -----------------------------------------------------------------------

    def decoder(self) -> OllamaDecoder:
        return OllamaDecoder(self.provider, self._call_ids)

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                error = error.get("message") or json.dumps(error)
            if isinstance(error, str) and error:
                code, etype = classify_error(error)
                return code, error, etype
        if isinstance(data, str) and data:
            code, etype = classify_error(data)
            return code, data, etype
        return super().parse_error_body(status, data)
