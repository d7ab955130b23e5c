"""What the session's log view says when its run changes: the server exited (and when it
restarts), it restarted (its new pid), the run's runtime settings re-applied (or not)
after a restart, a supervisor started for a run found without one. Each said once: the
last one said of each kind is kept here. And what it says when what answers at the run's
port is not this run's server (``not_ours``)."""

from __future__ import annotations

from server_control.model.run_status import RunStatus


class RunNotes:
    def __init__(self) -> None:
        self._last_exit: str | None = None  # the run's last exit already said in the log view
        self._restarts: int | None = None  # the run's restart count last seen (None: not yet)
        self._said: dict[str, str | None] = {}  # the last note said of each kind

    def exits(self, st: RunStatus) -> list[str]:
        """The lines to say for the run status ``st``: a new exit (a crash, said where the log
        goes on), a new restart."""
        out = []
        if st.last_exit and st.last_exit != self._last_exit:
            out.append(
                f"the server exited: {st.last_exit}"
                + (f"; restart in {st.next_restart_in_s:g} s" if st.next_restart_in_s is not None else "")
            )
        self._last_exit = st.last_exit
        if self._restarts is not None and st.restarts > self._restarts and st.pid:
            out.append(f"restarted (restart {st.restarts}): pid {st.pid}")
        self._restarts = st.restarts
        return out

    def news(self, st: RunStatus) -> list[str]:
        """The run's notes (runtime settings after a restart, a supervisor started for it)
        that are new since the last look."""
        out = []
        for kind, note in (("runtime", st.runtime_note), ("supervisor", st.supervisor_note)):
            if note and note != self._said.get(kind):
                out.append(note)
            self._said[kind] = note
        return out


def not_ours(port: int | None) -> str:
    """Why what answers at ``port`` is not this run's server, naming who holds the port."""
    from server_control.host.listener import holder  # noqa: PLC0415 - a scan of every process, once

    return (
        f"not this run's server: port {port} answers, but from {holder(port) if port else '?'}, "
        "not a process of this run; steering is off"
    )
