"""`python -m server_control.sim [launch_server flags]` (imports lazily: spawned TP ranks
re-import this module under another name and must stay light)."""

if __name__ == "__main__":
    import sys

    from server_control.sim.server import main

    sys.exit(main())
