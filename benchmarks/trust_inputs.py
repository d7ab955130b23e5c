"""The hostile inputs of the trust audit (benchmarks/trust_audit.py): profiles and command
line flags that must be refused with exit 2 naming the key or flag, never a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.trust_audit import Audit


def _bad_profile(audit: Audit, label: str, body: str, words: str) -> None:
    def run() -> tuple[bool, str]:
        path = audit.root / f"bad-{len(audit.results)}.toml"
        path.write_text(body)
        res = audit.cli("launch", "--profile", str(path), "--dry-run")
        ok = res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr
        return ok, f"exit {res.returncode}: {res.stderr.strip()[-140:]}"

    audit.check("input", label, run)


def _bad_flag(audit: Audit, command: str, flag: str, value: str) -> None:
    def run() -> tuple[bool, str]:
        res = audit.cli(command, "--profile", str(audit.root / "none.toml"), f"{flag}={value}")
        ok = res.returncode == 2 and "finite number" in res.stderr
        return ok, f"exit {res.returncode}: {res.stderr.strip()[-120:]}"

    audit.check("input", f"{command} {flag}={value}", run)


def check_bad_inputs(audit: Audit) -> None:
    """Check every hostile profile and flag, one ``audit.check("input", ...)`` each."""
    head = '[server]\nkind = "sim"\n'
    for section, key in (
        ("restart", "stop_grace_s"),
        ("health", "timeout_s"),
        ("health", "interval_s"),
        ("restart", "backoff_initial_s"),
        ("server", "log_rotate_mb"),
    ):
        for value in ("nan", "inf", "-inf"):
            sec = "" if section == "server" else f"[{section}]\n"
            _bad_profile(
                audit,
                f"[{section}] {key} = {value}",
                f"{head}{sec}{key} = {value}\n",
                f"[{section}] {key}: must be a finite number",
            )
    for flag, command in (("--grace", "stop"), ("--linger", "supervise"), ("--wait", "launch")):
        for value in ("nan", "inf", "-1", "1e309"):
            _bad_flag(audit, command, flag, value)
    _bad_profile(audit, "tp_size = 100000", head + "tp_size = 100000\n", "[server] tp_size: must be 1..64")
    _bad_profile(audit, "host = 127.0.0.1:1@10.0.0.1", head + 'host = "127.0.0.1:1@10.0.0.1"\n', "[server] host")
    _bad_profile(audit, "NUL in extra_args", head + 'extra_args = ["a\\u0000b"]\n', "must not contain a NUL")
    _bad_profile(audit, "NUL in [env]", head + '[env]\nX = "a\\u0000b"\n', "[env] X: must not contain a NUL")
    _bad_profile(audit, "TOML nested 50,000 deep", "x = " + "[" * 50000 + "]" * 50000 + "\n", "invalid TOML")
