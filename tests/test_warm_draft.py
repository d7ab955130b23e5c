"""benchmarks/warm_draft.py's logic (not its speed): the pairing of warm and cold windows by
round, the acceptance ratios, what counts as a problem, and its arguments."""

import pytest

from benchmarks import warm_draft
from server_control.protocol import decision

T = decision.TARGET_ONLY


def _w(c: int, k: int, variant: str, ms: float | None, problem: str | None = None, errors: int = 0) -> dict:
    steps = {"ms_per_step_by_mode": {T: ms}} if ms is not None else None
    return {"clients": c, "round": k, "variant": variant, "steps": steps, "tok_s": 100.0, "problem": problem, "errors": errors}


def test_cold_over_warm_pairs_the_windows_of_one_round_and_level():
    windows = [
        _w(16, 0, "warm", 100.0),
        _w(16, 0, "cold", 95.0),
        _w(16, 1, "cold", 90.0),
        _w(16, 1, "warm", 100.0),
        _w(32, 0, "warm", 200.0),
        _w(32, 0, "cold", 190.0),
        _w(32, 1, "warm", 210.0),
        _w(32, 1, "cold", None),  # no target-only step counted: left out, not a zero
        _w(16, 1, "cold_caught_up", 92.0),  # round 0's caught-up window missing: round 1 alone
    ]
    out = warm_draft.summarise(windows, [])
    assert out["levels"]["16"]["cold_over_warm_by_round"] == [0.95, 0.9]
    assert out["levels"]["16"]["cold_over_warm_median"] == pytest.approx(0.925)
    assert out["levels"]["16"]["cold_caught_up_over_warm_by_round"] == [pytest.approx(0.92)]
    assert out["levels"]["32"]["cold_over_warm_by_round"] == [0.95]
    assert out["levels"]["32"]["cold_caught_up_over_warm_median"] is None
    assert out["levels"]["32"]["ms_per_step_runs"] == {"warm": [200.0, 210.0], "cold": [190.0, None], "cold_caught_up": []}
    assert out["problems"] == [] and out["errors"] == 0


def test_problems_and_failed_requests_are_counted_and_a_resume_without_a_switch_is_one():
    windows = [_w(8, 0, "warm", 80.0, problem="target_only: 3 steps ran speculative", errors=2), _w(8, 0, "cold", 70.0)]
    resumes = [
        {"variant": "warm", "errors": 1, "around": [{"before": 2.5, "after": 2.45}]},
        {"variant": "cold", "errors": 0, "around": [{"before": 2.5, "after": 2.0}]},
        {"variant": "cold", "errors": 0, "around": []},
        {"variant": "cold_caught_up", "errors": 0, "around": [{"before": 2.5, "after": 2.5}]},
    ]
    out = warm_draft.summarise(windows, resumes)
    assert out["errors"] == 3
    assert out["problems"] == [
        "round 0 c=8 warm: target_only: 3 steps ran speculative",
        "resume cold: no resume found in the trace",
    ]
    assert out["accept_after_over_before"] == {
        "warm": [pytest.approx(0.98)],
        "cold": [pytest.approx(0.8)],
        "cold_caught_up": [pytest.approx(1.0)],
    }
    assert "cold: [0.8]" in warm_draft.render(out) and "PROBLEM: resume cold" in warm_draft.render(out)


@pytest.mark.parametrize("argv", [["--levels", "8,x"], ["--levels", "0,8"], ["--rounds", "0"], ["--resumes", "-1"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        warm_draft.options(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_defaults_are_the_crossover_pair_at_steps_3():
    opts = warm_draft.options([])
    assert (opts.models, opts.steps, opts.levels, opts.tokens) == ("crossover", 3, [8, 16, 32], 64)
    win = warm_draft._window_opts(opts, 16, measure=3.0)
    assert (win.clients, win.measure, win.tokens, win.pause) == (16, 3.0, (64, 64), (0.0, 0.0))
