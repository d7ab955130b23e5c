"""benchmarks/tune_rig.py's pure parts: reversals, a start's summary, the move lines it
reads from the server's log (one rank's), and its options' refusals."""

import pytest

from benchmarks import tune_rig


def test_reversals_count_moves_against_the_one_before():
    assert tune_rig.reversals([2, 4, 4, 7, 9]) == 0
    assert tune_rig.reversals([2, 4, 12, 24, 19]) == 1  # run 2's path, up then down once
    assert tune_rig.reversals([10, 12, 8, 14, 6]) == 3
    assert tune_rig.reversals([48]) == 0


def test_a_start_reaches_the_target_at_the_first_reading_inside_it():
    rows = [{"at_s": 10, "threshold": 4}, {"at_s": 20, "threshold": 12}, {"at_s": 30, "threshold": 23}]
    s = tune_rig.summarise_start(2, rows, (8, 16))
    assert s == {"start": 2, "reached_target_s": 20, "reversals": 0, "final": 23, "distinct": [2, 4, 12, 23]}
    never = tune_rig.summarise_start(48, [{"at_s": 10, "threshold": 50}], (8, 16))
    assert never["reached_target_s"] is None and never["final"] == 50


def test_move_lines_are_read_once_whatever_the_rank_prefix():
    log = "\n".join(
        [
            "[2026-12-04 21:34:36] Dynamic speculation: threshold 16 -> 18 (auto: target-only faster from batch 19)",
            "[2026-12-04 21:34:41 TP0] Dynamic speculation: threshold 18 -> 19 (auto: x)",
            "[2026-12-04 21:34:41 TP1] Dynamic speculation: threshold 18 -> 19 (auto: x)",
            "[2026-12-04 21:34:42] Dynamic speculation: threshold changed 2 -> 48 (resume_at<=47)",
        ]
    )
    moves = [(m.group(2), m.group(3)) for m in tune_rig.MOVE_LINE.finditer(log)]
    assert moves == [("16", "18"), ("18", "19")]


@pytest.mark.parametrize("argv", [["--clients", "9-4"], ["--target", "x"], ["--bounds", "8-2"], ["--clients", "0-4"]])
def test_bad_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        tune_rig.options(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err
