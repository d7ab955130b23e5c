"""The steps=0 state's memory and the graph / eager decode steps per mode, from the real
patched worker's /server_info entry (through SGLang's real internal-state controller) to
the snapshot part, ``status``'s text and the console's GPU panel."""

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from rich.console import Console  # noqa: E402

from console.cli.status import rank_line  # noqa: E402
from console.widgets.gpu_table import rank_table  # noqa: E402
from server_control.model.switch_health import SwitchHealth  # noqa: E402
from server_control.sglang_patch import worker as patch_worker  # noqa: E402
from tests.cli.status_schema import RANK, problems  # noqa: E402
from tests.sglang.objects import Recorder, build_worker, decode_batch, server_info_entry  # noqa: E402


def test_the_server_info_entry_reaches_status_and_the_gpu_panel(publish):
    server_args = publish(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0)
    import sglang.srt.speculative.eagle_worker_v2 as ew

    worker = build_worker(ew.EAGLEWorkerV2, Recorder())
    worker.gpu_id = 0  # free memory is measured (host memory on the CPU)
    worker._dynspec = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    worker.init_cuda_graphs()  # the patched real method: agree, build, measure
    for bs in (2, 2, 6, 6, 6):  # two speculative steps, three target-only (eager on the CPU)
        worker.forward_batch_generation(decode_batch(bs))
    dyn = server_info_entry(worker)["dynamic_speculation"]
    health = SwitchHealth.from_states([dyn])
    (rank,) = health.ranks
    assert rank.rank == "TP0"
    assert isinstance(rank.memory["used_gib"], float) and isinstance(rank.memory["free_gib"], float)
    assert dict(rank.forwards["speculative"]) == {
        "target_graph": 0,
        "target_eager": 2,
        "draft_extend_graph": 0,
        "draft_extend_eager": 2,
    }
    assert rank.forwards["target_only"]["target_eager"] == 3
    assert SwitchHealth.from_json(health.to_json()) == health  # status --json and back
    assert problems(health.to_json()["ranks"][0], RANK) == []  # the pinned status --json schema
    line = rank_line(rank)
    assert line.startswith("rank TP0: steps=0 state ") and "target_only target 0/3" in line
    console = Console(width=200, record=True)
    console.print(rank_table(health.ranks))
    text = console.export_text()
    assert "steps=0 GiB" in text and "0/3 0/3" in text and "0/2 0/2" in text


def test_a_failed_rank_row_is_shown_as_failed():
    dyn = {"active": True, "ranks": [{"rank": 0, "forwards": {}}, {"rank": 1, "failed": "rank failed: boom"}]}
    ranks = SwitchHealth.from_states([dyn]).ranks
    assert [r.rank for r in ranks] == ["TP0", "TP1"]
    assert rank_line(ranks[1]) == "rank TP1: rank failed: boom"
