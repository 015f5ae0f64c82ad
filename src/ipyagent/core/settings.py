"""`ModelSettings`: provider-neutral generation settings (DESIGN.md, "core").

One object serves every provider: each prompt driver translates the fields it
can take to its own wire names (OpenAI Chat ``max_completion_tokens``, Anthropic
``max_tokens``, Gemini ``generationConfig.maxOutputTokens``, Ollama
``options.num_predict``...). A field the model cannot take fails before anything
is sent, as a `ProviderError` of type ``unsupported_capability`` naming the
provider, the model and the setting (`unsupported_setting`); nothing is dropped.

Settings layer: a later one overrides the fields it sets (`merged`), so the
session default, the agent's settings and one run's settings combine.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import ProviderError

#: Reasoning effort levels (`ModelSettings.reasoning` may also be a thinking budget in tokens).
Effort = Literal["low", "medium", "high"]
#: Tool choices besides the name of one tool.
TOOL_CHOICES = ("auto", "required", "none")


#: How a footer names a setting whose field name is not its option's (``--max-tokens``).
SETTING_LABELS = {"max_output_tokens": "max tokens"}


class ModelSettings(BaseModel):
    """Generation settings for one request; None means "the provider's default".

    Attributes:
        temperature: sampling temperature, 0 to 2.
        top_p: nucleus sampling mass, 0 to 1.
        max_output_tokens: the most tokens the reply may have (tokens, >= 1).
        stop: sequences that end the reply (a string is one sequence).
        seed: a seed for reproducible sampling, where the provider has one.
        reasoning: ``"low"`` / ``"medium"`` / ``"high"`` effort, or a thinking
            budget in tokens (0: no thinking, where the model can turn it off).
        tool_choice: ``"auto"``, ``"required"`` (some tool must be called),
            ``"none"``, or the name of the one tool to call.
        parallel_tool_calls: whether the model may call several tools in one turn.
        cache: prompt caching: True asks for it (Anthropic ``cache_control`` on the
            stable prefix; automatic on OpenAI, Gemini and Ollama), False for none.

    Raises:
        pydantic.ValidationError: a value out of range or of the wrong kind.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1)
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    reasoning: Effort | int | None = None
    tool_choice: str | None = None
    parallel_tool_calls: bool | None = None
    cache: bool | None = None

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        if value is not None and not all(isinstance(v, str) and v for v in value):
            raise ValueError("stop sequences must be non-empty strings")
        return tuple(value) if value is not None else None

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("reasoning is an effort (low, medium, high) or a thinking budget in tokens, not a bool")
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and value < 0:
            raise ValueError("a thinking budget is 0 or more tokens")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("tool_choice is auto, required, none or a tool's name")
        return value

    @property
    def effort(self) -> str | None:
        """The reasoning effort when `reasoning` is one, else None."""
        return self.reasoning if isinstance(self.reasoning, str) else None

    @property
    def budget(self) -> int | None:
        """The thinking budget (tokens) when `reasoning` is one, else None."""
        return self.reasoning if isinstance(self.reasoning, int) else None

    @property
    def tool_name(self) -> str | None:
        """The one tool `tool_choice` names, or None for auto / required / none."""
        return self.tool_choice if self.tool_choice not in (None, *TOOL_CHOICES) else None

    def merged(self, *others: "ModelSettings | dict[str, Any] | None") -> "ModelSettings":
        """These settings with the fields each of `others` sets on top (later wins); these very
        settings (they are frozen) when the others set nothing, as on most runs."""
        added = [other.as_dict() if isinstance(other, ModelSettings) else ModelSettings(**other).as_dict()
                 for other in others if other is not None]
        if not any(added):
            return self
        data = self.as_dict()
        for fields in added:
            data.update(fields)
        return ModelSettings(**data)

    def as_dict(self) -> dict[str, Any]:
        """The fields that are set, ``{name: value}`` (``stop`` as a list), in field order: what
        ``model_dump(exclude_none=True)`` gives for these scalar fields, without building the
        serializer (no settings: a first ``%provider`` builds no pydantic model)."""
        data = {name: value for name in _SETTING_NAMES if (value := getattr(self, name)) is not None}
        if "stop" in data:
            data["stop"] = list(data["stop"])
        return data

    def describe(self) -> str:
        """One line for footers and transcripts, each setting named as its magic option names it
        (``--max-tokens``): ``temperature 0 · max tokens 64``; ``""`` when none is set."""
        parts = []
        for name, value in self.as_dict().items():
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            label = SETTING_LABELS.get(name, name.replace("_", " "))
            parts.append(f"{label} {', '.join(map(repr, value)) if name == 'stop' else value}")
        return " · ".join(parts)

    def __bool__(self) -> bool:
        return bool(self.as_dict())


#: The settings' field names in order, read once: ``model_fields`` is a descriptor that costs a
#: call a read, and `ModelSettings.as_dict` runs a few times a run.
_SETTING_NAMES = tuple(ModelSettings.model_fields)

#: No settings: equal to ``ModelSettings()``, made without the validator (there is nothing to validate),
#: so a session that sets none builds no pydantic model for them (issue 29: the first magic of a session).
NO_SETTINGS = ModelSettings.model_construct()


def coerce_settings(value: "ModelSettings | dict[str, Any] | None") -> ModelSettings:
    """A `ModelSettings` from one, a dict of its fields, or None (no settings).

    Raises:
        pydantic.ValidationError: an unknown field or a bad value.
    """
    if value is None or (isinstance(value, dict) and not value):
        return NO_SETTINGS
    return value if isinstance(value, ModelSettings) else ModelSettings(**value)


def unsupported_setting(provider: str, model: str, setting: str, why: str = "") -> ProviderError:
    """The error for a setting a model cannot take: type ``unsupported_capability``,
    ``code`` the setting's name, the message naming provider, model and setting."""
    reason = f": {why}" if why else ""
    return ProviderError(
        "unsupported_capability",
        f"{provider} model {model} does not support the setting {setting}{reason}; remove it or choose another model",
        code=setting,
        retryable=False,
    )
