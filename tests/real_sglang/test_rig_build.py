"""The rig's cache (rig/build.py): other versions are kept while they are in use."""

from __future__ import annotations

import os
import time

import pytest

from tests.real_sglang.rig import build


def _version(root, name: str, age_s: float):
    d = root / name
    d.mkdir()
    (d / "rig.json").write_text("{}")
    t = time.time() - age_s
    os.utime(d / "rig.json", (t, t))
    return d


def test_prune_keeps_versions_used_lately_and_deletes_unused_ones(tmp_path):
    """Another worktree's rig version (another hash) may run servers right now: deleting
    every other version at once took their models and stand-in libcuda away mid-run."""
    keep = _version(tmp_path, "a" * 12, 0)
    recent = _version(tmp_path, "b" * 12, 3600)
    stale = _version(tmp_path, "c" * 12, build.KEEP_UNUSED_S + 60)
    other = tmp_path / "not-a-version"
    other.mkdir()
    build._prune(keep)
    assert keep.is_dir() and recent.is_dir() and other.is_dir()
    assert not stale.exists()


def test_using_a_version_marks_it_used(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCONSOLE_RIG_CACHE", str(tmp_path))
    root = _version(tmp_path, build._stamp(), build.KEEP_UNUSED_S + 60)
    (root / "rig.json").write_text('{"constant_token_id": 5, "constant_text": " hello"}')
    old = time.time() - build.KEEP_UNUSED_S - 60
    os.utime(root / "rig.json", (old, old))
    assert build.ensure_rig().root == root
    assert time.time() - (root / "rig.json").stat().st_mtime < 60


@pytest.mark.xdist_group("torch")  # with the other torch tests: one worker imports it (tests/support/lazy.py)
def test_the_trained_pair_comes_from_the_kept_weights_and_is_checked(tmp_path):
    """A cold rig cache loads the kept weights (seconds, no training) and still checks them
    on fresh sequences; weights that do not copy the language are refused, not served.
    Needs torch/transformers (the sglang extra)."""
    pytest.importorskip("transformers")
    import shutil

    from safetensors.torch import load_file, save_file

    from tests.real_sglang.rig import trained_models

    facts = trained_models.build(tmp_path / "t", tmp_path / "d")
    assert facts["weights"] == "kept test data (trained)" and "train_s" not in facts
    assert min(facts["target_accuracy"], facts["draft_accuracy_extend"], facts["draft_accuracy_decode"]) >= 0.99
    assert (tmp_path / "t" / "model.safetensors").is_file() and (tmp_path / "d" / "config.json").is_file()

    broken = tmp_path / "broken"
    shutil.copytree(trained_models.DATA_DIR, broken)
    draft = load_file(str(broken / "draft.safetensors"))
    draft["fc.weight"] = draft["fc.weight"] * 0  # the draft no longer sees the target's states
    save_file(draft, str(broken / "draft.safetensors"))
    with pytest.raises(RuntimeError, match="did not converge"):
        trained_models.build(tmp_path / "t2", tmp_path / "d2", data_dir=broken)
