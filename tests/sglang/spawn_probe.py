"""Targets for processes started with the spawn method, as SGLang starts its schedulers.

``child`` runs with the bootstrap first on PYTHONPATH: it parses a real command line with
SGLang's parser, then starts ``grandchild`` (spawn again) handing it the ServerArgs as a
Process argument, i.e. pickled by class reference exactly as SGLang hands it to
``run_scheduler_process``.
"""

import contextlib
import io
import multiprocessing
import sys

ARGV = [
    "--model-path",
    "dummy-model",
    "--speculative-disable-batch-threshold",
    "7",
    "--speculative-disable-hysteresis",
    "2",
    "--speculative-disable-min-dwell-steps",
    "3",
    "--speculative-disable-force-mode",
    "target-only",
]
KEYS = (
    "speculative_disable_batch_threshold",
    "speculative_disable_hysteresis",
    "speculative_disable_min_dwell_steps",
    "speculative_disable_force_mode",
)


def _process_facts() -> dict:
    from server_control.sglang_patch import hook

    return {
        "hook_installed": hook.installed(),
        "bootstrap_loaded": "sitecustomize" in sys.modules
        and "sglang_patch" in (getattr(sys.modules["sitecustomize"], "__file__", "") or ""),
        "chained": getattr(sys, "_specconsole_test_chained", False),
        "preload": getattr(sys, "_specconsole_test_preload", None),
    }


def _parse_error(argv) -> str:
    from sglang.srt.server_args import prepare_server_args

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            prepare_server_args(argv)
        except SystemExit:
            pass
    return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""


def grandchild(queue, server_args) -> None:
    try:
        out = _process_facts()
        out["values"] = {k: getattr(server_args, k, "MISSING") for k in KEYS}
        out["launch_command"] = server_args.launch_command
        queue.put(out)
    except BaseException as exc:  # noqa: BLE001 - report, never hang the parent
        queue.put({"error": repr(exc)})


def child(queue) -> None:
    try:
        out = _process_facts()
        from sglang.srt.server_args import ServerArgs, prepare_server_args

        server_args = prepare_server_args(ARGV)
        out["values"] = {k: getattr(server_args, k) for k in KEYS}
        out["startup_line"] = f"server_args={server_args!r}"
        defaults = prepare_server_args(["--model-path", "dummy-model"])
        out["defaults"] = {k: getattr(defaults, k) for k in KEYS}
        out["fields"] = list(ServerArgs.__struct_fields__)
        out["errors"] = {
            "negative": _parse_error(["--model-path", "m", "--speculative-disable-batch-threshold", "-1"]),
            "text": _parse_error(["--model-path", "m", "--speculative-disable-batch-threshold", "many"]),
            "force": _parse_error(["--model-path", "m", "--speculative-disable-force-mode", "off"]),
        }
        ctx = multiprocessing.get_context("spawn")
        inner = ctx.Queue()
        proc = ctx.Process(target=grandchild, args=(inner, server_args))
        proc.start()
        try:
            out["grandchild"] = inner.get(timeout=240)
        finally:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
        queue.put(out)
    except BaseException as exc:  # noqa: BLE001 - any failure of the probe is reported, not raised
        queue.put({"error": repr(exc)})
