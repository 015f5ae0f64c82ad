"""`ModelSettings` without its validator: no settings (`NO_SETTINGS`) and `as_dict` cost no pydantic
build (issue 29: the first magic of a session builds no model; tests/notebook/test_first_magic.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ipyagent.core import ModelSettings, coerce_settings
from ipyagent.core.settings import NO_SETTINGS, unsupported_setting

FULL = {"temperature": 0.5, "top_p": 1, "max_output_tokens": 64, "stop": ["\n", "END"], "seed": 7,
        "reasoning": "low", "tool_choice": "lookup", "parallel_tool_calls": False, "cache": True}


def test_no_settings_are_the_empty_settings_shared() -> None:
    assert coerce_settings(None) is NO_SETTINGS and coerce_settings({}) is NO_SETTINGS
    assert NO_SETTINGS == ModelSettings() and not NO_SETTINGS and NO_SETTINGS.describe() == ""
    assert NO_SETTINGS.merged({"temperature": 0}).as_dict() == {"temperature": 0.0}
    with pytest.raises(ValidationError):
        NO_SETTINGS.temperature = 1  # frozen like any other


@pytest.mark.parametrize("fields", [FULL, {"seed": 0}, {"reasoning": 0, "cache": False}, {}])
def test_as_dict_is_the_dump_of_the_fields_set(fields: dict) -> None:
    """What ``model_dump(exclude_none=True)`` gives (``stop`` as a list), in field order; a 0 or False
    is set, only None is not."""
    settings = ModelSettings(**fields)
    dumped = settings.model_dump(exclude_none=True)
    if "stop" in dumped:
        dumped["stop"] = list(dumped["stop"])
    assert settings.as_dict() == dumped and list(settings.as_dict()) == list(dumped)


def test_settings_given_are_still_validated() -> None:
    with pytest.raises(ValidationError):
        coerce_settings({"temperature": 5})
    with pytest.raises(ValidationError):
        coerce_settings({"nope": 1})


def test_a_setting_a_model_cannot_take_is_one_error_naming_it_and_not_retried() -> None:
    error = unsupported_setting("openai", "o3", "temperature", "reasoning models fix it")
    assert (error.type, error.code, error.retryable) == ("unsupported_capability", "temperature", False)
    assert error.message == ("openai model o3 does not support the setting temperature: reasoning models fix it; "
                             "remove it or choose another model")
    assert unsupported_setting("gemini", "g", "seed").message == (
        "gemini model g does not support the setting seed; remove it or choose another model")


def test_each_setting_is_checked_and_read_as_a_request_needs_it() -> None:
    assert ModelSettings(stop="END").stop == ("END",) and ModelSettings(stop=["a", "b"]).stop == ("a", "b")
    for bad in (["a", ""], [1]):
        with pytest.raises(ValidationError, match="stop sequences must be non-empty strings"):
            ModelSettings(stop=bad)
    assert ModelSettings(reasoning=" 512 ").reasoning == 512 and ModelSettings(reasoning=0).budget == 0
    assert (ModelSettings(reasoning="high").effort, ModelSettings(reasoning="high").budget) == ("high", None)
    assert (ModelSettings(reasoning=64).effort, ModelSettings(reasoning=64).budget) == (None, 64)
    with pytest.raises(ValidationError, match="not a bool"):
        ModelSettings(reasoning=True)
    with pytest.raises(ValidationError, match="a thinking budget is 0 or more tokens"):
        ModelSettings(reasoning=-1)
    with pytest.raises(ValidationError, match="tool_choice is auto, required, none or a tool's name"):
        ModelSettings(tool_choice="  ")
    assert ModelSettings(tool_choice="lookup").tool_name == "lookup"
    assert [ModelSettings(tool_choice=c).tool_name for c in ("auto", "required", "none")] == [None, None, None]
    assert ModelSettings().tool_name is None


def test_a_footer_line_names_each_setting_set_as_its_option_does() -> None:
    line = ModelSettings(**FULL).describe()
    assert line == ("temperature 0.5 · top p 1 · max tokens 64 · stop '\\n', 'END' · seed 7 · reasoning low · "
                    "tool choice lookup · parallel tool calls False · cache True")
    assert ModelSettings(temperature=1.0).describe() == "temperature 1"  # a whole float without its .0


def test_settings_are_true_when_any_is_set() -> None:
    assert not ModelSettings() and ModelSettings(seed=0) and ModelSettings(parallel_tool_calls=False)


def test_settings_and_usages_read_their_field_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`as_dict` and ``Usage + Usage`` run a few times a run: they read the field names kept at
    import, not pydantic's ``model_fields`` (a descriptor that costs a call a read)."""
    from pydantic import BaseModel

    from ipyagent.core import Usage

    settings = ModelSettings(temperature=0, stop=("x",), cache=False)
    one, two = Usage(input_tokens=1, output_tokens=2), Usage(input_tokens=3, output_tokens=4, reasoning_tokens=1)

    class Unread:
        def __get__(self, obj: object, cls: type) -> None:
            raise AssertionError("model_fields read")

    monkeypatch.setattr(BaseModel, "model_fields", Unread())
    assert settings.as_dict() == {"temperature": 0, "stop": ["x"], "cache": False}
    assert list(settings.as_dict()) == ["temperature", "stop", "cache"]  # field order
    total = one + two
    assert (total.input_tokens, total.output_tokens, total.total_tokens, total.reasoning_tokens) == (4, 6, 10, 1)
