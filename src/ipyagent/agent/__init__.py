"""The agent layer: conversations over a prompt driver; knows no provider by name."""

from .._lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "agent": ("Agent",),
    "loop": ("AgentRun",),
    "loop_thread": ("background_loop", "background_loop_running", "run_in_background", "run_sync",
                    "stop_background_loop", "Detached", "run_detached", "stop_detached"),
    "options": ("RunOptions",),
    "result": ("AgentResult",),
    "compare": ("Comparison", "acompare", "COLUMNS", "NUMERIC", "RunFigures", "Stat", "summarize", "provider_keys"),
    "evaluation": ("Evaluation", "EvalResult", "TemplateError", "aevaluate", "make_variants", "normalize_rows",
                   "render_template", "render_cell", "parse_assertion", "build_judges",
                   "load_evaluation", "stored_evaluations",
                   "leave_or_cancel", "row_fields", "percentile"),
    "conversation": ("DEFAULT_THREAD", "Composition", "Thread", "ThreadStore", "Turn", "result_turn"),
    "defaults": ("DEFAULT_MAX_TOOL_CALLS", "DEFAULT_PROVIDER", "MAX_TOOL_CALLS_CEILING", "check_max_tool_calls",
                 "current_default", "reset_default", "session_default", "set_default"),
    "inputs.files": ("document_block",),
    "inputs.images": ("image_blocks",),
    "telemetry.tracing": ("trace", "Tracing", "tracing_status"),
    "transcript": ("transcript_of", "comparison_record", "artifact_summary", "RunLog"),
})

__all__ = [*__getattr__.exports]
