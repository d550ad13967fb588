"""Issue 34, "a silent change": a DFlash drafter whose layers mix sliding-window and full attention.

SpecForge's configs/qwen3.6-27b-dflash.json (tests/data/block-diffusion, copied at a6b6b023) has four sliding layers
then a full one and no `dflash_config.causal`: SpecForge trains the sliding layers causal within the draft block and
the full one bidirectional (dflash_family_model.py), as vLLM 0.33.0's `_dflash_layer_causal` and SGLang 0.5.23 read
`layer_types`. A speculators config says one `sliding_window_non_causal`, which vLLM's `update_dflash` applies to
every layer; vLLM's V1 runner refuses mixed layers (config/vllm.py, qwen3_dflash.py NotImplementedError).
Built here at a small width, with the tensors SpecForge's DFlashDraftModel saves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import write_safetensors
from conftest import run_cli, tensor_hashes
from test_drafters_2026_block import BLOCK_DIFFUSION, HD, HEADS, INTER, KV, VOCAB, H, body_tensors, refusal

LAYERS = 5  # as published: sliding, sliding, sliding, sliding, full
SLIDING_CAUSAL = [True, True, True, True, False]


def mixed_drafter(dest: Path, **changes) -> Path:
    config = json.loads((BLOCK_DIFFUSION / "specforge-qwen3.6-27b-dflash.json").read_text())
    config.update(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HD,
                  intermediate_size=INTER, vocab_size=VOCAB, **changes)
    config["dflash_config"] = {**config["dflash_config"], "mask_token_id": VOCAB - 3}
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dest / "model.safetensors", body_tensors(config, "dflash"))
    return dest


def verdicts(stdout: str) -> dict[str, str]:
    """convert's verdict lines: runner label -> what follows it."""
    out = {}
    for line in stdout.splitlines():
        for label in ("vLLM (V1 runner)", "vLLM (V2 runner)", "SGLang", "speculators library"):
            if line.strip().startswith(label):
                out[label] = line.strip()[len(label):].split(None, 1)[1]
    return out


def findings(path: Path) -> list[tuple[str, str | None, str]]:
    report = json.loads(run_cli("validate", "--json", path).stdout)
    return sorted((f["code"], f["engine"], f["message"]) for f in report["findings"]
                  if f["code"] != "I-KIND-BLOCK-DIFFUSION")


V1_REFUSES = ("vLLM (V1 runner): mixed sliding/full attention layers run on the V2 runner only (config/vllm.py: "
              "\"Model Runner V1 does not support: mixed sliding/full dflash drafts\"; qwen3_dflash.py raises "
              "NotImplementedError)")


