"""Google Gemini `streamGenerateContent` over SSE.

Follows the Gemini API reference, "Generating content" (`POST
/v1beta/models/{model}:streamGenerateContent?alt=sse`, request `Content` /
`Part` / `Tool` / `GenerationConfig`, response `GenerateContentResponse`), the
"Function calling", "Thought signatures", "Thinking" and "Structured output"
guides, and the `google.rpc.Status` error model. The API key travels in the
``x-goog-api-key`` header, never in the URL.

Translation notes:

* Roles are ``user`` / ``model``; system messages are joined into
  ``systemInstruction``; tool results are ``functionResponse`` parts in a
  ``user`` content (all results of one step in one content).
* Gemini sends each ``functionCall`` whole (``{name, args}``) and gives no call
  id: a call gets ``call_<content index>_<responseId>`` (``call_<index>`` when
  the response has no id) unless its part has an ``id``; made-up ids are not
  sent back. The Vertex AI form with streamed arguments (``willContinue`` /
  ``partialArgs`` with a ``jsonPath``, closed by an empty ``functionCall``) is
  assembled here.
* A ``thoughtSignature`` must go back unchanged on the same part. On a
  function call it rides on the `ActionCallBlock`; on a thought part on its
  `ReasoningBlock`; on a plain text part (often an empty text part at the end
  of a Gemini 3 stream) it becomes a signature-only `ReasoningBlock` (empty
  text, sent whole as a `BlockDelta`) placed just before the text it came
  with, and is put back on that text part (or on an empty text part) next turn.
* Tool parameter schemas are rewritten to Gemini's OpenAPI-3.0 `Schema`
  subset (see `to_gemini_schema`); the output schema goes as
  ``responseJsonSchema``, which takes JSON Schema as it is.
* An error object inside the stream (a ``data:`` payload, or a bare JSON
  object written without ``data:`` as the API and its SDKs do) raises
  `ProviderError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2

from ..core import (
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    BlockDelta,
    DeltaMessage,
    GenericBlock,
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
)
from .base import BasePromptDriver, BlockIndex, Capabilities, StreamMeta
from .structured import OUTPUT_TOOL, output_tool

#: `Candidate.finishReason` -> StopKind. STOP with function calls is tool_use.
FINISH_REASONS: dict[str, StopKind] = {
    "STOP": StopKind.end_turn,
    "MAX_TOKENS": StopKind.max_tokens,
    "SAFETY": StopKind.content_filter,
    "RECITATION": StopKind.content_filter,
    "BLOCKLIST": StopKind.content_filter,
    "PROHIBITED_CONTENT": StopKind.content_filter,
    "SPII": StopKind.content_filter,
    "IMAGE_SAFETY": StopKind.content_filter,
    "IMAGE_PROHIBITED_CONTENT": StopKind.content_filter,
    "IMAGE_RECITATION": StopKind.content_filter,
    "MALFORMED_FUNCTION_CALL": StopKind.error,
    "UNEXPECTED_TOOL_CALL": StopKind.error,
    "TOO_MANY_TOOL_CALLS": StopKind.error,
    "MISSING_THOUGHT_SIGNATURE": StopKind.error,
}

#: `google.rpc.Status.status` -> ProviderError type.
STATUS_TYPES: dict[str, str] = {
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "UNKNOWN": "server",
    "DATA_LOSS": "server",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
}

#: `google.rpc.ErrorInfo.reason` values that decide the type whatever the HTTP status
#: (Gemini reports a bad key as HTTP 400 INVALID_ARGUMENT with reason API_KEY_INVALID).
REASON_TYPES: dict[str, str] = {
    "API_KEY_INVALID": "authentication",
    "API_KEY_EXPIRED": "authentication",
    "ACCESS_TOKEN_EXPIRED": "authentication",
    "CREDENTIALS_MISSING": "authentication",
    "API_KEY_SERVICE_BLOCKED": "permission",
    "SERVICE_DISABLED": "permission",
}

#: `provider_options` keys that go into `generationConfig`; the others are top-level fields.
_GENERATION_OPTIONS = frozenset(
    {
        "temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "candidateCount",
        "thinkingConfig", "responseMimeType", "seed", "presencePenalty", "frequencyPenalty",
    }
)

#: Keys of Gemini's `Schema` object kept by `to_gemini_schema`; every other key is dropped.
SCHEMA_KEYS = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "items", "properties", "required",
        "minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength",
        "pattern", "minimum", "maximum", "anyOf", "propertyOrdering", "example",
    }
)
#: `format` values Gemini's `Schema` accepts, by type.
_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"}, "number": {"float", "double"}}

#: Fields of Gemini's `Part`: a `GenericBlock` holding only these is sent back as a part.
PART_KEYS = frozenset(
    {
        "text", "thought", "thoughtSignature", "inlineData", "fileData", "functionCall", "functionResponse",
        "executableCode", "codeExecutionResult", "videoMetadata", "partMetadata",
    }
)

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")
_PATH_RE = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\[(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\")\]")


def usage_from_gemini(raw: dict[str, Any]) -> Usage:
    """Map `usageMetadata` (tokens) to `Usage`. Thought tokens are `reasoning`, not `output`."""
    return Usage(
        input=raw.get("promptTokenCount") or 0,
        output=raw.get("candidatesTokenCount") or 0,
        total=raw.get("totalTokenCount") or 0,
        cache_read=raw.get("cachedContentTokenCount") or 0,
        reasoning=raw.get("thoughtsTokenCount") or 0,
        raw=raw,
    )


def parse_duration(value: Any) -> float | None:
    """Seconds from a protobuf JSON `Duration` (``"48s"``, ``"1.5s"``), else None."""
    if not isinstance(value, str):
        return None
    match = _DURATION_RE.match(value)
    return float(match.group(1)) if match else None


def _details(error: dict[str, Any]) -> list[dict[str, Any]]:
    details = error.get("details")
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def _reason(error: dict[str, Any]) -> str | None:
    for detail in _details(error):
        if str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo") and detail.get("reason"):
            return str(detail["reason"])
    return None


def retry_delay(error: Any) -> float | None:
    """Seconds from the `google.rpc.RetryInfo.retryDelay` of an error body, else None."""
    if isinstance(error, list) and error:
        error = error[0]
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if not isinstance(error, dict):
        return None
    for detail in _details(error):
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            return parse_duration(detail.get("retryDelay"))
    return None


def _error_type(error: dict[str, Any]) -> str | None:
    reason = _reason(error)
    if reason in REASON_TYPES:
        return REASON_TYPES[reason]
    return STATUS_TYPES.get(str(error.get("status") or ""))


# -- tool schemas ----------------------------------------------------------------------


def to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a JSON Schema into the OpenAPI-3.0 subset Gemini's `Schema` accepts.

    * ``$ref`` is inlined from ``$defs`` / ``definitions`` (a recursive reference
      becomes a plain ``{"type": "object"}``), then ``$defs`` / ``definitions`` go;
    * ``type: [T, "null"]`` and an ``anyOf`` member ``{"type": "null"}`` become
      ``nullable: true``; ``oneOf`` becomes ``anyOf``; a one-member ``anyOf`` or
      ``allOf`` is merged into its parent; ``const`` becomes a one-value ``enum``
      (an ``enum`` without a type is a ``string``);
    * dropped: every key outside `SCHEMA_KEYS`, notably ``additionalProperties``,
      ``$schema``, ``$id``, ``title``, ``default``, ``examples``, ``const``,
      ``exclusiveMinimum`` / ``exclusiveMaximum``, ``multipleOf``, ``uniqueItems``,
      ``patternProperties``, ``not``, ``if`` / ``then`` / ``else``; a ``format``
      Gemini does not know for its type (only ``enum`` / ``date-time``, ``int32`` /
      ``int64``, ``float`` / ``double``); a non-string ``enum``; an empty
      ``properties`` (Gemini rejects an OBJECT with empty properties);
      ``required`` names that are not properties.
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update({f"#/{key}/{name}": value for name, value in schema[key].items()})
    return _clean(schema, defs, ())


def _clean(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen or ref not in defs:
            out: dict[str, Any] = {"type": "object"}
            if isinstance(node.get("description"), str):
                out["description"] = node["description"]
            return out
        # siblings of $ref (a description) win over the referenced schema's own
        merged = {**defs[ref], **{k: v for k, v in node.items() if k != "$ref"}}
        return _clean(merged, defs, seen + (ref,))
    node = dict(node)
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list):
        for member in all_of:
            member = _clean(member, defs, seen)
            if isinstance(member, dict):
                node = {**member, **node}
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]
    out = {}
    nullable = bool(node.get("nullable"))
    types = node.get("type")
    if isinstance(types, list):
        kinds = [t for t in types if t != "null"]
        nullable = nullable or len(kinds) < len(types)
        if len(kinds) == 1:
            out["type"] = kinds[0]
        elif kinds:
            out["anyOf"] = [{"type": t} for t in kinds]
    elif isinstance(types, str) and types != "null":
        out["type"] = types
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        members = []
        for member in any_of:
            if isinstance(member, dict) and member.get("type") == "null" and len(member) == 1:
                nullable = True
                continue
            members.append(_clean(member, defs, seen))
        if len(members) == 1 and isinstance(members[0], dict):
            for key, value in members[0].items():
                out.setdefault(key, value)
        elif members:
            out["anyOf"] = members
    for key, value in node.items():
        if key in ("type", "anyOf", "nullable") or key not in SCHEMA_KEYS:
            continue
        if key == "properties":
            if isinstance(value, dict) and value:
                out["properties"] = {name: _clean(sub, defs, seen) for name, sub in value.items()}
        elif key == "items":
            out["items"] = _clean(value, defs, seen)
        elif key == "enum":
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                out["enum"] = value
        elif key == "format":
            if value in _FORMATS.get(str(out.get("type")), ()):
                out["format"] = value
        else:
            out[key] = value
    if "required" in out:
        props = out.get("properties") or {}
        required = [name for name in out["required"] if name in props] if isinstance(out["required"], list) else []
        if required:
            out["required"] = required
        else:
            del out["required"]
    if "enum" in out and "type" not in out:
        out["type"] = "string"  # Gemini's enum is a STRING format
    if nullable:
        out["nullable"] = True
    return out


# -- response parsing ------------------------------------------------------------------


class _OpenCall:
    """A function call whose arguments are still streaming (Vertex `partialArgs`)."""

    __slots__ = ("index", "args", "continuing")

    def __init__(self, index: int, args: dict[str, Any]) -> None:
        self.index = index
        self.args = args
        self.continuing: set[str] = set()  # jsonPaths whose string value goes on


def _set_path(root: dict[str, Any], path: str, value: Any, append: bool) -> None:
    """Set (or append to, for a continuing string) the value at a JSONPath like ``$.a[0].b``."""
    keys: list[str | int] = []
    for name, number, single, double in _PATH_RE.findall(path[1:] if path.startswith("$") else path):
        keys.append(int(number) if number else (name or single or double))
    if not keys:
        return
    node: Any = root
    for key, nxt in zip(keys, keys[1:]):
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(key, int):
            if not isinstance(node, list):
                return
            node.extend([None] * (key + 1 - len(node)))
            if not isinstance(node[key], (dict, list)):
                node[key] = empty
            node = node[key]
        else:
            if not isinstance(node, dict):
                return
            if not isinstance(node.get(key), (dict, list)):
                node[key] = empty
            node = node[key]
    last = keys[-1]
    if isinstance(last, int):
        if not isinstance(node, list):
            return
        node.extend([None] * (last + 1 - len(node)))
        old = node[last]
        node[last] = old + value if append and isinstance(old, str) and isinstance(value, str) else value
    elif isinstance(node, dict):
        old = node.get(last)
        node[last] = old + value if append and isinstance(old, str) and isinstance(value, str) else value


class GeminiResponseParser:
    """Turns `GenerateContentResponse` objects (stream chunks, or one whole
    non-streaming body) into deltas; `finish()` gives the closing `StreamMeta`.

    Only candidate 0 makes the reply. Consecutive text parts form one text
    block, consecutive thought parts one reasoning block; each function call is
    its own block.
    """

    __slots__ = ("index", "_kind", "_seq", "_calls", "_open", "_reasoning_signed", "usage", "finish_reason", "block_reason", "response_id", "model")

    def __init__(self) -> None:
        self.index = BlockIndex()
        self._kind: str | None = None  # kind of the block now open: "text", "thought" or None
        self._seq = 0
        self._calls = 0
        self._open: _OpenCall | None = None
        self._reasoning_signed = False
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.block_reason: str | None = None
        self.response_id: str | None = None
        self.model: str | None = None

    def feed(self, chunk: Any) -> Iterator[DeltaMessage]:
        """Deltas for one response object. Raises `ProviderError` for an ``error`` object."""
        if isinstance(chunk, list):  # a JSON-array framed body
            for item in chunk:
                yield from self.feed(item)
            return
        if not isinstance(chunk, dict):
            return
        error = chunk.get("error")
        if error:
            raise stream_error(error)
        usage = chunk.get("usageMetadata")
        if usage:
            self.usage = usage
        self.response_id = chunk.get("responseId") or self.response_id
        self.model = chunk.get("modelVersion") or self.model
        candidates = chunk.get("candidates")
        if not candidates:
            feedback = chunk.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                self.block_reason = feedback["blockReason"]
            return
        for candidate in candidates:
            if candidate.get("index", 0) != 0:
                continue  # candidateCount > 1: the other candidates are not this reply
            content = candidate.get("content")
            if content:
                for part in content.get("parts") or ():
                    yield from self._part(part)
            finish = candidate.get("finishReason")
            if finish:
                self.finish_reason = finish

    def _new(self, kind: str | None) -> int:
        self._seq += 1
        self._kind = kind
        return self.index(("block", self._seq))

    def _part(self, part: dict[str, Any]) -> Iterator[DeltaMessage]:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        if call is not None:
            yield from self._function_call(call, signature)
            return
        text = part.get("text")
        if text is not None:
            if part.get("thought"):
                if self._kind != "thought" or (signature and self._reasoning_signed):
                    self._new("thought")
                    self._reasoning_signed = False
                self._reasoning_signed = self._reasoning_signed or bool(signature)
                if text or signature:
                    yield ReasoningDelta(self.index(("block", self._seq)), text, signature)
                return
            if signature:
                # A signature on a text part: a whole signature-only reasoning block (nothing to
                # show while streaming), then the text in a new block.
                yield BlockDelta(self._new(None), ReasoningBlock(text="", signature=signature))
            if text:
                if self._kind != "text":
                    self._new("text")
                yield TextDelta(self.index(("block", self._seq)), text)
            return
        inline = part.get("inlineData")
        if isinstance(inline, dict) and inline.get("data"):
            mime = inline.get("mimeType") or "application/octet-stream"
            block: Any = (
                ImageBlock(mime_type=mime, data=inline["data"]) if mime.startswith("image/")
                else AudioBlock(mime_type=mime, data=inline["data"]) if mime.startswith("audio/")
                else GenericBlock(value=part)
            )
            yield BlockDelta(self._new(None), block)
            return
        if part:
            # executableCode, codeExecutionResult, fileData...: kept whole, sent back as they came.
            yield BlockDelta(self._new(None), GenericBlock(value=part))

    def _function_call(self, call: dict[str, Any], signature: str | None) -> Iterator[DeltaMessage]:
        name = call.get("name")
        open_call = self._open
        if open_call is not None and not name:
            self._apply_partial(open_call, call)
            if signature:
                yield ToolCallDelta(open_call.index, None, None, "", signature)
            if not call.get("willContinue"):
                yield self._close()
            return
        if open_call is not None:
            yield self._close()
        if not name:
            return  # a stray closing part without an open call
        index = self._new("call")
        self._calls += 1
        call_id = call.get("id") or _call_id(index, self.response_id)
        args = call.get("args") if isinstance(call.get("args"), dict) else {}
        if call.get("willContinue"):
            self._open = _OpenCall(index, dict(args))
            self._apply_partial(self._open, call)
            yield ToolCallDelta(index, call_id, name, "", signature)
        else:
            yield ToolCallDelta(index, call_id, name, json.dumps(args, ensure_ascii=False), signature)

    @staticmethod
    def _apply_partial(open_call: _OpenCall, call: dict[str, Any]) -> None:
        if isinstance(call.get("args"), dict):
            open_call.args.update(call["args"])
        for partial in call.get("partialArgs") or ():
            path = partial.get("jsonPath") or ""
            if "stringValue" in partial:
                value: Any = partial["stringValue"]
            elif "numberValue" in partial:
                value = partial["numberValue"]
            elif "boolValue" in partial:
                value = partial["boolValue"]
            elif "nullValue" in partial:
                value = None
            else:
                continue
            _set_path(open_call.args, path, value, append=path in open_call.continuing)
            if partial.get("willContinue"):
                open_call.continuing.add(path)
            else:
                open_call.continuing.discard(path)

    def _close(self) -> ToolCallDelta:
        open_call, self._open = self._open, None
        assert open_call is not None
        return ToolCallDelta(open_call.index, None, None, json.dumps(open_call.args, ensure_ascii=False))

    def finish(self) -> list[DeltaMessage | StreamMeta]:
        """What the end of the response tells: a still-open call closed, usage, stop reason, ids."""
        items: list[DeltaMessage | StreamMeta] = []
        if self._open is not None:
            items.append(self._close())
        meta = StreamMeta(request_id=self.response_id, model=self.model)
        if self.usage:
            meta.usage = usage_from_gemini(self.usage)
        if self.finish_reason:
            meta.stop_raw = self.finish_reason
            kind = FINISH_REASONS.get(self.finish_reason, StopKind.end_turn)
            if kind is StopKind.end_turn and self._calls:
                kind = StopKind.tool_use
            meta.stop_kind = kind
        elif self.block_reason:
            meta.stop_raw, meta.stop_kind = self.block_reason, StopKind.content_filter
        items.append(meta)
        return items


def stream_error(error: Any, redact: Any = None) -> ProviderError:
    """A `ProviderError` for an ``error`` object (`google.rpc.Status`) found in a stream."""
    if not isinstance(error, dict):
        return ProviderError("server", f"gemini stream error: {error}", raw=error)
    message = str(error.get("message") or error.get("status") or error)
    if redact is not None:
        message = redact(message)
    code = error.get("code")
    status = code if isinstance(code, int) else None
    etype = _error_type(error) or ("server" if status is None or status >= 500 else "invalid_request")
    return ProviderError(
        etype,  # type: ignore[arg-type]
        f"gemini stream error: {message}",
        code=_reason(error) or error.get("status") or code,
        raw=error,
        status=status,
        retry_after=retry_delay(error),
    )


class _Lines:
    """Splits streamed text into lines on CR, LF or CRLF only (not on U+2028 and the
    like, which may sit inside a JSON string)."""

    __slots__ = ("_rest", "_cr")

    def __init__(self) -> None:
        self._rest = ""
        self._cr = False

    def feed(self, text: str) -> list[str]:
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._rest += text
            return []
        lines = text.split("\n")
        lines[0] = self._rest + lines[0]
        self._rest = lines.pop()
        return lines

    def flush(self) -> list[str]:
        rest, self._rest = self._rest, ""
        if self._cr:
            self._cr = False
            return [rest, ""]
        return [rest] if rest else []


# -- the driver ------------------------------------------------------------------------


class GeminiPromptDriver(BasePromptDriver):
    """Prompt driver for `POST {base_url}/models/{model}:streamGenerateContent?alt=sse`.

    Args: see `BasePromptDriver`. `provider_options`: the `generationConfig`
    fields (``temperature``, ``topP``, ``topK``, ``maxOutputTokens``,
    ``stopSequences``, ``candidateCount``, ``thinkingConfig``,
    ``responseMimeType``, ``seed``, ``presencePenalty``, ``frequencyPenalty``)
    and the top-level ``safetySettings`` and ``toolConfig``, in the API's own
    camelCase form.
    """

    protocol = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    capabilities = Capabilities(vision=True, structured_output_native=True, reasoning=True)
    known_options = _GENERATION_OPTIONS | {"safetySettings", "toolConfig"}

    def capabilities_for(self, model: str) -> Capabilities:
        """Gemma models served by the Gemini API take no tools, JSON mode or thinking
        (``gemma-3-1b`` no images either); TTS and image-generation models take no tools."""
        name = model.rsplit("/", 1)[-1].lower()
        if name.startswith("gemma"):
            return Capabilities(
                tools=False, parallel_tools=False, vision="-1b" not in name, structured_output_native=False, reasoning=False
            )
        if "-tts" in name or "image-generation" in name or "-image" in name:
            return Capabilities(tools=False, parallel_tools=False, vision=True, structured_output_native=False, reasoning=False)
        return self.capabilities

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

    # -- request ------------------------------------------------------------------------

    def _model_path(self) -> str:
        model = self.model.strip("/")
        # "models/x", "tunedModels/x" are resource names already; a bare id is a model.
        return f"/{model}" if "/" in model else f"/models/{model}"

    def build_request(self, prompt_stack: PromptStack) -> tuple[str, dict[str, Any]]:
        system: list[str] = []
        contents: list[dict[str, Any]] = []
        for message in prompt_stack.messages:
            if message.role == "system":
                system.extend(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
                continue
            results = [self._result_part(b) for b in message.content if isinstance(b, ActionResultBlock)]
            if results:
                _append(contents, "user", results)
            role = "model" if message.role == "assistant" else "user"
            parts = self._parts(message, role)
            if parts:
                _append(contents, role, parts)
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        strategy = self.output_strategy(prompt_stack)
        schema = prompt_stack.to_output_json_schema()
        tools = list(prompt_stack.tools) + ([output_tool(schema)] if strategy == "tool" else [])  # type: ignore[arg-type]
        if tools:
            declarations = []
            for tool in tools:
                declaration: dict[str, Any] = {"name": tool.name}
                if tool.description:
                    declaration["description"] = tool.description
                parameters = to_gemini_schema(tool.parameters) if tool.parameters else {}
                if parameters.get("properties") or parameters.get("type") not in (None, "object"):
                    declaration["parameters"] = parameters  # an argument-less function sends none
                declarations.append(declaration)
            body["tools"] = [{"functionDeclarations": declarations}]
        generation = {k: v for k, v in self.provider_options.items() if k in _GENERATION_OPTIONS}
        if strategy == "native":
            if not self.capabilities_for(self.model).structured_output_native:
                raise ProviderError(
                    "unsupported_capability",
                    f"{self.provider} model {self.model} does not support structured output (JSON schema); "
                    "remove the output schema or choose a model that has it",
                    code="structured_output",
                    retryable=False,
                )
            generation["responseMimeType"] = "application/json"
            generation["responseJsonSchema"] = schema
        if generation:
            body["generationConfig"] = generation
        for key in ("safetySettings", "toolConfig"):
            if key in self.provider_options:
                body[key] = self.provider_options[key]
        if strategy == "tool":
            if "toolConfig" in self.provider_options:
                raise ProviderError("invalid_request", "provider option toolConfig contradicts the tool output strategy, "
                                    "which forces a call to its output tool; drop one of them", retryable=False)
            # Mode ANY: some function must be called; with only the output tool, that one.
            config: dict[str, Any] = {"mode": "ANY"}
            if not prompt_stack.tools:
                config["allowedFunctionNames"] = [OUTPUT_TOOL]
            body["toolConfig"] = {"functionCallingConfig": config}
        return f"{self._model_path()}:streamGenerateContent?alt=sse", body

    @staticmethod
    def _result_part(block: ActionResultBlock) -> dict[str, Any]:
        response = {"error": block.text} if block.is_error else {"result": block.text}
        part: dict[str, Any] = {"name": block.action.native_name, "response": response}
        if _sent_id(block.action.tag):
            part["id"] = block.action.tag
        return {"functionResponse": part}

    def _parts(self, message: Message, role: str) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        blocks = message.content
        skip_next = False
        for n, block in enumerate(blocks):
            if skip_next:
                skip_next = False
                continue
            if isinstance(block, TextBlock):
                if block.text:
                    parts.append({"text": block.text})
            elif isinstance(block, ImageBlock):
                if block.data:
                    parts.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
                elif block.url:
                    parts.append({"fileData": {"fileUri": block.url, "mimeType": block.mime_type}})
            elif isinstance(block, AudioBlock):
                parts.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
            elif isinstance(block, ActionCallBlock):
                call: dict[str, Any] = {"name": block.action.native_name, "args": block.action.input}
                if _sent_id(block.action.tag):
                    call["id"] = block.action.tag
                part: dict[str, Any] = {"functionCall": call}
                if block.signature:
                    part["thoughtSignature"] = block.signature
                parts.append(part)
            elif isinstance(block, ReasoningBlock):
                if role != "model" or block.redacted:
                    continue
                if block.text:
                    part = {"text": block.text, "thought": True}
                    if block.signature:
                        part["thoughtSignature"] = block.signature
                    parts.append(part)
                elif block.signature:
                    # A signature that came on a text part goes back on that same part.
                    following = blocks[n + 1] if n + 1 < len(blocks) else None
                    if isinstance(following, TextBlock) and following.text:
                        parts.append({"text": following.text, "thoughtSignature": block.signature})
                        skip_next = True
                    else:
                        parts.append({"text": "", "thoughtSignature": block.signature})
            elif isinstance(block, GenericBlock):
                # Only a value shaped like a Gemini `Part` (one this driver received) can go back.
                if isinstance(block.value, dict) and block.value and set(block.value) <= PART_KEYS:
                    parts.append(block.value)
        return parts

    # -- response -----------------------------------------------------------------------

    async def parse_stream(self, response: httpx2.Response) -> AsyncIterator[DeltaMessage | StreamMeta]:
        parser = GeminiResponseParser()
        lines = _Lines()
        data: list[str] = []
        bare: list[str] = []
        async for text in response.aiter_text():
            for line in lines.feed(text):
                if line.startswith("data:"):
                    data.append(line[6:] if line.startswith("data: ") else line[5:])
                    continue
                chunk = self._line(line, data, bare)
                if chunk is not None:
                    for item in parser.feed(chunk):
                        yield item
        for line in lines.flush() + [""]:
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
                continue
            chunk = self._line(line, data, bare)
            if chunk is not None:
                for item in parser.feed(chunk):
                    yield item
        if bare:
            text = "\n".join(bare).strip()
            raise ProviderError(
                "invalid_response", f"{self.provider} sent a stream line that is not SSE or JSON: {self.redact(text[:200])!r}"
            )
        for item in parser.finish():
            yield item

    def _line(self, line: str, data: list[str], bare: list[str]) -> Any:
        """The JSON value a non-``data:`` line completes, or None: the event's data at a
        blank line, or a bare JSON object (an error written without ``data:``)."""
        if not line:
            if data:
                payload = "\n".join(data)
                data.clear()
                if payload != "[DONE]":
                    return self._json(payload)
            return None
        if bare or line.lstrip().startswith(("{", "[")):
            bare.append(line)
            if line.rstrip().endswith(("}", "]")):
                try:
                    value = json.loads("\n".join(bare))
                except ValueError:
                    return None
                bare.clear()
                if isinstance(value, dict) and "error" in value:
                    raise stream_error(value["error"], self.redact)
                return value
        # ":" comments, event:, id:, retry: carry nothing Gemini uses
        return None

    def _json(self, payload: str) -> Any:
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise ProviderError(
                "invalid_response", f"{self.provider} sent a stream event that is not JSON: {self.redact(payload[:200])!r}"
            ) from None
        if isinstance(chunk, dict) and chunk.get("error"):
            raise stream_error(chunk["error"], self.redact)
        return chunk

    def parse_error_body(self, status: int, data: Any) -> tuple[str | int | None, str | None, str | None]:
        if isinstance(data, list) and data and isinstance(data[0], dict):
            data = data[0]  # errors of a JSON-array framed stream come as a one-element list
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            error = data["error"]
            code = _reason(error) or error.get("status") or error.get("code")
            return code, error.get("message"), _error_type(error)
        return super().parse_error_body(status, data)

    def error_from_response(self, status: int, headers: httpx2.Headers, body: bytes) -> ProviderError:
        """As the base, plus `RetryInfo.retryDelay` from the body when no header gave a wait."""
        error = super().error_from_response(status, headers, body)
        if error.retry_after is None:
            error.retry_after = retry_delay(error.raw)
        return error


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    """Add parts to `contents`, merged into the last content when the role is the same."""
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": list(parts)})


_GENERATED_ID = re.compile(r"^call_\d+(?:_[A-Za-z0-9_-]+)?$")


def _call_id(index: int, response_id: str | None) -> str:
    """An id for a call Gemini sent without one: stable on replay, and unique across the
    turns of a conversation when the response has a `responseId`."""
    return f"call_{index}_{response_id}" if response_id else f"call_{index}"


def _sent_id(tag: str) -> bool:
    """Whether a call id goes on the wire: the ids `_call_id` made up do not."""
    return bool(tag) and not _GENERATED_ID.match(tag)


def parse_response(body: Any) -> tuple[list[DeltaMessage], StreamMeta]:
    """The deltas and closing `StreamMeta` of one whole (non-streaming)
    `GenerateContentResponse`, through the same parser the stream uses."""
    parser = GeminiResponseParser()
    items: list[Any] = list(parser.feed(body))
    *rest, meta = parser.finish()
    return items + rest, meta


__all__ = [
    "GeminiPromptDriver",
    "GeminiResponseParser",
    "parse_response",
    "to_gemini_schema",
    "usage_from_gemini",
    "retry_delay",
]
