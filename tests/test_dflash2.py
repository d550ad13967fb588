"""Issue 35, "DFlash2": speculators' DFlash2 drafters (PR 1006, `models/dflash2`) read, checked, converted and judged.

The file is the one speculators itself writes: tests/data/dflash2-speculators was saved by speculators 0.9.0's
`DFlash2DraftModel.save_pretrained` (its README says how). The broken copies change one thing of it each.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from builders import RawTensor, write_safetensors
from conftest import DATA, run_cli, tensor_hashes
from test_drafters_2026_block import refusal

SAMPLE = DATA / "dflash2-speculators"
V1_REFUSES = ("the V1 runner refuses DFlash2's candidate head (config/vllm.py: \"Model Runner V1 does not support: "
              "DFlash candidate-head drafts\"; its DFlashProposer would never call it)")


def stored(path: Path) -> dict[str, RawTensor]:
    blob = (path / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    return {name: RawTensor(v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
            for name, v in header.items() if name != "__metadata__"}


def copy(tmp_path: Path, name: str = "src", drop: str | None = None, swap: dict[str, RawTensor] | None = None,
         **config_edits) -> Path:
    """The sample with config.json's top-level keys edited (None: removed) and a tensor dropped or replaced."""
    dest = tmp_path / name
    dest.mkdir()
    config = json.loads((SAMPLE / "config.json").read_text())
    for key, value in config_edits.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    tensors = {k: v for k, v in stored(SAMPLE).items() if k != drop}
    tensors.update(swap or {})
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def serves(src: Path, dest: Path, layout: str) -> dict[str, tuple[str, str]]:
    done = run_cli("--no-record", "--to", layout, "--json", src, dest)
    assert done.exit_code == 0, done.stderr
    return {r: (v["verdict"], v["why"]) for r, v in json.loads(done.stdout)["serves"].items()}


def test_speculators_own_dflash2_file_is_read_as_its_own_kind(tmp_path: Path):
    """Before: speculators_model_type 'dflash2' was no kind this tool knew (E-CONFIG-ALGORITHM). Now: a DFlash2
    drafter whose conv and selector tensors are checked against its four sizes; vLLM's V1 runner refuses it."""
    report = json.loads(run_cli("validate", "--json", SAMPLE).stdout)
    said = sorted((f["code"], f["engine"] or "") for f in report["findings"])
    assert said == [("I-KIND-BLOCK-DIFFUSION", ""), ("W-ENGINE-CAVEAT", "vllm")], said
    assert report["ok"] and report["layout"] == "speculators"
    shown = run_cli("inspect", SAMPLE).stdout
    assert "kind         dflash2, mask token 509" in shown, shown


