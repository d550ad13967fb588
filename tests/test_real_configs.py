"""Real published EAGLE-3 drafter configs (tests/data/real-configs, sources in its README), rebuilt at full
size with sparse zero tensors: each weight file is a safetensors header followed by a hole as long as the
data (ftruncate), so a 2 GB drafter costs a few KB of disk and no byte of weights is written.

On each: `inspect` and `validate` through the CLI, and the conversion to every layout as convert decides it
(`read_source` + `plan_conversion`: the destination plan and every engine's verdict, all but the byte copy).
No crash, no traceback, one-line refusals with a code and a hint, and the family, dimensions and capture
boundaries the config means. The real CLI conversions (they copy the full-size zeros) run on the smallest
drafter; EAGLE3_REAL_CONFIGS_CONVERT=1 runs them on all (tens of GB written in all, minutes).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from conftest import DATA, run_cli
from eagle3_convert.convert import plan_conversion, read_source
from eagle3_convert.converters.base import ConvertOptions
from eagle3_convert.drafter import TargetIdentity
from eagle3_convert.errors import Eagle3Error

REAL = DATA / "real-configs"
LAYOUTS = ("speculators", "sglang", "vllm", "eagle", "modelopt")

# name -> (stored prefix of layer 0, expected family, hidden size, draft vocab, target vocab, boundaries)
# Boundaries are FORMATS §4 capture boundaries: SGLang / ModelOpt ids + 1, except SGLang's Kimi/DeepSeek
# targets, which read ids that do not start at 1 as boundaries (kimi-k2: the config's model_type says Kimi;
# kimi-k25: its vocabulary, 163840, is Kimi's).
EXPECTED: dict[str, tuple[str, str, int, int, int, list[int] | None]] = {
    "specforge-kimi-k2-eagle3": ("midlayer.", "llama", 7168, 32000, 163840, [2, 30, 58]),
    "specforge-kimi-k25-eagle3": ("midlayer.", "llama", 7168, 32000, 163840, [2, 30, 58]),
    "specforge-llama3-70B-ealge3": ("midlayer.", "llama", 8192, 32000, 128256, None),
    "specforge-deepseek-v3-671b-eagle3": ("midlayer.", "llama", 7168, 32000, 129280, [2, 30, 58]),
    "specforge-qwen3-32b-eagle3": ("midlayer.", "llama", 5120, 32000, 151936, None),
    "specforge-qwen3-235B-A22B-eagle3": ("midlayer.", "llama", 4096, 32000, 151936, [2, 47, 91]),
    "specforge-llama4-scout-17B-16E-eagle3": ("midlayer.", "llama", 5120, 32000, 202048, None),
    "specforge-phi4-mini-eagle3": ("midlayer.", "llama", 3072, 32000, 200064, None),
    "specforge-longcat-flash-eagle3": ("midlayer.", "llama", 6144, 131072, 131072, None),
    "eagle-traineagle3-config": ("midlayer.", "llama", 4096, 32000, 128256, None),
    "redhatai-gemma-4-31B-it-speculator.eagle3": ("layers.0.", "llama", 5376, 32000, 262144, [2, 30, 57]),
    "redhatai-gpt-oss-20b-speculator.eagle3": ("layers.0.", "llama", 2880, 64000, 201088, None),
    "nebius-EAGLE3-gpt-oss-20b": ("midlayer.", "llama", 2880, 64000, 201088, None),
    "modelopt-llama-eagle3-template": ("layers.0.", "llama", 4096, 32000, 128256, [2, 16, 29]),
    "modelopt-kimik2-eagle3-template": ("layers.0.", "deepseek_mla", 7168, 32000, 163840, [2, 30, 58]),
    # issue 22: SpecForge's configs/ at a6b6b023 (2026-08-08), as SpecForge writes them (SGLang ids, +1)
    "specforge-llama3-8B-eagle3": ("midlayer.", "llama", 4096, 32000, 128256, None),
    "specforge-gpt-oss-20B-eagle3": ("midlayer.", "llama", 2880, 32000, 201088, [2, 12, 22]),
    "specforge-gpt-oss-120B-eagle3": ("midlayer.", "llama", 2880, 32000, 201088, [2, 18, 34]),
    "specforge-qwen3-8b-eagle3": ("midlayer.", "llama", 4096, 32000, 151936, None),
    "specforge-qwen3-4b-eagle3": ("midlayer.", "llama", 2560, 32000, 151936, None),
    "specforge-qwen3-30B-A3B-eagle3": ("midlayer.", "llama", 2048, 32000, 151936, None),
    "specforge-qwen3-30B-A3B-eagle3.1": ("midlayer.", "llama", 2048, 32000, 151936, None),
    "specforge-qwen2.5-7b-eagle3": ("midlayer.", "llama", 3584, 16000, 152064, None),
    "specforge-qwen2.5-0.5b-eagle3": ("midlayer.", "llama", 896, 16000, 151936, None),
    "specforge-qwen2-5-vl-7b-eagle3": ("midlayer.", "llama", 3584, 32000, 152064, None),
    "specforge-qwen2.5-vl-32b-eagle3": ("midlayer.", "llama", 5120, 32000, 152064, None),
    "specforge-deepseek-v2-lite-eagle3": ("midlayer.", "llama", 2048, 32000, 102400, None),
    "specforge-gemma3-1b-eagle3": ("midlayer.", "llama", 1152, 32000, 262144, None),
    "specforge-ling-flash-2.0-eagle3": ("midlayer.", "llama", 4096, 32000, 157184, None),
    "specforge-phi4-eagle3": ("midlayer.", "llama", 5120, 32000, 100352, None),
    "specforge-qwq-32B-eagle3": ("midlayer.", "llama", 5120, 32000, 152064, None),
    "specforge-qwen3-coder-30B-A3B-instruct-eagle3": ("midlayer.", "llama", 2048, 32000, 151936, None),
    "specforge-qwen3-coder-480B-A35B-instruct-eagle3": ("midlayer.", "llama", 6144, 32000, 151936, None),
    "specforge-qwen3-coder-next-eagle3": ("midlayer.", "llama", 2048, 32000, 151936, None),
    "specforge-qwen3-next-80b-a3b-eagle3": ("midlayer.", "llama", 2048, 32000, 151936, None),
    "specforge-qwen3.5-35b-a3b-eagle3": ("midlayer.", "llama", 2048, 32000, 248320, None),
    # Tencent/AngelSlim's EAGLE-3 trainer configs (vLLM-native Eagle3LlamaForCausalLM, layers.0.* tensors)
    "angelslim-qwen3-8b-eagle3": ("layers.0.", "llama", 4096, 32000, 151936, None),
    "angelslim-qwen3-30b-a3b-eagle3": ("layers.0.", "llama", 2048, 32000, 151936, None),
    "angelslim-qwen3-vl-4b-eagle3-mrope": ("layers.0.", "llama", 2560, 32000, 151936, None),
    "angelslim-qwen3-4b-eagle3": ("layers.0.", "llama", 2560, 32000, 151936, None),
    # P-EAGLE, 4 layers, as SpecForge's PEagleDraftModel saves it (layers.{i}, mask_hidden, its own embed_tokens)
    "specforge-qwen3-8b-peagle": ("layers.0.", "llama", 4096, 32000, 151936, None),
}
# The drafter kind each config names (drafter.KINDS); the rest are EAGLE-3.
KIND = {"specforge-qwen3-8b-peagle": "peagle"}
VERIFIER = TargetIdentity(name_or_path="org/target")
MLA = {"Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"}
# What validate rightly reports on the published file itself.
VALIDATE_ERRORS: dict[str, set[str]] = {
    # EAGLE's training template says LlamaForCausalLM: SGLang builds no drafter from that (the published
    # yuhuili/EAGLE3-* configs say LlamaForCausalLMEagle3)
    "eagle-traineagle3-config": {"E-CONFIG-ARCH"},
    "nebius-EAGLE3-gpt-oss-20b": {"E-CONFIG-ARCH"},  # the same: LlamaForCausalLM
    # the quoted subset has no speculators_config, which vLLM's speculators path needs
    "redhatai-gpt-oss-20b-speculator.eagle3": {"E-SCHEMA"},
    # tie_word_embeddings true (the template copies Phi-4-mini's flag; SpecForge turns it off to train): SGLang
    # then ties lm_head to embed_tokens and never loads the trained head (issue 22; engines/sglang.py)
    "specforge-phi4-mini-eagle3": {"E-ENGINE-WRONG"},
    # "Eagle3LLamaforCausalLM": no engine matches a class name in another case (read as Eagle3LlamaForCausalLM)
    "angelslim-qwen3-4b-eagle3": {"E-CONFIG-ARCH"},
    # SpecForge's P-EAGLE config names no mask token: vLLM's parallel drafting refuses it without pard_token
    "specforge-qwen3-8b-peagle": {"E-ENGINE-REFUSES"},
}


def full_size_shapes(cfg: dict[str, Any]) -> tuple[dict[str, tuple[int, ...]], int, int]:
    """Every tensor the published config implies, by canonical name, worked out here from the config alone."""
    dec = cfg.get("transformer_layer_config", cfg)
    H, I, nh = dec["hidden_size"], dec["intermediate_size"], dec["num_attention_heads"]
    nkv = dec.get("num_key_value_heads") or nh
    hd = dec.get("head_dim") or H // nh
    V = dec["vocab_size"]
    Vd = cfg.get("draft_vocab_size") or V
    Ht = cfg.get("target_hidden_size") or H
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or (cfg.get("eagle_config") or {}).get(
        "eagle_aux_hidden_state_layer_ids")
    k = cfg.get("num_aux_hidden_states") or (len(ids) if ids else 3)
    p = "layers.0."
    s: dict[str, tuple[int, ...]] = {"fc.weight": (H, k * Ht), "norm.weight": (H,), "lm_head.weight": (Vd, H)}
    if set(cfg.get("architectures") or ()) & MLA:
        q, kv = dec["q_lora_rank"], dec["kv_lora_rank"]
        nope, rope, v = dec["qk_nope_head_dim"], dec["qk_rope_head_dim"], dec["v_head_dim"]
        s.update({p + "self_attn.q_a_proj.weight": (q, 2 * H), p + "self_attn.q_a_layernorm.weight": (q,),
                  p + "self_attn.q_b_proj.weight": (nh * (nope + rope), q),
                  p + "self_attn.kv_a_proj_with_mqa.weight": (kv + rope, 2 * H),
                  p + "self_attn.kv_a_layernorm.weight": (kv,), p + "self_attn.kv_b_proj.weight": (nh * (nope + v), kv),
                  p + "self_attn.o_proj.weight": (H, nh * v)})
    else:
        s.update({p + "self_attn.q_proj.weight": (nh * hd, 2 * H), p + "self_attn.k_proj.weight": (nkv * hd, 2 * H),
                  p + "self_attn.v_proj.weight": (nkv * hd, 2 * H), p + "self_attn.o_proj.weight": (H, nh * hd)})
    s.update({p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H), p + "mlp.down_proj.weight": (H, I),
              p + "input_layernorm.weight": (H,), p + "hidden_norm.weight": (H,),
              p + "post_attention_layernorm.weight": (H,)})
    for i in range(1, dec.get("num_hidden_layers", 1)):  # later layers: a plain decoder layer reading H
        q = f"layers.{i}."
        s.update({q + "self_attn.q_proj.weight": (nh * hd, H), q + "self_attn.k_proj.weight": (nkv * hd, H),
                  q + "self_attn.v_proj.weight": (nkv * hd, H), q + "self_attn.o_proj.weight": (H, nh * hd),
                  q + "mlp.gate_proj.weight": (I, H), q + "mlp.up_proj.weight": (I, H),
                  q + "mlp.down_proj.weight": (H, I), q + "input_layernorm.weight": (H,),
                  q + "post_attention_layernorm.weight": (H,)})
    if cfg.get("norm_before_fc"):
        s["input_norm.weight"] = (k * Ht,)
    if cfg.get("fc_norm"):  # Eagle 3.1: one norm per captured state
        s.update({f"fc_norm.{j}.weight": (Ht,) for j in range(k)})
    if "PEagleDraftModel" in (cfg.get("architectures") or ()):  # SpecForge's P-EAGLE trains both
        s.update({"mask_hidden": (1, 1, k * Ht), "embed_tokens.weight": (V, H)})
    return s, V, Vd


def rebuild_sparse(dest: Path, cfg: dict[str, Any], prefix: str) -> int:
    """config.json + model.safetensors whose data section is a hole; returns the data bytes it stands for."""
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(cfg, indent=2))
    shapes, V, Vd = full_size_shapes(cfg)
    header: dict[str, Any] = {}
    offset = 0
    for name, shape in sorted(shapes.items()):
        n = 2
        for d in shape:
            n *= d
        header[name.replace("layers.0.", prefix, 1)] = {"dtype": "BF16", "shape": list(shape),
                                                        "data_offsets": [offset, offset + n]}
        offset += n
    t2d_at = None
    if Vd != V:  # a valid vocabulary map: d2t all-zero offsets (draft id i = target id i), t2d marks the first Vd
        header["d2t"] = {"dtype": "I64", "shape": [Vd], "data_offsets": [offset, offset + 8 * Vd]}
        offset += 8 * Vd
        if "speculators_model_type" in cfg or prefix == "midlayer.":
            header["t2d"] = {"dtype": "BOOL", "shape": [V], "data_offsets": [offset, offset + V]}
            t2d_at = offset
            offset += V
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(dest / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + offset)  # the hole: no weight byte is written
        if t2d_at is not None:
            f.seek(8 + len(blob) + t2d_at)
            f.write(b"\x01" * Vd)
    return offset


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("real-configs")
    out = {}
    for name, (prefix, *_rest) in EXPECTED.items():
        cfg = json.loads((REAL / f"{name}.json").read_text())
        out[name] = root / name
        assert rebuild_sparse(out[name], cfg, prefix) > 0
    return out


def test_every_real_config_is_listed_with_its_source():
    on_disk = {p.stem for p in REAL.glob("*.json")}
    assert on_disk == set(EXPECTED)
    readme = (REAL / "README.md").read_text()
    assert all(f"`{name}.json`" in readme for name in on_disk)


def _one_line_refusal(stderr: str) -> None:
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1 and all(" [E-" in line and "hint:" in line for line in errors), stderr


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_config_reads_as_published(name: str, rebuilt: dict[str, Path]):
    prefix, family, hidden, vd, vocab, boundaries = EXPECTED[name]
    path = rebuilt[name]
    source = read_source(str(path))
    cfg = source.drafter.config
    assert (cfg.family, cfg.hidden_size, cfg.draft_vocab_size, cfg.vocab_size) == (family, hidden, vd, vocab)
    assert cfg.capture_boundaries == boundaries
    assert (source.drafter.vocab is None) == (vd == vocab)
    assert cfg.kind == KIND.get(name, "eagle3")

    validated = run_cli("validate", "--json", path)
    _one_line_refusal(validated.stderr)
    report = json.loads(validated.stdout)
    errors = {f["code"] for f in report["findings"] if f["severity"] == "error"}
    assert errors == VALIDATE_ERRORS.get(name, set()), report["findings"]
    assert validated.exit_code == (1 if errors else 0)
    inspected = run_cli("inspect", path)
    _one_line_refusal(inspected.stderr)
    assert inspected.exit_code == validated.exit_code, inspected.stderr
    assert str(hidden) in inspected.stdout


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_config_converts_or_refuses_in_one_line(name: str, rebuilt: dict[str, Path]):
    path = rebuilt[name]
    options = ConvertOptions(verifier=VERIFIER)  # the speculators layout names its verifier
    written, refused = [], {}
    for to in LAYOUTS:
        source = read_source(str(path))
        try:
            plan, _serves = plan_conversion(source, to, options)
        except Eagle3Error as exc:
            assert exc.code.startswith("E-") and exc.hint and "\n" not in exc.message, (to, exc)
            refused[to] = exc.code
            continue
        written.append(to)
        assert plan.config and plan.tensors
    if KIND.get(name, "eagle3") == "eagle3":
        assert "vllm" in written  # vLLM serves every EAGLE-3 variant
    else:  # P-EAGLE: only speculators holds it, and it needs the mask token this file does not name
        assert refused == {"speculators": "E-CONFIG-FIELD", **{to: "E-KIND-UNSUPPORTED" for to in LAYOUTS[1:]}}


def test_specforge_peagle_converts_once_its_mask_token_is_named(rebuilt: dict[str, Path], tmp_path: Path):
    """The hint of the refusal above, followed: the mask token written where vLLM reads it (pard_token), and the
    drafter converts to speculators' P-EAGLE, every trained tensor kept (mask_hidden and all four layers)."""
    name = "specforge-qwen3-8b-peagle"
    cfg = json.loads((REAL / f"{name}.json").read_text())
    rebuild_sparse(tmp_path / "src", {**cfg, "pard_token": 151669}, "layers.0.")
    source = read_source(str(tmp_path / "src"))
    assert (source.drafter.config.kind, source.drafter.config.mask_token_id) == ("peagle", 151669)
    plan, serves = plan_conversion(source, "speculators", ConvertOptions(verifier=VERIFIER))
    assert plan.config["speculators_model_type"] == plan.config["speculators_config"]["algorithm"] == "peagle"
    assert plan.config["mask_token_id"] == 151669 and plan.config["architectures"] == ["PEagleSpeculator"]
    assert plan.config["transformer_layer_config"]["num_hidden_layers"] == 4
    assert set(plan.tensors) == set(source.drafter.tensors) | {"d2t", "t2d"}
    assert "mask_hidden" in plan.tensors and "layers.3.mlp.down_proj.weight" in plan.tensors
    assert serves["vllm-v1"].verdict != "wrong" and serves["sglang"].verdict == "refuses"


def _data_bytes(name: str) -> int:
    shapes, _, _ = full_size_shapes(json.loads((REAL / f"{name}.json").read_text()))
    return sum(2 * math.prod(shape) for shape in shapes.values())


# The real CLI conversions copy the full-size zeros: the smallest drafter always (tens of MB, seconds), all of them
# (tens of GB written in all) with EAGLE3_REAL_CONFIGS_CONVERT=1.
CLI_CONVERTED = sorted(EXPECTED) if os.environ.get("EAGLE3_REAL_CONFIGS_CONVERT") else [
    min(sorted(EXPECTED), key=_data_bytes)]


@pytest.mark.parametrize("name", CLI_CONVERTED)
def test_real_config_cli_conversions(name: str, rebuilt: dict[str, Path], tmp_path: Path):
    for to in LAYOUTS:
        dest = tmp_path / to
        result = run_cli("--to", to, "--verifier", "org/target", "--no-record", "--quiet", rebuilt[name], dest)
        _one_line_refusal(result.stderr)
        if result.exit_code == 0:
            again = run_cli("validate", dest)
            _one_line_refusal(again.stderr)
            assert "Traceback" not in again.stdout
        shutil.rmtree(dest, ignore_errors=True)
