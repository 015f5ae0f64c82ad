"""An evaluation's checks: `assertions` parses a check's spec and runs it on one answer (text,
JSON, schema, a Python function, a judge model); `limits` keeps each within its time (regex
searches that cannot hang, functions stopped by an interrupt or a deadline)."""

from .assertions import (
    DEFAULT_RUBRIC,
    JUDGE_PROMPT,
    PASS_SCORE,
    Assertion,
    CallableAssertion,
    CheckError,
    JsonAssertion,
    JudgeAssertion,
    Outcome,
    SchemaAssertion,
    TextAssertion,
    Verdict,
    build_judges,
    parse_assertion,
    parse_verdict,
)
from .limits import CHECK_TIMEOUT_S, Stoppable

__all__ = ["CHECK_TIMEOUT_S", "DEFAULT_RUBRIC", "JUDGE_PROMPT", "PASS_SCORE", "Assertion", "CallableAssertion",
           "CheckError", "JsonAssertion", "JudgeAssertion", "Outcome", "SchemaAssertion", "Stoppable", "TextAssertion",
           "Verdict", "build_judges", "parse_assertion", "parse_verdict"]
