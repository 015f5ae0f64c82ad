"""`Calculator`: arithmetic evaluated safely with simpleeval (never `eval`)."""

from __future__ import annotations

import math

from ..activity import activity
from ..base_tool import BaseTool

_FUNCTIONS = {
    name: getattr(math, name)
    for name in (
        "sqrt",
        "log",
        "log10",
        "log2",
        "exp",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "floor",
        "ceil",
        "factorial",
    )
}
_FUNCTIONS.update(abs=abs, round=round, min=min, max=max)
_NAMES = {"pi": math.pi, "e": math.e, "tau": math.tau}


class Calculator(BaseTool):
    """Evaluates arithmetic expressions: + - * / // % **, parentheses, math functions."""

    @activity
    def evaluate(self, expression: str) -> str:
        """Evaluate an arithmetic expression and return the result.

        Args:
            expression: a Python-style arithmetic expression, e.g. "2 ** 10 / (3 + 1)" or "sqrt(2) * pi".
                Functions: sqrt, log, log10, log2, exp, sin, cos, tan, asin, acos, atan, floor, ceil,
                factorial, abs, round, min, max; constants: pi, e, tau.
        """
        from simpleeval import SimpleEval

        evaluator = SimpleEval(functions=_FUNCTIONS, names=_NAMES)
        return str(evaluator.eval(expression))
