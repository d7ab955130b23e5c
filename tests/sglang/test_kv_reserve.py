"""The steps=0 state's memory comes out of the target's KV budget before the pool is
sized: the patched real ``KVCacheConfigurator._profile_available_bytes`` returns SGLang's
budget less the reserve (the operator's ``SPECCONSOLE_DYNSPEC_RESERVE_GIB`` or the
estimate), for the target's configurator of an EAGLE server only, once per process."""

from types import SimpleNamespace

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.mem_cache.kv_cache_configurator as kvc  # noqa: E402
from sglang.srt.runtime_context import get_server_args  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

from server_control.sglang_patch import reserve, startup  # noqa: E402

GIB = 1024**3


@pytest.fixture
def budget(monkeypatch):
    """SGLang's own budget: 10 GiB (its profiling reads the device: the device edge)."""
    monkeypatch.setattr(reserve, "_reserved", [None])
    monkeypatch.setattr(reserve, "_refused", [None])
    cls = kvc.KVCacheConfigurator
    wrapper = cls._profile_available_bytes
    original = wrapper.__closure__  # the wrapper calls the original it closed over: swap it
    cell = next(
        c
        for c in original
        if callable(c.cell_contents) and getattr(c.cell_contents, "__name__", "") == "_profile_available_bytes"
    )
    monkeypatch.setattr(cell, "cell_contents", lambda self, pre: 10 * GIB)
    return wrapper


def configurator(algo=SpeculativeAlgorithm.EAGLE3, draft=False, server_args=None):
    text = SimpleNamespace(hidden_size=64, vocab_size=1000)
    return SimpleNamespace(
        server_args=server_args if server_args is not None else get_server_args(),
        is_draft_worker=draft,
        spec_algorithm=algo,
        page_size=1,
        model_config=SimpleNamespace(context_len=4096, hf_text_config=text),
    )


def test_the_class_is_patched():
    assert kvc.KVCacheConfigurator._specconsole_patched is True


def test_the_operators_reserve_comes_out_of_the_target_budget_once(budget, publish, monkeypatch):
    publish()
    monkeypatch.setenv(reserve.RESERVE_ENV, "1.5")
    assert budget(configurator(), 0) == int(8.5 * GIB)
    assert reserve.reserved_gib() == 1.5
    assert budget(configurator(), 0) == 10 * GIB  # once per process (the target's pool)


def test_the_draft_and_non_eagle_servers_keep_sglangs_budget(budget, publish, monkeypatch):
    publish()
    monkeypatch.setenv(reserve.RESERVE_ENV, "1.5")
    assert budget(configurator(draft=True), 0) == 10 * GIB
    assert budget(configurator(SpeculativeAlgorithm.NONE), 0) == 10 * GIB
    assert reserve.reserved_gib() is None


def test_the_estimate_is_the_documented_formula(budget, publish, monkeypatch):
    publish(disable_cuda_graph=True, max_running_requests=32)
    from server_control.sglang_patch import gate

    said: list = []
    monkeypatch.setattr(gate, "not_active", said.append)
    got = budget(configurator(), 0)
    assert said == []
    want = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False)
    assert want == round(2 * 32 * 4096 * 4 / GIB, 4) and want > 0
    assert got == int(10 * GIB - want * GIB)
    assert reserve.reserved_gib() == want


def test_a_bad_reserve_is_named_and_sglangs_budget_stands(budget, publish, monkeypatch):
    publish()
    monkeypatch.setenv(reserve.RESERVE_ENV, "lots")
    assert budget(configurator(), 0) == 10 * GIB
    with pytest.raises(ValueError, match=f"{reserve.RESERVE_ENV}='lots' is not a number of GiB"):
        reserve.operator_gib()


def test_a_build_over_the_reserve_says_what_to_set():
    assert startup.over_reserve(0.3, 0.5) is None
    assert startup.over_reserve(0.3, None) is None
    line = startup.over_reserve(0.8, 0.5)
    assert line is not None and f"{reserve.RESERVE_ENV}=0.80" in line and "0.500 GiB taken out" in line


def test_the_estimate_covers_what_the_rigs_state_took_on_an_h200():
    """The rig's pair on one H200 (2026-12-04, scripts/gpu-check --bundle): the steps=0 state
    took 0.012 GiB with decode graphs of 32 requests; the buffers alone came to 0.0009 GiB,
    so the check failed. The graphs' own memory is now part of the estimate."""
    with_graphs = reserve.estimate_gib(32, 2048, 1, 512, 64, graphs=True, attention=("triton", "triton"))
    assert with_graphs >= 0.012
    without = reserve.estimate_gib(32, 2048, 1, 512, 64, graphs=False, attention=("triton", "triton"))
    assert without < 0.001  # eager: no graph memory, only the page tables


def test_a_flashinfer_server_reserves_the_states_new_workspace(monkeypatch):
    monkeypatch.delenv(reserve.FLASHINFER_WORKSPACE_ENV, raising=False)
    base = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False, attention=("fa3", "fa3"))
    fi = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False, attention=("flashinfer", "flashinfer"))
    assert round(fi - base, 3) == 0.5
    split = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False, attention=("fa3", "flashinfer"))
    assert split == fi
    det = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False, attention=("flashinfer",), deterministic=True)
    assert round(det - base, 3) == 2.0
    monkeypatch.setenv(reserve.FLASHINFER_WORKSPACE_ENV, str(1024 * 1024 * 1024))
    big = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False, attention=("flashinfer", None))
    assert round(big - base, 3) == 1.0


