"""Processes: launch through the keeper, a run's identity (boot id + start ticks), stopping a
run's processes, free ports. Imports protocol, model, state and config."""
