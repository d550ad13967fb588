"""Issue 22, deliverable 2: the block-diffusion drafters DFlash and DSpark, read, validated, recorded and converted.

The files are built here, independently of the tool: SpecForge's published configs (tests/data/block-diffusion,
copied from sgl-project/SpecForge `configs/`) shrunk to a small width, with the tensors its DFlashDraftModel /
DSparkDraftModel hold (specforge/modeling/draft/dflash.py, dspark.py): plain Qwen3 decoder layers, `fc` over the
captured target states, `hidden_norm`, `norm`; DSpark's `markov_head.markov_w1/w2` and `confidence_head.proj`.
The speculators files are written as speculators' DFlashSpeculatorConfig / DSparkSpeculatorConfig save them
(models/dflash/config.py, models/dspark/config.py; the verifier's embedding and head kept, as save_pretrained
keeps every tensor not in `_keys_to_ignore_on_save`).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path

import pytest

from builders import RawTensor, write_safetensors
from conftest import DATA, run_cli, tensor_hashes

BLOCK_DIFFUSION = DATA / "block-diffusion"
H, HEADS, KV, HD, INTER, LAYERS, VOCAB, RANK = 64, 4, 2, 16, 96, 2, 512, 8
TARGET_DEPTH = 36  # Qwen3-8B, which SpecForge's published configs name (num_target_layers)
ERROR_LINE = re.compile(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$")


def _bytes(name: str, n: int, salt: str = "") -> bytes:
    return hashlib.shake_256(f"{salt}:{name}".encode()).digest(n)


def _tensor(name: str, *shape: int, salt: str = "") -> RawTensor:
    n = 1
    for d in shape:
        n *= d
    return RawTensor("BF16", tuple(shape), _bytes(name, 2 * n, salt))


def block_shapes(config: dict, kind: str) -> dict[str, tuple[int, ...]]:
    """What SpecForge's DFlashDraftModel / DSparkDraftModel save for this flat config (no embedding, no head: the
    target's): Qwen3 decoder layers, fc over one state per target layer, hidden_norm, norm; DSpark's heads."""
    h, heads, kv, hd = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"], \
        config["head_dim"]
    inter, vocab = config["intermediate_size"], config["vocab_size"]
    nested = config["dflash_config"]
    out = {"fc.weight": (h, len(nested["target_layer_ids"]) * h), "hidden_norm.weight": (h,), "norm.weight": (h,)}
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        for name, shape in (("self_attn.q_proj.weight", (heads * hd, h)), ("self_attn.k_proj.weight", (kv * hd, h)),
                            ("self_attn.v_proj.weight", (kv * hd, h)), ("self_attn.o_proj.weight", (h, heads * hd)),
                            ("self_attn.q_norm.weight", (hd,)), ("self_attn.k_norm.weight", (hd,)),
                            ("mlp.gate_proj.weight", (inter, h)), ("mlp.up_proj.weight", (inter, h)),
                            ("mlp.down_proj.weight", (h, inter)), ("input_layernorm.weight", (h,)),
                            ("post_attention_layernorm.weight", (h,))):
            out[p + name] = shape
    if kind == "dspark":  # dspark.py VanillaMarkov (markov_w1 [V, r], markov_w2 [r -> V]) and the confidence head
        rank = nested["markov_rank"]
        out["markov_head.markov_w1.weight"] = (vocab, rank)
        out["markov_head.markov_w2.weight"] = (vocab, rank)
        out["confidence_head.proj.weight"] = (1, h + rank)
        out["confidence_head.proj.bias"] = (1,)
    return out


def body_tensors(config: dict, kind: str, salt: str = "") -> dict[str, RawTensor]:
    return {name: _tensor(name, *shape, salt=salt) for name, shape in block_shapes(config, kind).items()}


def sparse_drafter(dest: Path, config: dict, kind: str) -> int:
    """The published config at full size: a safetensors header, then a hole as long as the data (no byte of
    weights is written). Returns the bytes it stands for."""
    header, offset = {}, 0
    for name, shape in sorted(block_shapes(config, kind).items()):
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    with open(dest / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + offset)
    return offset


def shrink(config: dict) -> dict:
    config = dict(config)
    config.update(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HD,
                  intermediate_size=INTER, num_hidden_layers=LAYERS, max_window_layers=LAYERS, vocab_size=VOCAB,
                  layer_types=["full_attention"] * LAYERS)
    nested = dict(config["dflash_config"])
    nested["mask_token_id"] = VOCAB - 3
    if "markov_rank" in nested:
        nested["markov_rank"] = RANK
    config["dflash_config"] = nested
    return config


def specforge_drafter(dest: Path, kind: str, salt: str = "") -> Path:
    """SpecForge's configs/qwen3-8b-{dflash,dspark}.json at a small width, as its trainer saves the drafter."""
    config = shrink(json.loads((BLOCK_DIFFUSION / f"specforge-qwen3-8b-{kind}.json").read_text()))
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dest / "model.safetensors", body_tensors(config, kind, salt))
    return dest


