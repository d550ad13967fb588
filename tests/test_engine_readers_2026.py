"""Issue 22, the new readers and llama.cpp's limits, through the real CLI on files tests/builders.py writes
(independently of our writers), edited as their producers write them.

- mlx-vlm v0.6.15 (`mlx_vlm/speculative/drafters/eagle3/`, utils.load_model): speculators configs only, its own
  embed_tokens required, strict load_weights (no midlayer.*, no fc_norm.*, no later hidden_norm), capture hooks
  max(b - 1, 0) (boundary 0 becomes 1), defaults derived from the DRAFTER's depth, no norm_output, no rope scaling.
- LMDeploy v0.16.0 (`lmdeploy/pytorch/models/llama_eagle3.py`, configurations/llama.py): LlamaForCausalLM (or
  Eagle3LlamaForCausalLM) with midlayer.*, one layer, three ids it never reads (the target's defaults), d2t + arange,
  a missing d2t left at zeros.
- llama.cpp (`src/models/eagle3.cpp`): one layer only, no sliding window.
"""

from __future__ import annotations

import json
from pathlib import Path

from builders import DrafterSpec, build_drafter, config_for, stored_tensors, write_checkpoint, write_target
from conftest import edit_config, run_cli

WINDOW = {"sliding_window": 16, "layer_types": ["sliding_attention"], "use_sliding_window": True}


def validate(*args) -> tuple[int, list[dict], dict]:
    result = run_cli("validate", "--json", *args)
    report = json.loads(result.stdout)
    return result.exit_code, report["findings"], report


def of(found: list[dict], code: str, engine: str) -> list[str]:
    return [f["message"] for f in found if f["code"] == code and f.get("engine") == engine]


# ------------------------------------------------------------------ mlx-vlm

def test_mlx_vlm_serves_a_speculators_drafter_with_its_embedding(tmp_path: Path):
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(embed_tokens=True))
    code, found, report = validate("--engine", "mlx-vlm", src)
    assert code == 0 and report["releases"] == ["mlx-vlm 0.6.15"], found
    assert of(found, "I-ENGINE-READING", "mlx-vlm") == [
        "mlx-vlm (from source) 0.6.15: as-trained (captures [2, 4, 5], trained maths; mlx-vlm captures only on "
        "targets whose model takes its hooks (gemma4, gemma4_unified, lfm2, minimax_m3_vl, muse_glimmer, qwen3_5 at "
        "0.6.15))"], found

    bare = build_drafter(tmp_path / "bare", "speculators", DrafterSpec())  # the speculators layout has no embedding
    code, found, _ = validate("--engine", "mlx-vlm", bare)
    assert code == 1 and "embed_tokens" in of(found, "E-ENGINE-REFUSES", "mlx-vlm")[0], found


