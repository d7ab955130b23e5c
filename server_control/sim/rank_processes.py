"""The TP rank processes seen from the main process: spawn, step, settings, stop."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

from server_control.sim.worker import HANDSHAKE_READY, run_rank


class RankError(RuntimeError):
    pass


class RankGroup:
    def __init__(self, tp_size: int, cfg: dict[str, Any]) -> None:
        ctx = mp.get_context("spawn")  # as SGLang: mp.set_start_method("spawn")
        self.conns = []
        self.procs = []
        for rank in range(tp_size):
            parent, child = ctx.Pipe(duplex=True)
            # not daemonic: like SGLang's schedulers they survive a SIGKILLed parent
            proc = ctx.Process(target=run_rank, args=(rank, cfg, child), name=f"sim-TP{rank}")
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for rank, conn in enumerate(self.conns):
            left = max(0.0, deadline - time.monotonic())
            if not conn.poll(left):
                raise RankError(f"TP{rank} did not finish initialisation within {timeout:.0f} s")
            msg = self._recv(rank)
            if msg[0] != HANDSHAKE_READY:
                raise RankError(f"TP{rank} sent {msg!r} instead of ready")

    def _recv(self, rank: int) -> Any:
        try:
            return self.conns[rank].recv()
        except (EOFError, OSError) as exc:
            code = self.procs[rank].exitcode
            raise RankError(f"TP{rank} exited unexpectedly (exit code {code})") from exc

    def _send_all(self, msg: tuple[Any, ...]) -> None:
        for rank, conn in enumerate(self.conns):
            try:
                conn.send(msg)
            except OSError as exc:
                raise RankError(f"TP{rank} is gone: {exc}") from exc

    def step(self, step_no: int, batch: int, lines: list[str]) -> str | None:
        """Every rank decides the mode of this step; they must agree."""
        for rank, conn in enumerate(self.conns):
            try:
                conn.send(("step", step_no, batch, lines if rank == 0 else ()))
            except OSError as exc:
                raise RankError(f"TP{rank} is gone: {exc}") from exc
        modes = [self._recv(rank)[2] for rank in range(len(self.conns))]
        if any(m != modes[0] for m in modes):
            raise RankError(f"TP ranks disagree on the mode of step {step_no}: {modes}")
        mode: str | None = modes[0]
        return mode

    def apply(self, key: str, value: object) -> tuple[bool, str]:
        """Apply one setting on every rank. Returns (ok, message of TP0)."""
        self._send_all(("set", key, value))
        replies = [self._recv(rank) for rank in range(len(self.conns))]
        ok = all(r[1] for r in replies)
        return ok, replies[0][2]

    def crash(self) -> None:
        try:
            self._send_all(("crash",))
        except RankError:
            pass
        self.join(5.0)

    def stop(self, timeout: float = 3.0) -> None:
        for conn in self.conns:
            try:
                conn.send(("stop",))
            except OSError:
                pass
        self.join(timeout)
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        self.join(1.0)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
