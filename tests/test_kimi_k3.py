"""Kimi K3 EAGLE-3 drafts (NVIDIA-NeMo/Automodel #3286, `draft_kimi_k3.py`, issue 35): one K3 MLA layer with NoPE
(`mla_use_nope`), a sigmoid output gate (`self_attn.g_proj.weight`) and a SiTU MLP (`hidden_act: situ`). No engine's
drafter class serves any of the three (converters/kimi_k3.py), and the canonical drafter has no field for them: each
command refuses the file in one line naming every feature it shows, in whatever layout it is saved, instead of the
dozen misleading key errors it got as a Llama draft (NeMo saves it as `LlamaEagle3DraftModel`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builders import DrafterSpec, RawTensor, _bytes_for, build_drafter, canonical_tensors, draft_vocab, \
    stored_tensors, write_safetensors
from conftest import nothing_written, run_cli
from eagle3_convert.safetensors_io import read_tensor_bytes, read_tensor_table

SPEC = DrafterSpec(family="deepseek_mla", capture_boundaries=None, target_model_type="deepseek_v3",
                   num_key_value_heads=4)
FEATURES = ("NoPE MLA", "a sigmoid output gate", "a SiTU MLP")
ERROR = re.compile(r"^error: (.+) \[(E-[A-Z0-9-]+)\] — hint: .+$")


def gate(spec: DrafterSpec = SPEC) -> RawTensor:
    rows, cols = spec.num_attention_heads * spec.mla_v_head_dim, 2 * spec.hidden_size  # g_proj over [embed, hidden]
    return RawTensor(spec.dtype, (rows, cols), _bytes_for(spec.seed, "g_proj", rows * cols * 2))


def k3_draft(dest: Path, spec: DrafterSpec = SPEC) -> Path:
    """As NeMo Automodel's EAGLE-3 recipe saves a K3 draft: the target's text config (KimiK3TextConfig:
    model_type kimi_linear, the MLA and SiTU keys) under LlamaEagle3DraftModel, the backbone under `model.`, and the
    d2t/t2d buffers the DeepSeek MLA draft registers (#2447)."""
    tensors = {(n if n.startswith("lm_head.") else f"model.{n}"): t for n, t in canonical_tensors(spec).items()}
    tensors["model.layers.0.self_attn.g_proj.weight"] = gate(spec)
    ids = draft_vocab(spec)
    tensors["d2t"] = RawTensor("I64", (len(ids),), b"".join((t - i).to_bytes(8, "little", signed=True)
                                                          for i, t in enumerate(ids)))
    tensors["t2d"] = RawTensor("BOOL", (spec.vocab_size,), bytes(int(t in ids) for t in range(spec.vocab_size)))
    config = {"architectures": ["LlamaEagle3DraftModel"], "model_type": "kimi_linear", "hidden_size": spec.hidden_size,
              "intermediate_size": spec.intermediate_size, "num_attention_heads": spec.num_attention_heads,
              "num_key_value_heads": spec.num_attention_heads, "num_hidden_layers": 8, "hidden_act": "situ",
              "vocab_size": spec.vocab_size, "rms_norm_eps": 1e-5, "q_lora_rank": spec.mla_q_lora_rank,
              "kv_lora_rank": spec.mla_kv_lora_rank, "qk_nope_head_dim": spec.mla_qk_nope_head_dim,
              "qk_rope_head_dim": spec.mla_qk_rope_head_dim, "v_head_dim": spec.mla_v_head_dim,
              "mla_use_nope": True, "mla_use_output_gate": True, "activation_situ_beta": 4.0,
              "activation_situ_linear_beta": 25.0, "rope_theta": 10000.0, "max_position_embeddings": 4096,
              "tie_word_embeddings": False, "draft_vocab_size": spec.vd, "target_hidden_size": spec.hidden_size,
              "torch_dtype": "bfloat16"}
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def refusal(stderr: str) -> tuple[str, str]:
    assert "Traceback" not in stderr
    match = ERROR.match(stderr.strip().splitlines()[-1])
    assert match, stderr
    return match.group(2), match.group(1)


def test_k3_draft_is_refused_in_one_line_naming_each_feature(tmp_path: Path):
    """Before: eleven errors about a Llama draft's missing q/k/v and unused MLA tensors, and convert's E-KEY-MISSING.
    After: validate and every conversion say E-DRAFT-UNSERVED once, naming the three features; nothing is written."""
    src = k3_draft(tmp_path / "k3")
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert [f["code"] for f in findings] == ["E-DRAFT-UNSERVED"]
    message = findings[0]["message"]
    assert "NoPE MLA (mla_use_nope" in message and "model.layers.0.self_attn.g_proj.weight" in message
    assert "SiTU MLP (hidden_act: situ" in message
    for layout in ("vllm", "sglang", "speculators"):
        result = run_cli("--no-record", "--verifier", "org/k3", "--to", layout, src, tmp_path / layout)
        assert result.exit_code == 1 and refusal(result.stderr)[0] == "E-DRAFT-UNSERVED", result.stderr
        assert nothing_written(tmp_path, layout)
    assert run_cli("inspect", src).exit_code == 1


@pytest.mark.parametrize("feature, change, named", [
    ("nope", {"mla_use_nope": True}, "NoPE MLA"),
    ("gate flag", {"mla_use_output_gate": True}, "a sigmoid output gate (mla_use_output_gate"),
    ("situ", {"hidden_act": "situ"}, "a SiTU MLP"),
])
def test_each_feature_alone_is_named_in_a_layout_an_engine_serves(tmp_path: Path, feature: str, change: dict,
                                                                   named: str):
    """A DeepSeek MLA draft in SGLang's layout (Eagle3DeepseekV2ForCausalLM, which vLLM and SGLang serve) validates
    clean; one K3 feature added makes it E-DRAFT-UNSERVED naming that feature and only it."""
    src = build_drafter(tmp_path / "mla", "sglang", SPEC)
    assert run_cli("validate", src).exit_code == 0
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, **change}))
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert [f["code"] for f in findings] == ["E-DRAFT-UNSERVED"]
    message = findings[0]["message"]
    assert named in message
    assert [n for n in FEATURES if n in message] == [n for n in FEATURES if named.startswith(n)]


