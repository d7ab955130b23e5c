"""What each mode really costs on the real server: a CPU rig pair (trained, deep, crossover).

    python -m benchmarks.mode_cost [--levels 1,2,4,8,16] [--rounds 3] [--warmup 3]
                                   [--measure 10] [--max-tokens 64] [--auto-threshold N]
                                   [--models trained|deep|crossover] [--steps 2]
                                   [--max-total-tokens 8192] [--max-running-requests R]
                                   [--adaptive] [--adaptive-config FILE]
                                   [--auto-adaptive-config FILE] [--cold] [--relaunch]
                                   [--auto-hysteresis H]
                                   [--arms A,B] [--json] [--out FILE]

Starts a plain SGLang server (the target alone) and the patched server (the trained
EAGLE-3 pair of tests/real_sglang/rig), both with ``--enable-metrics``, and measures four
arms level by level, ``--rounds`` rounds each, every arm once per round, the order
rotated each round:

  plain        the plain server
  speculative  the patched server, forced speculative
  target_only  the patched server, forced target-only
  auto         the patched server, force auto, threshold ``--auto-threshold`` (default twice
               the top level: auto then speculates at every level and must equal speculative;
               at c = N a closed loop briefly holds c + 1 requests, a finished one not yet
               freed beside its successor, which switches auto to target-only, and the
               hysteresis keeps it there while the batch stays at N)

``--adaptive`` adds a third server, SGLang's own ``--speculative-adaptive`` (its default
config; unpatched) as the arm ``sglang_adaptive``, and ``--adaptive-config FILE`` a fourth
with that config (``sglang_adaptive_tuned``): the peer on the same pair and traffic. SGLang's
adaptive needs ``--steps`` among its candidates (0, 1, 3, 5, 7 by default). Its windows are
drained and timed like the others; SGLang publishes no mode share for them.
``--auto-adaptive-config FILE`` adds the patched server once more, launched with SGLang's
adaptive and that config beside the threshold (``auto_adaptive``: force auto at the same N):
at or below N SGLang's controller picks the draft steps by bucket, above it the patch runs
the target alone, N changeable at runtime as ever. ``--cold`` adds two arms of the patched
server with its cold-draft mark (``speculative_disable_cold_draft_above``: a target-only
step above it skips the draft's extend, SGLang's own stub): ``target_only_cold``, forced
target-only with the mark at 1 (what a target-only step costs without keeping the draft
warm, beside plain's), and ``auto_cold``, auto at N with the mark at N (the product's cold
mode). Every other arm of the patched server runs with the mark at 0; each window's cold
steps are checked from the server's own counters (``cold_steps``). ``--auto-hysteresis H``
sets the patched server's hysteresis for its auto arms (back to speculative at a decode
batch <= N - H; the forced arms never read it).

The server not being measured is paused (SIGSTOP of its process group; SIGCONT before its
own window), so the two never share the CPU. Before each window the server is drained
(``/v1/loads``: no running or waiting request), and each window records the server's own
decode-pass counter (milliseconds per decode step beside client tok/s) and the patch's
step counters: a forced arm whose window did not run every step in its mode, or an auto
window below the threshold that ran any step target-only, fails the run. Each cell is the
median of its rounds; every round is kept in the JSON. Prints tok/s and ms per step per
arm, target-only / plain (per step and tok/s) and auto / max(speculative, target-only),
and the A/A line: auto over the forced arm of the one mode it ran at a level, round by
round (the same server in the same mode: the spread this machine's windows cannot resolve).
``--plain-url``/``--url`` measure running servers instead (not paused). ``--relaunch``
starts every server afresh for each round (every level, every arm once, then the servers
stopped): one launch of a configuration can step ~30 % faster or slower than the next, an
offset that rounds on the same servers cannot remove; with it each cell's median is over
launches, and the by-round pairs compare the arms of one round's launches. ``--arms``
measures only the arms it names (``speculative,auto``: the A/A alone, on one server, in as
many short rounds as it takes; the report gives the pairs' geometric mean and its 95 %
interval). Figures go in docs/cpu-rig.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks.interleave import Arm, interleaved, patched_arms, relaunched, signal_group
from benchmarks.mode_cost_report import (  # noqa: F401 - the report's names, as callers use them from here
    ADAPTIVE,
    ADAPTIVE_TUNED,
    ARM_WORDS,
    ARMS,
    AUTO,
    AUTO_ADAPTIVE,
    AUTO_COLD,
    OURS,
    PLAIN,
    SPEC,
    TARGET,
    TARGET_COLD,
    render,
    summarise,
)
from server_control.protocol import decision

ROOT = Path(__file__).resolve().parents[1]
SERVER_EXTRA = ("--decode-log-interval", "40", "--max-total-tokens", "8192", "--enable-metrics")


def set_threshold(url: str, n: int) -> None:
    set_setting(url, decision.THRESHOLD_KEY, n)


def set_setting(url: str, key: str, value: int) -> None:
    """One runtime setting on the patched server; RuntimeError with the server's reason."""
    with httpx.Client(timeout=30, trust_env=False) as client:  # loopback: never a proxy
        try:
            resp = client.post(url + "/set_internal_state", json={"server_args": {key: value}})
        except httpx.HTTPError as exc:
            raise RuntimeError(f"cannot reach the patched server at {url}: {exc}") from None
        if resp.status_code == 200 and resp.json() == [True]:
            return
        why = refusal_reason(client, url)
    word = "threshold" if key == decision.THRESHOLD_KEY else key
    raise RuntimeError(f"{word} {value} refused: {resp.status_code} {resp.text[:200]}" + (f" ({why})" if why else ""))


