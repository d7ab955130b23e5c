"""Version gate, anchor check and the one `NOT active` line per process.

Imports only the standard library (and, lazily, SGLang's version module). The anchors
are checked statically, by parsing the installed SGLang source files with ``ast``, before
any of them is executed: so the gate decides once, up front, whether every part of the
patch can be applied, and a renamed class or method upstream turns the switch off
with one clear line instead of half-applying it.

When the gate fails, the report-only parts (``FIELD_ANCHORS`` + ``REPORT_ANCHORS``) are
still applied if their own anchors are there: the flags parse, the server starts with the
switch off, and ``/server_info`` / ``/set_internal_state`` carry the reason (see hook.py).
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import importlib
import importlib.util
import logging
import os
import sys

from server_control.protocol.decision import NOT_ACTIVE_PREFIX
from server_control.protocol.sglang_version import SGLANG_VERSION

# module -> {class name or "" for module level: [attribute names]}
Anchors = dict[str, dict[str, list[str]]]

# The server arguments: enough for the flags to parse (also when the rest is gated off).
FIELD_ANCHORS: Anchors = {
    "sglang.srt.server_args": {"": ["ServerArgs", "_INPUT_NAMESPACES", "Spec", "collect_input_fields", "prepare_server_args"]},
    "sglang.srt.arg_groups.fields": {"": ["collect_input_fields"]},
    "sglang.srt.arg_groups.field_order": {"": ["POSITIONAL_FIELD_ORDER"]},
    "sglang.srt.arg_groups.fields.spec": {"Spec": ["_NS_PATH", "speculative_num_steps"]},
    "sglang.srt.arg_groups.arg_utils": {"": ["A", "Arg", "add_cli_args_from_dataclass"]},
}
# The internal-state controller: enough to publish "not active" and its reason.
REPORT_ANCHORS: Anchors = {
    "sglang.srt.managers.scheduler_components.internal_state": {
        "SchedulerInternalStateController": ["__init__", "_update_handlers", "set_internal_state", "get_internal_state"],
        "": ["UpdateRejected", "_UpdateHandler"],
    },
    "sglang.srt.utils.common": {"": ["configure_logger"]},
}
# The switch itself.
SWITCH_ANCHORS: Anchors = {
    "sglang.srt.speculative.eagle_worker_v2": {
        "EAGLEWorkerV2": [
            "__init__",
            "init_cuda_graphs",
            "forward_batch_generation",
            "activate_step_by_batch",
            "on_verify_complete_cpu",
            "build_adaptive_runtime_state",
            "apply_runtime_state",
            "_build_trivial_verify_input",
            "adaptive_controller",
        ],
        "EagleDraftWorker": ["_configure_qsa_mtp_index_share"],
        "": [
            "draft_tp_context",
            "speculative_moe_backend_context",
            "speculative_moe_a2a_backend_context",
            "SpecRuntimeState",
            "_qsa_index_share_requested",
            "EAGLEDraftExtendCudaGraphRunner",
        ],
    },
    "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner": {"EAGLEDraftExtendCudaGraphRunner": ["execute"]},
    "sglang.srt.managers.utils": {"GenerationBatchResult": ["can_run_cuda_graph"]},
    "sglang.srt.speculative.adaptive_runtime_state": {"SpecRuntimeState": [], "AdaptiveController": ["_states"]},
    "sglang.srt.speculative.adaptive_spec_params": {
        "": ["adaptive_unsupported_reason"],
        "AdaptiveSpeculativeParams": ["cuda_graph_bs_for_step"],
    },
    "sglang.srt.arg_groups.overrides": {"": ["resolving_view"]},
    "sglang.srt.runtime_context": {
        "RuntimeContext": ["_overrides_log", "override", "resolved_server_args_dict"],
        "": ["get_context", "get_parallel", "get_spec", "get_exec", "get_schedule", "get_disagg"],
    },
    "sglang.srt.model_executor.cuda_graph_config": {"": ["check_cuda_graph_backend", "Phase", "Backend"]},
    "sglang.srt.utils.common": {"": ["get_available_gpu_memory"]},
    "sglang.srt.managers.scheduler_components.batch_result_processor": {
        "SchedulerBatchResultProcessor": ["_resolve_spec_v2_tokens"]
    },
    "sglang.srt.distributed.parallel_state": {"GroupCoordinator": ["ranks", "rank_in_group", "world_size", "cpu_group"]},
    "sglang.srt.observability.metrics_collector": {"SchedulerMetricsCollector": ["__init__", "log_stats", "labels"]},
    "sglang.srt.mem_cache.kv_cache_configurator": {
        "KVCacheConfigurator": ["_profile_available_bytes", "is_draft_worker", "spec_algorithm", "model_config", "page_size"]
    },
    "sglang.srt.managers.scheduler_components.request_receiver": {
        "SchedulerRequestReceiver": ["recv_requests", "_broadcast_reqs_across_ranks"]
    },
}


def merged(*parts: Anchors) -> Anchors:
    out: Anchors = {}
    for part in parts:
        for module, classes in part.items():
            slot = out.setdefault(module, {})
            for cls, attrs in classes.items():
                slot[cls] = [*slot.get(cls, []), *attrs]
    return out


ANCHORS: Anchors = merged(FIELD_ANCHORS, REPORT_ANCHORS, SWITCH_ANCHORS)

logger = logging.getLogger("sglang.srt.speculative.dynamic_speculation")

_reported: str | None = None  # the reason already logged (or pending) in this process
_pending: list[str] = []


def sglang_version() -> str:
    """The installed SGLang version, read without importing the heavy package if possible."""
    mod = sys.modules.get("sglang.version") or sys.modules.get("sglang")
    version = getattr(mod, "__version__", None)
    if version is None:
        version = importlib.import_module("sglang.version").__version__
    return str(version)


def _module_names(path: str, classes: dict[str, list[str]]) -> dict[str, set[str]]:
    """Names defined at module level and in the named classes of one source file."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=path)
    found: dict[str, set[str]] = {"": set()}

    def names_of(body: list[ast.stmt]) -> set[str]:
        out: set[str] = set()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            out.add(sub.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    out.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, (ast.If, ast.Try)):
                out |= names_of(node.body)
                out |= names_of(getattr(node, "orelse", []))
        return out

    found[""] = names_of(tree.body)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in classes:
            names = names_of(node.body)
            for sub in ast.walk(node):  # instance attributes: self.<name> = ...
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    names.add(sub.attr)
            found[node.name] = names
    return found


