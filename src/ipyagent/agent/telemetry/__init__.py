"""OpenTelemetry traces of runs and evaluations, and the spans they are built from."""
