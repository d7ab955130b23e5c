"""Benchmarks against a live server: the load generator (``loadgen``: closed-loop streams,
sweeps with every arm in every round) and its referee (``referee``: what the server itself
says about each window: drained, the forwards counted, the mode it ran)."""