def test_mlx_vlm_hooks_boundary_zero_as_one(tmp_path: Path):
    """Its hooks are decoder-layer outputs max(b - 1, 0): the embedding output (b = 0) becomes layer 0's output."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(embed_tokens=True, capture_boundaries=(0, 4, 5)))
    code, found, _ = validate("--engine", "mlx-vlm", src)
    [wrong] = of(found, "E-ENGINE-WRONG", "mlx-vlm")
    assert code == 1 and "boundary 0" in wrong and "[1, 4, 5]" in wrong, found


def test_mlx_vlm_derives_default_layers_from_the_drafters_depth(tmp_path: Path):
    """Without ids it takes [2, n//2, n-3] of the drafter's own num_hidden_layers: a one-layer drafter gets two
    hooks where fc takes three (refused loudly at the first draft step)."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(embed_tokens=True, capture_boundaries=None))
    code, found, _ = validate("--engine", "mlx-vlm", src)
    [refusal] = of(found, "E-ENGINE-REFUSES", "mlx-vlm")
    assert code == 1 and "drafter's own depth" in refusal and "[0, 1]" in refusal, found


def test_mlx_vlm_strict_load_refuses_names_it_has_no_parameter_for(tmp_path: Path):
    cases = {
        "sglang": (build_drafter(tmp_path / "sglang", "sglang", DrafterSpec()), "model_type"),
        "fc_norm": (build_drafter(tmp_path / "fcn", "speculators", DrafterSpec(embed_tokens=True, fc_norm=True)),
                    "'fc_norm.0.weight'"),
        "qwen3": (build_drafter(tmp_path / "qwen3", "speculators", DrafterSpec(embed_tokens=True, family="qwen3")),
                  "self_attn.k_norm.weight"),
    }
    for name, (src, said) in cases.items():
        code, found, _ = validate("--engine", "mlx-vlm", src)
        refusals = of(found, "E-ENGINE-REFUSES", "mlx-vlm")
        assert code == 1 and refusals and said in refusals[0], (name, found)


def test_mlx_vlm_ignores_norm_output_and_rope_scaling(tmp_path: Path):
    out = build_drafter(tmp_path / "out", "speculators", DrafterSpec(embed_tokens=True, norm_output=True))
    code, found, _ = validate("--engine", "mlx-vlm", out)
    assert code == 1 and "norm_output True in training, False in mlx-vlm" in of(found, "E-ENGINE-WRONG",
                                                                                   "mlx-vlm")[0], found
    rope = {"rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}}
    scaled = build_drafter(tmp_path / "rope", "speculators", DrafterSpec(embed_tokens=True, extra=rope))
    code, found, _ = validate("--engine", "mlx-vlm", scaled)
    assert code == 1 and "not the drafter's llama3 scaling" in of(found, "E-ENGINE-WRONG", "mlx-vlm")[0], found


def test_mlx_vlm_is_judged_only_when_named(tmp_path: Path):
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(embed_tokens=True))
    plain = run_cli("--no-record", "--to", "speculators", "--verifier", "org/target-model", src, tmp_path / "a")
    assert plain.exit_code == 0 and "mlx-vlm" not in plain.stdout, plain.stdout
    named = run_cli("--no-record", "--to", "speculators", "--verifier", "org/target-model", "--engine", "mlx-vlm",
                    src, tmp_path / "b")
    assert named.exit_code == 0, named.stderr
    [line] = [x for x in named.stdout.splitlines() if x.strip().startswith("mlx-vlm")]
    assert "serves as trained: captures [2, 4, 5]" in line, named.stdout


# ------------------------------------------------------------------ LMDeploy

def eagle_as_documented(dest: Path, **changes) -> Path:
    """The layout LMDeploy's docs serve (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): midlayer.*, LlamaForCausalLM."""
    src = build_drafter(dest, "eagle", DrafterSpec(**changes))
    return edit_config(src, lambda c: c.__setitem__("architectures", ["LlamaForCausalLM"]))


def test_lmdeploy_captures_the_targets_defaults_never_the_drafters_ids(tmp_path: Path):
    target = write_target(tmp_path / "target", DrafterSpec())  # 8 layers: defaults {2, 4, 5}
    default = eagle_as_documented(tmp_path / "default", capture_boundaries=None)
    code, found, report = validate("--engine", "lmdeploy", "--target", target, default)
    assert code == 0 and report["releases"] == ["LMDeploy 0.16.0"], found
    assert of(found, "I-ENGINE-READING", "lmdeploy") == [
        "LMDeploy (from source) 0.16.0: default-layers (captures its default layers, the trained ones; LMDeploy sets "
        "the capture layers only for LlamaForCausalLM targets (configurations/llama.py: aux_hidden_state_layers = "
        "(2, L//2, L-3)))"], found
    assert of(found, "W-ENGINE-CAVEAT", "lmdeploy"), found

    sglang = build_drafter(tmp_path / "sg", "sglang", DrafterSpec(capture_boundaries=(1, 3, 6)))
    edit_config(sglang, lambda c: c.__setitem__("architectures", ["LlamaForCausalLM"]))
    code, found, _ = validate("--from", "sglang", "--engine", "lmdeploy", "--target", target, sglang)
    [wrong] = of(found, "E-ENGINE-WRONG", "lmdeploy")
    assert code == 1 and "[2, 4, 5]" in wrong and "[1, 3, 6]" in wrong, found


def test_lmdeploy_refuses_what_its_loader_cannot_build(tmp_path: Path):
    cases = {
        "sglang class name": (build_drafter(tmp_path / "a", "sglang", DrafterSpec()), "no EAGLE-3 rewrite"),
        "layers.0 names": (edit_config(build_drafter(tmp_path / "b", "vllm", DrafterSpec()),
                                       lambda c: c.__setitem__("architectures", ["LlamaForCausalLM"])),
                           "KeyError on 'layers.0."),
        "speculators": (build_drafter(tmp_path / "c", "speculators", DrafterSpec()), "model_type"),
    }
    two = edit_config(build_drafter(tmp_path / "e", "vllm", DrafterSpec(num_layers=2)),
                      lambda c: c.__setitem__("architectures", ["LlamaForCausalLM"]))
    cases["two layers"] = (two, "1 decode layer")
    for name, (src, said) in cases.items():
        code, found, _ = validate("--engine", "lmdeploy", src)
        refusals = of(found, "E-ENGINE-REFUSES", "lmdeploy")
        assert code == 1 and refusals and said in refusals[0], (name, found)
    code, found, _ = validate("--engine", "lmdeploy", two)
    assert "no file makes LMDeploy serve a 2-layer drafter" in [f for f in found if f["code"] ==
                                                                 "E-ENGINE-REFUSES"][0]["hint"], found


def test_lmdeploy_leaves_d2t_at_zeros_when_the_file_has_none(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=None)
    tensors = {n: t for n, t in stored_tensors("eagle", spec).items() if n not in ("d2t", "t2d")}
    src = write_checkpoint(tmp_path / "src", {**config_for("eagle", spec), "architectures": ["LlamaForCausalLM"]},
                           tensors)
    code, found, _ = validate("--engine", "lmdeploy", src)
    wrong = of(found, "E-ENGINE-WRONG", "lmdeploy")
    assert code == 1 and wrong and "target id 0" in wrong[0], found


# ------------------------------------------------------------------ llama.cpp: one layer, no window

def test_llamacpp_refuses_a_multi_layer_drafter_and_says_no_file_helps(tmp_path: Path):
    """Before: validate --engine llamacpp said OK on a 2-layer drafter its converter never detects."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(num_layers=2))
    code, found, _ = validate("--engine", "llamacpp", src)
    [refusal] = [f for f in found if f["code"] == "E-ENGINE-REFUSES" and f["engine"] == "llamacpp"]
    assert code == 1 and "one layer" in refusal["message"], found
    assert refusal["hint"].startswith("no file makes llama.cpp serve a 2-layer drafter"), refusal
    code, found, _ = validate("--engine", "llamacpp", build_drafter(tmp_path / "one", "vllm", DrafterSpec()))
    assert code == 0 and of(found, "I-ENGINE-READING", "llamacpp"), found  # the control


def test_llamacpp_verdict_says_the_window_is_not_applied(tmp_path: Path):
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(extra=WINDOW))
    code, found, _ = validate("--engine", "llamacpp", src)
    [caveat] = of(found, "W-ENGINE-CAVEAT", "llamacpp")
    assert code == 0 and "maths differ past 16 tokens" in caveat, found
    full = build_drafter(tmp_path / "full", "speculators", DrafterSpec(extra={**WINDOW,
                                                                              "layer_types": ["full_attention"]}))
    code, found, _ = validate("--engine", "llamacpp", full)
    assert code == 0 and not of(found, "W-ENGINE-CAVEAT", "llamacpp"), found  # a window no layer uses


# ------------------------------------------------------------------ TensorRT-LLM and P-EAGLE

def test_trtllm_has_no_p_eagle_verdict_and_says_why(tmp_path: Path):
    """Before: 'builds its eagle3 drafter for a peagle drafter; served wrong', a claim no source read made. Its
    SpeculativeDecodingMode has no P-EAGLE mode (PARD drafts without target hidden states): no verdict, said."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(num_layers=2, peagle_mask_token_id=7))
    code, found, _ = validate("--engine", "trtllm", src)
    [unknown] = of(found, "W-ENGINE-UNKNOWN", "trtllm")
    assert code == 0 and "no P-EAGLE mode" in unknown and "not established" in unknown, found
    assert not of(found, "E-ENGINE-WRONG", "trtllm"), found
    eagle3 = build_drafter(tmp_path / "eagle3", "modelopt", DrafterSpec())  # the control: an EAGLE-3 drafter is judged
    code, found, _ = validate("--engine", "trtllm", eagle3)
    assert code == 0 and not of(found, "W-ENGINE-UNKNOWN", "trtllm"), found


# ------------------------------------------------------------------ SpecForge's norm_output: false

def test_specforge_norm_output_false_has_no_final_norm_and_no_engine_serves_it(tmp_path: Path):
    """SpecForge's compute_logits (llama3_eagle.py, since b7ce50cd) applies the final norm only with norm_output
    true, its default: false trains lm_head on the un-normalised state, which every engine normalises. Before:
    read as the engines' false and converted 'as trained'."""
    src = edit_config(build_drafter(tmp_path / "src", "sglang", DrafterSpec()),
                      lambda c: c.__setitem__("norm_output", False))
    code, found, _ = validate(src)
    wrong = [f["message"] for f in found if f["code"] == "E-ENGINE-WRONG"]
    assert code == 1 and wrong and "no final norm before lm_head" in wrong[0], found
    for to in ("vllm", "speculators", "sglang"):
        done = run_cli("--no-record", "--to", to, "--verifier", "org/target-model", src, tmp_path / to)
        assert done.exit_code != 0 and "[E-ENGINE-WRONG]" in done.stderr, (to, done.stderr)
        assert not (tmp_path / to).exists()

    # the controls: SpecForge's default (the key absent) and a config written for vLLM (norm_before_residual is no
    # SpecForge option), where false is the usual final norm
    absent = build_drafter(tmp_path / "absent", "sglang", DrafterSpec())
    assert run_cli("--no-record", "--to", "vllm", absent, tmp_path / "absent-out").exit_code == 0
    for_vllm = edit_config(build_drafter(tmp_path / "v", "sglang", DrafterSpec()),
                           lambda c: c.update(norm_output=False, norm_before_residual=False))
    done = run_cli("--no-record", "--from", "sglang", "--to", "vllm", for_vllm, tmp_path / "v-out")
    assert done.exit_code == 0, done.stderr


# ------------------------------------------------------------------ the fc_norm spellings

def test_fcs_n_is_refused_naming_the_key(tmp_path: Path):
    """fc_norm.{j} is what speculators, SpecForge, vLLM, SGLang and TensorRT-LLM write and load; aux_norm_low/mid/high
    is SGLang's legacy spelling (read as fc_norm.0/1/2: test_drafters_2026_layers). `fcs.{j}` is in no source read:
    refused, naming it, never read as fc_norm nor dropped."""
    spec = DrafterSpec(fc_norm=True)
    tensors = {n.replace("fc_norm.", "fcs."): t for n, t in stored_tensors("speculators", spec).items()}
    src = write_checkpoint(tmp_path / "src", config_for("speculators", spec), tensors)
    code, found, _ = validate(src)
    unknown = sorted(f["where"] for f in found if f["code"] == "E-KEY-UNKNOWN")
    assert code == 1 and unknown == ["fcs.0.weight", "fcs.1.weight", "fcs.2.weight"], found
    assert "no engine loads it" in [f for f in found if f["code"] == "E-KEY-UNKNOWN"][0]["message"]
    done = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert done.exit_code == 1 and "'fcs.0.weight'" in done.stderr and "[E-KEY-UNKNOWN]" in done.stderr, done.stderr


def test_mlx_vlm_multi_layer_drafters_per_layer_norms(tmp_path: Path):
    """Its layers >= 1 are plain decoder layers: input_layernorm applied, no hidden_norm. A speculators 2-layer drafter
    (input_layernorm only) is served; the same with the later hidden_norm our SGLang/vLLM writers add for the other
    engines fails its strict load, naming the tensor."""
    spec = DrafterSpec(num_layers=2, embed_tokens=True)
    plain = build_drafter(tmp_path / "plain", "speculators", spec)
    code, found, _ = validate("--engine", "mlx-vlm", plain)
    assert code == 0 and of(found, "I-ENGINE-READING", "mlx-vlm"), found
    tensors = stored_tensors("speculators", spec)
    tensors["layers.1.hidden_norm.weight"] = tensors["layers.1.input_layernorm.weight"]
    both = write_checkpoint(tmp_path / "both", config_for("speculators", spec), tensors)
    code, found, _ = validate("--engine", "mlx-vlm", both)
    refusals = of(found, "E-ENGINE-REFUSES", "mlx-vlm")
    assert code == 1 and refusals and "'layers.1.hidden_norm.weight'" in refusals[0], found
