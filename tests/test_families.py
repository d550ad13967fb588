"""Drafter families and each layout's own rules: multi-layer naming per engine, Qwen3, the MLA
drafter, ModelOpt's NVIDIA fields and base head, original EAGLE's pickles and hard-coded capture,
vLLM's two id copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import (DrafterSpec, build_drafter, canonical_tensors, config_for, stored_tensors, write_safetensors,
                      write_target)
from conftest import run_cli, tensor_hashes
from eagle3_convert.convert import make_options, read_source
from eagle3_convert.errors import Eagle3Error
from eagle3_convert.safetensors_io import read_tensor_table

MLA = DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3")


def config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def rewrite_config(path: Path, **changes) -> Path:
    cfg = config(path)
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def add_tensors(path: Path, layout: str, spec: DrafterSpec, extra: dict[str, str]) -> Path:
    """Rewrite the checkpoint with `extra` {new name: copy of existing name} added."""
    tensors = stored_tensors(layout, spec)
    tensors.update({new: tensors[old] for new, old in extra.items()})
    write_safetensors(path / "model.safetensors", tensors)
    return path


def convert_code(*args) -> tuple[int, str]:
    result = run_cli(*args)
    return result.exit_code, result.stderr + result.stdout


# ------------------------------------------------------------ multi-layer

def test_layers_after_the_first_use_each_engines_norm_name(tmp_path: Path):
    spec = DrafterSpec(num_layers=3)
    src = build_drafter(tmp_path / "spec", "speculators", spec)
    canonical = canonical_tensors(spec)
    for layout in ("sglang", "vllm", "modelopt"):
        assert run_cli("--to", layout, src, tmp_path / layout).exit_code == 0
    sglang = read_tensor_table(tmp_path / "sglang")[0]
    vllm = read_tensor_table(tmp_path / "vllm")[0]
    for i in (1, 2):
        # SGLang's later layers normalise their input with hidden_norm, vLLM's with input_layernorm, and each
        # leaves the other name unset without a word: both files carry the one weight under both names.
        for tensors in (sglang, vllm):
            assert {f"layers.{i}.hidden_norm.weight", f"layers.{i}.input_layernorm.weight"} <= set(tensors)
        for layout in ("sglang", "vllm"):
            hashes = tensor_hashes(tmp_path / layout)
            assert hashes[f"layers.{i}.hidden_norm.weight"] == hashes[f"layers.{i}.input_layernorm.weight"] == \
                canonical[f"layers.{i}.input_layernorm.weight"].sha256
    assert "midlayer.self_attn.q_proj.weight" not in sglang and "layers.0.self_attn.q_proj.weight" in sglang
    assert config(tmp_path / "sglang")["num_hidden_layers"] == 3


def test_sglang_refuses_a_later_input_layernorm_that_differs_from_hidden_norm(tmp_path: Path):
    # SGLang reads hidden_norm, vLLM input_layernorm: keeping either would pick one drafter in silence (issue 22)
    spec = DrafterSpec(num_layers=2)
    src = add_tensors(build_drafter(tmp_path / "sg", "sglang", spec), "sglang", spec,
                      {"layers.1.input_layernorm.weight": "layers.0.input_layernorm.weight"})
    result = run_cli("--to", "vllm", src, tmp_path / "vllm")
    assert result.exit_code == 1 and "[E-KEY-DUPLICATE]" in result.stderr, result.stdout
    assert not (tmp_path / "vllm").exists()


def test_sglang_refuses_vllm_names_for_later_layers(tmp_path: Path):
    spec = DrafterSpec(num_layers=2)
    src = build_drafter(tmp_path / "v", "vllm", spec)
    code, out = convert_code("--from", "sglang", "--to", "vllm", src, tmp_path / "out")
    assert code == 1 and "[E-FROM-MISMATCH]" in out and "--from vllm" in out


def test_vllm_refuses_a_later_hidden_norm_that_differs_from_input_layernorm(tmp_path: Path):
    spec = DrafterSpec(num_layers=2)
    src = add_tensors(build_drafter(tmp_path / "v", "vllm", spec), "vllm", spec,
                      {"layers.1.hidden_norm.weight": "layers.0.hidden_norm.weight"})
    result = run_cli("--to", "sglang", src, tmp_path / "sg")
    assert result.exit_code == 1 and "[E-KEY-DUPLICATE]" in result.stderr, result.stdout
    assert not (tmp_path / "sg").exists()


def test_sglang_reads_midlayer_as_the_first_of_several_layers(tmp_path: Path):
    spec = DrafterSpec(num_layers=2)
    src = build_drafter(tmp_path / "sg", "sglang", spec)
    tensors = stored_tensors("sglang", spec)
    renamed = {(n.replace("layers.0.", "midlayer.", 1) if n.startswith("layers.0.") else n): t
               for n, t in tensors.items()}
    write_safetensors(src / "model.safetensors", renamed)
    assert run_cli("--to", "vllm", src, tmp_path / "v").exit_code == 0
    assert tensor_hashes(tmp_path / "v") == {n: t.sha256 for n, t in stored_tensors("vllm", spec).items()}


# ------------------------------------------------------------------ Qwen3

def test_qwen3_keeps_q_norm_and_k_norm_in_vllm(tmp_path: Path):
    spec = DrafterSpec(family="qwen3", num_layers=2)
    src = build_drafter(tmp_path / "spec", "speculators", spec)
    assert run_cli("--to", "vllm", src, tmp_path / "v").exit_code == 0
    cfg = config(tmp_path / "v")
    assert cfg["architectures"] == ["Eagle3Qwen3ForCausalLM"] and cfg["model_type"] == "qwen3"
    names = set(read_tensor_table(tmp_path / "v")[0])
    assert {f"layers.{i}.self_attn.{n}.weight" for i in (0, 1) for n in ("q_norm", "k_norm")} <= names


def test_vllm_refuses_an_architecture_of_another_family(tmp_path: Path):
    spec = DrafterSpec(family="qwen3")
    src = rewrite_config(build_drafter(tmp_path / "v", "vllm", spec), architectures=["LlamaForCausalLMEagle3"])
    code, out = convert_code("--to", "speculators", src, tmp_path / "out")
    assert code == 1 and "[E-CONFIG-FAMILY]" in out and "Eagle3Qwen3ForCausalLM" in out


# -------------------------------------------------------------------- MLA

def test_mla_drafter_in_sglang_is_eagle3_deepseek_with_unprefixed_names(tmp_path: Path):
    src = build_drafter(tmp_path / "v", "vllm", MLA)
    assert run_cli("--to", "sglang", src, tmp_path / "sg").exit_code == 0
    cfg = config(tmp_path / "sg")
    assert cfg["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]
    assert {k: cfg[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                "v_head_dim")} == {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
                                                   "qk_rope_head_dim": 4, "v_head_dim": 8}
    tensors = read_tensor_table(tmp_path / "sg")[0]
    assert tensors["midlayer.self_attn.q_a_proj.weight"].shape == (16, 64)
    assert tensors["midlayer.self_attn.kv_a_proj_with_mqa.weight"].shape == (8 + 4, 64)
    assert tensors["midlayer.self_attn.kv_b_proj.weight"].shape == (4 * (8 + 8), 8)
    assert not any(n.startswith("model.") for n in tensors)


def test_mla_ids_follow_sglangs_deepseek_quirk_without_a_target(tmp_path: Path):
    # On DeepSeek/Kimi targets SGLang adds 1 only when ids[0] == 1: boundary 3 first is written raw.
    spec = MLA.with_(capture_boundaries=(3, 5, 6))
    src = build_drafter(tmp_path / "v", "vllm", spec)
    assert run_cli("--to", "sglang", src, tmp_path / "sg").exit_code == 0
    assert config(tmp_path / "sg")["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [3, 5, 6]
    (tmp_path / "sg" / "eagle3-convert.json").unlink()  # no sidecar: the ids alone must say it
    assert run_cli("--to", "vllm", tmp_path / "sg", tmp_path / "back").exit_code == 0
    assert config(tmp_path / "back")["eagle_aux_hidden_state_layer_ids"] == [3, 5, 6]


def test_mla_config_must_state_every_latent_width(tmp_path: Path):
    cfg = config_for("sglang", MLA)
    cfg.pop("kv_lora_rank")
    src = build_drafter(tmp_path / "sg", "sglang", MLA)
    (src / "config.json").write_text(json.dumps(cfg))
    code, out = convert_code("--to", "vllm", src, tmp_path / "out")
    assert code == 1 and "[E-CONFIG-FIELD]" in out and "kv_lora_rank" in out


def test_modelopt_kimi_k2_spelling_is_kept(tmp_path: Path):
    src = build_drafter(tmp_path / "mo", "modelopt", MLA)
    assert config(src)["model_type"] == "kimi_k2"
    assert run_cli("--to", "sglang", src, tmp_path / "sg").exit_code == 0
    assert config(tmp_path / "sg")["model_type"] == "kimi_k2"
    assert read_source(str(tmp_path / "sg")).drafter.config.family == "deepseek_mla"


# --------------------------------------------------------------- ModelOpt

def test_modelopt_hf_trained_first_layer_is_carried_not_lost(tmp_path: Path):
    spec = DrafterSpec(modelopt_hf_trained=True)
    src = build_drafter(tmp_path / "mo", "modelopt", spec)
    assert read_source(str(src)).drafter.config.input_layernorm_on_hidden is True
    # Engines serve NVIDIA's export itself with hidden_norm(h): converting changes nothing served, so it warns.
    result = run_cli("--to", "sglang", src, tmp_path / "sg")
    assert result.exit_code == 0 and "WARNING" in result.stdout and "hidden_norm(input_layernorm(h))" in result.stdout
    assert json.loads((tmp_path / "sg" / "eagle3-convert.json").read_text())["flags"]["input_layernorm_on_hidden"]
    assert read_source(str(tmp_path / "sg")).drafter.config.input_layernorm_on_hidden is True
    assert run_cli("--to", "modelopt", tmp_path / "sg", tmp_path / "again").exit_code == 0
    assert config(tmp_path / "again")["eagle_config"]["use_input_layernorm_in_first_layer"] is True


def test_modelopt_nvidia_fields_survive_a_trip_through_vllm(tmp_path: Path):
    src = build_drafter(tmp_path / "mo", "modelopt")
    cfg = config(src)
    cfg["eagle_config"].update({"parallel_draft_heads_num_layers": 2, "eagle_decoder_type": "llama"})
    (src / "config.json").write_text(json.dumps(cfg))
    assert run_cli("--to", "vllm", src, tmp_path / "v").exit_code == 0
    assert run_cli("--to", "modelopt", tmp_path / "v", tmp_path / "back").exit_code == 0
    assert config(tmp_path / "back")["eagle_config"] == cfg["eagle_config"]


def test_modelopt_megatron_midlayer_export_reads_as_standard_maths(tmp_path: Path):
    spec = DrafterSpec(modelopt_hf_trained=True)  # the flag is true in every ModelOpt export
    src = build_drafter(tmp_path / "mo", "modelopt", spec)
    write_safetensors(src / "model.safetensors", {n.replace("layers.0.", "midlayer."): t
                                                   for n, t in stored_tensors("modelopt", spec).items()})
    result = run_cli("--to", "sglang", src, tmp_path / "sg")
    assert result.exit_code == 0, result.stderr
    assert "Megatron export" in result.stdout
    rewrite_config(src, eagle_config={**config(src)["eagle_config"], "use_input_layernorm_in_first_layer": False})
    code, out = convert_code("--to", "sglang", src, tmp_path / "sg2")
    assert code == 1 and "[E-FLAG-UNSUPPORTED]" in out


def test_modelopt_base_head_is_recognised(tmp_path: Path):
    spec = DrafterSpec(draft_vocab_size=None)  # no draft head trained: the base [V, H] head is copied in
    src = rewrite_config(build_drafter(tmp_path / "mo", "modelopt", spec), draft_vocab_size=None)
    result = run_cli("--to", "sglang", src, tmp_path / "sg")
    assert result.exit_code == 0, result.stderr
    assert "copies the base model's head" in result.stdout
    assert config(tmp_path / "sg")["draft_vocab_size"] == 96

    # The base head where the config promises a smaller draft head: never mistaken for one.
    rewrite_config(src, draft_vocab_size=32)
    code, out = convert_code("--to", "sglang", src, tmp_path / "sg2")
    assert code == 1 and "[E-MODELOPT-BASE-HEAD]" in out


@pytest.mark.parametrize("change, code", [
    ({"use_mtp_layernorm": True}, "E-FLAG-UNSUPPORTED"),
    ({"parallel_draft_step": 3}, "E-FLAG-UNSUPPORTED"),
    ({"use_last_layernorm": False}, "E-FLAG-UNSUPPORTED"),
    ({"use_aux_hidden_state": False}, "E-CONFIG-ALGORITHM"),
])
def test_modelopt_modules_no_engine_serves_are_refused(tmp_path: Path, change: dict, code: str):
    src = build_drafter(tmp_path / "mo", "modelopt")
    rewrite_config(src, eagle_config={**config(src)["eagle_config"], **change})
    rc, out = convert_code("--from", "modelopt", "--to", "vllm", src, tmp_path / "out")
    assert rc == 1 and f"[{code}]" in out and not (tmp_path / "out").exists()


def test_modelopt_quantized_export_is_refused(tmp_path: Path):
    src = build_drafter(tmp_path / "mo", "modelopt")
    (src / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    rc, out = convert_code("--to", "vllm", src, tmp_path / "out")
    assert rc == 1 and "[E-QUANT-UNSUPPORTED]" in out


def test_modelopt_writes_no_t2d_and_output_of_layer_ids(tmp_path: Path):
    src = build_drafter(tmp_path / "spec", "speculators", capture_boundaries=(1, 3, 6))
    assert run_cli("--to", "modelopt", src, tmp_path / "mo").exit_code == 0
    assert "t2d" not in read_tensor_table(tmp_path / "mo")[0]
    assert config(tmp_path / "mo")["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 2, 5]
    assert run_cli("--to", "speculators", tmp_path / "mo", tmp_path / "back").exit_code == 0
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)  # t2d rebuilt from d2t, byte for byte


# ------------------------------------------------------------- original EAGLE

def test_eagle_pytorch_model_bin_converts(tmp_path: Path):
    pytest.importorskip("torch")
    spec = DrafterSpec(pickled=True)
    src = build_drafter(tmp_path / "eagle", "eagle", spec)
    assert (src / "pytorch_model.bin").is_file()
    assert run_cli("--to", "sglang", src, tmp_path / "sg").exit_code == 0
    assert tensor_hashes(tmp_path / "sg") == {n: t.sha256 for n, t in stored_tensors("sglang", spec).items()}


def test_eagle_is_written_as_safetensors_and_says_so(tmp_path: Path):
    src = build_drafter(tmp_path / "sg", "sglang")
    target = write_target(tmp_path / "target")
    result = run_cli("--to", "eagle", "--target", target, src, tmp_path / "eagle")
    assert result.exit_code == 0, result.stderr
    assert "model.safetensors" in result.stdout
    assert (tmp_path / "eagle" / "model.safetensors").is_file()
    assert not (tmp_path / "eagle" / "pytorch_model.bin").exists()
    cfg = config(tmp_path / "eagle")
    assert "eagle_config" not in cfg and "eagle_aux_hidden_state_layer_ids" not in cfg


def test_eagle_needs_the_target_depth_to_drop_explicit_ids(tmp_path: Path):
    src = build_drafter(tmp_path / "sg", "sglang")  # explicit boundaries [2, 4, 5]
    code, out = convert_code("--to", "eagle", src, tmp_path / "eagle")
    assert code == 1 and "[E-CAPTURE-DEPTH-UNKNOWN]" in out and "--target" in out
    src_default = build_drafter(tmp_path / "sg2", "sglang", capture_boundaries=None)
    assert run_cli("--to", "eagle", src_default, tmp_path / "eagle2").exit_code == 0


def test_eagle_refuses_layer_names_it_would_not_load(tmp_path: Path):
    spec = DrafterSpec()
    src = build_drafter(tmp_path / "eagle", "eagle", spec)
    write_safetensors(src / "model.safetensors", {n.replace("midlayer.", "layers.0."): t
                                                   for n, t in stored_tensors("eagle", spec).items()})
    code, out = convert_code("--from", "eagle", "--to", "sglang", src, tmp_path / "out")
    assert code == 1 and "[E-KEY-UNKNOWN]" in out and "midlayer" in out


# -------------------------------------------------------------------- vLLM

def test_vllm_writes_both_id_copies_the_flags_and_k(tmp_path: Path):
    src = build_drafter(tmp_path / "sg", "sglang", num_aux=4, capture_boundaries=(1, 3, 5, 6))
    assert run_cli("--to", "vllm", src, tmp_path / "v").exit_code == 0
    cfg = config(tmp_path / "v")
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5, 6]  # boundaries, as vLLM reads them
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 2, 4, 5]  # block outputs, as SGLang reads
    assert cfg["num_aux_hidden_states"] == 4
    assert cfg["norm_before_residual"] is False  # always written: an absent key is true on vLLM's other path
    names = set(read_tensor_table(tmp_path / "v")[0])
    assert "layers.0.self_attn.q_proj.weight" in names and not any(n.startswith("midlayer.") for n in names)


def test_vllm_refuses_ids_only_in_eagle_config(tmp_path: Path):
    src = rewrite_config(build_drafter(tmp_path / "v", "vllm"), eagle_aux_hidden_state_layer_ids=None)
    code, out = convert_code("--from", "vllm", "--to", "speculators", src, tmp_path / "out")
    assert code == 1 and "[E-CAPTURE-AMBIGUOUS]" in out


def test_vllm_top_level_ids_win_over_the_nested_copy(tmp_path: Path):
    src = build_drafter(tmp_path / "v", "vllm")  # top level and nested both [2, 4, 5]: SGLang reads [3, 5, 6]
    result = run_cli("--to", "sglang", src, tmp_path / "sg")
    assert result.exit_code == 0 and "ignored" in result.stdout and "SGLang would have read" in result.stdout
    assert config(tmp_path / "sg")["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]  # from [2, 4, 5]


def test_vllm_nested_block_outputs_beside_top_level_boundaries_are_one_list(tmp_path: Path):
    src = build_drafter(tmp_path / "v", "vllm")
    rewrite_config(src, eagle_config={"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]})
    result = run_cli("--to", "sglang", src, tmp_path / "sg")
    assert result.exit_code == 0 and "ignored" not in result.stdout
    assert config(tmp_path / "sg")["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]


def test_layout_read_errors_are_eagle3_errors(tmp_path: Path):
    src = build_drafter(tmp_path / "v", "vllm")
    rewrite_config(src, eagle_config={"use_aux_hidden_state": False})
    with pytest.raises(Eagle3Error) as info:
        read_source(str(src), "vllm", make_options())
    assert info.value.code == "E-CONFIG-ALGORITHM"
