"""Every rank of a tensor-parallel group runs the same mode, or none switches.

A TP group runs one collective per decode step: a rank doing a multi-token verify while
another does a one-token one hangs or computes garbage. And the steps=0 build itself runs
collectives (with CUDA graphs each capture does a ``barrier()`` on the TP CPU group and
warm-up forwards with all-reduces per bucket): a rank that skips the build leaves the
others in that collective forever. So, once per start-up and BEFORE the build
(``settle``), every rank of the group reports its facts (whether it will build and why
not, the four settings, the SGLang version, the patch version, its free memory against
the estimate of the steps=0 state) and rank 0 judges them (``judge``): unless every rank
said yes with the same settings and versions, NO rank builds, EVERY rank turns the switch
off and logs the same ``NOT active`` line naming the ranks and why. The server keeps
serving (plain speculation on every rank). After the build every rank reports whether
its build succeeded, and a rank still inside its build learns of a failure elsewhere
(build_outcome.py): a failed build stops the server on every rank within seconds, the
failure named (see docs/sglang-patch.md, "Every rank").

The exchange goes through the world process group's key-value store (the TCPStore SGLang
created for ``init_process_group``; point-to-point, with a timeout), not through a
collective on the CPU (gloo) group: a rank without the patch (another node, another
SGLang version) never joins, and a collective abandoned at a timeout would leave the
group's sequence out of step with SGLang's next ``broadcast_pyobj`` on the same group.
Rank 0 writes one verdict; the others wait for it (a little longer), so every rank that
answers reads the same verdict; a rank that gets none turns off. The keys carry a run
number (one per ``init_cuda_graphs`` in the process, the same on every rank), so a second
build in the same process group never reads the previous run's verdict.

Once the verdict says every rank runs this patch in a set-up it was not refused for
(``uniform``: no attention DP or PP, where the TP ranks do not all handle each request in
step), the live per-rank values are gathered over the CPU group at points every rank
reaches in the same order (each ``/server_info`` and ``/set_internal_state`` request is
broadcast to every TP rank and handled at the same point of its loop): ``gather_live``.
Every rank takes part whatever happened before on it (a failure there is sent as a
"rank failed: ..." row), and ``/server_info`` gathers at most once every
``GATHER_EVERY`` requests (a request counter, identical on every rank; the others reuse
the last rows): see ``live_rows``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os

from server_control.protocol import decision, rank_verdict, runtime_settings
from server_control.protocol.rank_verdict import Verdict, judge
from server_control.sglang_patch.sglang_shapes import GroupCoordinator, RankState, Store

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")

PROTOCOL = "v2"  # the store keys below; keep them stable so other patch versions are named
TIMEOUT_ENV = "SPECCONSOLE_DYNSPEC_AGREE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0
VERDICT_GRACE_S = 30.0  # ranks > 0 wait this much longer than TP0 for its verdict
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_version: list[str] = []
_run = [0]  # this process's init_cuda_graphs runs (the same count on every rank)
LIVE_BYTES = 768  # one rank's live row in the gather: JSON, space-padded
GATHER_EVERY_ENV = "SPECCONSOLE_DYNSPEC_GATHER_EVERY"
DEFAULT_GATHER_EVERY = 4
STORE_MISSING = "torch.distributed has no default store (torch's private distributed_c10d._get_default_store is gone or failed)"


def patch_version() -> str:
    """A digest of the code that decides (this package and decision.py)."""
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


def settings_of(switch: decision.SpecSwitch) -> list[int | str]:
    """The switch's runtime settings in the table's order (protocol/runtime_settings.py)."""
    return [switch.setting(s.field) for s in runtime_settings.SETTINGS]


def facts(
    active: bool,
    reason: str | None,
    settings: list[int | str],
    sglang: str,
    setup_ok: bool = True,
    memory: dict[str, float | None] | None = None,
) -> dict[str, object]:
    """One rank's report. ``active``: it will build; ``setup_ok``: no refusal of the
    set-up (refusals.py) on this rank; ``memory``: its free memory and the estimate."""
    out: dict[str, object] = {
        "active": bool(active),
        "reason": reason,
        "settings": list(settings),
        "sglang": sglang,
        "patch": patch_version(),
        "setup_ok": bool(setup_ok),
    }
    if memory is not None:
        out["memory"] = dict(memory)
    return out


def timeout_s() -> float:
    try:
        return max(1.0, float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _key(group: GroupCoordinator, what: str, run: int = 1) -> str:
    return f"specconsole/dynspec/{PROTOCOL}/tp{'-'.join(map(str, group.ranks))}/run{run}/{what}"


def next_run() -> int:
    """A new run number (one per init_cuda_graphs in this process)."""
    _run[0] += 1
    return _run[0]


def default_store() -> Store:
    """The world process group's store (torch private API, guarded): raises RuntimeError
    with STORE_MISSING when it cannot be had."""
    try:
        import torch.distributed.distributed_c10d as c10d

        store: Store | None = c10d._get_default_store()
    except Exception as exc:  # noqa: BLE001 - torch's private store API: any failure named in one line
        raise RuntimeError(f"{STORE_MISSING}: {exc!r}") from None
    if store is None:
        raise RuntimeError(STORE_MISSING)
    return store


def agree(mine: dict[str, object], group: GroupCoordinator, store: Store, timeout: float, run: int = 1) -> Verdict:
    """Exchange ``mine`` with the other ranks of ``group`` through ``store``."""
    store.set(_key(group, f"facts/{group.rank_in_group}", run), json.dumps(mine))
    verdict_key = _key(group, "verdict", run)
    if group.rank_in_group == 0:
        keys = [_key(group, f"facts/{i}", run) for i in range(group.world_size)]
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
        return Verdict.from_json(store.get(verdict_key).decode())
    except Exception:  # noqa: BLE001 - no verdict in time, or a store error: either way the switch stays off
        return Verdict(
            False,
            f"no verdict from TP0 within {wait:.0f} s (TP0 has no "
            "patch, another version of it, or failed); the switch is off on every rank",
            False,
        )


def tp_group() -> GroupCoordinator | None:
    """SGLang's tensor-parallel GroupCoordinator, or None (not distributed, e.g. tests)."""
    try:
        import torch.distributed as dist

        if not dist.is_initialized():
            return None
        from sglang.srt.runtime_context import get_parallel

        group = get_parallel().tp_group
    except Exception:  # noqa: BLE001 - no TP group to agree with: a single rank decides alone
        return None
    return group if getattr(group, "world_size", 1) > 1 else None


