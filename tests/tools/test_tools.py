"""The tools layer: `@activity`, schema derivation, `BaseTool` / `FunctionTool`, `Toolbox` dispatch."""

import asyncio
import json
import threading
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from ipyagent.core import ErrorArtifact, InfoArtifact, TextArtifact, ToolAction, ToolNameError
from ipyagent.tools import ActivityConfig, BaseTool, FunctionTool, Toolbox, activity, as_tool
from ipyagent.tools.activity import ACTIVITY_ATTR


def run_calls(toolbox: Toolbox, *calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
    """Run (tag, native name, input) calls through `Toolbox.run_all`; the result artifacts, in order."""
    actions = [ToolAction.from_native(tag, native, inp) for tag, native, inp in calls]
    return [artifact for artifact, _ in asyncio.run(toolbox.run_all(actions))]


def run_one(tool: Any, native: str, inp: dict[str, Any]) -> Any:
    return run_calls(Toolbox([tool]), ("call_1", native, inp))[0]


def resolve(schema: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    """A property's schema with a local ``$ref`` (directly or in ``allOf``) followed."""
    ref = prop.get("$ref") or next((p["$ref"] for p in prop.get("allOf", []) if "$ref" in p), None)
    if ref is None:
        return prop
    name = ref.rsplit("/", 1)[-1]
    return schema["$defs"][name]


# -- @activity -----------------------------------------------------------------------------------


def test_activity_bare_marks_with_default_config() -> None:
    @activity
    def ping() -> str:
        return "pong"

    assert ping() == "pong"  # the function itself is returned, still callable
    assert getattr(ping, ACTIVITY_ATTR) == ActivityConfig(description=None, schema=None, off_prompt=None)


def test_activity_with_config_records_it() -> None:
    class Query(BaseModel):
        q: str

    @activity(config={"description": "Search for {{ tool.name }}", "schema": Query, "off_prompt": True})
    def search(query: Query) -> str:
        return query.q

    assert getattr(search, ACTIVITY_ATTR) == ActivityConfig("Search for {{ tool.name }}", Query, True)


def test_activity_unknown_config_key_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="descripton"):
        activity(config={"descripton": "typo"})


def test_activity_schema_must_be_a_pydantic_model() -> None:
    with pytest.raises(TypeError, match="pydantic"):
        activity(config={"schema": {"type": "object"}})


# -- schema from type hints and docstrings -------------------------------------------------------


class GoogleStyle(BaseTool):
    @activity
    def forecast(self, city: str, days: int = 3) -> str:
        """Get the weather forecast.

        Args:
            city: The city to look up.
            days: How many days ahead.

        Returns:
            The forecast.
        """
        return f"{city}:{days}"


class NumpyStyle(BaseTool):
    @activity
    def forecast(self, city: str, days: int = 3) -> str:
        """Get the weather forecast.

        Parameters
        ----------
        city : str
            The city to look up.
        days : int
            How many days ahead.

        Returns
        -------
        str
            The forecast.
        """
        return f"{city}:{days}"


class SphinxStyle(BaseTool):
    @activity
    def forecast(self, city: str, days: int = 3) -> str:
        """Get the weather forecast.

        :param city: The city to look up.
        :param days: How many days ahead.
        :returns: The forecast.
        """
        return f"{city}:{days}"


@pytest.mark.parametrize("tool_class", [GoogleStyle, NumpyStyle, SphinxStyle])
def test_schema_from_docstring_styles(tool_class: type[BaseTool]) -> None:
    tool = tool_class()
    schema = tool.schema()["forecast"]
    assert schema["type"] == "object"
    assert schema["properties"]["city"] == {"type": "string", "description": "The city to look up."}
    assert schema["properties"]["days"] == {"type": "integer", "default": 3, "description": "How many days ahead."}
    assert schema["required"] == ["city"]
    assert tool.description("forecast") == "Get the weather forecast."
    [definition] = tool.tool_definitions()
    assert definition.name == f"{tool_class.__name__}_forecast"
    assert definition.description == "Get the weather forecast."
    assert definition.parameters == schema


class Address(BaseModel):
    street: str
    zip_code: int = Field(description="Postal code")


class Typed(BaseTool):
    @activity
    def book(
        self,
        count: int,
        tags: list[str],
        units: Literal["metric", "imperial"],
        address: Address,
        note: str | None = None,
        untyped=7,  # noqa: ANN001 - no hint: any JSON value
    ) -> dict[str, Any]:
        """Book something.

        Args:
            count: How many.
            tags: Labels to attach.
            units: Unit system.
            address: Where to deliver.
            note: Optional note.
            untyped: Anything.
        """
        return {
            "count": count,
            "tags": tags,
            "units": units,
            "address": address.model_dump(),
            "note": note,
            "untyped": untyped,
        }


def test_schema_types_required_and_nested_model() -> None:
    schema = Typed().schema()["book"]
    props = schema["properties"]
    assert list(props) == ["count", "tags", "units", "address", "note", "untyped"]
    assert set(schema["required"]) == {"count", "tags", "units", "address"}
    assert props["count"]["type"] == "integer"
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["units"]["enum"] == ["metric", "imperial"]
    assert props["note"]["default"] is None
    assert props["untyped"]["default"] == 7 and "type" not in props["untyped"]
    for name, text in [
        ("count", "How many."),
        ("tags", "Labels to attach."),
        ("units", "Unit system."),
        ("address", "Where to deliver."),
    ]:
        assert props[name]["description"] == text
    nested = resolve(schema, props["address"])
    assert nested["type"] == "object"
    assert nested["properties"]["zip_code"]["type"] == "integer"
    assert nested["properties"]["zip_code"]["description"] == "Postal code"
    assert set(nested["required"]) == {"street", "zip_code"}
    json.dumps(schema)  # plain JSON Schema, sendable as it is


def test_nested_model_arrives_as_an_instance() -> None:
    out = run_one(
        Typed(), "Typed_book",
        {"count": "2", "tags": ["a", "b"], "units": "metric", "address": {"street": "Main", "zip_code": "12345"}},
    )
    assert isinstance(out, TextArtifact)
    assert json.loads(out.value) == {
        "count": 2, "tags": ["a", "b"], "units": "metric",
        "address": {"street": "Main", "zip_code": 12345}, "note": None, "untyped": 7,
    }


def test_literal_is_enforced() -> None:
    out = run_one(
        Typed(), "Typed_book", {"count": 1, "tags": [], "units": "kelvin", "address": {"street": "x", "zip_code": 1}}
    )
    assert isinstance(out, ErrorArtifact)
    assert "units" in out.value and "'metric' or 'imperial'" in out.value


# -- config schema ---------------------------------------------------------------------------------


class SearchQuery(BaseModel):
    """Search parameters."""

    terms: str = Field(description="What to look for", min_length=1)
    limit: int = Field(5, ge=1, le=50, description="At most this many hits")


class Search(BaseTool):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.received: list[Any] = []

    @activity(config={"description": "Search the index", "schema": SearchQuery})
    def find(self, query: SearchQuery) -> str:
        self.received.append(query)
        return f"{query.terms}/{query.limit}"

    @activity(config={"schema": SearchQuery})
    def count(self, terms: str, limit: int) -> int:
        self.received.append((terms, limit))
        return len(terms) * limit


def test_config_schema_is_used_as_given() -> None:
    tool = Search()
    expected = SearchQuery.model_json_schema()
    schema = tool.schema()["find"]
    # the model's own fields and constraints, not anything derived from the method signature
    assert list(schema["properties"]) == ["terms", "limit"]
    assert schema["required"] == expected["required"] == ["terms"]
    for name in ("terms", "limit"):
        want = {k: v for k, v in expected["properties"][name].items() if k != "title"}
        assert schema["properties"][name] == want
    assert schema["properties"]["terms"]["minLength"] == 1
    assert schema["properties"]["limit"]["maximum"] == 50
    assert tool.description("find") == "Search the index"
    assert tool.input_model("find") is SearchQuery


def test_config_schema_method_receives_the_model_instance() -> None:
    tool = Search()
    out = run_one(tool, "Search_find", {"terms": "cats", "limit": "7", "junk": True})
    assert out == TextArtifact(value="cats/7")
    [query] = tool.received
    assert isinstance(query, SearchQuery) and query == SearchQuery(terms="cats", limit=7)


def test_config_schema_fields_bound_to_parameters_when_not_annotated_with_it() -> None:
    tool = Search()
    out = run_one(tool, "Search_count", {"terms": "abc"})
    assert out == TextArtifact(value="15")
    assert tool.received == [("abc", 5)]


def test_config_schema_constraints_are_validated() -> None:
    tool = Search()
    out = run_one(tool, "Search_find", {"terms": "cats", "limit": 500})
    assert isinstance(out, ErrorArtifact) and out.exception_type == "ValidationError"
    assert "limit" in out.value and "50" in out.value
    assert tool.received == []


# -- descriptions as Jinja templates ------------------------------------------------------------


class Thermometer(BaseTool):
    def __init__(self, unit: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.unit = unit

    @activity(
        config={
            "description": "Read {{ tool.name }} in {{ unit }} ({{ tool.unit | upper }}){% if off_prompt %}, off "
            "prompt{% endif %}"
        }
    )
    def read(self) -> float:
        return 21.5

    @activity(config={"description": "Plain {text} without template syntax"})
    def plain(self) -> None:
        return None


def test_description_template_renders_with_the_tool() -> None:
    tool = Thermometer("celsius", name="Kitchen")
    assert tool.description("read") == "Read Kitchen in celsius (CELSIUS)"
    assert (
        Thermometer("kelvin", off_prompt=True).description("read") == "Read Thermometer in kelvin (KELVIN), off prompt"
    )
    definitions = {d.name: d.description for d in tool.tool_definitions()}
    assert definitions == {
        "Kitchen_read": "Read Kitchen in celsius (CELSIUS)",
        "Kitchen_plain": "Plain {text} without template syntax",
    }


def test_description_template_with_an_attribute_named_tool() -> None:
    class Wrapper(BaseTool):
        def __init__(self) -> None:
            super().__init__()
            self.tool = "inner"

        @activity(config={"description": "{{ tool.name }} wraps {{ tool.tool }}"})
        def go(self) -> None:
            return None

    assert Wrapper().description("go") == "Wrapper wraps inner"


def test_description_template_unknown_name_fails_loudly() -> None:
    class Broken(BaseTool):
        @activity(config={"description": "uses {{ missing }}"})
        def go(self) -> None:
            return None

    with pytest.raises(Exception, match="missing"):
        Broken().description("go")


# -- allowlist / denylist ----------------------------------------------------------------------


class Calc(BaseTool):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.calls: list[tuple[str, Any]] = []

    @activity
    def add(self, a: int, b: int = 10) -> int:
        """Add two numbers.

        Args:
            a: First.
            b: Second.
        """
        self.calls.append(("add", (a, b)))
        return a + b

    @activity
    def sub(self, a: int, b: int) -> int:
        """Subtract."""
        self.calls.append(("sub", (a, b)))
        return a - b

    @activity
    def mul(self, a: int, b: int) -> int:
        """Multiply."""
        self.calls.append(("mul", (a, b)))
        return a * b

    def helper(self) -> None:
        """Not an activity."""


def test_activities_and_filters() -> None:
    assert Calc().activities() == ["add", "sub", "mul"]
    assert Calc(allowlist=["mul", "add"]).activities() == ["add", "mul"]
    assert Calc(denylist=["sub"]).activities() == ["add", "mul"]
    assert Calc(allowlist=["add", "sub"], denylist=["sub"]).activities() == ["add"]
    assert Calc(allowlist=[]).activities() == []
    assert list(Calc(denylist=["add"]).schema()) == ["sub", "mul"]
    assert [d.name for d in Calc(allowlist=["sub"]).tool_definitions()] == ["Calc_sub"]


@pytest.mark.parametrize("kw", [{"allowlist": ["add", "divide"]}, {"denylist": ["divide", "pow"]}])
def test_filter_with_unknown_names_is_a_value_error(kw: dict[str, list[str]]) -> None:
    unknown = sorted(set(next(iter(kw.values()))) - {"add"})
    with pytest.raises(ValueError) as info:
        Calc(**kw)
    message = str(info.value)
    assert all(repr(name) in message for name in unknown)
    assert "'add'" not in message.split("it has")[0]  # only the unknown ones are named as unknown


# -- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my_calc", "my-calc", "9calc", "calc tool"])
def test_bad_tool_name_fails_at_construction(name: str) -> None:
    with pytest.raises(ToolNameError, match=name):
        Calc(name=name)
    assert Calc(name="MyCalc2").native_name("add") == "MyCalc2_add"


def test_class_name_with_underscore_fails_at_construction() -> None:
    class My_Tool(BaseTool):  # noqa: N801
        @activity
        def go(self) -> None:
            return None

    with pytest.raises(ToolNameError, match="My_Tool"):
        My_Tool()
    assert My_Tool(name="MyTool").activities() == ["go"]


def test_tool_without_activities_is_rejected() -> None:
    class Empty(BaseTool):
        def go(self) -> None:
            return None

    with pytest.raises(ValueError, match="no @activity"):
        Empty()


# -- FunctionTool / as_tool --------------------------------------------------------------------


def get_weather(city: str, units: Literal["c", "f"] = "c") -> str:
    """Current weather for a city.

    Args:
        city: City name.
        units: Temperature units.
    """
    return f"{city}: 20{units}"


def test_function_tool_native_name_is_the_function_name() -> None:
    tool = as_tool(get_weather)
    assert isinstance(tool, FunctionTool)
    [definition] = tool.tool_definitions()
    assert definition.name == "get_weather"
    assert definition.description == "Current weather for a city."
    assert definition.parameters["properties"]["city"] == {"type": "string", "description": "City name."}
    assert definition.parameters["properties"]["units"]["enum"] == ["c", "f"]
    assert definition.parameters["required"] == ["city"]
    assert run_one(tool, "get_weather", {"city": "Oslo"}) == TextArtifact(value="Oslo: 20c")


def test_function_tool_with_activity_config() -> None:
    @activity(config={"description": "Echo via {{ tool.name }}"})
    def echo(text: str) -> str:
        return text

    tool = FunctionTool(echo)
    assert tool.tool_definitions()[0].description == "Echo via echo"
    assert run_one(tool, "echo", {"text": "hi"}) == TextArtifact(value="hi")


def test_function_tool_bad_name() -> None:
    def ok_name() -> None:
        return None

    with pytest.raises(ToolNameError):
        FunctionTool(ok_name, name="bad-name")
    assert FunctionTool(ok_name, name="renamed").tool_definitions()[0].name == "renamed"


def test_as_tool_accepts_instances_and_classes_only() -> None:
    calc = Calc()
    assert as_tool(calc) is calc
    made = as_tool(Calc)
    assert isinstance(made, Calc) and made.activities() == ["add", "sub", "mul"]
    with pytest.raises(TypeError):
        as_tool(42)


def test_toolbox_duplicate_native_names() -> None:
    with pytest.raises(ValueError, match="Calc_add"):
        Toolbox([Calc(), Calc()])
    box = Toolbox([Calc(), Calc(name="Calc2", allowlist=["add"]), get_weather])
    assert box.names() == ["Calc_add", "Calc_sub", "Calc_mul", "Calc2_add", "get_weather"]
    assert [d.name for d in box.definitions()] == box.names()

    def Calc_add(a: int) -> int:  # noqa: N802 - a function whose name collides with a tool's native name
        return a

    with pytest.raises(ValueError, match="Calc_add"):
        Toolbox([Calc(), Calc_add])
    # two instances of one class coexist under different names, each with its own filter
    assert Toolbox([Calc(allowlist=["add"]), Calc(name="Other", denylist=["add"])]).names() == [
        "Calc_add",
        "Other_sub",
        "Other_mul",
    ]


def test_toolbox_resolves_base_tool_methods_and_leaves_function_names_whole() -> None:
    """DESIGN.md: ``Tool_activity`` is for BaseTool methods only; a function keeps its own name."""

    def word_count(text: str) -> int:
        return len(text.split())

    box = Toolbox([Calc(), word_count])
    method = box.resolve(ToolAction.from_native("c1", "Calc_add", {"a": 1, "b": 2}))
    assert (method.name, method.path, method.native_name) == ("Calc", "add", "Calc_add")
    function = box.resolve(ToolAction.from_native("c2", "word_count", {"text": "a b c"}))
    assert (function.name, function.path, function.native_name) == ("word_count", None, "word_count")
    unknown = box.resolve(ToolAction.from_native("c3", "Nope_run", {}))
    assert (unknown.name, unknown.path) == ("Nope_run", None)
    assert run_calls(box, ("c4", "word_count", {"text": "a b c"}))[0].to_text() == "3"


# -- running calls ---------------------------------------------------------------------------------


def test_input_coerced_defaults_applied_unknown_keys_dropped() -> None:
    calc = Calc()
    out = run_one(calc, "Calc_add", {"a": "3", "junk": "x", "b_": 1})
    assert out == TextArtifact(value="13")
    assert calc.calls == [("add", (3, 10))]
    assert type(calc.calls[0][1][0]) is int


def test_missing_required_argument_is_an_error_artifact() -> None:
    calc = Calc()
    out = run_one(calc, "Calc_sub", {"a": 1})
    assert isinstance(out, ErrorArtifact)
    assert out.exception_type == "ValidationError"
    assert "Calc_sub" in out.value and "b" in out.value and "Field required" in out.value
    assert calc.calls == []


class Misc(BaseTool):
    @activity
    def fail(self, why: str) -> str:
        raise ValueError(f"cannot: {why}")

    @activity
    def fail_silently(self) -> str:
        raise KeyError

    @activity
    def nothing(self) -> None:
        return None

    @activity
    def table(self) -> Any:
        class Frame:
            def _repr_llm_(self) -> str:
                return "| a |\n| 1 |"

            def __str__(self) -> str:
                return "not this"

        return Frame()

    @activity
    def record(self) -> dict[str, Any]:
        return {"id": 7, "tags": ["x", "y"], "ok": True, "none": None}

    @activity
    def model(self) -> Address:
        return Address(street="Main", zip_code=1)

    @activity
    def odd(self) -> Any:
        return {1, 2}  # not JSON-able: falls back to str()


def test_exception_in_tool_is_an_error_artifact() -> None:
    out = run_one(Misc(), "Misc_fail", {"why": "disk full"})
    assert out == ErrorArtifact(value="cannot: disk full", exception_type="ValueError")
    out = run_one(Misc(), "Misc_fail_silently", {})
    assert isinstance(out, ErrorArtifact) and out.exception_type == "KeyError" and out.value == "KeyError"


def test_return_values_become_artifacts() -> None:
    box = Toolbox([Misc()])
    nothing, table, record, model, odd = run_calls(
        box,
        ("c1", "Misc_nothing", {}),
        ("c2", "Misc_table", {}),
        ("c3", "Misc_record", {}),
        ("c4", "Misc_model", {}),
        ("c5", "Misc_odd", {}),
    )
    assert isinstance(nothing, InfoArtifact) and nothing.value
    assert table == TextArtifact(value="| a |\n| 1 |")
    assert isinstance(record, TextArtifact) and json.loads(record.value) == {
        "id": 7,
        "tags": ["x", "y"],
        "ok": True,
        "none": None,
    }
    assert isinstance(model, TextArtifact) and json.loads(model.value) == {"street": "Main", "zip_code": 1}
    assert odd == TextArtifact(value="{1, 2}")


def test_denied_activity_is_an_error_naming_the_available_ones() -> None:
    calc = Calc(denylist=["sub"])
    out = run_one(calc, "Calc_sub", {"a": 1, "b": 2})
    assert isinstance(out, ErrorArtifact)
    assert "Calc_sub" in out.value and "Calc_add" in out.value and "Calc_mul" in out.value
    assert calc.calls == []
    # the tool refuses it too when asked directly, not only the toolbox
    direct = asyncio.run(calc.run("sub", ToolAction.from_native("c", "Calc_sub", {"a": 1, "b": 2})))
    assert isinstance(direct, ErrorArtifact)
    assert "Calc_add" in direct.value and "Calc_mul" in direct.value
    assert calc.calls == []


def test_unknown_activity_is_an_error_naming_the_available_ones() -> None:
    box = Toolbox([Calc(allowlist=["add"]), get_weather])
    for native in ("Calc_divide", "Nope_add", "whatever"):
        out = run_calls(box, ("c", native, {}))[0]
        assert isinstance(out, ErrorArtifact)
        assert native in out.value and "Calc_add" in out.value and "get_weather" in out.value
    assert "none" in run_calls(Toolbox([]), ("c", "x", {}))[0].value


class Threads(BaseTool):
    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}

    @activity
    def sync_one(self) -> str:
        self.seen["sync"] = threading.get_ident()
        return "sync"

    @activity
    async def async_one(self) -> str:
        self.seen["async"] = threading.get_ident()
        await asyncio.sleep(0)
        return "async"


def test_sync_tools_run_in_a_worker_thread_async_tools_are_awaited() -> None:
    tool = Threads()
    box = Toolbox([tool])

    async def main() -> tuple[int, list[Any]]:
        actions = [
            ToolAction.from_native("a", "Threads_sync_one", {}),
            ToolAction.from_native("b", "Threads_async_one", {}),
        ]
        return threading.get_ident(), await box.run_all(actions)

    loop_thread, results = asyncio.run(main())
    assert [r.value for r, _ in results] == ["sync", "async"]
    assert tool.seen["sync"] != loop_thread
    assert tool.seen["async"] == loop_thread


def test_parallel_calls_run_concurrently_and_come_back_in_call_order() -> None:
    both_running = threading.Barrier(2, timeout=30)  # passes only when the two calls run at once
    b_done = threading.Event()
    finished: list[str] = []

    def slow_a(tag: str) -> str:
        both_running.wait()
        b_done.wait(30)
        finished.append("a")
        return f"a:{tag}"

    def slow_b(tag: str) -> str:
        both_running.wait()
        finished.append("b")
        b_done.set()
        return f"b:{tag}"

    box = Toolbox([slow_a, slow_b])
    actions = [
        ToolAction.from_native("c1", "slow_a", {"tag": "1"}),
        ToolAction.from_native("c2", "slow_b", {"tag": "2"}),
    ]
    results = asyncio.run(box.run_all(actions))
    assert finished == ["b", "a"]  # b finished first, yet the results come back in call order
    assert [r.value for r, _ in results] == ["a:1", "b:2"]


def test_a_call_s_seconds_are_measured_around_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    import ipyagent.tools.toolbox as toolbox_module

    ticks = iter([100.0, 102.5])
    monkeypatch.setattr(toolbox_module, "time", type("Clock", (), {"monotonic": staticmethod(lambda: next(ticks))}))
    [(artifact, seconds)] = asyncio.run(
        Toolbox([lambda_tool]).run_all([ToolAction.from_native("c1", "lambda_tool", {})])
    )
    assert artifact.value == "done" and seconds == 2.5


def lambda_tool() -> str:
    """Returns at once."""
    return "done"


def test_results_in_call_order_even_when_finishing_in_reverse() -> None:
    finished: list[int] = []
    done = {n: threading.Event() for n in (1, 2, 3)}

    def end(n: int) -> int:
        finished.append(n)
        done[n].set()
        return n

    async def wait(n: int, after: int) -> int:  # an async tool: awaits the end of call `after`
        if after:
            await asyncio.to_thread(done[after].wait, 30)
        return end(n)

    def block(n: int, after: int) -> int:  # a blocking tool, in a worker thread
        done[after].wait(30)
        return end(n)

    box = Toolbox([wait, block])
    results = run_calls(
        box,
        ("c1", "wait", {"n": 1, "after": 2}),
        ("c2", "block", {"n": 2, "after": 3}),
        ("c3", "wait", {"n": 3, "after": 0}),
    )
    assert finished == [3, 2, 1]
    assert [r.value for r in results] == ["1", "2", "3"]
