"""The real ``SchedulerRequestReceiver`` (patched through the hook) around real zmq sockets,
a rank's patched worker with the in-server tuner, and cost counters fed from the
simulator's step-time model (crossover 5 at its defaults), for tests/sglang/test_autotune*.py."""

from __future__ import annotations

import dataclasses
import random
from types import SimpleNamespace
from typing import Any

import zmq

SPEC = dict(
    speculative_algorithm="EAGLE3",
    speculative_eagle_topk=1,
    speculative_num_steps=3,
    speculative_num_draft_tokens=4,
    speculative_disable_min_dwell_steps=0,
)


def feed(counters, steps: int = 3000, seed: int = 1, t0: float = 0.0) -> float:
    """``steps`` decode steps, batch uniform 1..20, each mode half of them (as exploration
    would give at every batch), timed by the simulator's model. Returns the clock after."""
    from server_control.sim import model

    cal = dataclasses.replace(model.DEFAULT, kv_ms_per_ktoken=0.0)
    rng = random.Random(seed)
    t = t0
    for _ in range(steps):
        b = rng.randint(1, 20)
        mode = "speculative" if rng.random() < 0.5 else "target_only"
        counters.step(mode, b, t, 500.0)
        t += model.step_ms(mode, b, cal, 500.0) / 1000
        counters.commit(mode, b, sum(model.sample_accept(rng, 0.777, 3) for _ in range(b)) if mode == "speculative" else b)
    return t


def publish(threshold: int, auto_tune: str):
    """A published config with the patch's fields (restore it with ``.restore()``)."""
    from sglang.srt.runtime_context import get_context

    from tests.sglang.objects import require_patched_server_args

    require_patched_server_args()
    override = get_context().override_server_args(
        **SPEC, speculative_disable_batch_threshold=threshold, speculative_disable_auto_tune=auto_tune
    )
    return override, override.install()


def rank_worker(server_args):
    """A started patched EAGLEWorkerV2 (stand-ins at the device edge): its DynamicSpeculation."""
    import sglang.srt.speculative.eagle_worker_v2 as ew

    from server_control.sglang_patch import current_rank
    from server_control.sglang_patch import worker as patch_worker
    from tests.sglang.objects import Recorder, build_worker

    worker = build_worker(ew.EAGLEWorkerV2, Recorder())
    worker._dynspec = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    current_rank.set_current(worker._dynspec)
    worker.init_cuda_graphs()
    return worker


class Receiver:
    """SGLang's SchedulerRequestReceiver on two real zmq PULL sockets (tokenizer, rpc)."""

    def __init__(self, server_args, pulls: bool = True) -> None:
        from sglang.srt.managers.scheduler_components.request_receiver import SchedulerRequestReceiver

        self.ctx = zmq.Context()
        self.sockets: list[Any] = []
        self.push = None
        if pulls:
            pull = self._socket(zmq.PULL, "tok")
            self.push = self.ctx.socket(zmq.PUSH)
            self.push.connect(f"inproc://tok-{id(self)}")
            rpc = self._socket(zmq.PULL, "rpc")
        else:
            pull = rpc = None
        self.real = SchedulerRequestReceiver(
            recv_from_tokenizer=pull,
            recv_from_rpc=rpc,
            recv_skipper=None,
            input_blocker=None,
            mm_receiver=None,
            server_args=server_args,
            model_config=SimpleNamespace(is_multimodal=False),
            max_recv_per_poll=-1,
            stream_output=lambda *a, **kw: None,
            get_last_batch=lambda: None,
        )

    def _socket(self, kind, name):
        s = self.ctx.socket(kind)
        s.bind(f"inproc://{name}-{id(self)}")
        self.sockets.append(s)
        return s

    def send(self, obj) -> None:
        from sglang.srt.managers.io_struct import _USE_PICKLE_IPC, msgpack_encode

        if _USE_PICKLE_IPC:
            self.push.send_pyobj(obj)
        else:
            self.push.send(msgpack_encode(obj))

    def close(self) -> None:
        for s in [*self.sockets, *([self.push] if self.push else [])]:
            s.close(linger=0)
        self.ctx.term()


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def two_rank_child(rank: int, port: int, variants: tuple[bool, ...], out) -> None:
    """One TP rank of two (a spawned process): a real gloo group as SGLang's TP CPU group,
    SGLang's receiver; for each variant in turn (``tp0_only``: the negative control, TP0
    applies its own move and nothing is broadcast) puts (rank, tp0_only, [(names SGLang got,
    threshold)] per iteration). The variants share the two processes (each imports SGLang
    and torch once) and the group; each starts from a fresh published config, worker and
    receiver."""
    from server_control.sglang_patch import hook

    hook.install()  # before anything imports SGLang, as the bootstrap does
    import sglang.srt.managers.scheduler_components.request_receiver  # noqa: F401 - patched on import
    import torch.distributed as dist
    from sglang.srt.managers.io_struct import AbortReq
    from sglang.srt.runtime_context import get_parallel

    from server_control.sglang_patch import autotune

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    group = SimpleNamespace(rank=rank, rank_in_group=rank, ranks=[0, 1], world_size=2, cpu_group=dist.group.WORLD)
    ranks = dict(moe_tp_size=2, tp_size=2, tp_rank=rank, attn_tp_size=2, attn_tp_rank=rank, pp_rank=0, attn_cp_rank=0)
    offer = autotune.AutoTune.offer
    for tp0_only in variants:
        override, server_args = publish(16, "1-16")
        with get_parallel().override(**ranks, tp_group=group):
            dyn = rank_worker(server_args)._dynspec
            clock = dyn.autotune.clock = Clock()
            if tp0_only:

                def local_offer(self):
                    move = offer(self)
                    if move is not None:
                        self.apply(move)
                        self.pending = None
                    return None

                autotune.AutoTune.offer = local_offer  # type: ignore[method-assign]
            receiver = Receiver(server_args, pulls=rank == 0)
            feed(dyn.curves, seed=10 + rank)  # each rank's own timings (TP1's never decide)
            seen = []
            for i in range(4):
                clock.t = 6.0 * i
                got = receiver.real.recv_requests(local_reqs=[AbortReq(rid=f"abort-{i}")] if rank == 0 else [])
                feed(dyn.curves, steps=500, seed=100 * i + rank, t0=1000.0 * (i + 1))
                seen.append(([type(r).__name__ for r in got], dyn.switch.threshold))
            out.put((rank, tp0_only, seen))
            receiver.close()
        autotune.AutoTune.offer = offer  # type: ignore[method-assign]
        autotune._active[0] = None
        override.restore()
        dist.barrier()  # both ranks done with this variant before the next one's first broadcast
    dist.destroy_process_group()
