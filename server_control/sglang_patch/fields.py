"""The new server arguments, as a namespace class SGLang collects into ServerArgs.

The five runtime settings (``NEW_FIELDS``, settable through ``/set_internal_state``) and
the start-only ``--speculative-disable-auto-tune LO-HI`` (``AUTO_TUNE_FIELD``; empty = off):
the bounds of the in-server tuner (sglang_patch/autotune.py); at runtime the same key takes
1 (on) or 0 (off).

SGLang 0.5.23 builds ``ServerArgs`` at import of ``sglang.srt.server_args`` with
``msgspec.defstruct`` from ``collect_input_fields(_INPUT_NAMESPACES)``. We wrap
``collect_input_fields`` (before server_args runs) so the list it sees also holds
``DynamicSpeculationArgs``: its fields land in the ``spec`` namespace (``get_spec()``),
after the positional fields (``POSITIONAL_FIELD_ORDER`` is left alone, as its docstring
asks of extension fields), on the command line (``add_cli_args_from_dataclass``), in the
``server_args=...`` start-up line (``__repr__``) and in ``/server_info`` (``resolved_dict``).
"""

import argparse
from typing import Any

from server_control.protocol import decision, explore, tuner
from server_control.sglang_patch import gate

NEW_FIELDS = (decision.THRESHOLD_KEY, decision.HYSTERESIS_KEY, decision.DWELL_KEY, decision.FORCE_KEY, explore.SHARE_KEY)
DEFAULTS = {
    decision.THRESHOLD_KEY: 0,
    decision.HYSTERESIS_KEY: decision.DEFAULT_HYSTERESIS,
    decision.DWELL_KEY: decision.DEFAULT_MIN_DWELL_STEPS,
    decision.FORCE_KEY: decision.AUTO,
    explore.SHARE_KEY: 0.0,
}
VALIDATORS = {
    decision.THRESHOLD_KEY: decision.validate_threshold,
    decision.HYSTERESIS_KEY: decision.validate_hysteresis,
    decision.DWELL_KEY: decision.validate_dwell,
    decision.FORCE_KEY: decision.validate_force,
    explore.SHARE_KEY: explore.validate_share,
}
AUTO_TUNE_FIELD = tuner.AUTO_TUNE_KEY
ALL_FIELDS = (*NEW_FIELDS, AUTO_TUNE_FIELD)


