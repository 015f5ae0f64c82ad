"""`PromptStack`: the provider-neutral request (DESIGN.md, "core")."""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .artifacts import (
    ActionArtifact,
    AudioArtifact,
    BaseArtifact,
    GenericArtifact,
    ImageArtifact,
    ListArtifact,
    TextArtifact,
    split_media,
)
from .content import (
    BUILTIN_TOOLS,
    ActionCallBlock,
    ActionResultBlock,
    AudioBlock,
    ContentBlock,
    GenericBlock,
    ImageBlock,
    TextBlock,
    _Block,
)
from .messages import Message, Role
from .settings import ModelSettings
from .system import SystemBlock


class BuiltinTool(BaseModel):
    """A provider-side tool the model may use (`core.BUILTIN_TOOLS`: ``web_search``, ``web_fetch``,
    ``code_execution``, ``file_search``, ``url_context``), with its options, each driver mapping
    them to its provider's tool or refusing one it has no counterpart for: ``allowed_domains``,
    ``blocked_domains``, ``max_uses``, ``user_location``, ``container`` (a code container's id),
    ``file_ids``, ``vector_store_ids``, ``max_results``, ``search_context_size``.

    ``BuiltinTool("web_search", allowed_domains=["python.org"])``.

    Raises:
        ValueError: a name that is not one of `BUILTIN_TOOLS`.
    """

    model_config = ConfigDict(defer_build=True, frozen=True)

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, name: str, /, **options: Any) -> None:
        given = options.pop("options", None) or {}
        if name not in BUILTIN_TOOLS:
            raise ValueError(f"unknown built-in tool {name!r}; the built-in tools are {', '.join(BUILTIN_TOOLS)}")
        super().__init__(name=name, options={**given, **options})

    @classmethod
    def of(cls, value: Any) -> "BuiltinTool":
        """`value` as a `BuiltinTool`: one already, a name, or ``{"name": ..., **options}``.

        Raises:
            ValueError: an unknown name; TypeError: anything else.
        """
        if isinstance(value, BuiltinTool):
            return value
        if isinstance(value, str):
            return cls(value.strip())
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            options = {k: v for k, v in value.items() if k != "name"}
            return cls(value["name"], **options)
        raise TypeError(f"a built-in tool is a name ({', '.join(BUILTIN_TOOLS)}) or a BuiltinTool, not {value!r}")


class ToolDefinition(BaseModel):
    """One function the model may call: native name, description, JSON Schema of its input."""
    model_config = ConfigDict(defer_build=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


def to_blocks(value: Any) -> list[ContentBlock]:
    """Reduce any artifact (or str, block, list of those) to content blocks.

    A string or text artifact becomes text; image/audio/generic map to their
    blocks; an action without output is a call, with output a result (its images and audio
    as the result's `media`); a list flattens recursively; anything else falls back to its text.
    """
    if isinstance(value, str):
        return [TextBlock(text=value)]
    if isinstance(value, _Block):
        return [value]  # type: ignore[list-item]
    if isinstance(value, (list, tuple)):
        return [b for v in value for b in to_blocks(v)]
    if isinstance(value, ListArtifact):
        return to_blocks(value.value)
    if isinstance(value, TextArtifact):
        return [TextBlock(text=value.value)]
    if isinstance(value, ImageArtifact):
        return [ImageBlock(mime_type=value.mime_type, data=base64.b64encode(value.value).decode())]
    if isinstance(value, AudioArtifact):
        return [AudioBlock(mime_type=value.mime_type, data=base64.b64encode(value.value).decode())]
    if isinstance(value, GenericArtifact):
        return [GenericBlock(value=value.value)]
    if isinstance(value, ActionArtifact):
        action = value.value
        if action.output is None:
            return [ActionCallBlock(action=action)]
        out = action.output
        text, media = split_media(out)
        return [ActionResultBlock(action=action, text=text, is_error=getattr(out, "type", None) == "error",
                                  media=[b for m in media for b in to_blocks(m)])]
    if isinstance(value, BaseArtifact):
        return [TextBlock(text=value.to_text())]
    return [TextBlock(text=str(value))]


#: How a driver asks for structured output (DESIGN.md, "drivers"): the provider's own
#: JSON-schema mode, a synthetic tool the model must call, or the schema as a system instruction.
OutputStrategy = Literal["native", "tool", "rule"]


class PromptStack(BaseModel):
    """Messages + tools + an optional output schema: everything a prompt driver sends.

    `output_schema` is a pydantic model class or a JSON Schema dict.
    `output_strategy` says how the driver asks for it; None lets the driver
    choose (`BasePromptDriver.default_output_strategy`). It lives here, not on
    the agent, because it changes the request a driver builds.
    `settings` are the provider-neutral generation settings each driver
    translates to its wire names (`ModelSettings`).
    """

    model_config = ConfigDict(defer_build=True, arbitrary_types_allowed=True)

    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolDefinition] = Field(default_factory=list)
    #: Provider-side tools the model may use (web search, code execution, ...): the provider runs them.
    builtin_tools: list[BuiltinTool] = Field(default_factory=list)
    output_schema: Any = None
    output_strategy: OutputStrategy | None = None
    settings: ModelSettings = Field(default_factory=ModelSettings)
    #: The system prompt as blocks (already fitted to the budget); sent before any system message.
    system_blocks: list[SystemBlock] = Field(default_factory=list)
    #: Dynamic blocks left out to fit the budget (reported, never sent).
    system_dropped: list[SystemBlock] = Field(default_factory=list)

    def add_message(self, role: Role, value: Any) -> Message:
        message = value if isinstance(value, Message) else Message(role=role, content=to_blocks(value))
        self.messages.append(message)
        return message

    def add_system_message(self, value: Any) -> Message:
        return self.add_message("system", value)

    def add_user_message(self, value: Any) -> Message:
        return self.add_message("user", value)

    def add_assistant_message(self, value: Any) -> Message:
        return self.add_message("assistant", value)

    def system_texts(self) -> list[str]:
        """The system prompt's parts in order: each block's text, then each system message's text."""
        texts = [b.text for b in self.system_blocks if b.text]
        texts += [m.text for m in self.messages if m.role == "system" and m.text]
        return texts

    def to_output_json_schema(self) -> dict[str, Any] | None:
        """The output schema as plain JSON Schema, or None when there is none.

        Raises:
            TypeError: `output_schema` is neither a pydantic model class nor a dict.
        """
        schema = self.output_schema
        if schema is None:
            return None
        if isinstance(schema, dict):
            return schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_json_schema()
        raise TypeError("output_schema must be a pydantic model class or a JSON Schema dict, "
                        f"not {type(schema).__name__}")
