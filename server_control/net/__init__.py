"""HTTP mechanics every client of ours shares (the floor under advice, telemetry, control,
supervision, proc and fleet)."""
