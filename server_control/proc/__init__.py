"""Processes: launch through the keeper, stopping a run's processes, free ports, the
simulator started as a process. Imports state, config and sanitize."""
