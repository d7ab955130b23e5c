"""The crossover pair (rig/crossover_models.py): its wide target is the trained target's
function, its draft is wrong about the share of tokens chosen, and the build refuses
either claim when it is false. Built here narrow (an MLP of 1024, not 131072)."""

from __future__ import annotations

import json

import pytest

from tests.real_sglang.rig import crossover_models, trained_models

# the build's transformers and torch are imported by the fixture, in the one worker that runs these
# tests, not by every worker that collects this module (tests/support/lazy.py)
pytestmark = pytest.mark.xdist_group("torch")

WIDTH = 1024


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    root = tmp_path_factory.mktemp("trained")
    trained_models.build(root / "target", root / "draft", log=lambda _: None)
    return root / "target", root / "draft"


def test_the_wide_target_is_the_trained_one_and_the_draft_errs_as_chosen(source, tmp_path):
    target, draft = source
    facts = crossover_models.build(target, draft, tmp_path / "t", tmp_path / "d", width=WIDTH, wrong=0.3)
    assert facts["argmax_equal"] and facts["max_logit_delta"] <= 1e-3, facts
    assert json.loads((tmp_path / "t" / "config.json").read_text())["intermediate_size"] == WIDTH
    for key in ("draft_accuracy_extend", "draft_accuracy_decode"):
        assert 0.64 <= facts[key] <= 0.76, facts
    assert facts["wrong_tokens"] == round(0.3 * (trained_models.LAST_TOKEN - trained_models.FIRST_TOKEN))


def test_padding_that_computes_something_is_refused(source, tmp_path, monkeypatch):
    """Negative control: appended MLP units with non-zero weights change the function."""
    import torch

    target, draft = source
    real = crossover_models.widen

    def noisy(state, layers, width):
        out = real(state, layers, width)
        key = "model.layers.0.mlp.down_proj.weight"
        out[key] = out[key] + torch.full_like(out[key], 0.5)
        return out

    monkeypatch.setattr(crossover_models, "widen", noisy)
    with pytest.raises(RuntimeError, match="not the trained one"):
        crossover_models.build(target, draft, tmp_path / "t", tmp_path / "d", width=WIDTH, wrong=0.3)


def test_a_draft_that_is_not_misled_is_refused(source, tmp_path, monkeypatch):
    """Negative control: without the rotated rows the draft is right ~always, not ~70 %."""
    target, draft = source
    monkeypatch.setattr(crossover_models, "mislead", lambda lm_head, tokens: lm_head)
    with pytest.raises(RuntimeError, match="accuracy is not"):
        crossover_models.build(target, draft, tmp_path / "t", tmp_path / "d", width=WIDTH, wrong=0.3)
