"""`BaseTool`: a class whose `@activity` methods a model may call; `FunctionTool` for one plain function.

Running a call never raises: validation failures, unknown or denied
activities and exceptions in the tool all become `ErrorArtifact`s that go
back to the model.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import json
import re
from collections.abc import Callable
from functools import cached_property
from typing import Any, get_type_hints

from pydantic import BaseModel, ValidationError

from ..core import (
    BaseArtifact,
    ErrorArtifact,
    InfoArtifact,
    TextArtifact,
    ToolAction,
    ToolDefinition,
    ToolNameError,
    to_native_name,
)
from ..memory import to_memory_artifact
from .activity import (
    ACTIVITY_ATTR,
    ActivityConfig,
    input_model,
    parse_docstring,
    schema_of,
)

_FUNCTION_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def to_artifact(value: Any) -> BaseArtifact:
    """A tool's return value as an artifact: artifacts pass; None -> info; an object
    with `_repr_llm_()` uses it; str -> text; JSON-able values -> JSON text; else str()."""
    if isinstance(value, BaseArtifact):
        return value
    if value is None:
        return InfoArtifact(value="the tool ran and returned nothing")
    if hasattr(value, "_repr_llm_"):
        return TextArtifact(value=str(value._repr_llm_()))
    if isinstance(value, str):
        return TextArtifact(value=value)
    if isinstance(value, BaseModel):
        return TextArtifact(value=value.model_dump_json())
    try:
        return TextArtifact(value=json.dumps(value))
    except (TypeError, ValueError):
        return TextArtifact(value=str(value))


def _describe(exc: BaseException) -> str:
    try:
        return str(exc) or type(exc).__name__
    except Exception:  # an exception whose __str__ raises
        return type(exc).__name__


class _Raised:
    """What a sync tool raised, carried out of its thread as a value."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _catching(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BaseException as exc:  # noqa: BLE001 - every failure is the tool's result
        return _Raised(exc)


@functools.lru_cache(maxsize=1)
def _tool_executor() -> concurrent.futures.ThreadPoolExecutor:
    """Threads for sync tools, apart from asyncio's default pool: tools left hanging by an
    interrupt must not starve the rest of ipyagent (pricing, terminal prompts)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="ipyagent-tool")


def _single_model_parameter(fn: Callable[..., Any]) -> tuple[str, type[BaseModel]] | None:
    """(name, model) when `fn` takes exactly one parameter and it is annotated with a pydantic model."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(params) != 1:
        return None
    try:
        annotation = get_type_hints(fn).get(params[0].name, params[0].annotation)
    except Exception:
        annotation = params[0].annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return params[0].name, annotation
    return None