def _source_path(module: str) -> str | None:
    """The source file of ``module`` inside the installed sglang package, found without
    importing any of its parent packages (their code may import server_args, which is
    the module the gate runs in front of)."""
    top = sys.modules.get("sglang")
    roots = list(getattr(top, "__path__", []) or [])
    if not roots:
        spec = importlib.util.find_spec("sglang")
        roots = list(spec.submodule_search_locations or []) if spec else []
    rel = module.split(".")[1:]
    for root in roots:
        base = os.path.join(root, *rel)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def missing_anchor(anchors: Anchors | None = None) -> str | None:
    """The first anchor that the installed SGLang source lacks, or None."""
    for module, classes in (anchors or ANCHORS).items():
        path = _source_path(module)
        if path is None:
            return f"module {module}"
        try:
            found = _module_names(path, classes)
        except (OSError, SyntaxError, ValueError) as exc:
            return f"{module} (unreadable: {exc})"
        for cls, attrs in classes.items():
            if cls and cls not in found[""]:
                return f"{module}.{cls}"
            have = found.get(cls, set())
            for attr in attrs:
                if attr not in have:
                    return f"{module}.{cls + '.' if cls else ''}{attr}"
    return None


def check(version: str | None = None) -> str | None:
    """Why the patch must stay off in this process (version or anchor), or None."""
    try:
        version = version if version is not None else sglang_version()
    except Exception as exc:  # noqa: BLE001 - any failure here means "cannot verify"
        return f"cannot read the sglang version ({exc!r})"
    if version != SGLANG_VERSION:
        return f"sglang {version} is not the supported {SGLANG_VERSION}; the patch is gated to that exact version"
    stamp = _source_stamp(version)
    if stamp is not None and os.environ.get(VERIFIED_ENV) == stamp:
        return None  # the parent process parsed these very files (spawned children inherit)
    anchor = missing_anchor()
    if anchor is not None:
        return f"sglang {version}: anchor {anchor} is missing (renamed upstream?)"
    if stamp is not None:
        os.environ[VERIFIED_ENV] = stamp
    return None


VERIFIED_ENV = "SPECCONSOLE_SGLANG_ANCHORS_VERIFIED"


def _source_stamp(version: str) -> str | None:
    """Version + path, size and mtime of every anchored source file (None if one is
    missing): a process whose environment carries the stamp of a parent that parsed the
    same files skips the parse (~0.3 s per process)."""
    parts = [version]
    for module in ANCHORS:
        path = _source_path(module)
        if path is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def report_parts_missing() -> str | None:
    """When ``check`` fails: the first anchor missing for the report-only parts (the four
    flags parse, ``/server_info`` and ``/set_internal_state`` say why the switch is off),
    or None when those parts can be applied."""
    return missing_anchor(merged(FIELD_ANCHORS, REPORT_ANCHORS))


def _logging_ready() -> bool:
    return bool(logging.getLogger().handlers)


def not_active(reason: str) -> bool:
    """Log `Dynamic speculation disable NOT active: <reason>` once per process.

    Through SGLang's logger; if SGLang has not configured logging yet (import time),
    the line waits for ``flush()`` (called right after SGLang's configure_logger), and
    at exit it is written to stderr if it is still waiting. Returns False when another
    reason was already reported in this process."""
    global _reported
    if _reported is not None:
        return False
    _reported = reason
    warn(NOT_ACTIVE_PREFIX + reason)
    return True


def warn(line: str) -> None:
    """A warning through SGLang's logger, or pending until SGLang configured logging."""
    if _logging_ready():
        logger.warning(line)
    else:
        _pending.append(line)


def reported() -> str | None:
    return _reported


def flush() -> None:
    while _pending:
        logger.warning(_pending.pop(0))


def _flush_at_exit() -> None:
    if _pending:
        if _logging_ready():
            flush()
        else:
            for line in _pending:
                sys.stderr.write(line + "\n")
            _pending.clear()


atexit.register(_flush_at_exit)
