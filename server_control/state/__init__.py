"""What lives in the state dir: its location and private files, run records, log files, the
operator journal. Imports protocol and model only."""
