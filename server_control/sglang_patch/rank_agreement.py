"""Every rank of a tensor-parallel group runs the same mode, or none switches.

A TP group runs one collective per decode step: a rank doing a multi-token verify while
another does a one-token one hangs or computes garbage. So, once per start-up, after the
steps=0 state was built (``settle``), every rank of the group reports its facts (active,
the four settings, the SGLang version, the patch version) and rank 0 judges them
(``judge``): unless every rank is active with the same settings and versions, EVERY rank
turns the switch off and logs the same ``NOT active`` line naming the ranks and why. The
server keeps serving (plain speculation on every rank).

The exchange goes through the world process group's key-value store (the TCPStore SGLang
created for ``init_process_group``; point-to-point, with a timeout), not through a
collective on the CPU (gloo) group: a rank without the patch (another node, another
SGLang version) never joins, and a collective abandoned at a timeout would leave the
group's sequence out of step with SGLang's next ``broadcast_pyobj`` on the same group.
Rank 0 writes one verdict; the others wait for it (a little longer), so every rank that
answers reads the same verdict; a rank that gets none turns off.

Once the verdict says every rank runs this patch in a set-up it was not refused for
(``uniform``: no attention DP or PP, where the TP ranks do not all handle each request in
step), the live per-rank values
are gathered over the CPU group at points every rank reaches in the same order (each
``/server_info`` and ``/set_internal_state`` request is broadcast to every TP rank and
handled at the same point of its loop): ``gather_live``.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
from typing import Any

from server_control.protocol import decision, rank_verdict
from server_control.protocol.rank_verdict import Verdict, judge

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")

PROTOCOL = "v1"  # the store keys below; keep them stable so other patch versions are named
TIMEOUT_ENV = "SPECCONSOLE_DYNSPEC_AGREE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0
VERDICT_GRACE_S = 30.0  # ranks > 0 wait this much longer than TP0 for its verdict
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_version: list[Any] = []


def patch_version() -> str:
    """A digest of the code that decides (this package and protocol/decision.py)."""
    if not _version:
        digest = hashlib.sha256()
        files = sorted(f for f in os.listdir(_PACKAGE_DIR) if f.endswith(".py"))
        paths = [os.path.join(_PACKAGE_DIR, f) for f in files]
        paths.append(os.path.abspath(decision.__file__))
        for path in paths:
            with open(path, "rb") as fh:
                digest.update(os.path.basename(path).encode() + b"\0" + fh.read())
        _version.append(digest.hexdigest()[:12])
    version: str = _version[0]
    return version


def settings_of(switch: Any) -> list[Any]:
    return [switch.threshold, switch.hysteresis, switch.min_dwell_steps, switch.force]


def facts(active: bool, reason: str | None, settings: list[Any], sglang: str,
          setup_ok: bool = True) -> dict[str, Any]:
    """One rank's report. ``setup_ok``: no refusal of the set-up (refusals.py) on this rank."""
    return {"active": bool(active), "reason": reason, "settings": list(settings),
            "sglang": sglang, "patch": patch_version(), "setup_ok": bool(setup_ok)}


