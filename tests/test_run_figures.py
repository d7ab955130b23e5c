"""The run's summary counts real-server starts per configuration and names the test modules
that started each (issue 33: where the starts go is what a shared pool would save)."""

from tests.support import run_figures


def test_starts_are_counted_summed_and_grouped_by_configuration():
    s = run_figures.STARTS
    lines = [
        "rig trained: built in 0.6 s",
        f"{s}: trained-plain.log, ready, by=test_switch_exact.py, start_s=30.5",
        f"{s}: trained-plain.log, ready, by=test_gpu_check_cpu.py, start_s=29.5",
        f"{s}: rig-tp2.log, exited, by=test_patched_tp2.py, start_s=12.0",
        f"{s}: odd.log, ready, start_s=not-a-number",
    ]
    out = run_figures.summary(lines)
    assert out[0] == "rig trained: built in 0.6 s"
    assert out[1] == "real SGLang servers started: 4, start-up time 72 s in all"
    assert out[2] == "  2 x trained-plain.log (60 s): test_switch_exact.py, test_gpu_check_cpu.py"
    assert set(out[3:]) == {"  1 x odd.log (0 s): -", "  1 x rig-tp2.log (12 s): test_patched_tp2.py"}


def test_no_start_says_zero():
    assert run_figures.summary([]) == ["real SGLang servers started: 0, start-up time 0 s in all"]


def test_commands_are_counted_forked_and_execd_with_the_reasons():
    c = run_figures.COMMANDS
    lines = [f"{c}: forked"] * 3 + [f"{c}: exec'd, asked", f"{c}: exec'd, PYTHONPATH shadows or hooks", f"{c}: exec'd, asked"]
    out = run_figures.summary(lines)
    assert out[0] == "real SGLang servers started: 0, start-up time 0 s in all"
    assert out[1] == "specconsole commands run by the tests: 3 forked, 3 exec'd (2 asked, 1 PYTHONPATH shadows or hooks)"