def settle(dyn: RankState, local_failure: str | None, memory: dict[str, float | None] | None = None) -> bool:
    """BEFORE the steps=0 build: agree with the other TP ranks whether every rank builds.
    ``local_failure``: why this rank will not build (besides ``dyn``'s own refusal).
    Returns whether this rank (and so every rank) builds; otherwise it is off with one
    ``NOT active`` line, and so is every other rank."""
    from server_control.sglang_patch import gate

    active = dyn.active and local_failure is None
    reason = local_failure or dyn.reason
    group = tp_group()
    dyn.run = next_run()
    if group is None:
        dyn.verdict = None
    else:
        settings = settings_of(dyn.switch) if dyn.switch is not None else []
        mine = facts(
            active, reason, settings, gate.sglang_version(), setup_ok=dyn.active or local_failure is not None, memory=memory
        )
        try:
            dyn.verdict = agree(mine, group, default_store(), timeout_s(), dyn.run)
        except Exception as exc:  # noqa: BLE001 - the agreement must never stop the server: the switch goes off instead
            dyn.verdict = Verdict(False, f"the TP ranks could not agree ({exc}); the switch is off on every rank", False)
        if not dyn.verdict.agreed:
            active, reason = False, dyn.verdict.reason
    if not active:
        assert reason is not None  # a rank that does not build says why (None never reached gate.not_active)
        if dyn.active:
            dyn.deactivate(reason)
        else:
            dyn.reason = dyn.reason or reason
            gate.not_active(reason)
        return False
    return True


