"""vLLM V1 with M-RoPE targets (vllm-project/vllm #54498, open; PRs #54519 closed unmerged, #54716 open; issue 35):
the V1 draft loop writes draft tokens to the wrong KV slots on image inputs. A caveat on vLLM's V1 runner at every
release the tool knows (0.18.0 to 0.33.0: the loop was read in the 0.24.0 and 0.33.0 wheels), shown when the target
uses M-RoPE: its config (--target) declares an `mrope_section`, in rope_scaling or rope_parameters, or the drafter's
own config does (the VL drafters copy it, and vLLM's draft reads its own: `uses_mrope`). Its hint names no
conversion: no file change avoids an engine's bug.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter, write_target
from conftest import DATA, run_cli

SPEC = DrafterSpec(capture_boundaries=None, target_model_type="qwen2_5_vl")
QWEN25_VL_ROPE = {"type": "mrope", "mrope_section": [16, 24, 24]}  # Qwen2.5-VL's config (rope_scaling)


def caveats(path: Path, *args: str) -> list[dict]:
    found = json.loads(run_cli("validate", "--json", *args, path).stdout)["findings"]
    return [f for f in found if f["code"] == "W-ENGINE-CAVEAT"]


def vl_target(dest: Path, where: str) -> Path:
    """A Qwen2.5-VL-like target config whose M-RoPE is declared `where` (transformers 4 rope_scaling, or 5's
    rope_parameters under text_config)."""
    write_target(dest, SPEC)
    config = json.loads((dest / "config.json").read_text())
    if where == "rope_scaling":
        config["rope_scaling"] = QWEN25_VL_ROPE
    else:
        config["text_config"] = {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                     "mrope_section": [16, 24, 24]},
                                 "num_hidden_layers": SPEC.target_layers, "hidden_size": SPEC.ht}
    (dest / "config.json").write_text(json.dumps(config))
    return dest


@pytest.mark.parametrize("where", ["rope_scaling", "text_config.rope_parameters"])
def test_an_m_rope_target_gets_the_v1_caveat(tmp_path: Path, where: str):
    """Before: vLLM V1 served it as trained without a word. After: a caveat for vLLM, naming the issue and the
    open fix, with a hint that is a statement (no command changes an engine's bug)."""
    src = build_drafter(tmp_path / "d", "vllm", SPEC)
    assert caveats(src) == []
    target = vl_target(tmp_path / "t", where)
    [caveat] = caveats(src, "--target", str(target))
    assert caveat["engine"] == "vllm" and "#54498" in caveat["message"] and "#54716" in caveat["message"]
    assert "eagle3-convert" not in caveat["hint"] and "text-only" in caveat["hint"]
    converted = run_cli("--no-record", "--target", str(target), "--to", "vllm", src, tmp_path / "out")
    assert converted.exit_code == 0 and "#54498" in converted.stdout
    assert "#54498" in next(line for line in converted.stdout.splitlines() if "vLLM (V1 runner)" in line)
    assert "#54498" not in next(line for line in converted.stdout.splitlines() if "vLLM (V2 runner)" in line)


def test_a_published_vl_drafter_carries_it_in_its_own_config(tmp_path: Path):
    """SpecForge's Qwen2.5-VL-7B EAGLE-3 config (tests/data/real-configs) copies the target's mrope rope_scaling:
    the drafter alone says its target is M-RoPE."""
    published = json.loads((DATA / "real-configs" / "specforge-qwen2-5-vl-7b-eagle3.json").read_text())
    src = build_drafter(tmp_path / "d", "sglang", SPEC)
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "rope_scaling": published["rope_scaling"]}))
    found = caveats(src, "--engine", "vllm", "--engine", "sglang")  # (SGLang's layout: validate judges SGLang alone)
    assert [f["engine"] for f in found] == ["vllm"] and "#54498" in found[0]["message"]


def test_a_plain_rope_target_gets_none(tmp_path: Path):
    src = build_drafter(tmp_path / "d", "vllm", SPEC)
    target = write_target(tmp_path / "t", SPEC)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
    assert caveats(src, "--target", str(target)) == []


def test_every_known_vllm_release_holds_it(tmp_path: Path):
    """The fix is in no release: the oldest and the newest the tool knows both carry the caveat."""
    src = build_drafter(tmp_path / "d", "vllm", SPEC)
    target = vl_target(tmp_path / "t", "rope_scaling")
    for release in ("0.18.0", "0.33.0"):
        [caveat] = caveats(src, "--target", str(target), "--engine", f"vllm=={release}")
        assert "#54498" in caveat["message"]
