"""An evaluation that runs in the background, and the progress of any evaluation.

``ipyagent.evaluate(..., background=True)`` (``%%compare ... --background``) starts the matrix on
ipyagent's loop and returns its `Evaluation` at once; it fills as runs end while other cells
run. Nothing awaits it, so a kernel interrupt of another cell does not reach it; `cancel`,
``%unload_ext`` / ``%reload_ext`` and the end of the process stop it (`loop_thread.stop_detached`),
and what finished stays in `results` and in the run store (the runner commits it as it stops).

    >>> ev = ipyagent.evaluate(["openai:gpt-6-luna"], "{{ row.q }}", rows, background=True)
    >>> ev.done, ev.progress      # False, 12 / 300 runs · 4.1 runs/s · 70 s left · $0.00312 spent
    >>> ev.wait(timeout=60)       # True once it has ended
    >>> ev.cancel()               # stop it; the finished runs are kept
"""

from __future__ import annotations

import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ...core import format_usd
from ..loop_thread import Detached, in_background_loop, run_detached
from .batch import cancel_batches


@dataclass(frozen=True, slots=True)
class Progress:
    """How far an evaluation is (`Background.progress`).

    Attributes:
        finished: runs ended (answered, failed, skipped by the budget or not rendered).
        total: runs in the matrix (rows × columns × repeats).
        spent: USD spent by its new requests so far (runs and judges; a cached run costs nothing),
            counting the runs whose price is known (0.0 when none is).
        elapsed_s: seconds since it started (its wall time once it has ended).
        rate: runs ended per second so far (None before the first).
        eta_s: seconds left at that rate (None: no rate yet, or it ended before every run did
            (cancelled, interrupted); 0 when every run has ended).
        priced: some run ended knowing its price, or none has run yet (False: runs ran and no
            price is known, a ``--base-url`` model: the line says "cost unknown", as the summary
            leaves its cost columns out).
        ended: the evaluation has ended (finished, cancelled, interrupted): no time left is shown.
    """

    finished: int
    total: int
    spent: float
    elapsed_s: float
    rate: float | None
    eta_s: float | None
    priced: bool = True
    ended: bool = False

    def __str__(self) -> str:
        """One line: ``12 / 300 runs · 4.1 runs/s · 70 s left · $0.00312 spent``; ``stopped`` in
        place of the time left when it ended before every run did, ``cost unknown`` in place of
        the money when no run knew its price."""
        parts = [f"{self.finished:,} / {self.total:,} runs"]
        if self.rate is not None:
            parts.append(f"{self.rate:.3g} runs/s")
        if self.finished < self.total:
            if self.ended:
                parts.append("stopped")
            elif self.eta_s is not None:
                parts.append(f"{_seconds(self.eta_s)} left")
        parts.append(f"{format_usd(self.spent)} spent" if self.priced else "cost unknown")
        return " · ".join(parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython shows it as its line (`ev.progress` in a cell), not as the dataclass."""
        printer.text(str(self))


def _seconds(value: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 05 min``."""
    value = max(0, round(value))
    if value < 60:
        return f"{value} s"
    if value < 3600:
        return f"{value // 60} min {value % 60:02d} s"
    return f"{value // 3600} h {value % 3600 // 60:02d} min"


class Background:
    """What `Evaluation` adds for a run in the background: `done`, `progress`, `wait`, `cancel`.

    An evaluation run in the foreground (or loaded) has no background job: it is `done`, `wait`
    returns True at once and `cancel` has nothing to stop."""

    _job: Detached | None = None
    #: Batch mode (`batch`): how far the batches are (a `BatchProgress`; None: no batch), and the
    #: (`BatchAPI`, batch id) of each batch still running at its provider.
    batch_progress: Any = None
    pending_batches: Any = ()
    #: (results counted, their USD, runs that knew their price, runs that did not): `progress` reads
    #: only what is new.
    _tally: tuple[int, float, int, int] = (0, 0.0, 0, 0)

    def run_in_background(self, run: Coroutine[Any, Any, Any]) -> Any:
        """Start `run` (the coroutine that fills this evaluation: `runner.evaluation_run`) on
        ipyagent's loop and return self at once."""
        self._job = run_detached(run)
        return self

    @property
    def done(self) -> bool:
        """False while a background run goes on; True once it has ended (finished, cancelled, failed),
        and always for an evaluation run in the foreground."""
        return self._job is None or self._job.finished.is_set()

    @property
    def progress(self) -> Progress:
        """How far it is (`Progress`); costs what ended since the last call, not the whole matrix."""
        results: list[Any] = self.results  # type: ignore[attr-defined]
        counted, spent, priced, unpriced = self._tally
        if counted > len(results):  # the results were replaced: count again
            counted, spent, priced, unpriced = 0, 0.0, 0, 0
        for r in results[counted:]:
            if not r.cached:
                spent += (r.cost or 0.0) + (r.judge_cost or 0.0)
            if r.status in ("ok", "failed"):  # ran (as the summary's cost columns count it)
                known = r.cost is not None or r.judge_cost is not None
                priced, unpriced = priced + known, unpriced + (not known)
        finished = len(results)
        self._tally = (finished, spent, priced, unpriced)
        total: int = self.total  # type: ignore[attr-defined]
        wall: float = self.wall_s  # type: ignore[attr-defined]
        ended = wall > 0 or self.interrupted  # type: ignore[attr-defined]
        elapsed = wall or max(0.0, time.monotonic() - self.started)  # type: ignore[attr-defined]
        rate = finished / elapsed if finished and elapsed > 0 else None
        eta = 0.0 if finished >= total else None if ended or not rate else (total - finished) / rate
        spent = max(spent, self.spent)  # type: ignore[attr-defined]
        return Progress(finished, total, spent, elapsed, rate, eta, priced > 0 or not unpriced, ended)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background run has ended, `timeout` seconds at most (None: no limit);
        True when it has (at once when there is none), False when the time ran out first. An
        interrupt (Ctrl-C, the kernel's stop button) ends the wait, not the run (False, one line).

        Raises:
            RuntimeError: called from ipyagent's own loop (a tool of a run): it would wait for itself.
            Whatever ended the run with an error (`TemplateError`: no row could be rendered).
        """
        job = self._job
        if job is None:
            return True
        if in_background_loop() and not job.finished.is_set():
            raise RuntimeError("ev.wait() on ipyagent's own loop would wait for itself; await nothing, "
                               "read ev.done and ev.progress instead")
        try:
            if not job.finished.wait(timeout):
                return False
        except KeyboardInterrupt:
            print(f"ipyagent: stopped waiting; the evaluation goes on ({self.progress}); ev.cancel() stops it",
                  file=sys.stderr)
            return False
        if job.error is not None:
            raise job.error
        return True

    def cancel_batches(self) -> list[str]:
        """Cancel this evaluation's batches still running at their providers (left running by an
        interrupt, `pending_batches`); the ids cancelled. Answers already given are not collected."""
        return cancel_batches(self)

    def cancel(self, timeout: float | None = 10.0) -> bool:
        """Stop the background run: runs in flight are cancelled (their streams closed), every
        finished run stays in `results` and in the run store, and the evaluation is marked
        ``interrupted``. Waits up to `timeout` seconds (None: no limit) for it to stop; True once it
        has ended (it may have ended before), False when the time ran out first."""
        job = self._job
        return True if job is None else job.cancel(timeout)
