"""What lives in the state dir and what a record there names: the dir's location and private
files, run records, log files, the operator journal, and a run's process identity (boot id +
start ticks + command line, matched against the live processes). Imports sanitize only."""