def encode_live(snapshot: dict[str, object]) -> dict[str, object]:
    """One rank's live entry, for the gather."""
    entry = rank_verdict.live_entry(0, snapshot)
    entry.pop("rank", None)
    for key in rank_verdict.EXTRA_LIVE_KEYS:
        if snapshot.get(key) is not None:
            entry[key] = snapshot[key]
    if isinstance(entry.get("auto_tune"), dict):  # the row's share of LIVE_BYTES: no evidence text
        entry["auto_tune"] = {k: entry["auto_tune"].get(k) for k in rank_verdict.AUTO_TUNE_ROW}
    return entry


def _pack(entry: dict[str, object]) -> bytes:
    raw = json.dumps(entry, separators=(",", ":")).encode()
    if len(raw) > LIVE_BYTES:  # keep what identifies the rank; cut the rest
        short = {k: entry[k] for k in rank_verdict.live_keys() if k in entry}
        if "failed" in entry:
            short["failed"] = str(entry["failed"])[: LIVE_BYTES // 2]
        raw = json.dumps(short, separators=(",", ":")).encode()[:LIVE_BYTES]
    return raw.ljust(LIVE_BYTES, b" ")


def decode_live(rows: list[bytes]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for rank, raw in enumerate(rows):
        try:
            item = json.loads(raw.decode("utf-8", "replace").strip())
        except ValueError:
            item = {"failed": "unreadable live row"}
        if "failed" in item and "mode" not in item:
            out.append({"rank": rank, "failed": f"rank failed: {item['failed']}"})
            continue
        row = rank_verdict.live_entry(rank, item)
        for key in (*rank_verdict.EXTRA_LIVE_KEYS, "failed"):
            if key in item:
                row[key] = item[key] if key != "failed" else f"rank failed: {item[key]}"
        out.append(row)
    return out


def gather_every() -> int:
    try:
        return max(1, int(os.environ.get(GATHER_EVERY_ENV, DEFAULT_GATHER_EVERY)))
    except ValueError:
        return DEFAULT_GATHER_EVERY


def gather_live(dyn: RankState, failure: BaseException | None = None) -> list[dict[str, object]] | None:
    """Every TP rank's live values (a collective: call it where every rank does), or None
    when the group is one rank or not every rank runs this patch. Never raises before
    its part of the collective is done: ``failure`` (what went wrong on this rank before)
    or a failure of its own snapshot is sent as a "rank failed: ..." row."""
    verdict = getattr(dyn, "verdict", None)
    if verdict is None or not verdict.uniform:
        return None
    group = tp_group()
    if group is None:
        return None
    import torch
    import torch.distributed as dist

    try:
        entry: dict[str, object] = encode_live(dyn.snapshot())
    except Exception as exc:  # noqa: BLE001 - still take part
        entry = {"failed": repr(exc)}
    if failure is not None:
        entry["failed"] = repr(failure)
    mine = torch.frombuffer(bytearray(_pack(entry)), dtype=torch.uint8)
    rows = [torch.empty_like(mine) for _ in range(group.world_size)]
    dist.all_gather(rows, mine, group=group.cpu_group)
    return decode_live([bytes(r.tolist()) for r in rows])


class LiveCache:
    """``/server_info``'s rows: gathered on the first request and then every
    ``gather_every()``-th one; the others reuse the last rows. Every rank counts the same
    requests (each is broadcast to every TP rank), so every rank decides alike. A new
    ``version`` (the in-server tuner's move count, alike on every rank) gathers again."""

    def __init__(self) -> None:
        self.requests = 0
        self.rows: list[dict[str, object]] | None = None
        self.age = 0  # requests since the rows were gathered
        self.version = 0

    def rows_for(self, dyn: RankState, failure: BaseException | None = None, version: int = 0) -> list[dict[str, object]] | None:
        due = self.rows is None or version != self.version or self.requests % gather_every() == 0
        self.version = version
        self.requests += 1
        if due:
            self.rows = gather_live(dyn, failure)
            self.age = 0
        else:
            self.age += 1
        return self.rows
