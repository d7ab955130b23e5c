"""The production-cost pair's deep target (rig/deep_models.py) is the source target's
function: built here from the rig's random-weight shape (no trained pair needed)."""

from __future__ import annotations

import json

import pytest

from tests.real_sglang.rig import deep_models, tiny_models

# the build's transformers and torch are imported by the fixture, in the one worker that runs these
# tests, not by every worker that collects this module (tests/support/lazy.py)
pytestmark = pytest.mark.xdist_group("torch")


@pytest.fixture
def source(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    target, draft = tmp_path / "src-target", tmp_path / "src-draft"
    tiny_models.build(target, draft, constant=False, seed=3)
    return target, draft


def test_appended_zero_output_layers_leave_the_logits_bit_for_bit(source, tmp_path):
    target, draft = source
    facts = deep_models.build(target, draft, tmp_path / "t", tmp_path / "d", layers=10)
    assert facts["max_logit_delta"] == 0.0
    assert facts["layers"] == 10 and facts["source_layers"] == tiny_models.TARGET_LAYERS
    assert json.loads((tmp_path / "t" / "config.json").read_text())["num_hidden_layers"] == 10
    # the draft still reads the layers it was trained on
    assert (
        (json.loads((tmp_path / "d" / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
        == tiny_models.AUX_LAYER_IDS
    )


def test_an_appended_layer_that_writes_to_the_residual_is_caught(source, tmp_path, monkeypatch):
    """Negative control: appended layers with random output projections change the
    function, and the build refuses them."""
    target, draft = source
    monkeypatch.setattr(deep_models, "ZEROED", ())
    with pytest.raises(RuntimeError, match="not the trained one"):
        deep_models.build(target, draft, tmp_path / "t", tmp_path / "d", layers=6)
