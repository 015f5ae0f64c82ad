"""What an evaluation will send, worked out before the first request: every row's prompt for
every variant rendered, and every check's template rendered and pattern compiled for every row.

A row that cannot be (a missing field, an invalid pattern, any Jinja error) is not an error of
the evaluation: its cells are ``template_error`` runs, never sent, each with one line naming
the row, the variant or check, and the reason (`Plan.errors`). Only when no row renders at all
does the evaluation stop, before any request (`TemplateError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import Assertion
from .templates import TemplateError, render_template

#: Rows whose reasons the note of an evaluation quotes (the rest are counted).
QUOTED = 3


@dataclass(slots=True)
class Variant:
    """One prompt variant: a name (None: the evaluation has no variants), its prompt template
    and its system prompt (None: the agent's own)."""

    name: str | None
    template: str
    system: str | None = None


@dataclass
class Plan:
    """Each variant's prompt for each row, or why it cannot be sent.

    Attributes:
        variants: in order.
        prompts: variant name -> one prompt per row ("" where `errors` has a reason).
        errors: variant name -> one reason per row (None: it renders), ``row N: ...``.
    """

    variants: list[Variant]
    prompts: dict[str | None, list[str]] = field(default_factory=dict)
    errors: dict[str | None, list[str | None]] = field(default_factory=dict)

    def failed_rows(self) -> list[int]:
        """Rows with at least one variant that cannot be sent."""
        count = len(next(iter(self.errors.values()), []))
        return [n for n in range(count) if any(errors[n] for errors in self.errors.values())]

    def note(self) -> str | None:
        """One line: how many rows could not be rendered, and the first reasons."""
        failed = self.failed_rows()
        if not failed:
            return None
        reasons = [next(e[n] for e in self.errors.values() if e[n]) for n in failed[:QUOTED]]
        more = f"; and {len(failed) - QUOTED} more" if len(failed) > QUOTED else ""
        rows = "1 row" if len(failed) == 1 else f"{len(failed)} rows"
        return f"{rows} could not be rendered (not sent: template_error): " + "; ".join(reasons) + more


def _check_errors(checks: list[Assertion], rows: list[Any]) -> list[str | None]:
    """Per row, the first check that cannot be prepared for it, as ``row N: check NAME: reason``."""
    errors: list[str | None] = [None] * len(rows)
    for check in checks:
        if type(check).prepare is Assertion.prepare:
            continue  # nothing to render
        for n, row in enumerate(rows):
            if errors[n] is not None:
                continue
            try:
                check.prepare(row)
            except Exception as exc:  # noqa: BLE001 - any failure to render is the row's, said in one line
                errors[n] = f"row {n}: check {check.name}: {_one_line(exc)}"
    return errors


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def make_plan(variants: list[Variant], rows: list[Any], checks: list[Assertion], *,
              namespace: dict[str, Any] | None = None, raw: bool = False, redacting: bool = False) -> Plan:
    """Render every variant's prompt for every row and prepare every check for every row.

    Args:
        raw: send each variant's template as it is (no rendering).
        redacting: the values the prompts take pass the context rule (`render_template`).

    Raises:
        TemplateError: no row can be sent in any variant; the message gives the first reasons.
    """
    plan = Plan(variants)
    row_errors = _check_errors(checks, rows)
    for variant in variants:
        where = f", variant {variant.name}" if variant.name is not None else ""
        prompts, errors = [], list(row_errors)
        for n, row in enumerate(rows):
            prompt = ""
            if errors[n] is None:
                try:
                    prompt = (
                        variant.template.strip() if raw
                        else render_template(variant.template, row, namespace, redacting=redacting).strip()
                    )
                except TemplateError as exc:
                    errors[n] = f"row {n}{where}: {_one_line(exc)}"
                else:
                    if not prompt:
                        errors[n] = f"row {n}{where}: the prompt is empty once rendered"
            prompts.append(prompt)
        plan.prompts[variant.name], plan.errors[variant.name] = prompts, errors
    if rows and all(all(errors) for errors in plan.errors.values()):
        raise TemplateError(f"no row could be rendered, so nothing was sent: {plan.note()}")
    return plan