def test_the_gate_tensor_alone_is_named(tmp_path: Path):
    src = build_drafter(tmp_path / "mla", "sglang", SPEC)
    stored = stored_tensors("sglang", SPEC)  # (SGLang's one-layer layout spells layers.0 as midlayer)
    stored["midlayer.self_attn.g_proj.weight"] = gate()
    write_safetensors(src / "model.safetensors", stored)
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1
    code, message = refusal(result.stderr)
    assert code == "E-DRAFT-UNSERVED" and "midlayer.self_attn.g_proj.weight" in message
    assert [n for n in FEATURES if n in message] == ["a sigmoid output gate"]


def test_a_k3_model_that_is_no_eagle3_draft_is_not_called_one(tmp_path: Path):
    """The K3 keys alone (a K3 target, or K3's DSpark draft, which vLLM 0.33.0 serves) are no EAGLE-3 draft: without
    EAGLE-3's hidden_norm the refusal is not given (whatever else is said of the file)."""
    src = k3_draft(tmp_path / "k3")
    config = json.loads((src / "config.json").read_text())
    table, _ = read_tensor_table(src)
    kept = {n: RawTensor(t.dtype, t.shape, read_tensor_bytes(t)) for n, t in table.items()
            if not n.endswith("hidden_norm.weight")}
    write_safetensors(src / "model.safetensors", kept)
    (src / "config.json").write_text(json.dumps(config))
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert "E-DRAFT-UNSERVED" not in [f["code"] for f in findings]
