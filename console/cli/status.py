"""`specconsole status`: the session snapshot (what the screen shows), once.

The server is the profile's run (`--profile F`: a path or a shipped name), any server by
URL (`--url URL`, optionally `--log FILE` to read its log) or the run of `specconsole demo`
(`--demo`: its state dir and the port it took); with none of them $SPECCONSOLE_PROFILE,
else the demo's run. A server that does not answer is named with its URL. API keys for `--url` come from the environment variables
named by `--api-key-env` / `--admin-api-key-env` (default SPECCONSOLE_API_KEY and
SPECCONSOLE_ADMIN_API_KEY); profiles name their own variables.

Exit codes: 0 the server answered; 1 what answers is not this run's server, or `--demo` has
no run; 2 bad profile or arguments; 3 not running: the profile's run was stopped on purpose
(or never launched), so nothing should answer; 5 no answer at the server's URL (the snapshot
is still printed, with the reason); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    add_target_arguments,
    answered_nothing,
    error,
    open_session,
    run_async,
    settle,
    unreachable_hint,
)
from server_control.model.latency import line as latency_line
from server_control.model.rank_resources import RankResources
from server_control.model.run_status import RunStatus
from server_control.model.snapshot import SessionSnapshot, SpecStatus
from server_control.model.verification import Verification
from server_control.model.vocabulary import RunState
from server_control.supervision.ownership import ROLE_WORDS

EPILOG = (
    "Exit codes: 0 the server answered, 1 it is not this run's server, 2 bad profile/arguments, "
    "3 not running (stopped on purpose), 5 no answer (snapshot printed with the reason), 130 interrupted."
)
EXIT_NOT_RUNNING = 3


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def _run_state(run: RunStatus) -> str:
    """``crashed (exit 3)``, ``crashed (exit -9, signal 9)``: how a dead run ended."""
    state, code = run.state, run.exit_code
    if state not in (RunState.CRASHED, RunState.FATAL):
        return str(state)
    if code is None:
        return f"{state} (exit code unknown)"
    return f"{state} (exit {code}" + (f", signal {-code})" if code < 0 else ")")


def _cold(spec: SpecStatus) -> str:
    """The cold-draft mark and its count (nothing from a server that does not say them)."""
    if spec.cold_draft_above is None:
        return ""
    mark = f"above {spec.cold_draft_above}" if spec.cold_draft_above > 0 else "never (kept warm)"
    return f"  draft cold {mark}, {_fmt(spec.cold_steps)} cold steps"


def _who(info) -> str:
    return f"{ROLE_WORDS.get(info.kind, info.kind)} pid {info.pid} (since {info.since})"


def _supervisor_line(run: RunStatus) -> str:
    who, lost, prior = run.supervisor, run.lost_supervisor, run.took_over_from
    if run.supervising:
        return "supervisor: this process" + (f" (took over from {_who(prior)}, which ended without detaching)" if prior else "")
    if who is None and lost is not None:
        return (
            f"supervisor: none: {_who(lost)} ended without detaching (killed or crashed); "
            "nobody restarts a crash; `specconsole supervise` would"
        )
    if who is None:
        return "supervisor: none (nobody restarts a crash; `specconsole supervise` would)"
    return f"supervisor: {ROLE_WORDS.get(who.kind, who.kind)}, pid {who.pid}, since {who.since}"


def render_text(snap: SessionSnapshot) -> str:
    run, srv, spec, live, gpus, ver = snap.run, snap.server, snap.spec, snap.live, snap.gpus, snap.verify
    lines = [
        f"{snap.profile or '(attached)'}  {snap.url}  run: {_run_state(run)}"
        + (f" pid {run.pid}" if run.pid else "")
        + f"  restarts {run.restarts}",
        f"server: {'reachable' if srv.reachable else 'UNREACHABLE: ' + str(srv.error)}"
        f"  model {_fmt(srv.model)}  tp {_fmt(srv.tp_size)}  dp {_fmt(srv.dp_size)}"
        f"  version {_fmt(srv.version)}",
        f"speculation: mode {_fmt(spec.mode)}  threshold {_fmt(spec.threshold)} decode requests"
        f" (back at <= {_fmt(spec.low_mark)})  force {_fmt(spec.force)}"
        f"  switches {_fmt(spec.switch_count)}{_cold(spec)}  runtime changes "
        + {True: "supported", False: "NOT supported", None: "unknown"}[spec.supports_runtime_threshold],
        f"live: batch {_fmt(live.batch)}  queue {_fmt(live.queue)}  token usage {_fmt(live.token_usage)}"
        f"  gen {_fmt(live.gen_throughput)} tok/s  accept len {_fmt(live.accept_len)}",
    ]
    if run.supervising is not None:  # a profile's run (an attached server has no supervision)
        lines.append(_supervisor_line(run))
        lines += [f"  {note}" for note in (run.last_error, run.runtime_note) if note]
    for mode, pm in snap.timeline.per_mode.items():
        lines.append(f"  {mode:12s} share {_fmt(pm.share)}  {_fmt(pm.tok_s)} tok/s")
    lines.append(latency_line(srv.latency))
    if gpus.available:
        for dev in gpus.devices:
            lines.append(
                f"gpu {dev.index} {dev.name}: util {_fmt(dev.util)}%  mem {_fmt(dev.mem_used_mb)}"
                f"/{_fmt(dev.mem_total_mb)} MB  {_fmt(dev.power_w)} W  {_fmt(dev.temp_c)} C"
                f"  pids {list(dev.pids)}"
            )
    else:
        lines.append(f"gpus: N/A ({gpus.reason})")
    lines += [rank_line(r) for r in spec.health.ranks]
    lines.append(verification_text(ver, "verify", "cause"))
    logs = snap.logs
    lines.append(f"log: {_fmt(logs.path)}  {logs.total} records, {logs.dropped} dropped from memory, {logs.truncated} long")
    return "\n".join(lines)


def rank_line(r: RankResources) -> str:
    """One rank's steps=0 state memory (GiB) and graph/all decode steps per mode."""
    if r.failed:
        return f"rank {r.rank}: {r.failed}"
    m = r.memory
    graphs = "  ".join(
        f"{mode} target {r.graph_share(mode, 'target')} draft-extend {r.graph_share(mode, 'draft_extend')}" for mode in r.forwards
    )
    return (
        f"rank {r.rank}: steps=0 state {_fmt(m.get('used_gib'))} GiB (estimate "
        f"{_fmt(m.get('estimate_gib'))}, reserved {_fmt(m.get('reserved_gib'))}, free before "
        f"{_fmt(m.get('free_gib'))})  graph/all steps: {graphs or 'none yet'}"
    )