def parse_auto_tune(text: str) -> str:
    """The start value of ``--speculative-disable-auto-tune``: ``LO-HI`` (e.g. ``2-32``) or
    empty (off); ArgumentTypeError with the reason otherwise."""
    text = text.strip()
    if text:
        try:
            tuner.parse_bounds(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


parse_auto_tune.__name__ = AUTO_TUNE_FIELD

_namespace_class = None


def _cli_type(key: str) -> Any:
    validator = VALIDATORS[key]

    def parse(text: str) -> Any:
        value: object = text
        if key != decision.FORCE_KEY:
            try:
                value = int(text.strip())
            except ValueError:
                pass  # the validator names what is wrong with it
        try:
            return validator(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = key  # argparse names the type in its own messages
    return parse


def namespace_class() -> Any:
    """``DynamicSpeculationArgs``: a msgspec Struct in SGLang's field style (built once)."""
    global _namespace_class
    if _namespace_class is not None:
        return _namespace_class
    import msgspec
    from sglang.srt.arg_groups.arg_utils import A, Arg

    hyst, dwell = decision.DEFAULT_HYSTERESIS, decision.DEFAULT_MIN_DWELL_STEPS

    class DynamicSpeculationArgs(msgspec.Struct):
        """Namespace ``spec``: dynamic speculation disable (specconsole patch)."""

        _NS_PATH = "spec"
        speculative_disable_batch_threshold: A[
            int,
            Arg(
                help="Dynamic speculation disable: speculate while the decode batch is <= N, "
                "run the target model alone (steps=0 state) above N. 0 = never disable. "
                "Settable at runtime via /set_internal_state.",
                type_parser=_cli_type(decision.THRESHOLD_KEY),
            ),
        ] = 0
        speculative_disable_hysteresis: A[
            int,
            Arg(
                help=f"Back to speculative when the decode batch <= max(1, N - H). Default {hyst}.",
                type_parser=_cli_type(decision.HYSTERESIS_KEY),
            ),
        ] = hyst
        speculative_disable_min_dwell_steps: A[
            int,
            Arg(
                help=f"Decode steps spent in a mode before switching again. Default {dwell}.",
                type_parser=_cli_type(decision.DWELL_KEY),
            ),
        ] = dwell
        speculative_disable_force_mode: A[
            str,
            Arg(
                help="auto (the threshold rule), speculative or target_only (forced).",
                choices=list(decision.FORCE_CHOICES),
                type_parser=_cli_type(decision.FORCE_KEY),
            ),
        ] = decision.AUTO
        speculative_disable_explore_share: A[
            float,
            Arg(
                help=f"Exploration: the share of decode steps (0..{explore.MAX_SHARE}) that run the other "
                "mode at batch sizes near N, so both modes' cost curves exist there (0 = off). "
                "With --speculative-disable-auto-tune a start value of 0 means the tuner's default (0.05); "
                "settable at runtime via /set_internal_state (0 there turns it off).",
                type_parser=_cli_type(explore.SHARE_KEY),
            ),
        ] = 0.0
        speculative_disable_auto_tune: A[
            str,
            Arg(
                help="Dynamic speculation: LO-HI (e.g. 2-32) lets the server move the threshold itself "
                "toward the measured crossover, within LO..HI, decided on TP0 and broadcast to every "
                "rank (empty = off). An operator's threshold turns it off; "
                "/set_internal_state speculative_disable_auto_tune=1 (on) or 0 (off).",
                type_parser=parse_auto_tune,
            ),
        ] = ""

    _namespace_class = DynamicSpeculationArgs
    return DynamicSpeculationArgs


def wrap_collect_input_fields() -> None:
    """Before server_args executes: make collect_input_fields add our namespace."""
    import sglang.srt.arg_groups.fields as fields_module

    original = fields_module.collect_input_fields
    if getattr(original, "_specconsole", False):
        return
    extra = namespace_class()

    def collect_input_fields(sources: Any) -> Any:
        if extra in sources:
            return original(sources)
        try:
            return original([*sources, extra])
        except Exception as exc:  # noqa: BLE001 - never keep SGLang from starting
            gate.not_active(f"adding the server arguments failed: {exc!r}")
            return original(sources)

    collect_input_fields._specconsole = True  # type: ignore[attr-defined]
    collect_input_fields.__wrapped__ = original  # type: ignore[attr-defined]
    collect_input_fields.__doc__ = original.__doc__
    fields_module.collect_input_fields = collect_input_fields


FLAGS = tuple("--" + key.replace("_", "-") for key in ALL_FIELDS)


def drop_flags_from_argv(argv: list[str]) -> list[str]:
    """Take the patch's flags (``--flag value`` and ``--flag=value``) off ``argv`` in place, so
    SGLang's parser, which does not know them here, still starts the server; logs one line
    naming what was dropped. Returns the dropped arguments."""
    kept, dropped, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if i > 0 and name in FLAGS:
            take = 1 if "=" in arg or i + 1 >= len(argv) else 2
            dropped += argv[i : i + take]
            i += take
            continue
        kept.append(arg)
        i += 1
    if dropped:
        argv[:] = kept
        gate.warn(
            "Dynamic speculation: ignored "
            + " ".join(dropped)
            + " (the patch is not active in this server; see the NOT active line)"
        )
    return dropped


def missing_fields(server_args_cls: Any) -> list[str]:
    present = set(getattr(server_args_cls, "__struct_fields__", ()))
    return [name for name in ALL_FIELDS if name not in present]


def check_server_args(module: Any) -> bool:
    """After server_args executed (or found already imported): the fields must be there."""
    missing = missing_fields(module.ServerArgs)
    if missing:
        gate.not_active(
            "ServerArgs was built without "
            + ", ".join(missing)
            + " (sglang.srt.server_args was imported before the patch hook was installed)"
        )
        return False
    return True