class BaseTool:
    """A tool: its `@activity` methods are what a model may call.

    Args:
        name: the tool's name (default: the class name); letters and digits.
        allowlist: only these activities are offered and may run.
        denylist: these activities are neither offered nor run.
        off_prompt: send outputs to Task Memory instead of the prompt.
        output_memory: {activity: [TaskMemory, ...]}: that activity's outputs go off-prompt
            to these memories (instead of the run's own Task Memory).
        requires_approval: every call waits for the user's approval (per activity:
            ``@activity(config={"requires_approval": True})``).
        extra_schema_properties: {activity: {property: JSON Schema}} added to
            that activity's input schema.

    Raises:
        ToolNameError: a tool or activity name cannot map to a native tool name.
        ValueError: allowlist/denylist name an activity the tool does not have.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        allowlist: list[str] | None = None,
        denylist: list[str] | None = None,
        off_prompt: bool = False,
        requires_approval: bool = False,
        extra_schema_properties: dict[str, dict[str, Any]] | None = None,
        output_memory: dict[str, list[Any]] | None = None,
    ) -> None:
        self.name = name or type(self).__name__
        self.allowlist = list(allowlist) if allowlist is not None else None
        self.denylist = list(denylist or [])
        self.off_prompt = off_prompt
        self.requires_approval = requires_approval
        self.extra_schema_properties = dict(extra_schema_properties or {})
        self.output_memory = {k: list(v) for k, v in (output_memory or {}).items()}
        known = set(self._functions)
        if not known:
            raise ValueError(f"tool {self.name!r} has no @activity methods")
        for label, names in (
            ("allowlist", self.allowlist or []),
            ("denylist", self.denylist),
            ("extra_schema_properties", self.extra_schema_properties),
            ("output_memory", self.output_memory),
        ):
            unknown = set(names) - known
            if unknown:
                raise ValueError(
                    f"{label} of tool {self.name!r} names unknown activities {sorted(unknown)}; it has {sorted(known)}"
                )
        for activity in known:
            self.native_name(activity)  # fails now, when declared, not when the model calls

    @cached_property
    def _functions(self) -> dict[str, Callable[..., Any]]:
        found: dict[str, Callable[..., Any]] = {}
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                if callable(value) and hasattr(value, ACTIVITY_ATTR):
                    found[attr] = getattr(self, attr)
        return found

    def _config(self, activity: str) -> ActivityConfig:
        return getattr(self._functions[activity], ACTIVITY_ATTR)

    def native_name(self, activity: str) -> str:
        return to_native_name(self.name, activity)

    def activities(self) -> list[str]:
        """The activity names offered to the model, after allowlist and denylist."""
        names = [n for n in self._functions if n not in self.denylist]
        return [n for n in names if n in self.allowlist] if self.allowlist is not None else names

    def is_off_prompt(self, activity: str) -> bool:
        if self.output_memory.get(activity):
            return True
        own = self._config(activity).off_prompt
        return self.off_prompt if own is None else own

    def needs_approval(self, activity: str) -> bool:
        own = self._config(activity).requires_approval
        return self.requires_approval if own is None else own

    def preapproved(self, activity: str) -> bool:
        """Whether `activity` would ask for approval but the user approved it in advance (an option
        such as ``--approve-runs``): it runs without asking, and its card says so."""
        return False

    def input_model(self, activity: str) -> type[BaseModel]:
        """The pydantic model the activity's input is validated against: the config's
        schema; else the model of a single pydantic-model parameter (the model sees its
        fields, not a wrapper); else one derived from the parameters."""
        config = self._config(activity)
        if config.schema is not None:
            return config.schema
        fn = self._functions[activity]
        single = _single_model_parameter(fn)
        if single is not None:
            return single[1]
        return input_model(fn, f"{self.native_name(activity)}_input")

    def description(self, activity: str) -> str:
        """The activity's description, its Jinja template rendered with this tool."""
        template = self._config(activity).description
        if template is None:
            return parse_docstring(self._functions[activity])[0]
        if "{{" not in template and "{%" not in template:
            return template
        import jinja2

        return (
            jinja2.Environment(undefined=jinja2.StrictUndefined)
            .from_string(template)
            .render({**vars(self), "tool": self})
        )

    def schema(self) -> dict[str, dict[str, Any]]:
        """{activity: JSON Schema of its input} for every offered activity."""
        schemas = {}
        for activity in self.activities():
            schema = schema_of(self.input_model(activity))
            schema["properties"].update(self.extra_schema_properties.get(activity, {}))
            schemas[activity] = schema
        return schemas

    def tool_definitions(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(name=self.native_name(a), description=self.description(a), parameters=s)
            for a, s in self.schema().items()
        ]

    async def run(self, activity: str, action: ToolAction) -> BaseArtifact:
        """Validate `action.input`, call the activity, and return its result as an artifact.

        Sync activities run in a worker thread; async ones are awaited. Never
        raises (except for cancellation): every failure is an `ErrorArtifact`.
        """
        if activity not in self.activities():
            available = ", ".join(self.native_name(a) for a in self.activities())
            return ErrorArtifact(value=f"{action.native_name} is not an available activity; available: {available}")
        model = self.input_model(activity)
        try:
            values = model.model_validate(action.input)
        except ValidationError as exc:
            return ErrorArtifact(
                value=f"invalid arguments for {action.native_name}: {exc}", exception_type="ValidationError"
            )
        fn = self._functions[activity]
        single = _single_model_parameter(fn)
        if single is not None and single[1] is model:
            args: dict[str, Any] = {single[0]: values}
        else:
            args = {name: getattr(values, name) for name in type(values).model_fields}
            if any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()):
                extra = set(self.extra_schema_properties.get(activity, {})) & set(action.input)
                args.update({k: action.input[k] for k in extra})
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(**args)
            else:
                # In the caller's context (which agents are running: a nested run fails at once), and
                # whatever it raises comes back as a value: a KeyboardInterrupt or SystemExit raised
                # through the loop would stop the loop itself.
                call = functools.partial(contextvars.copy_context().run, _catching, functools.partial(fn, **args))
                result = await asyncio.get_running_loop().run_in_executor(_tool_executor(), call)
                if isinstance(result, _Raised):
                    raise result.exc
            if self.is_off_prompt(activity):  # kept in its own shape (a table, bytes) for Task Memory

                return to_memory_artifact(result)
            return to_artifact(result)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # sys.exit() (argparse), KeyboardInterrupt...: a failed tool, not a dead loop
            return ErrorArtifact(value=_describe(exc), exception_type=type(exc).__name__)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {', '.join(self.activities())}>"


class FunctionTool(BaseTool):
    """A one-activity tool made from a plain function; its native name is the function's name.

    Raises:
        ToolNameError: the function's name is not letters, digits and underscores (at most 64).
    """

    def __init__(self, fn: Callable[..., Any], **kwargs: Any) -> None:
        if not hasattr(fn, ACTIVITY_ATTR):
            setattr(fn, ACTIVITY_ATTR, ActivityConfig())
        self.fn = fn
        super().__init__(name=kwargs.pop("name", None) or fn.__name__, **kwargs)

    @cached_property
    def _functions(self) -> dict[str, Callable[..., Any]]:
        return {self.fn.__name__: self.fn}

    def native_name(self, activity: str) -> str:
        if not _FUNCTION_NAME_RE.match(self.name):
            raise ToolNameError(
                f"function {self.name!r} cannot be a tool name: use letters, digits and underscores, at most 64"
            )
        return self.name