def speculators_drafter(dest: Path, kind: str, aux_ids: list[int], verifier: str | None = "Qwen/Qwen3-8B",
                        draft_vocab: int = VOCAB) -> Path:
    """As speculators' DFlashSpeculatorConfig / DSparkSpeculatorConfig save a drafter: the decoder nested, the
    boundaries in aux_hidden_state_layer_ids, the verifier's frozen embedding and head saved beside the body."""
    decoder = {"model_type": "qwen3", "hidden_size": H, "intermediate_size": INTER, "num_attention_heads": HEADS,
               "num_key_value_heads": KV, "head_dim": HD, "num_hidden_layers": LAYERS, "vocab_size": VOCAB,
               "rms_norm_eps": 1e-6, "rope_theta": 1000000, "max_position_embeddings": 40960,
               "hidden_act": "silu", "layer_types": ["full_attention"] * LAYERS, "tie_word_embeddings": False}
    config = {"architectures": [f"{'DFlash' if kind == 'dflash' else 'DSpark'}Speculator"],
              "speculators_model_type": kind, "speculators_version": "0.9.0", "transformer_layer_config": decoder,
              "draft_vocab_size": draft_vocab, "block_size": 8, "target_hidden_size": None,
              "aux_hidden_state_layer_ids": aux_ids, "mask_token_id": VOCAB - 3,
              "sliding_window_non_causal": False, "sample_from_anchor": kind == "dspark",
              "speculators_config": {"algorithm": kind, "default_proposal_method": "greedy",
                                     "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 7}],
                                     "verifier": {"name_or_path": verifier, "architectures": ["Qwen3ForCausalLM"]}}}
    if kind == "dspark":
        config.update(markov_rank=RANK, markov_head_type="vanilla", enable_confidence_head=True,
                      confidence_head_with_markov=True)
    flat = {**decoder, "dflash_config": {"target_layer_ids": aux_ids, "markov_rank": RANK}}
    tensors = body_tensors(flat, kind)
    tensors["embed_tokens.weight"] = _tensor("embed", VOCAB, H)
    tensors["lm_head.weight"] = _tensor("head", draft_vocab, H)  # the verifier's rows t2d selects
    if draft_vocab < VOCAB:  # DraftVocabMixin's buffers: every other target token, as offsets and a mask
        kept = list(range(0, VOCAB, VOCAB // draft_vocab))[:draft_vocab]
        tensors["d2t"] = RawTensor("I64", (draft_vocab,), struct.pack(f"<{draft_vocab}q",
                                                                       *(t - i for i, t in enumerate(kept))))
        tensors["t2d"] = RawTensor("BOOL", (VOCAB,), bytes(int(t in kept) for t in range(VOCAB)))
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def refusal(stderr: str) -> str | None:
    """The code of a one-line refusal (after at most the line saying which layout was detected)."""
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("detected ")]
    m = ERROR_LINE.match(lines[0]) if len(lines) == 1 and "Traceback" not in stderr else None
    return m.group(1) if m else None


def findings(path: Path, *args: str) -> list[dict]:
    return json.loads(run_cli("validate", "--json", *args, path).stdout)["findings"]


# ------------------------------------------------------------------ SpecForge's published configs, at full size

@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_published_configs_at_full_size_are_read_and_each_engines_reading_said(tmp_path: Path, kind: str):
    """Before: "not converted" (DFlash), refused in one line. SpecForge's configs/qwen3-8b-{dflash,dspark}.json as
    published (Qwen3-8B, 5 layers, ids [1, 9, 17, 25, 33] of 36), rebuilt at full size."""
    config = json.loads((BLOCK_DIFFUSION / f"specforge-qwen3-8b-{kind}.json").read_text())
    assert sparse_drafter(tmp_path / "src", config, kind) > 2 * 10**9
    report = json.loads(run_cli("validate", "--json", tmp_path / "src").stdout)
    said = sorted((f["code"], f["engine"] or "") for f in report["findings"])
    if kind == "dflash":  # vLLM and SGLang build it as published
        assert said == [("I-KIND-BLOCK-DIFFUSION", "")], said
    else:  # markov_rank only in dflash_config: vLLM's Qwen3DSparkModel and SGLang's Markov head read the top level
        assert said == [("E-ENGINE-REFUSES", "sglang"), ("E-ENGINE-REFUSES", "vllm"),
                        ("I-KIND-BLOCK-DIFFUSION", "")], said
    assert report["layout"] == "dflash" and report["ok"] is (kind == "dflash")


# ------------------------------------------------------------------ conversion, both ways

@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_specforge_drafter_converts_to_speculators_and_back_byte_for_byte(tmp_path: Path, kind: str):
    """Before: E-KIND-UNSUPPORTED ("no lossless conversion"). The verifier's embedding and head are needed by
    neither file: every tensor is carried, the ids shifted by one (z-lab reads hidden_states[id + 1])."""
    src = specforge_drafter(tmp_path / "src", kind)
    spec = tmp_path / "spec"
    result = run_cli("--no-record", "--verifier", "Qwen/Qwen3-8B", "--to", "speculators", src, spec)
    assert result.exit_code == 0, result.stderr
    written = json.loads((spec / "config.json").read_text())
    assert written["speculators_model_type"] == kind
    assert written["aux_hidden_state_layer_ids"] == [2, 10, 18, 26, 34]  # SpecForge's [1, 9, 17, 25, 33] + 1
    assert written["mask_token_id"] == VOCAB - 3 and written["block_size"] == (16 if kind == "dflash" else 7)
    assert written["speculators_config"]["verifier"]["name_or_path"] == "Qwen/Qwen3-8B"
    assert written["transformer_layer_config"]["num_hidden_layers"] == LAYERS
    if kind == "dspark":
        assert (written["markov_rank"], written["enable_confidence_head"]) == (RANK, True)
    assert tensor_hashes(spec) == tensor_hashes(src)
    back = tmp_path / "back"
    result = run_cli("--no-record", "--to", "dflash", spec, back)
    assert result.exit_code == 0, result.stderr
    again = json.loads((back / "config.json").read_text())
    original = json.loads((src / "config.json").read_text())
    assert again["dflash_config"]["target_layer_ids"] == original["dflash_config"]["target_layer_ids"]
    assert again["dflash_config"]["mask_token_id"] == original["dflash_config"]["mask_token_id"]
    assert again["architectures"] == original["architectures"] and again["block_size"] == original["block_size"]
    for key, value in original["dflash_config"].items():
        assert again["dflash_config"][key] == value, key
    assert tensor_hashes(back) == tensor_hashes(src)


def test_speculators_dflash_with_the_verifiers_head_converts_to_the_flat_layout_keeping_it(tmp_path: Path):
    """speculators saves the verifier's frozen embedding and head: the flat file keeps them (vLLM loads a head the
    file has: process_eagle_weight), and the ids drop by one."""
    src = speculators_drafter(tmp_path / "src", "dflash", [2, 18, 34])
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["dflash_config"]["target_layer_ids"] == [1, 17, 33]
    assert written["architectures"] == ["DFlashDraftModel"] and written["model_type"] == "qwen3"
    assert tensor_hashes(tmp_path / "out") == tensor_hashes(src)
    serves = [line.split() for line in result.stdout.splitlines() if line.startswith("  vLLM") or
              line.startswith("  SGLang")]
    assert len(serves) == 3 and all("serves as trained:" in " ".join(line) for line in serves), result.stdout
    # speculators trains full-attention layers bidirectionally whatever sliding_window_non_causal says (attention.py),
    # as vLLM and SGLang read a flat file's full layers: no causal override is written
    assert not {"causal", "sliding_window_non_causal"} & set(written["dflash_config"])
    back = run_cli("--no-record", "--to", "speculators", tmp_path / "out", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    again = json.loads((tmp_path / "back" / "config.json").read_text())
    original = json.loads((src / "config.json").read_text())
    # the way back writes the flag vLLM's update_dflash reads as these layers' causality (false: causal everywhere)
    assert (original["sliding_window_non_causal"], again["sliding_window_non_causal"]) == (False, True)
    nested = ("speculators_config", "transformer_layer_config", "sliding_window_non_causal")
    assert {k: again[k] for k in original if k not in nested} == {k: v for k, v in original.items() if k not in nested}
    # the decoder as saved, plus the defaults this tool writes out (attention_bias, mlp_bias false)
    assert original["transformer_layer_config"].items() <= again["transformer_layer_config"].items()
    assert again["speculators_config"]["verifier"] == original["speculators_config"]["verifier"]
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)


def test_a_reduced_draft_vocabulary_keeps_its_head_and_map_both_ways(tmp_path: Path):
    """A speculators DFlash with a draft vocabulary: the head is the drafter's own rows, d2t maps them; both are
    carried to the flat file (vLLM loads them: draft_id_to_target_id) and back."""
    src = speculators_drafter(tmp_path / "src", "dflash", [2, 18, 34], draft_vocab=128)
    flat = tmp_path / "flat"
    result = run_cli("--no-record", "--to", "dflash", src, flat)
    assert result.exit_code == 0, result.stderr
    written = json.loads((flat / "config.json").read_text())
    assert (written["draft_vocab_size"], written["vocab_size"]) == (128, VOCAB)
    assert tensor_hashes(flat) == tensor_hashes(src)  # lm_head [128, H], d2t and t2d included
    # vLLM serves it; how SGLang's DFlash reads a reduced vocabulary was not read: said, not guessed
    said = [(f["code"], f["engine"]) for f in findings(flat) if f["severity"] != "info"]
    assert said == [("W-ENGINE-UNKNOWN", "sglang")], said
    result = run_cli("--no-record", "--to", "speculators", flat, tmp_path / "back")
    assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
    assert json.loads((tmp_path / "back" / "config.json").read_text())["draft_vocab_size"] == 128


def test_flat_dspark_is_written_where_vllm_and_sglang_read_its_head_fields(tmp_path: Path):
    """SpecForge nests markov_rank in dflash_config; vLLM's Qwen3DSparkModel and SGLang's build_markov_head read it
    at the top level. As published, both refuse it (validate says so); the dflash writer writes both places."""
    src = specforge_drafter(tmp_path / "src", "dspark")
    refused = {(f["code"], f["engine"]) for f in findings(src)}
    assert {("E-ENGINE-REFUSES", "vllm"), ("E-ENGINE-REFUSES", "sglang")} <= refused
    out = tmp_path / "out"
    result = run_cli("--no-record", "--to", "dflash", src, out)
    assert result.exit_code == 0, result.stderr
    written = json.loads((out / "config.json").read_text())
    assert written["markov_rank"] == written["dflash_config"]["markov_rank"] == RANK
    assert written["target_layer_ids"] == written["dflash_config"]["target_layer_ids"] == [1, 9, 17, 25, 33]
    # served by SGLang and vLLM's V2 runner; the V1 runner refuses DSpark (config/vllm.py): a caveat, not an error
    said = sorted((f["code"], f["engine"] or "") for f in findings(out))
    assert said == [("I-KIND-BLOCK-DIFFUSION", ""), ("W-ENGINE-CAVEAT", "vllm")], said
    assert tensor_hashes(out) == tensor_hashes(src)


# ------------------------------------------------------------------ refusals

@pytest.mark.parametrize("layout", ["sglang", "vllm", "eagle", "modelopt"])
def test_eagle3_layouts_refuse_a_dflash_drafter_naming_the_field(tmp_path: Path, layout: str):
    src = specforge_drafter(tmp_path / "src", "dflash")
    result = run_cli("--no-record", "--to", layout, src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-KIND-UNSUPPORTED", result.stderr
    assert "DFlashDraftModel" in result.stderr and "--to dflash" in result.stderr
    assert not (tmp_path / "out").exists()


def test_speculators_needs_the_verifier_the_library_fills_the_head_from(tmp_path: Path):
    src = specforge_drafter(tmp_path / "src", "dflash")
    result = run_cli("--no-record", "--to", "speculators", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-VERIFIER-MISSING", result.stderr
    assert "load_verifier_weights" in result.stderr and not (tmp_path / "out").exists()


def test_a_speculators_dspark_without_sample_from_anchor_names_no_single_drafter(tmp_path: Path):
    """speculators' DSparkSpeculatorConfig defaults sample_from_anchor to true, vLLM's update_dspark to false (a flat
    file means true to both vLLM and SGLang, so SpecForge's is read as true)."""
    src = speculators_drafter(tmp_path / "src", "dspark", [2, 18, 34])
    config = json.loads((src / "config.json").read_text())
    del config["sample_from_anchor"]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-CONFIG-DEFAULTS-DIFFER", result.stderr
    assert "sample_from_anchor" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_a_missing_mask_token_is_refused_and_named(tmp_path: Path, kind: str):
    src = specforge_drafter(tmp_path / "src", kind)
    config = json.loads((src / "config.json").read_text())
    del config["dflash_config"]["mask_token_id"]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--verifier", "Qwen/Qwen3-8B", "--to", "speculators", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-CONFIG-FIELD"
    assert "dflash_config.mask_token_id" in result.stderr
    errors = [f for f in findings(src) if f["severity"] == "error"]
    assert [(f["code"], f["where"]) for f in errors] == [("E-CONFIG-FIELD", "config.json")]


def test_fc_wider_than_the_target_layers_named_is_refused(tmp_path: Path):
    """fc fuses one state per target layer: a list that disagrees with fc's width names another drafter."""
    src = specforge_drafter(tmp_path / "src", "dflash")
    config = json.loads((src / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [1, 9, 17]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-CAPTURE-COUNT", result.stderr


def test_a_dspark_field_written_twice_with_two_values_is_refused(tmp_path: Path):
    """SpecForge reads dflash_config.markov_rank, vLLM and SGLang the top-level one: two values name two drafters."""
    src = specforge_drafter(tmp_path / "src", "dspark")
    config = json.loads((src / "config.json").read_text())
    config["markov_rank"] = 2 * RANK
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-CONFIG-FIELD", result.stderr
    assert f"dflash_config.markov_rank is {RANK} but the top-level markov_rank is {2 * RANK}" in result.stderr


def test_a_dspark_head_the_config_does_not_build_is_refused(tmp_path: Path):
    src = specforge_drafter(tmp_path / "src", "dspark")
    config = json.loads((src / "config.json").read_text())
    config["dflash_config"]["enable_confidence_head"] = False
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "dflash", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal(result.stderr) == "E-KEY-UNUSED", result.stderr
    assert "confidence_head." in result.stderr


def test_a_field_of_the_wrong_type_breaks_the_dflash_schema(tmp_path: Path):
    src = specforge_drafter(tmp_path / "src", "dflash")
    config = json.loads((src / "config.json").read_text())
    config["block_size"] = "16"
    (src / "config.json").write_text(json.dumps(config))
    errors = [(f["code"], f["where"]) for f in findings(src) if f["severity"] == "error"]
    assert errors == [("E-SCHEMA", "$.block_size")], errors


def test_sglang_reads_no_speculators_dflash_config(tmp_path: Path):
    src = speculators_drafter(tmp_path / "src", "dflash", [2, 18, 34])
    refused = [f for f in findings(src, "--engine", "sglang") if f["code"] == "E-ENGINE-REFUSES"]
    assert [f["engine"] for f in refused] == ["sglang"] and "--to dflash" in refused[0]["hint"]


def test_the_published_card_serves_it_as_a_dflash_drafter(tmp_path: Path):
    """Before: the card called it EAGLE-3 and gave `"method": "eagle3"` / `--speculative-algorithm EAGLE3`."""
    src = specforge_drafter(tmp_path / "src", "dflash")
    result = run_cli("publish", "--dry-run", "--no-record", "--verifier", "Qwen/Qwen3-8B", src, "org/qwen3-dflash")
    assert result.exit_code == 0, result.stderr
    card = result.stdout
    assert "Publish DFlash drafter" in card and "A DFlash (block-diffusion) draft model" in card
    assert '"method": "dflash"' in card and '"num_speculative_tokens": 15' in card  # block 16 less its anchor
    assert "--speculative-algorithm DFLASH" in card and "EAGLE3" not in card
    assert "`dflash_config.target_layer_ids` `[1, 9, 17, 25, 33]`" in card


# ------------------------------------------------------------------ the registry

@pytest.mark.parametrize("kind", ["dflash", "dspark"])
def test_registry_records_the_kind_and_its_target_layers(tmp_path: Path, kind: str, registry_url,
                                                         monkeypatch: pytest.MonkeyPatch):
    """Recorded with its kind, its boundaries (SpecForge's ids + 1) and each layout's spelling of them, in the
    existing columns (capture_boundaries, ids_as_written, drafter_kind), on SQLite and PostgreSQL alike."""
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(registry_url))
    src = specforge_drafter(tmp_path / "src", kind)
    added = run_cli("registry", "add", "--json", src)
    assert added.exit_code == 0, added.stderr
    converted = run_cli("--verifier", "Qwen/Qwen3-8B", "--to", "speculators", src, tmp_path / "spec")
    assert converted.exit_code == 0, converted.stderr
    shown = json.loads(run_cli("registry", "list", "--json").stdout)
    records = shown["records"]
    assert len(records) == 1, records
    record = records[0]
    assert record["drafter_kind"] == kind
    assert record["capture_boundaries"] == [2, 10, 18, 26, 34]
    assert record["ids_as_written"]["dflash"] == [1, 9, 17, 25, 33]
    assert record["ids_as_written"]["speculators"] == [2, 10, 18, 26, 34]
    assert {loc["layout"] for loc in record["locations"]} == {"dflash", "speculators"}
    # the record is what the next conversion is checked against: the same ids pass, others are refused
    again = run_cli("--to", "dflash", tmp_path / "spec", tmp_path / "back")
    assert again.exit_code == 0, again.stderr
    config = json.loads((tmp_path / "spec" / "config.json").read_text())
    config["aux_hidden_state_layer_ids"] = [3, 10, 18, 26, 34]
    (tmp_path / "spec" / "config.json").write_text(json.dumps(config))
    clash = run_cli("--to", "dflash", tmp_path / "spec", tmp_path / "clash")
    assert clash.exit_code == 1 and refusal(clash.stderr) == "E-CAPTURE-RECORD", clash.stderr
