"""Steering a running server: get/set the runtime settings read back on every rank, the guard
against concurrent changes, the three verification layers. Imports telemetry, logs, state,
model, protocol and sanitize."""