def timeout_s() -> float:
    try:
        return max(1.0, float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _key(group: Any, what: str) -> str:
    return f"specconsole/dynspec/{PROTOCOL}/tp{'-'.join(map(str, group.ranks))}/{what}"


def agree(mine: dict[str, Any], group: Any, store: Any, timeout: float) -> Verdict:
    """Exchange ``mine`` with the other ranks of ``group`` through ``store``."""
    store.set(_key(group, f"facts/{group.rank_in_group}"), json.dumps(mine))
    verdict_key = _key(group, "verdict")
    if group.rank_in_group == 0:
        keys = [_key(group, f"facts/{i}") for i in range(group.world_size)]
        try:
            store.wait(keys, datetime.timedelta(seconds=timeout))
        except Exception:  # noqa: BLE001 - a timeout: judge who answered
            pass
        got = [json.loads(store.get(k)) if store.check([k]) else None for k in keys]
        verdict = judge(got, timeout)
        store.set(verdict_key, verdict.to_json())
        return verdict
    wait = timeout + VERDICT_GRACE_S
    try:
        store.wait([verdict_key], datetime.timedelta(seconds=wait))
        return Verdict.from_json(store.get(verdict_key))
    except Exception:  # noqa: BLE001
        return Verdict(False, f"no verdict from TP0 within {wait:.0f} s (TP0 has no "
                       "patch, another version of it, or failed); the switch is off on every rank",
                       False)


def tp_group() -> Any:
    """SGLang's tensor-parallel GroupCoordinator, or None (not distributed, e.g. tests)."""
    try:
        import torch.distributed as dist
        if not dist.is_initialized():
            return None
        from sglang.srt.runtime_context import get_parallel
        group = get_parallel().tp_group
    except Exception:  # noqa: BLE001
        return None
    return group if getattr(group, "world_size", 1) > 1 else None


def settle(dyn: Any, local_failure: str | None) -> bool:
    """After the build on this rank: agree with the other TP ranks. Returns whether this
    rank's switch is ready; otherwise it is off with one ``NOT active`` line."""
    from server_control.sglang_patch import gate
    active = dyn.active and local_failure is None
    reason = local_failure or dyn.reason
    group = tp_group()
    if group is None:
        dyn.verdict = None
    else:
        import torch.distributed.distributed_c10d as c10d
        settings = settings_of(dyn.switch) if dyn.switch is not None else []
        mine = facts(active, reason, settings, gate.sglang_version(),
                     setup_ok=dyn.active)
        try:
            dyn.verdict = agree(mine, group, c10d._get_default_store(), timeout_s())
        except Exception as exc:  # noqa: BLE001
            dyn.verdict = Verdict(False, f"the TP ranks could not agree ({exc!r}); the switch "
                                  "is off on every rank", False)
        if not dyn.verdict.agreed:
            active, reason = False, dyn.verdict.reason
    if not active:
        if dyn.active:
            dyn.deactivate(reason)
        else:
            dyn.reason = dyn.reason or reason
            gate.not_active(reason)
        return False
    return True


def encode_live(snapshot: dict[str, Any]) -> list[int]:
    """One rank's live entry as integers, for the gather."""
    e = rank_verdict.live_entry(0, snapshot)
    steps = e["num_steps"]
    return [int(e["active"]), e["threshold"], e["hysteresis"], e["min_dwell_steps"],
            decision.FORCE_CHOICES.index(e["force"]), decision.MODES.index(e["mode"]),
            -1 if steps is None else steps, e["switch_count"], e["last_batch"]]


def decode_live(rows: list[list[int]]) -> list[dict[str, Any]]:
    out = []
    for rank, row in enumerate(rows):
        item: dict[str, Any] = dict(zip(rank_verdict.LIVE_KEYS, row))
        item["active"] = bool(item["active"])
        item["force"] = decision.FORCE_CHOICES[item["force"]]
        item["mode"] = decision.MODES[item["mode"]]
        item["num_steps"] = None if item["num_steps"] < 0 else item["num_steps"]
        out.append(rank_verdict.live_entry(rank, item))
    return out


def gather_live(dyn: Any) -> list[dict[str, Any]] | None:
    """Every TP rank's live values (a collective: call it where every rank does), or None
    when the group is one rank or not every rank runs this patch."""
    verdict = dyn.verdict
    if verdict is None or not verdict.uniform:
        return None
    group = tp_group()
    if group is None:
        return None
    import torch
    import torch.distributed as dist
    mine = torch.tensor(encode_live(dyn.snapshot()), dtype=torch.int64)
    rows = [torch.empty_like(mine) for _ in range(group.world_size)]
    dist.all_gather(rows, mine, group=group.cpu_group)
    return decode_live([r.tolist() for r in rows])
