"""The switch's runtime settings, defined once: N, hysteresis, dwell, the forced mode and
the cold-draft mark.

One row per setting; every other place derives from ``SETTINGS``: the patch's server
arguments and its ``/set_internal_state`` allowlist (``sglang_patch/fields.py``,
``targets/internal_state.py``), the simulator's, the control's validation and read-back
(``control/settings.py``), the journal's action word and the guard's sentences
(``control/guard.py``), what a restart carries (``supervision/carried_settings.py``), the
``specconsole setting`` command and the console's status bar. A value is validated once at
each edge (the request in, the server's own check) by ``RuntimeSetting.validate``; from
there on it travels as the ``int`` or ``str`` the row says.

Standard library only: this runs inside SGLang's processes and the simulator's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from server_control.protocol import decision

Value = int | str


@dataclass(frozen=True)
class RuntimeSetting:
    """One runtime setting of the switch."""

    key: str  # the server argument, the /set_internal_state and internal_states key
    field: str  # the SpecSwitch attribute and its name in the live state (dynamic_speculation)
    word: str  # the command line's and the journal's name: `specconsole setting WORD VALUE`
    label: str  # in sentences: "N changed elsewhere", "overridden (now N=8)"
    profile_key: str  # the profile's [dynamic] key
    default: Value
    validate: Callable[[object], Value]  # raises ValueError with the reason
    help: str
    choices: tuple[str, ...] = ()  # named values: over HTTP their index (SGLang types the values as numbers)
    damps: bool = True  # part of the rule's damping: a change restarts the switch-rate window
    names_resume: bool = False  # its change line names the resume point
    line: str = "{field} changed {old} -> {new}"  # after "Dynamic speculation: "

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def kind(self) -> type[int] | type[str]:
        return str if isinstance(self.default, str) else int

    def to_wire(self, value: Value) -> int:
        """A validated value as ``/set_internal_state`` takes it: a named value by its index."""
        if self.choices:
            return self.choices.index(str(value))
        return int(value)

    def from_wire(self, raw: object) -> Value:
        """A value from a request or a read-back: a named value by its index or its name;
        ValueError with the reason."""
        if self.choices and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            if float(raw).is_integer() and 0 <= int(raw) < len(self.choices):
                return self.choices[int(raw)]
            listed = ", ".join(f"{i} ({name})" for i, name in enumerate(self.choices))
            raise ValueError(f"{self.key} must be one of {listed}, got {raw}")
        return self.validate(raw)

    def shown(self, raw: object) -> object:
        """A read-back value as said: a named value's index by its name, anything else as it is."""
        if self.choices and isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < len(self.choices):
            return self.choices[raw]
        return raw

    def same(self, a: object, b: object) -> bool:
        """Two values equal once validated (" 5" and 5); unvalidatable ones compared as they are."""
        try:
            return self.validate(a) == self.validate(b)
        except ValueError:
            return a == b

    @property
    def change_prefix(self) -> str:
        """What every change line of this setting begins with ("Dynamic speculation: threshold changed")."""
        head = self.line.split("{old}")[0].split("{new}")[0]
        return decision.LOG_PREFIX + head.format(field=self.field).rstrip()

    def changed(self, old: Value, new: Value, resume_at: int) -> str:
        """The log line of a change on a rank."""
        text = decision.LOG_PREFIX + self.line.format(field=self.field, old=old, new=new)
        return text + (f" (resume_at<={resume_at})" if self.names_resume else "")


THRESHOLD = RuntimeSetting(
    key=decision.THRESHOLD_KEY,
    field="threshold",
    word="threshold",
    label="N",
    profile_key="threshold",
    default=0,
    validate=decision.validate_threshold,
    help="speculate while the decode batch is <= N, run the target alone above N; 0 = never disable",
    names_resume=True,
)
HYSTERESIS = RuntimeSetting(
    key=decision.HYSTERESIS_KEY,
    field="hysteresis",
    word="hysteresis",
    label="hysteresis",
    profile_key="hysteresis",
    default=decision.DEFAULT_HYSTERESIS,
    validate=decision.validate_hysteresis,
    help="back to speculative when the decode batch is <= max(1, N - H)",
    names_resume=True,
)
DWELL = RuntimeSetting(
    key=decision.DWELL_KEY,
    field="min_dwell_steps",
    word="dwell",
    label="min_dwell_steps",
    profile_key="min_dwell_steps",
    default=decision.DEFAULT_MIN_DWELL_STEPS,
    validate=decision.validate_dwell,
    help="decode steps spent in a mode before switching again",
)
FORCE = RuntimeSetting(
    key=decision.FORCE_KEY,
    field="force",
    word="force",
    label="forced mode",
    profile_key="force_mode",
    default=decision.AUTO,
    validate=decision.validate_force,
    help="auto (the threshold rule), speculative or target_only (forced)",
    choices=decision.FORCE_CHOICES,
    damps=False,
    line="force mode set to {new}",
)

COLD_DRAFT = RuntimeSetting(
    key=decision.COLD_DRAFT_KEY,
    field="cold_draft_above",
    word="cold",
    label="cold draft above",
    profile_key="cold_draft_above",
    default=0,
    validate=decision.validate_cold_draft,
    help=(
        "target-only steps of a decode batch > M skip the draft's extend: a plain step's cost, "
        "but the draft resumes cold (lower acceptance for the requests that lived through it); "
        "0 = keep the draft warm at every batch"
    ),
    damps=False,
)

SETTINGS: tuple[RuntimeSetting, ...] = (THRESHOLD, HYSTERESIS, DWELL, FORCE, COLD_DRAFT)


def by_key(key: str) -> RuntimeSetting | None:
    return next((s for s in SETTINGS if s.key == key), None)


def named(key: str) -> RuntimeSetting:
    """A setting by its key; KeyError for any other key."""
    setting = by_key(key)
    if setting is None:
        raise KeyError(key)
    return setting


def by_word(word: str) -> RuntimeSetting | None:
    """A setting by its command-line word, its key, or its field name."""
    return next((s for s in SETTINGS if word in (s.word, s.key, s.field)), None)


def keys() -> tuple[str, ...]:
    return tuple(s.key for s in SETTINGS)


def apply(switch: decision.SpecSwitch, setting: RuntimeSetting, raw: object) -> tuple[str, Value]:
    """Validate ``raw`` (a request's value: a named one by index or name) and set it on a
    rank's switch, effective from the next step: (the log line, the new value)."""
    new = setting.from_wire(raw)
    old = switch.put(setting.field, new)
    return setting.changed(old, new, switch.low_mark), new