def verification_text(ver: Verification, title: str, cause: str) -> str:
    """The verdict and one line per layer (with its likely cause), for status and verify."""
    lines = [f"{title}: {ver.summary}"]
    for layer in ver.layers:
        lines.append(f"  {layer.name:15s} {layer.status:7s} {layer.evidence}")
        if layer.cause:
            lines.append(f"  {'':15s} {cause}: {layer.cause}")
    return "\n".join(lines)


async def _status(args) -> int:
    session = open_session(args)
    await session.start()
    try:
        await settle(session)
        snap = session.snapshot()
        hint, nothing = unreachable_hint(snap.url, session), answered_nothing(session)
    finally:
        await session.close()
    print(json.dumps(snap.to_json(), indent=1) if args.json else render_text(snap))
    if not snap.server.reachable:
        error(hint)
        stopped = snap.run.state == RunState.STOPPED and not snap.attached and not snap.server.foreign
        if stopped:
            return EXIT_NOT_RUNNING
        return EXIT_UNREACHABLE if nothing and not snap.server.foreign else EXIT_FAILED
    return EXIT_OK


def cmd_status(args) -> int:
    return run_async(_status, args)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "status",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
        help="print the session snapshot (run, server, speculation, GPUs, verification)",
    )
    add_target_arguments(p)
    p.set_defaults(func=cmd_status)
