"""What this host's operating system says, shared by every floor above: a process's start in
a form the wall clock cannot move (``start_ticks``), who belongs to a run (``identity``),
who listens on a port (``listener``), a free loopback port (``ports``). Standard library and
psutil only; nothing of ours."""
