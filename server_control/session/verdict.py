"""The session's three-layer verification from what it holds: the last poll, the profile,
the log's facts and the runtime watch's status (server_control/control/verify.py judges)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from server_control.control import verify as v
from server_control.control.init_lines import InitExplanation, explain
from server_control.model.verification import Verification, VerifyLayer
from server_control.session.log_facts import LogFacts
from server_control.telemetry.sample import Sample

if TYPE_CHECKING:
    from server_control.config.profile import Profile


def _ranks_expected(s: Sample | None, profile: Profile | None) -> int:
    args = s.args if s else {}
    tp = s.tp_size if s and s.tp_size else (profile.server.get("tp_size") if profile else None)
    dp = s.dp_size if s and s.dp_size else (profile.server.get("dp_size") if profile else None)
    return v.expected_ranks(tp, dp, bool(args.get("enable_dp_attention")))


def explanation_of(s: Sample | None, profile: Profile | None, facts: LogFacts, *, log_attached: bool) -> InitExplanation:
    return explain(facts.init, facts.not_active, log_attached=log_attached, ranks_expected=_ranks_expected(s, profile))


def verification_of(
    s: Sample | None, profile: Profile | None, facts: LogFacts, *, log_attached: bool, runtime: VerifyLayer
) -> Verification:
    expected = profile.dynamic.get("threshold") if profile is not None else None
    init = v.initialisation(
        facts.init,
        facts.not_active,
        facts.ready,
        ranks_expected=_ranks_expected(s, profile),
        server_ready=bool(s and s.reachable),
        log_attached=log_attached,
        sample=s,
    )
    return v.summary([v.configuration(s, expected), init, runtime])
