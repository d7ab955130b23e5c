"""One simulated TP rank (a spawned process, like SGLang's scheduler process per rank).

Every rank takes part in every decode step: the main process sends it the step's batch
size, the rank runs its own ``SpecSwitch`` and answers the mode it chose. TP0 also writes
the `Prefill batch` / `Decode batch` lines. Imports only the standard library and
``server_control.protocol.decision`` so that spawning stays cheap.

If the main process dies (SIGKILL), the rank logs one error line and idles until its
own deadline or a signal, as SGLang's scheduler processes outlive a killed parent.
"""

from __future__ import annotations

import os
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

from server_control.protocol import decision, runtime_settings
from server_control.protocol.explore import Explorer
from server_control.sim.logfmt import Logger, rank_tag

CRASH_TRACEBACK = """Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 3127, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 1084, in event_loop_overlap
    batch_result = self.run_batch(batch)
  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/speculative/eagle_worker_v2.py", line 612, in forward_batch_generation
    batch_output = self.verify(batch)
RuntimeError: CUDA error: an illegal memory access was encountered (simulated by --sim-crash-after)"""


def _sleep_scaled(sim_seconds: float, scale: float) -> None:
    if sim_seconds > 0:
        time.sleep(sim_seconds / scale)


def startup_lines(cfg: dict[str, Any], log: Logger) -> None:
    """SGLang-like model loading, KV cache and CUDA graph lines, paced in simulated time."""
    scale = cfg["time_scale"]
    load = cfg["load_time"]
    log.info("Load weight begin. avail mem=78.51 GB")
    _sleep_scaled(load * 0.5, scale)
    log.info("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=70.32 GB, mem usage=8.19 GB.")
    if cfg["spec"]:
        log.info("Load weight begin. avail mem=70.30 GB")
        _sleep_scaled(load * 0.1, scale)
        log.info("Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=69.42 GB, mem usage=0.88 GB.")
    tokens = cfg["max_total_tokens"]
    log.info(f"KV Cache is allocated. #tokens: {tokens}, K size: 16.00 GB, V size: 16.00 GB")
    log.info("Memory pool end. avail mem=37.40 GB")
    log.info("Capture cuda graph begin. This can take up to several minutes. avail mem=37.12 GB")
    _sleep_scaled(load * 0.4, scale)
    log.info("Capture cuda graph end. Time elapsed: 2.31 s. mem usage=1.02 GB. avail mem=36.10 GB.")
    log.info(
        f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={cfg['max_running_requests']}, "
        f"context_len={cfg['context_length']}, available_gpu_mem=36.10 GB"
    )


_explorers: dict[int, Explorer] = {}  # per rank (the light ranks share a process)


def make_switch(cfg: dict[str, Any], log: Logger, rank: int = 0) -> decision.SpecSwitch | None:
    _explorers[rank] = Explorer(cfg.get("explore_share", 0.0))
    if cfg["spec"] and cfg.get("off_reason"):  # --sim-fail-build-rank: every rank turns off
        log.warning(decision.NOT_ACTIVE_PREFIX + cfg["off_reason"])
        return None
    if not cfg["spec"]:
        if cfg["settings"]["threshold"] > 0 or cfg["settings"]["force"] != decision.AUTO:
            log.info(decision.NOT_ACTIVE_PREFIX + "no --speculative-algorithm is set")
        return None
    sw = decision.SpecSwitch(**cfg["settings"])
    if sw.enabled:
        log.info(decision.init_line(sw.threshold, sw.hysteresis, sw.min_dwell_steps))
    return sw


HANDSHAKE_READY = "ready"  # a rank's first message to the parent: initialised


def apply_setting(sw: decision.SpecSwitch, key: str, value: object) -> str:
    """One runtime setting on this rank's switch (KeyError: not one of ours); its log line."""
    setting = runtime_settings.by_key(key)
    if setting is None:
        raise KeyError(key)
    return runtime_settings.apply(sw, setting, value)[0]


def _idle_until(deadline: float | None) -> None:
    while True:
        left = None if deadline is None else deadline - time.time()
        if left is not None and left <= 0:
            os._exit(0)
        time.sleep(3600 if left is None else min(left, 3600))


def handle(
    rank: int, sw: decision.SpecSwitch | None, log: Logger, msg: tuple[Any, ...], off_reason: str | None = None
) -> tuple[Any, ...]:
    """One "step" or "set" message of the main process -> the rank's reply. Shared by the
    spawned rank processes and the in-process ranks of ``--sim-light`` (rank_objects.py).
    ``off_reason``: why the switch is off on this rank (the refusal of a runtime change)."""
    if msg[0] == "step":
        _, step_no, batch, lines = msg
        if rank == 0:
            for line in lines:
                log.info(line)
        mode = None
        if sw is not None:
            text = sw.decide(batch)
            if text:
                log.info(text)
            # exploration flips the same steps on every rank: step number, batch and N only
            mode = _explorers[rank].mode(
                sw.mode,
                sw.steps[decision.SPECULATIVE] + sw.steps[decision.TARGET_ONLY],
                batch,
                sw.threshold,
                sw.force == decision.AUTO,
            )
            sw.draft_cold(batch, mode)  # each rank marks its own cold steps, as the patch's ranks do
        return ("mode", step_no, mode)
    _, key, value = msg
    try:
        if sw is None and runtime_settings.by_key(key) is not None:
            raise ValueError(
                f"dynamic speculation disable is not active on this rank ({off_reason})"
                if off_reason
                else "speculative decoding is not enabled (no --speculative-algorithm)"
            )
        if sw is None:
            raise KeyError(key)  # not one of our settings: SGLang's own answer
        text = apply_setting(sw, key, value)
    except KeyError:
        text = f"Updating {key} is not supported."
    except ValueError as exc:
        text = f"Dynamic speculation: refused {key}={value}: {exc}"
    else:
        log.info(text)
        return ("set", True, text)
    if rank == 0:
        log.info(text)
    return ("set", False, text)


def run_rank(rank: int, cfg: dict[str, Any], conn: Connection) -> None:
    """Entry point of a spawned TP rank."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the main process decides
    log = Logger(rank_tag(rank, cfg["tp_size"]))
    deadline = cfg["deadline"]
    try:
        startup_lines(cfg, log)
        sw = make_switch(cfg, log, rank)
        conn.send((HANDSHAKE_READY, rank, os.getpid()))
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.time())
            if not conn.poll(timeout):
                os._exit(0)  # bounded lifetime reached
            msg = conn.recv()
            kind = msg[0]
            if kind in ("step", "set"):
                conn.send(handle(rank, sw, log, msg, cfg.get("off_reason")))
            elif kind == "crash":
                if rank == 0:
                    log.error(CRASH_TRACEBACK)
                os._exit(1)
            elif kind == "stop":
                os._exit(0)
    except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
        log.error("Scheduler lost its connection to the main process; idling until signalled.")
        _idle_until(deadline)
    except KeyboardInterrupt:
        os._exit(0)