def test_dflash2_converts_to_the_flat_layout_and_back_byte_for_byte(tmp_path: Path):
    """The four sizes move between speculators' top level and dflash_config (where vLLM's update_dflash2 puts them and
    SGLang's parse_dflash_draft_config reads them), the ids drop by one, every tensor is carried as stored."""
    flat = tmp_path / "flat"
    said = serves(SAMPLE, flat, "dflash")
    written = json.loads((flat / "config.json").read_text())
    assert written["architectures"] == ["DFlash2DraftModel"] and written["block_size"] == 8
    assert written["dflash_config"]["block_size"] == 8  # where SGLang and TensorRT-LLM look first
    nested = written["dflash_config"]
    assert {k: nested[k] for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k",
                                   "target_layer_ids", "mask_token_id")} == {
        "conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 8, "selector_top_k": 4,
        "target_layer_ids": [1, 17, 33], "mask_token_id": 509}
    assert "causal" not in nested  # full-attention layers, bidirectional as trained and as every engine reads them
    assert tensor_hashes(flat) == tensor_hashes(SAMPLE)
    assert said["vllm-v1"] == ("refuses", V1_REFUSES)
    assert said["vllm-v2"] == ("as-trained", "builds DFlash2Qwen3ForCausalLM (serve with num_speculative_tokens 7: its "
                               "convolutions count positions in blocks of 1 + num_speculative_tokens, "
                               "qwen3_dflash2.py), capturing boundaries [2, 18, 34]")
    assert said["sglang"] == ("as-trained", "builds DFlash2DraftModel, capturing boundaries [2, 18, 34]")
    report = json.loads(run_cli("validate", "--json", flat).stdout)  # the flat file passes its own schema and checks
    assert report["ok"] and report["layout"] == "dflash", report["findings"]
    assert said["trtllm"] == ("unknown", "no DFlash2 (candidate selector, grouped convolutions) was found in "
                              "TensorRT-LLM's sources read (_torch/speculative, _torch/models)")
    assert said["llamacpp"][0] == "unknown" and "this tool writes no DFlash2 GGUF" in said["llamacpp"][1]

    back = tmp_path / "back"
    again = serves(flat, back, "speculators")
    original = json.loads((SAMPLE / "config.json").read_text())
    rewritten = json.loads((back / "config.json").read_text())
    for key in ("speculators_model_type", "architectures", "aux_hidden_state_layer_ids", "block_size", "mask_token_id",
                "conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k", "sliding_window_non_causal",
                "draft_vocab_size"):
        assert rewritten[key] == original[key], key
    assert rewritten["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 7
    assert tensor_hashes(back) == tensor_hashes(SAMPLE)
    assert again["speculators"] == ("as-trained", "builds DFlash2DraftModel; embedding and head from Qwen/Qwen3-8B "
                                    "where the file has none, capturing boundaries [2, 18, 34]")
    assert again["vllm-v2"] == ("as-trained", "builds DFlash2Qwen3ForCausalLM (speculators dflash2), capturing "
                                "boundaries [2, 18, 34]")
    assert again["sglang"][0] == "refuses"


def test_vllm_counts_the_convolutions_block_from_the_proposal_not_block_size(tmp_path: Path):
    """vLLM's DFlash2 convolutions take block_size = 1 + num_speculative_tokens (qwen3_dflash2.py), which a
    speculators file gives as its proposal's speculative_tokens: 3 tokens for a block of 8 is served wrong."""
    spec_cfg = json.loads((SAMPLE / "config.json").read_text())["speculators_config"]
    spec_cfg["proposal_methods"][0]["speculative_tokens"] = 3
    src = copy(tmp_path, speculators_config=spec_cfg)
    report = json.loads(run_cli("validate", "--json", src).stdout)
    wrong = [f for f in report["findings"] if f["code"] == "E-ENGINE-WRONG"]
    assert [(f["engine"], f["message"]) for f in wrong] == [("vllm", (
        "vLLM (V2 runner): its convolutions count positions in blocks of 1 + num_speculative_tokens = 4 "
        "(qwen3_dflash2.py), not the trained block_size 8"))], report["findings"]


def test_a_speculators_dflash2_without_sliding_window_non_causal_reads_speculators_default(tmp_path: Path):
    """DFlash2SpeculatorConfig defaults sliding_window_non_causal to true (DFlash's to false), and vLLM's
    update_dflash reads absent as true: a file without it is read as true and written so."""
    src = copy(tmp_path, sliding_window_non_causal=None)
    done = run_cli("--no-record", "--to", "speculators", src, tmp_path / "out")
    assert done.exit_code == 0, done.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["sliding_window_non_causal"] is True


@pytest.mark.parametrize("edits, code, said", [
    ({"selector_rank": None}, "E-CONFIG-FIELD", "selector_rank is None"),
    ({"conv_kernel_size": 0}, "E-CONFIG-FIELD", "conv_kernel_size is 0"),
    ({"block_size": None}, "E-CONFIG-FIELD", "block_size is None"),
    ({"conv_group_size": 24}, "E-CONFIG-FIELD", "conv_group_size 24 does not divide hidden_size 64"),
    ({"conv_kernel_size": 9}, "E-CONFIG-FIELD", "conv_kernel_size 9 exceeds block_size 8"),
    ({"selector_top_k": 513}, "E-CONFIG-FIELD", "selector_top_k 513 exceeds the vocabulary's 512 tokens"),
])
def test_each_size_out_of_range_is_refused_in_one_line(tmp_path: Path, edits: dict, code: str, said: str):
    src = copy(tmp_path, **edits)
    done = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert done.exit_code == 1 and refusal(done.stderr) == code, done.stderr
    assert said in done.stderr and not (tmp_path / "out").exists()
    report = json.loads(run_cli("validate", "--json", src).stdout)
    assert [f["code"] for f in report["findings"]] == [code] and not report["ok"]


def test_a_reduced_draft_vocabulary_is_refused(tmp_path: Path):
    """speculators' DFlash2DraftModel raises on draft_vocab_size != vocab_size; vLLM and SGLang size the selector's
    codebooks by vocab_size."""
    kept = list(range(0, 512, 2))
    maps = {"d2t": RawTensor("I64", (256,), struct.pack("<256q", *(t - i for i, t in enumerate(kept)))),
            "t2d": RawTensor("BOOL", (512,), bytes(int(t in kept) for t in range(512)))}
    src = copy(tmp_path, swap=maps, draft_vocab_size=256)
    done = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert done.exit_code == 1 and refusal(done.stderr) == "E-VOCAB-FULL-ONLY", done.stderr
    assert "drafting 256 of 512 tokens" in done.stderr


def test_a_missing_or_misshapen_conv_or_selector_tensor_is_refused(tmp_path: Path):
    missing = copy(tmp_path, "missing", drop="layers.1.mlp_conv.kernel_projection.weight")
    done = run_cli("--no-record", "--to", "dflash", missing, tmp_path / "out-a")
    assert done.exit_code == 1 and "layers.1.mlp_conv.kernel_projection.weight" in done.stderr, done.stderr
    wide = RawTensor("F32", (512, 16), bytes(512 * 16 * 4))  # a selector rank of 16 where the config says 8
    misshapen = copy(tmp_path, "misshapen", swap={"candidate_selector.successor_codebook": wide})
    done = run_cli("--no-record", "--to", "dflash", misshapen, tmp_path / "out-b")
    assert done.exit_code == 1 and "candidate_selector.successor_codebook" in done.stderr, done.stderr
    assert refusal(done.stderr) is not None


def test_eagle3_layouts_refuse_a_dflash2_drafter(tmp_path: Path):
    done = run_cli("--no-record", "--to", "sglang", SAMPLE, tmp_path / "out")
    assert done.exit_code == 1 and refusal(done.stderr) == "E-KIND-UNSUPPORTED", done.stderr
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


def test_the_published_card_serves_it_with_the_method_the_engines_have(tmp_path: Path):
    """vLLM has no method dflash2 (config/speculative.py: DFlashModelTypes is "dflash"; speculators/base.py maps a
    speculators dflash2 to it) and SGLang serves DFlash2DraftModel with its DFLASH worker: the card says dflash."""
    flat = tmp_path / "flat"
    assert run_cli("--no-record", "--quiet", "--to", "dflash", SAMPLE, flat).exit_code == 0
    done = run_cli("publish", "--dry-run", "--no-record", "--verifier", "Qwen/Qwen3-8B", flat, "org/qwen3-dflash2")
    assert done.exit_code == 0, done.stderr
    card = done.stdout
    assert "A DFlash2 (block-diffusion) draft model" in card
    assert '"method": "dflash"' in card and '"num_speculative_tokens": 7' in card
    assert "--speculative-algorithm DFLASH " in card and '"method": "dflash2"' not in card and "DFLASH2" not in card


def test_registry_records_a_dflash2_drafter(tmp_path: Path, registry_url, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(registry_url))
    added = run_cli("registry", "add", "--json", SAMPLE)
    assert added.exit_code == 0, added.stderr
    records = json.loads(run_cli("registry", "list", "--json").stdout)["records"]
    assert [(r["drafter_kind"], r["capture_boundaries"]) for r in records] == [("dflash2", [2, 18, 34])]


def test_a_flat_dflash2_with_its_block_size_only_in_dflash_config_is_read(tmp_path: Path):
    """A flat DFlash2 config may nest block_size (SGLang's parse_dflash_draft_config reads it there first): read, and
    written back in both places."""
    flat = tmp_path / "flat"
    assert run_cli("--no-record", "--quiet", "--to", "dflash", SAMPLE, flat).exit_code == 0
    config = json.loads((flat / "config.json").read_text())
    del config["block_size"]
    (flat / "config.json").write_text(json.dumps(config))
    again = tmp_path / "again"
    done = run_cli("--no-record", "--to", "speculators", "--verifier", "Qwen/Qwen3-8B", flat, again)
    assert done.exit_code == 0, done.stderr
    assert json.loads((again / "config.json").read_text())["block_size"] == 8
    del config["dflash_config"]["block_size"]
    (flat / "config.json").write_text(json.dumps(config))
    done = run_cli("--no-record", "--to", "speculators", "--verifier", "Qwen/Qwen3-8B", flat, tmp_path / "none")
    assert done.exit_code == 1 and refusal(done.stderr) == "E-CONFIG-FIELD" and "block_size is None" in done.stderr
