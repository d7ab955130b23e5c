"""The new server arguments, as a namespace class SGLang collects into ServerArgs.

The runtime settings (``new_fields()``: the switch's, ``protocol/runtime_settings.py``, and the
exploration share; settable through ``/set_internal_state``) and
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
from collections.abc import Callable
from typing import Any

from server_control.protocol import explore, runtime_settings, tuner
from server_control.sglang_patch import gate

AUTO_TUNE_FIELD = tuner.AUTO_TUNE_KEY


def new_fields() -> tuple[str, ...]:
    """The keys settable through ``/set_internal_state``: the switch's runtime settings
    (``protocol/runtime_settings.py``) and the exploration share."""
    return (*runtime_settings.keys(), explore.SHARE_KEY)


def all_fields() -> tuple[str, ...]:
    return (*new_fields(), AUTO_TUNE_FIELD)


def defaults() -> dict[str, object]:
    return {s.key: s.default for s in runtime_settings.SETTINGS} | {explore.SHARE_KEY: 0.0}


def validator(key: str) -> Callable[[object], object]:
    """The server's own check of one of ``new_fields()``; KeyError for any other key."""
    if key == explore.SHARE_KEY:
        return explore.validate_share
    setting = runtime_settings.by_key(key)
    if setting is None:
        raise KeyError(key)
    return setting.validate


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


def _cli_type(key: str) -> Callable[[str], object]:
    validate = validator(key)
    setting = runtime_settings.by_key(key)
    named = setting is not None and setting.kind is str

    def parse(text: str) -> object:
        value: object = text
        if not named:
            try:
                value = int(text.strip())
            except ValueError:
                pass  # the validator names what is wrong with it
        try:
            return validate(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = key  # argparse names the type in its own messages
    return parse


EXPLORE_HELP = (
    f"Exploration: the share of decode steps (0..{explore.MAX_SHARE}) that run the other "
    "mode at batch sizes near N, so both modes' cost curves exist there (0 = off). "
    "With --speculative-disable-auto-tune a start value of 0 means the tuner's default (0.05); "
    "settable at runtime via /set_internal_state (0 there turns it off)."
)
AUTO_TUNE_HELP = (
    "Dynamic speculation: LO-HI (e.g. 2-32) lets the server move the threshold itself "
    "toward the measured crossover, within LO..HI, decided on TP0 and broadcast to every "
    "rank (empty = off). An operator's threshold turns it off; "
    "/set_internal_state speculative_disable_auto_tune=1 (on) or 0 (off)."
)


def namespace_class() -> Any:
    """``DynamicSpeculationArgs``: a msgspec Struct in SGLang's field style (built once), one
    field per runtime setting of ``protocol/runtime_settings.py``, then the exploration share
    and the auto-tune bounds."""
    global _namespace_class
    if _namespace_class is not None:
        return _namespace_class
    import msgspec
    from sglang.srt.arg_groups.arg_utils import A, Arg

    rows: list[tuple[str, Any, object]] = []
    for s in runtime_settings.SETTINGS:
        words = f"Dynamic speculation disable: {s.help}. Default {s.default}; settable at runtime via /set_internal_state."
        extra = {"choices": list(s.choices)} if s.choices else {}
        rows.append((s.key, A[s.kind, Arg(help=words, type_parser=_cli_type(s.key), **extra)], s.default))
    rows.append((explore.SHARE_KEY, A[float, Arg(help=EXPLORE_HELP, type_parser=_cli_type(explore.SHARE_KEY))], 0.0))
    rows.append((AUTO_TUNE_FIELD, A[str, Arg(help=AUTO_TUNE_HELP, type_parser=parse_auto_tune)], ""))
    _namespace_class = msgspec.defstruct(
        "DynamicSpeculationArgs",
        rows,
        namespace={"_NS_PATH": "spec", "__doc__": "Namespace ``spec``: dynamic speculation disable (specconsole patch)."},
        module=__name__,
    )
    return _namespace_class


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


def flags() -> tuple[str, ...]:
    return tuple("--" + key.replace("_", "-") for key in all_fields())


def drop_flags_from_argv(argv: list[str]) -> list[str]:
    """Take the patch's flags (``--flag value`` and ``--flag=value``) off ``argv`` in place, so
    SGLang's parser, which does not know them here, still starts the server; logs one line
    naming what was dropped. Returns the dropped arguments."""
    kept, dropped, i, ours = [], [], 0, flags()
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if i > 0 and name in ours:
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
    return [name for name in all_fields() if name not in present]


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
