"""Two consoles on one profile, as two real processes: one writes the history, the other
keeps its points in memory and says who writes; when the writer has gone the other takes
over and adds its newer points to what the file holds (server_control/state/history_writer.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from server_control.session.history_keeper import HistoryKeeper
from server_control.state.history import History, HistPoint, history_path, read_history

NOW = 1_800_000_000.0
# a console's history, driven line by line: "add TS BATCH", "write", "who", "close"
CHILD = textwrap.dedent(
    """
    import json, sys
    from server_control.state.history import History, HistPoint
    h = History(sys.argv[1], clock=lambda: float(sys.argv[2]))
    print(json.dumps({"ready": True, "written_by": h.written_by}), flush=True)
    for line in sys.stdin:
        cmd, *a = line.split()
        if cmd == "add":
            h.add(HistPoint(float(a[0]), batch=float(a[1]), run="r"))
            out = {}
        elif cmd == "write":
            out = {"wrote": h.write(), "error": h.error}
        elif cmd == "who":
            out = {"written_by": h.written_by}
        else:
            h.release()
            out = {"closed": True}
        print(json.dumps(out), flush=True)
        if cmd == "close":
            break
    """
)


class Console:
    def __init__(self, path, clock):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(clock)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.first = self._read()

    def _read(self):
        line = self.proc.stdout.readline()  # the child answers every line at once
        assert line, f"the child ended (rc {self.proc.poll()})"
        return json.loads(line)

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self._read()

    def end(self):
        if self.proc.poll() is None:
            self.proc.kill()  # the process this test started, by its own handle
        self.proc.wait(10)


def test_two_processes_one_writer_then_the_other_takes_over(tmp_path):
    path = history_path(tmp_path, "demo")
    first = Console(path, NOW + 100)
    try:
        assert first.first == {"ready": True, "written_by": None}
        second = Console(path, NOW + 100)
        try:
            assert second.first["written_by"] == first.proc.pid, second.first
            for t, b in ((1, 1), (2, 2)):
                first.ask(f"add {NOW + t} {b}")
            second.ask(f"add {NOW + 1.5} 99")  # the same server seen by the other console
            assert first.ask("write") == {"wrote": True, "error": None}
            assert second.ask("write") == {"wrote": False, "error": None}, "it keeps its points in memory"
            assert [p.batch for p in read_history(path)[0]] == [1.0, 2.0], "the second did not overwrite"
            first.ask(f"add {NOW + 3} 3")
            assert first.ask("write")["wrote"]
            first.proc.kill()  # the writer ends without a word: the kernel releases its lock
            first.proc.wait(10)
            assert second.ask("who") == {"written_by": None}, "nobody holds it now"
            second.ask(f"add {NOW + 4} 4")
            assert second.ask("write") == {"wrote": True, "error": None}
            assert second.ask("who") == {"written_by": None}
            # the file kept the first console's points and gained the second's newer one
            assert [p.batch for p in read_history(path)[0]] == [1.0, 2.0, 3.0, 4.0]
        finally:
            second.end()
    finally:
        first.end()


def test_the_keeper_says_who_writes(tmp_path):
    path = history_path(tmp_path, "demo")
    first = Console(path, NOW)
    try:
        said = []
        keeper = HistoryKeeper(tmp_path, "demo", said.append)
        assert said == [f"history {path}: written by pid {first.proc.pid}; this console keeps its points in memory"]
        keeper.close()
        assert not path.exists(), "it wrote nothing"
    finally:
        first.end()
    again = History(path, clock=lambda: NOW)  # nobody holds it now
    again.add(HistPoint(NOW, batch=5, run="r"))
    assert again.write() and again.written_by is None
    again.release()
