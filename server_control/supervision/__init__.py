"""Keeping a run alive: the supervisor, health and watchdog, who supervises and the hand-over,
settings carried over a restart, the restart policy. Imports the layers below it: control,
proc, config, state, model, protocol, sanitize."""
