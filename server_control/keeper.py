"""``python -m server_control.keeper``: the entry point the launcher starts (running servers'
command lines name it, so it keeps this path); the keeper itself is server_control/proc/keeper.py."""

import sys

from server_control.proc.keeper import main

if __name__ == "__main__":
    sys.exit(main())
