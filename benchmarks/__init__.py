"""Benchmarks: scripts that print measured figures (run from the repository root,
`python -m benchmarks.<name>`). Not installed; speed goals live here, never in tests."""