def refusal_reason(client: httpx.Client, url: str) -> str | None:
    """Why the server refuses every setting: SGLang answers a refused /set_internal_state
    with a bare ``[false]`` and logs the reason; the patch also publishes it in
    ``/server_info`` (``dynamic_speculation``: ``active`` false and ``reason``)."""
    try:
        states = client.get(url + "/server_info").json().get("internal_states") or []
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    for state in states:
        snap = state.get(decision.STATE_KEY) if isinstance(state, dict) else None
        if isinstance(snap, dict) and snap.get("active") is False:
            return f"the switch is not active on this server: {snap.get('reason')}"
    return None


def measure_plain(url: str, opts: argparse.Namespace) -> dict:
    """The plain arm alone (scripts/gpu-check: one server at a time)."""
    return asyncio.run(interleaved([Arm(PLAIN, url, None)], opts))


def measure_patched(url: str, opts: argparse.Namespace) -> dict:
    """The three patched arms interleaved, auto at twice the top level's threshold."""
    set_threshold(url, 2 * max(opts.levels))
    return asyncio.run(interleaved(patched_arms(url), opts, 2 * max(opts.levels)))


def _levels(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip()})


PATCHED_ARMS = (SPEC, TARGET, AUTO, TARGET_COLD, AUTO_COLD)  # the arms of the one patched server
_NEEDS = {  # arms that only run with a flag: (option attribute, the flag)
    TARGET_COLD: ("cold", "--cold"),
    AUTO_COLD: ("cold", "--cold"),
    ADAPTIVE: ("adaptive", "--adaptive"),
    ADAPTIVE_TUNED: ("adaptive_config", "--adaptive-config FILE"),
    AUTO_ADAPTIVE: ("auto_adaptive_config", "--auto-adaptive-config FILE"),
}


