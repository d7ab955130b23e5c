"""Keeping a run alive: the supervisor and the parts it holds (health and watchdog, who
supervises and the hand-over, the run's processes, settings carried over a restart, the
restart policy). Imports the layers below it: control, proc, config, state, model,
protocol, sanitize."""