def test_the_configurator_reserves_the_workspace_of_a_flashinfer_server(budget, publish, monkeypatch):
    monkeypatch.delenv(reserve.FLASHINFER_WORKSPACE_ENV, raising=False)
    publish(disable_cuda_graph=True, max_running_requests=32, attention_backend="flashinfer")
    budget(configurator(), 0)
    want = reserve.estimate_gib(32, 4096, 1, 1000, 64, graphs=False)
    assert round(reserve.reserved_gib() - want, 3) == 0.5


def _adaptive(server_args, config):
    """The published args as seen with --speculative-adaptive on (SGLang's resolution turns
    it off on this CPU host; the configurator reads these two fields of it)."""

    class Adaptive:
        speculative_adaptive = True
        speculative_adaptive_config = config

        def __getattr__(self, name):
            return getattr(server_args, name)

    return Adaptive()


@pytest.mark.parametrize(
    "fields, why",
    [
        (dict(speculative_eagle_topk=4, speculative_num_draft_tokens=8), "speculative_eagle_topk=4"),
        (dict(disaggregation_mode="prefill"), "PD disaggregation prefill server"),
        ({"adaptive": None}, "SGLang's adaptive controller builds the steps=0 state itself"),
    ],
)
def test_nothing_is_reserved_when_no_state_will_be_built(budget, publish, caplog, monkeypatch, fields, why):
    """A topk-4 server lost 0.25 GiB of KV to a state the switch then refused to build."""
    monkeypatch.setenv(reserve.RESERVE_ENV, "1.5")
    adaptive = fields.pop("adaptive", False)
    server_args = publish(**fields)
    if adaptive is not False:  # SGLang's default config: steps 0 among its candidates
        server_args = _adaptive(server_args, adaptive)
    assert budget(configurator(server_args=server_args), 0) == 10 * GIB
    assert reserve.reserved_gib() is None
    said = [r.getMessage() for r in caplog.records if "nothing taken out of the KV cache budget" in r.getMessage()]
    assert len(said) == 1 and why in said[0], said


def test_an_adaptive_controller_without_steps_0_still_reserves(budget, publish, tmp_path, monkeypatch):
    config = tmp_path / "adaptive.json"
    config.write_text('{"1": {"candidate_steps": [1, 3]}, "16": {"candidate_steps": [1]}}')
    monkeypatch.setenv(reserve.RESERVE_ENV, "1.5")
    server_args = _adaptive(publish(), str(config))
    assert budget(configurator(server_args=server_args), 0) == int(8.5 * GIB)
    assert reserve.reserved_gib() == 1.5


def test_the_configurator_takes_nothing_and_refuses_when_the_ranks_differ(budget, publish, monkeypatch):
    """The ranks' verdict (reserve_agreement.py, its own tests with a real store) says they
    differ: SGLang's own budget, the reason said once and kept for the worker's set-up."""
    from server_control.sglang_patch import gate, refusals
    from server_control.sglang_patch import reserve_agreement as ra

    publish(disable_cuda_graph=True, max_running_requests=32)
    said: list = []
    monkeypatch.setattr(gate, "not_active", said.append)
    asked: list = []

    def differing(mine: ra.Figure) -> ra.ReserveVerdict:
        asked.append(mine)
        return ra.judge([mine, ra.Figure(mine.gib + 0.5, reserve.RESERVE_ENV)], 5.0)

    monkeypatch.setattr(ra, "settle", differing)
    assert budget(configurator(), 0) == 10 * GIB  # nothing taken
    assert [f.source for f in asked] == ["estimate"] and asked[0].gib > 0
    assert len(said) == 1 and said[0].startswith("the ranks would size their KV pools differently")
    assert reserve.reserved_gib() is None
    assert refusals.reserve_refused() == said[0]


def test_the_configurator_takes_the_reserve_the_ranks_agree_on(budget, publish, monkeypatch):
    from server_control.sglang_patch import reserve_agreement as ra

    publish()
    monkeypatch.setenv(reserve.RESERVE_ENV, "1.5")
    asked: list = []
    monkeypatch.setattr(ra, "settle", lambda mine: asked.append(mine) or ra.judge([mine, mine], 5.0))
    assert budget(configurator(), 0) == int(8.5 * GIB)
    assert asked == [ra.Figure(1.5, reserve.RESERVE_ENV)] and reserve.refused() is None


def test_a_bad_reserve_turns_the_switch_off_at_the_set_up_too(budget, publish, monkeypatch):
    """Before: the configurator logged NOT active for a bad SPECCONSOLE_DYNSPEC_RESERVE_GIB
    and nothing kept it: the worker's set-up found no refusal and built the state anyway.
    The other ranks are told (a figure of 0 from here), so they take none either."""
    from server_control.sglang_patch import gate, refusals
    from server_control.sglang_patch import reserve_agreement as ra

    publish()
    monkeypatch.setattr(gate, "not_active", lambda reason: None)
    asked: list = []
    monkeypatch.setattr(ra, "settle", lambda mine: asked.append(mine) or ra.judge([mine, mine], 5.0))
    monkeypatch.setenv(reserve.RESERVE_ENV, "lots")
    assert budget(configurator(), 0) == 10 * GIB
    why = refusals.reserve_refused()
    assert why is not None and "SPECCONSOLE_DYNSPEC_RESERVE_GIB='lots' is not a number of GiB" in why
    assert [(f.gib, f.source.split(":")[0]) for f in asked] == [(0.0, "failed")]