def _arms(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [n for n in names if n not in ARMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown arm {', '.join(unknown) or '(none)'} (known: {', '.join(ARMS)})")
    return names


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.mode_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--levels", type=_levels, default=[1, 2, 4, 8, 16])
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--measure", type=float, default=10.0)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3, help="rounds of every arm per level")
    p.add_argument("--auto-threshold", type=int, help="auto's threshold (default: 2 x top level)")
    p.add_argument(
        "--auto-hysteresis",
        type=int,
        help="auto's hysteresis: back to speculative at a decode batch <= N - H (default: the server's, 1)",
    )
    p.add_argument("--plain-url", help="a running plain server (else one is started)")
    p.add_argument("--url", help="a running patched server (else one is started)")
    p.add_argument("--models", default="trained", help="the rig pair: trained, deep or crossover (default trained)")
    p.add_argument("--steps", type=int, default=2, help="draft steps (steps + 1 tokens a verify; default 2)")
    p.add_argument("--max-total-tokens", type=int, default=8192, help="the servers' KV pool (default 8192)")
    p.add_argument("--max-running-requests", type=int, help="the servers' running cap (default SGLang's)")
    p.add_argument("--adaptive", action="store_true", help="also SGLang's own --speculative-adaptive (its default config)")
    p.add_argument("--adaptive-config", type=Path, help="also SGLang's adaptive with this config file (the peer tuned)")
    p.add_argument(
        "--auto-adaptive-config",
        type=Path,
        help="also the patched server with SGLang's adaptive and this config beside the threshold (auto_adaptive)",
    )
    p.add_argument(
        "--cold", action="store_true", help="also the cold-draft arms: target_only_cold (mark 1) and auto_cold (mark N)"
    )
    p.add_argument(
        "--relaunch",
        action="store_true",
        help="new servers every round (each launch has its own speed; the median is then over launches)",
    )
    p.add_argument(
        "--arms",
        type=_arms,
        help="measure only these arms (comma-separated; e.g. speculative,auto: the A/A on one server, many short rounds)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path, help="also write the JSON summary here")
    opts = p.parse_args(argv)
    opts.repeat = opts.rounds  # the name scripts/gpu-check's options use
    return opts


@contextmanager
def launched(opts: argparse.Namespace, threshold: int, tmp: Path, left: list) -> Iterator[list[Arm]]:
    """Every arm's server (the running ones ``--plain-url``/``--url`` name are used as they
    are), each paused once ready; on leaving, ours stopped and what they left in ``left``."""
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import Spec, launch

    extra: tuple[str, ...] = (*SERVER_EXTRA, "--max-total-tokens", str(opts.max_total_tokens))  # the last one counts
    if opts.max_running_requests:
        extra += ("--max-running-requests", str(opts.max_running_requests))
    rig = None  # built (or found in the cache) at the first launch: running servers need none
    servers = []
    try:
        arms: list[Arm] = []
        peers = [(None, Spec(opts.models, patched=False, extra=extra, steps=opts.steps, adaptive="default"), ADAPTIVE)]
        if opts.adaptive_config:
            tuned = Spec(opts.models, patched=False, extra=extra, steps=opts.steps, adaptive=str(opts.adaptive_config.resolve()))
            peers.append((None, tuned, ADAPTIVE_TUNED))
        if opts.auto_adaptive_config:
            both = Spec(opts.models, extra=extra, steps=opts.steps, adaptive=str(opts.auto_adaptive_config.resolve()))
            peers.append((None, both, AUTO_ADAPTIVE))
        wanted = set(opts.arms or ARMS)
        plain = [(opts.plain_url, Spec(opts.models, patched=False, extra=extra), PLAIN)] if PLAIN in wanted else []
        ours = [(opts.url, Spec(opts.models, extra=extra, steps=opts.steps), AUTO)] if wanted & set(PATCHED_ARMS) else []
        for url, spec, name in (
            *plain,
            *ours,
            *[p for p in peers if opts.adaptive or p[2] != ADAPTIVE],
        ):
            group = None
            if url is None:
                rig = rig or ensure_rig()
                server = launch(rig, spec, tmp, 7200)
                servers.append(server)
                server.wait_ready(timeout_s=900)
                url, group = server.url, server.pgid
                signal_group(group, signal.SIGSTOP)
            if spec.patched:
                signal_group(group, signal.SIGCONT)
                set_threshold(url, threshold)
                if opts.auto_hysteresis is not None:
                    set_setting(url, decision.HYSTERESIS_KEY, opts.auto_hysteresis)
                arms += patched_arms(url, group) if name == AUTO else [Arm(AUTO_ADAPTIVE, url, AUTO, group, cold=0)]
                if name == AUTO and opts.cold:
                    arms += [Arm(TARGET_COLD, url, TARGET, group, cold=1), Arm(AUTO_COLD, url, AUTO, group, cold=threshold)]
                signal_group(group, signal.SIGSTOP)
            elif name == PLAIN:
                arms.insert(0, Arm(PLAIN, url, None, group))
            else:
                arms.append(Arm(name, url, None, group))
        yield [a for a in arms if a.name in wanted]
    finally:
        for server in servers:
            signal_group(server.pgid, signal.SIGCONT)
            left += server.stop()


def main(argv: list[str] | None = None) -> int:
    opts = options(argv)
    threshold = opts.auto_threshold or 2 * max(opts.levels)
    if opts.relaunch and (opts.url or opts.plain_url):
        print("mode_cost: --relaunch launches every server each round; it cannot use --url or --plain-url", file=sys.stderr)
        return 2
    missing = [a for a in opts.arms or () if a in _NEEDS and not getattr(opts, _NEEDS[a][0])]
    if missing:
        flags = ", ".join(f"{a} needs {_NEEDS[a][1]}" for a in missing)
        print(f"mode_cost: --arms names an arm this run does not launch: {flags}", file=sys.stderr)
        return 2
    left: list = []
    progress = lambda line: print(line, file=sys.stderr)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="mode-cost-") as tmp:
        try:
            if opts.relaunch:
                result = asyncio.run(relaunched(lambda: launched(opts, threshold, Path(tmp), left), opts, threshold, progress))
            else:
                with launched(opts, threshold, Path(tmp), left) as arms:
                    result = asyncio.run(interleaved(arms, opts, threshold, progress))
        except RuntimeError as exc:  # a server refused a setting or cannot be reached: said, not a traceback
            print(f"mode_cost: {exc}", file=sys.stderr)
            return 1
    summary = summarise(result, opts.levels, threshold)
    summary["relaunched"] = bool(opts.relaunch)
    summary["auto_hysteresis"] = opts.auto_hysteresis  # None: the server's own (1)
    summary["processes_left"] = left
    if opts.out:
        opts.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1) if opts.json else render(summary))
    return 0 if summary["errors"] == 0 and not summary["problems"] and not left else 1


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