def test_to_speculators_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path):
    """Before: written, and vLLM's V1 and V2 runners said to serve it as trained, while update_dflash read every layer
    bidirectional (sliding_window_non_causal absent: true)."""
    src = mixed_drafter(tmp_path / "src")
    result = run_cli("--no-record", "--verifier", "Qwen/Qwen3.6-27B", "--to", "speculators", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-CAUSALITY-UNEXPRESSIBLE", result.stderr
    assert "layers [0, 1, 2, 3] were trained causal" in result.stderr and "update_dflash" in result.stderr
    assert "--to dflash" in result.stderr and not (tmp_path / "out").exists()


def test_the_flat_layout_keeps_each_layers_causality_and_validate_says_what_convert_says(tmp_path: Path):
    """`--to dflash` writes layer_types and the window as read and no causal override (it would hold for every layer);
    the V1 runner refuses mixed layers loudly, the V2 runner and SGLang serve it as trained; validate of the source and
    of the output says the same: the V1 refusal is a caveat, since the V2 runner (vLLM's default) serves it."""
    src = mixed_drafter(tmp_path / "src")
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    original = json.loads((src / "config.json").read_text())
    assert (written["layer_types"], written["sliding_window"]) == (original["layer_types"], 2048)
    assert "causal" not in written["dflash_config"] and "is_causal" not in written
    assert tensor_hashes(tmp_path / "out") == tensor_hashes(src)
    said = verdicts(result.stdout)
    assert said["vLLM (V1 runner)"].startswith("refuses it loudly: mixed sliding/full attention layers"), said
    assert said["vLLM (V2 runner)"].startswith("serves as trained"), said
    assert said["SGLang"].startswith("serves as trained"), said
    for path in (src, tmp_path / "out"):
        assert findings(path) == [("W-ENGINE-CAVEAT", "vllm", V1_REFUSES)], path


def test_a_speculators_file_that_lost_the_causality_is_served_wrong_by_vllm_and_the_hint_mends_it(tmp_path: Path):
    """What the tool wrote before (or speculators' flag given one value): vLLM's V2 runner loads it and attends with
    one causality in every layer. validate says so; the flat file its hint writes is served as trained."""
    src = mixed_drafter(tmp_path / "src")
    config = json.loads((src / "config.json").read_text())
    decoder = {k: v for k, v in config.items() if k not in ("architectures", "auto_map", "block_size", "dflash_config",
                                                              "num_target_layers")}
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "config.json").write_text(json.dumps({
        "architectures": ["DFlashSpeculator"], "speculators_model_type": "dflash", "speculators_version": "0.9.0",
        "transformer_layer_config": decoder, "draft_vocab_size": VOCAB, "block_size": 16, "target_hidden_size": None,
        "aux_hidden_state_layer_ids": [2, 17, 32, 47, 62], "mask_token_id": VOCAB - 3, "sample_from_anchor": False,
        "speculators_config": {"algorithm": "dflash", "default_proposal_method": "greedy", "proposal_methods": [
            {"proposal_type": "greedy", "speculative_tokens": 15}],
            "verifier": {"name_or_path": "Qwen/Qwen3.6-27B", "architectures": []}}}))
    (spec / "model.safetensors").write_bytes((src / "model.safetensors").read_bytes())
    # (the V1 runner's refusal is said as a caveat only where the V2 runner serves it; absent, speculators reads the
    # flag as false: its library applies the trained causality, sliding layers causal)
    said = findings(spec)
    assert said == [("E-ENGINE-WRONG", "vllm", "vLLM (V2 runner): builds DFlashQwen3ForCausalLM (speculators dflash), "
                     "but attends with layers 0, 1, 2, 3 bidirectional within the draft block, not as trained")], said
    mended = run_cli("--no-record", "--to", "dflash", spec, tmp_path / "flat")
    assert mended.exit_code == 0, mended.stderr
    assert verdicts(mended.stdout)["vLLM (V2 runner)"].startswith("serves as trained"), mended.stdout
    assert findings(tmp_path / "flat") == [("W-ENGINE-CAVEAT", "vllm", V1_REFUSES)]


@pytest.mark.parametrize("change, said", [
    ({"layer_types": ["sliding_attention"] * 4}, "layer_types is"),
    ({"layer_types": ["sliding_attention"] * 4 + ["chunked_attention"]}, "layer_types is"),
    ({"sliding_window": None}, "sliding_window is None"),
])
def test_a_layer_layout_no_reader_can_build_is_refused(tmp_path: Path, change: dict, said: str):
    """vLLM indexes layer_types per layer and needs a window for a sliding one; SpecForge and SGLang refuse both."""
    src = mixed_drafter(tmp_path / "src", **change)
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-CONFIG-FIELD", result.stderr
    assert said in result.stderr and not (tmp_path / "out").exists()


def test_an_all_sliding_bidirectional_drafter_says_it_where_sglang_reads_it(tmp_path: Path):
    """A uniform override (dflash_config.causal false on sliding layers, as MiMo-style files say it) holds for every
    layer in vLLM; SGLang reads no dflash_config.causal, only is_causal: the flat writer writes both."""
    src = mixed_drafter(tmp_path / "src", layer_types=["sliding_attention"] * LAYERS)
    config = json.loads((src / "config.json").read_text())
    config["dflash_config"]["causal"] = False
    (src / "config.json").write_text(json.dumps(config))
    assert ("E-ENGINE-WRONG", "sglang", "SGLang: builds DFlashDraftModel, but attends with layers 0, 1, 2, 3, 4 causal "
            "within the draft block, not as trained") in findings(src)
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["is_causal"], written["dflash_config"]["causal"]) == (False, False)
    assert findings(tmp_path / "out") == []
