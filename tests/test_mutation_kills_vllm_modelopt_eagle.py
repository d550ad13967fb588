"""vLLM-native, ModelOpt and original EAGLE layouts, word for word (issue 26: mutation survivors of
eagle3_convert/converters/vllm.py, modelopt.py and eagle.py, session 7). Builder-written checkpoints
(tests/builders.py) with one change each, through the real CLI: its one-line refusal, its notes, the files it
writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import (DrafterSpec, RawTensor, _write_pickle, build_drafter, stored_tensors, write_safetensors,
                      write_target)
from conftest import run_cli, tensor_hashes
from test_mutation_kills_converters import (FIRST_LAYER_NORM_ON, MLA, _both, _no_ids, _pop, built, last_line, megatron,
                                            modelopt_file, nested, notes, put)

# ------------------------------------------------------------------ vllm.py, writing


def with_mlp_bias(tmp_path: Path, layout: str, spec: DrafterSpec) -> Path:
    """The builder's `layout` file of `spec` with mlp_bias: true and the three MLP bias tensors it implies."""
    spec = spec.with_(extra={"mlp_bias": True})
    src = build_drafter(tmp_path / "src", layout, spec)
    tensors = stored_tensors(layout, spec)
    layer = "midlayer." if any(n.startswith("midlayer.") for n in tensors) else "layers.0."
    for proj, rows in (("gate", spec.intermediate_size), ("up", spec.intermediate_size), ("down", spec.hidden_size)):
        tensors[f"{layer}mlp.{proj}_proj.bias"] = RawTensor(spec.dtype, (rows,), bytes(2 * rows))
    write_safetensors(src / "model.safetensors", tensors)
    return src


def test_vllm_refuses_an_mla_drafter_with_mlp_biases_only(tmp_path: Path):
    """vLLM's Eagle3DeepseekV2ForCausalLM builds no bias: one kind of bias (the MLP's, no attention bias) is enough
    to refuse."""
    src = with_mlp_bias(tmp_path, "sglang", MLA)
    result = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == (
        "error: the MLA drafter has bias tensors; vLLM's Eagle3DeepseekV2ForCausalLM builds none [E-BIAS-UNSUPPORTED] "
        "— hint: this drafter cannot be served by vLLM's MLA class")
    assert not (tmp_path / "out").exists()


def test_vllm_refuses_four_states_without_capture_ids_naming_itself(tmp_path: Path):
    src = built(tmp_path, "vllm", _no_ids, DrafterSpec(num_aux=4, capture_boundaries=(1, 3, 5, 6)))
    result = run_cli("--from", "vllm", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == (
        "error: the drafter fuses 4 captured states but names no capture layers; the vllm layout's engine would "
        "capture its 3 default layers [E-CAPTURE-COUNT] — hint: add the capture ids the drafter was trained with to a "
        "copy of the source config.json")


def test_vllm_writes_boundaries_sglang_cannot_capture_at_the_top_level_only(tmp_path: Path):
    """Boundary 8 of an 8-layer target (the last block's output): SGLang has no id for it, so eagle_config holds
    none (SGLang would read its defaults: the class name it refuses is written instead), and vLLM reads the
    top-level list."""
    spec = DrafterSpec(capture_boundaries=(2, 4, 8))
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--from", "vllm", "--to", "vllm", "--target", target, "--no-record",
                     build_drafter(tmp_path / "src", "vllm", spec), tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 8]
    assert config["eagle_config"] == {"use_aux_hidden_state": True}
    assert config["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert notes(result.stdout)[-1] == (
        "architectures set to ['Eagle3LlamaForCausalLM'], a name vLLM resolves and SGLang refuses: SGLang would load "
        "this file and serve it wrong (captures its default layers [2, 4, 5], trained on [2, 4, 8])")


# ------------------------------------------------------------------ detection: the layout and why, as inspect says

_MODELOPT_FIELDS = ("use_input_layernorm_in_first_layer, use_last_layernorm, use_mtp_layernorm, next_layer_regular, "
                    "parallel_draft_step, parallel_draft_heads_num_layers")
# name -> (the builder's layout, its change, spec or None, the layout detected, why)
DETECTIONS = {
    "vllm: its norm_before_residual key": (
        "vllm", put(), None, "vllm", "top-level norm_before_residual (a vLLM key SGLang has not)"),
    "vllm: ids at the top level only": (
        "vllm", _both(_pop("norm_before_residual"), _pop("eagle_config", "eagle_aux_hidden_state_layer_ids")), None,
        "vllm", "top-level eagle_aux_hidden_state_layer_ids only (vLLM reads its ids there; SGLang and ModelOpt nest "
        "them)"),
    "vllm: a class only vLLM has": (
        "vllm", _pop("norm_before_residual"), DrafterSpec(family="qwen3"), "vllm",
        "architecture Eagle3Qwen3ForCausalLM exists only in vLLM"),
    # a sure reading wins over the speculators layout's guess (its objects without speculators_model_type)
    "vllm: its norm_before_residual key beside a speculators object": (
        "vllm", put(transformer_layer_config={"model_type": "llama"}), None, "vllm",
        "top-level norm_before_residual (a vLLM key SGLang has not)"),
    "vllm: a class only vLLM has beside a speculators object": (
        "vllm", _both(_pop("norm_before_residual"), put(transformer_layer_config={"model_type": "qwen3"})),
        DrafterSpec(family="qwen3"), "vllm", "architecture Eagle3Qwen3ForCausalLM exists only in vLLM"),
    "vllm: a class in another case": (
        "vllm", put(architectures=["LlamaForCausalLMEAGLE3"]), None, "vllm",
        "architecture LlamaForCausalLMEAGLE3 (LlamaForCausalLMEagle3 in another case) with layers.* tensors"),
    "vllm: TensorRT-LLM's class name": (
        "vllm", _both(_pop("norm_before_residual"), put(architectures=["EAGLE3LlamaForCausalLM"])), None, "vllm",
        "architecture EAGLE3LlamaForCausalLM (TensorRT-LLM's name), flat config"),
    "vllm: a community Llama draft": (
        "vllm", put(architectures=["LlamaForCausalLM"]), None, "vllm",
        "LlamaForCausalLM with draft_vocab_size and layers.* tensors (a community draft: vLLM builds "
        "Eagle3LlamaForCausalLM from it)"),
    "vllm: a community Qwen3 draft": (
        "vllm", put(architectures=["Qwen3ForCausalLM"]), DrafterSpec(family="qwen3"), "vllm",
        "Qwen3ForCausalLM with draft_vocab_size and layers.* tensors (a community draft: vLLM builds "
        "Eagle3Qwen3ForCausalLM from it)"),
    "speculators, with a flat Eagle3 class beside its type": (  # vLLM's markers (top-level ids and flag) are its too
        "speculators", put(architectures=["LlamaForCausalLMEagle3"]), None, "speculators",
        "config.json has speculators_model_type 'eagle3'"),
    "modelopt: NVIDIA's fields": (
        "modelopt", put(), None, "modelopt", f"eagle_config has NVIDIA ModelOpt fields ({_MODELOPT_FIELDS})"),
    "modelopt: the Megatron multi-layer class": (
        "modelopt", put(architectures=["LlamaForCausalLMEagle3Deep"],
                        eagle_config={"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}),
        None, "modelopt", "LlamaForCausalLMEagle3Deep (ModelOpt's Megatron multi-layer export)"),
    # a sure reading wins over the speculators layout's guess
    "modelopt: NVIDIA's fields beside a speculators object": (
        "modelopt", put(transformer_layer_config={"model_type": "llama"}), None, "modelopt",
        f"eagle_config has NVIDIA ModelOpt fields ({_MODELOPT_FIELDS})"),
    "modelopt: the Megatron multi-layer class beside a speculators object": (
        "modelopt", put(architectures=["LlamaForCausalLMEagle3Deep"], transformer_layer_config={"model_type": "llama"},
                        eagle_config={"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}),
        None, "modelopt", "LlamaForCausalLMEagle3Deep (ModelOpt's Megatron multi-layer export)"),
    # without NVIDIA's fields a quantization config names no layout (vLLM and SGLang serve quantized drafters in
    # theirs, issue 35): the SGLang spelling decides
    "modelopt: a quantization config beside a plain eagle_config": (
        "modelopt", put(quantization_config={"quant_method": "modelopt"},
                        eagle_config={"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}),
        None, "sglang", "LlamaForCausalLMEagle3 config with eagle_config and no top-level ids"),
    "eagle: a pickle with midlayer.*": (
        "eagle", put(), DrafterSpec(pickled=True), "eagle", "pytorch_model.bin with midlayer.* tensors (SafeAILab EAGLE)"),
    "eagle: a pickle of the training template": (  # midlayer.* without an Eagle3 class is enough in a pickle
        "eagle", put(architectures=["LlamaForCausalLM"]), DrafterSpec(pickled=True), "eagle",
        "pytorch_model.bin with midlayer.* tensors (SafeAILab EAGLE)"),
    "eagle: a pickle beside a speculators object": (  # a sure reading wins over the speculators layout's guess
        "eagle", put(transformer_layer_config={"model_type": "llama"}), DrafterSpec(pickled=True), "eagle",
        "pytorch_model.bin with midlayer.* tensors (SafeAILab EAGLE)"),
    "eagle: the training template beside a speculators object": (
        "eagle", put(architectures=["LlamaForCausalLM"], transformer_layer_config={"model_type": "llama"}), None,
        "eagle", "LlamaForCausalLM config with draft_vocab_size and midlayer.* (EAGLE's training template)"),
    "eagle: a pickle that says it is speculators'": (
        "eagle", put(speculators_model_type="eagle3"), DrafterSpec(pickled=True), "speculators",
        "config.json has speculators_model_type 'eagle3'"),
    "eagle: the training template": (
        "eagle", put(architectures=["LlamaForCausalLM"]), None, "eagle",
        "LlamaForCausalLM config with draft_vocab_size and midlayer.* (EAGLE's training template)"),
}


@pytest.mark.parametrize("case", DETECTIONS)
def test_each_detection_says_why(tmp_path: Path, case: str):
    layout, edit, spec, detected, why = DETECTIONS[case]
    result = run_cli("inspect", "--json", built(tmp_path, layout, edit, spec))
    report = json.loads(result.stdout)
    assert (report["layout"], report["detected_by"]) == (detected, why)


def test_vllm_refuses_a_file_both_its_runners_refuse_naming_the_layout(tmp_path: Path):
    """vLLM 0.23.0 has no Eagle3Qwen3ForCausalLM: a Qwen3 drafter written for it would be refused by both runners."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(family="qwen3"))
    result = run_cli("--from", "vllm", "--to", "vllm", "--engine", "vllm==0.23.0", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == (
        "error: the vllm layout is for vLLM (V1 runner), vLLM (V2 runner), and vLLM (V1 runner) would refuse it: model "
        "architectures ['Eagle3Qwen3ForCausalLM'] are not supported [E-ENGINE-REFUSES] — hint: "
        "upgrade to vLLM ≥ 0.24.0, which serves this file as trained; or convert to a layout whose engine serves the "
        "drafter as trained")
    assert not (tmp_path / "out").exists()
    # the hint works: the release it names writes the file (`--to vllm` is not offered as the way out of vllm)
    upgraded = run_cli("--from", "vllm", "--to", "vllm", "--engine", "vllm==0.24.0", "--no-record", src, tmp_path / "out")
    assert upgraded.exit_code == 0, upgraded.stderr


# ------------------------------------------------------------------ every reader of the three


@pytest.mark.parametrize("layout", ["vllm", "modelopt", "eagle"])
def test_a_model_type_of_no_drafter_family_is_read_by_its_class_with_a_note(tmp_path: Path, layout: str):
    src = built(tmp_path, layout, put(model_type="mistral"))
    result = run_cli("--from", layout, "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert notes(result.stdout)[0] == (
        "model_type 'mistral' read as a llama drafter: the engines build their llama class from architectures "
        "['LlamaForCausalLMEagle3'], and the tensors agree; written as model_type 'llama'")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == "llama"


# ------------------------------------------------------------------ vllm.py, reading


def convert(tmp_path: Path, src: Path, source: str, dest: str, *args: str) -> tuple[dict, list[str]]:
    result = run_cli("--from", source, "--to", dest, "--no-record", *args, src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    return json.loads((tmp_path / "out" / "config.json").read_text()), notes(result.stdout)


def refusal(tmp_path: Path, src: Path, source: str, dest: str, *args: str) -> str:
    result = run_cli("--from", source, "--to", dest, "--no-record", *args, src, tmp_path / "out")
    assert result.exit_code == 1
    assert not (tmp_path / "out").exists()
    return last_line(result.stderr)


_IDS_IGNORED = ("eagle_config ids [2, 4, 5] ignored: vLLM reads the top-level list [2, 4, 5]; SGLang would have read "
                "the nested list as boundaries [3, 5, 6] (the output spells it right)")


def test_vllm_an_absent_use_aux_hidden_state_is_eagle3(tmp_path: Path):
    config, _ = convert(tmp_path, built(tmp_path, "vllm", _pop("eagle_config", "use_aux_hidden_state")), "vllm", "vllm")
    assert config["eagle_config"] == {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}


def test_vllm_absent_flags_are_false(tmp_path: Path):
    """vLLM-native reads an absent norm_before_residual (and the Eagle 3.1 flags) as false: written out false."""
    edit = _both(*(_pop(flag) for flag in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")))
    config, _ = convert(tmp_path, built(tmp_path, "vllm", edit), "vllm", "vllm")
    assert {flag: config[flag] for flag in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")} == {
        "norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False}


def test_vllm_reads_a_nested_norm_before_fc_first(tmp_path: Path):
    """vLLM reads eagle_config.norm_before_fc before the top-level key: nested true with the top-level key absent
    is a drafter with input_norm; nested false beside a top-level true is one without."""
    spec = DrafterSpec(norm_before_fc=True)
    config, _ = convert(tmp_path / "a", built(tmp_path / "a", "vllm", _both(_pop("norm_before_fc"), nested(
        "eagle_config", norm_before_fc=True)), spec), "vllm", "vllm")
    assert (config["norm_before_fc"], config["eagle_config"]["norm_before_fc"]) == (True, True)
    config, _ = convert(tmp_path / "b", built(tmp_path / "b", "vllm", _both(put(norm_before_fc=True), nested(
        "eagle_config", norm_before_fc=False))), "vllm", "vllm")
    assert config["norm_before_fc"] is False and "norm_before_fc" not in config["eagle_config"]


@pytest.mark.parametrize("ids, said", [
    ([4, 3, 1], []),  # SGLang's spelling of the same layers, in another order: nothing to say
    ([-5], ["eagle_config ids [-5] ignored: vLLM reads the top-level list [2, 4, 5]; SGLang would have read the nested "
            "list as boundaries None (the output spells it right)"]),
], ids=["the same layers", "no layers"])
def test_vllm_nested_ids_are_noted_only_when_sglang_would_read_other_layers(tmp_path: Path, ids: list[int],
                                                                           said: list[str]):
    config, noted = convert(tmp_path, built(tmp_path, "vllm", nested(
        "eagle_config", eagle_aux_hidden_state_layer_ids=ids)), "vllm", "vllm")
    assert noted == said
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]


def test_vllm_a_declared_state_count_is_checked_against_fc(tmp_path: Path):
    assert refusal(tmp_path, built(tmp_path, "vllm", put(num_aux_hidden_states=4)), "vllm", "vllm") == (
        "error: num_aux_hidden_states is 4 but fc.weight fuses 3 states [E-CAPTURE-COUNT] — hint: fix "
        "num_aux_hidden_states in config.json")


def test_vllm_top_level_ids_alone_are_checked_against_fc(tmp_path: Path):
    edit = _both(put(eagle_aux_hidden_state_layer_ids=[1, 3, 5, 6]), _pop("eagle_config",
                                                                          "eagle_aux_hidden_state_layer_ids"))
    assert refusal(tmp_path, built(tmp_path, "vllm", edit), "vllm", "vllm") == (
        "error: fc.weight fuses 3 captured states but the config lists 4 capture ids [1, 3, 5, 6] [E-CAPTURE-COUNT] — "
        "hint: the capture id list and the fc width must agree")


def test_vllm_reads_the_mask_token_where_vllm_looks_first(tmp_path: Path):
    """pard_token before ptd_token_id (vLLM's _init_parallel_drafting_params order)."""
    config, _ = convert(tmp_path, built(tmp_path, "vllm", put(ptd_token_id=5), DrafterSpec(peagle_mask_token_id=3)),
                        "vllm", "speculators", "--verifier", "org/t")
    assert config["mask_token_id"] == 3


def test_vllm_an_absent_draft_vocab_size_is_the_full_vocab(tmp_path: Path):
    spec = DrafterSpec(draft_vocab_size=None)
    config, _ = convert(tmp_path, built(tmp_path, "vllm", _pop("draft_vocab_size"), spec), "vllm", "vllm")
    assert config["draft_vocab_size"] == 96


def test_vllm_a_config_without_architectures_names_no_class(tmp_path: Path):
    assert refusal(tmp_path, built(tmp_path, "vllm", _pop("architectures")), "vllm", "vllm") == (
        "error: architectures [] name no vLLM Eagle3 drafter class [E-CONFIG-ARCH] — hint: vLLM-native drafters use "
        "Eagle3DeepseekV2ForCausalLM, Eagle3Qwen3ForCausalLM, LlamaForCausalLMEagle3")


def test_vllm_a_declared_count_of_three_is_read_not_carried(tmp_path: Path):
    """num_aux_hidden_states is a key the reader models: 3 (the default) is not written back."""
    config, _ = convert(tmp_path, built(tmp_path, "vllm", put(num_aux_hidden_states=3)), "vllm", "vllm")
    assert "num_aux_hidden_states" not in config


# ------------------------------------------------------------------ eagle.py


def test_eagle_reads_back_the_boundaries_and_target_its_sidecar_recorded(tmp_path: Path):
    """EAGLE's config holds no ids: the boundaries checked against the target's default on writing, and the
    target, ride in eagle3-convert.json. Read back, they give the ids and the depth (no --target needed again)."""
    spec = DrafterSpec()
    target = write_target(tmp_path / "target", spec)
    convert(tmp_path / "first", build_drafter(tmp_path / "src", "vllm", spec), "vllm", "eagle", "--target", target)
    eagle_dir = tmp_path / "first" / "out"
    assert json.loads((eagle_dir / "eagle3-convert.json").read_text())["capture_boundaries"] == [2, 4, 5]
    config, _ = convert(tmp_path / "to-vllm", eagle_dir, "eagle", "vllm")
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    config, said = convert(tmp_path / "again", eagle_dir, "eagle", "eagle")  # the recorded target's depth: 8
    assert "eagle_aux_hidden_state_layer_ids" not in config
    assert said == ["written as model.safetensors (EAGLE's loader falls back to it when pytorch_model.bin is absent)"]


def test_eagle_without_its_sidecar_names_no_ids(tmp_path: Path):
    spec = DrafterSpec()
    target = write_target(tmp_path / "target", spec)
    convert(tmp_path / "first", build_drafter(tmp_path / "src", "vllm", spec), "vllm", "eagle", "--target", target)
    (tmp_path / "first" / "out" / "eagle3-convert.json").unlink()
    config, _ = convert(tmp_path / "to-vllm", tmp_path / "first" / "out", "eagle", "vllm")
    assert "eagle_aux_hidden_state_layer_ids" not in config


@pytest.mark.parametrize("rope, written", [
    ({"rope_type": "default"}, None),  # plain RoPE, spelt as EConfig reads it: null
    ({"rope_type": "LINEAR", "factor": 2}, {"type": "linear", "factor": 2.0}),
], ids=["default", "LINEAR, an integer factor"])
def test_eagle_writes_rope_scaling_as_econfig_reads_it(tmp_path: Path, rope: dict, written: dict | None):
    spec = DrafterSpec()
    config, _ = convert(tmp_path, built(tmp_path, "vllm", put(rope_scaling=rope)), "vllm", "eagle", "--target",
                        str(write_target(tmp_path / "target", spec)))
    assert config["rope_scaling"] == written


def test_eagle_writes_identity_vocab_buffers_for_a_full_vocab_drafter(tmp_path: Path):
    """EAGLE registers d2t and t2d whatever Vd is: a drafter over the whole vocab gets the identity map."""
    spec = DrafterSpec(draft_vocab_size=None)
    convert(tmp_path, build_drafter(tmp_path / "src", "vllm", spec), "vllm", "eagle", "--target",
            str(write_target(tmp_path / "target", spec)))
    written = tensor_hashes(tmp_path / "out")
    builder = stored_tensors("eagle", spec)
    assert (written["d2t"], written["t2d"]) == (builder["d2t"].sha256, builder["t2d"].sha256)


def test_eagle_refuses_a_tensor_under_model(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=None)
    src = built(tmp_path, "eagle", put(architectures=["LlamaForCausalLM"]), spec)
    tensors = stored_tensors("eagle", spec)
    tensors["model.embed_tokens.weight"] = tensors["norm.weight"]
    write_safetensors(src / "model.safetensors", tensors)
    assert refusal(tmp_path, src, "eagle", "vllm") == (
        "error: tensor 'model.embed_tokens.weight': original EAGLE loads midlayer.* only and would leave this layer "
        "randomly initialised [E-KEY-UNKNOWN] — hint: read it with the layout that wrote it (--from sglang or --from "
        "vllm)")


# ------------------------------------------------------------------ modelopt.py, reading


def _ids_to_top_level(c: dict) -> None:
    c["eagle_aux_hidden_state_layer_ids"] = c["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")


@pytest.mark.parametrize("convention, boundaries", [("modelopt", [2, 4, 5]), ("boundary", [1, 3, 4])])
def test_modelopt_top_level_ids_alone_are_settled_by_capture_layers(tmp_path: Path, convention: str,
                                                                    boundaries: list[int]):
    config, said = convert(tmp_path, built(tmp_path, "modelopt", _ids_to_top_level), "modelopt", "vllm",
                           "--capture-layers", "1,3,4", "--convention", convention)
    assert config["eagle_aux_hidden_state_layer_ids"] == boundaries
    assert said == [f"capture layers {boundaries} taken from --capture-layers ({convention} ids [1, 3, 4]): config.json "
                    "names none"]


def test_modelopt_a_top_level_copy_of_other_layers_is_a_conflict(tmp_path: Path):
    line = refusal(tmp_path, built(tmp_path, "modelopt", put(eagle_aux_hidden_state_layer_ids=[1, 3, 4])), "modelopt",
                   "vllm")
    assert line == (
        "error: the top-level eagle_aux_hidden_state_layer_ids [1, 3, 4] (vLLM reads them as boundaries [1, 3, 4]) and "
        "eagle_config.eagle_aux_hidden_state_layer_ids (read by ModelOpt as boundaries [2, 4, 5]) name different "
        "layers [E-CAPTURE-CONFLICT] — hint: say which the drafter was trained on: add `--capture-layers 2,4,5 "
        "--convention boundary` (the ModelOpt reading) or add `--capture-layers 1,3,4 --convention boundary` (the vLLM "
        "reading); a file written for vLLM (boundaries in both places) reads right with --from vllm")


def test_modelopt_a_top_level_copy_of_the_same_layers_is_read_in_silence(tmp_path: Path):
    config, said = convert(tmp_path, built(tmp_path, "modelopt", put(eagle_aux_hidden_state_layer_ids=[5, 4, 2])),
                           "modelopt", "vllm")
    assert (config["eagle_aux_hidden_state_layer_ids"], said) == ([2, 4, 5], [])


def test_modelopt_reads_norm_before_fc_nested_first_then_at_the_top_level(tmp_path: Path):
    spec = DrafterSpec(norm_before_fc=True)
    config, _ = convert(tmp_path / "a", built(tmp_path / "a", "modelopt", _both(_pop(
        "eagle_config", "norm_before_fc"), put(norm_before_fc=True)), spec), "modelopt", "modelopt")
    assert config["eagle_config"]["norm_before_fc"] is True  # vLLM's top-level spelling, read
    config, _ = convert(tmp_path / "b", built(tmp_path / "b", "modelopt", _both(put(norm_before_fc=True), nested(
        "eagle_config", norm_before_fc=False))), "modelopt", "modelopt")
    assert "norm_before_fc" not in config["eagle_config"] and "norm_before_fc" not in config


def test_modelopt_keeps_nvidias_own_fields(tmp_path: Path):
    edit = nested("eagle_config", next_layer_regular=False, parallel_draft_heads_num_layers=2)
    config, _ = convert(tmp_path, built(tmp_path, "modelopt", edit), "modelopt", "modelopt")
    assert config["eagle_config"] == {
        "eagle_aux_hidden_state_layer_ids": [1, 3, 4], "next_layer_regular": False, "parallel_draft_heads_num_layers": 2,
        "parallel_draft_step": 1, "use_aux_hidden_state": True, "use_input_layernorm_in_first_layer": False,
        "use_last_layernorm": True, "use_mtp_layernorm": False}


def test_modelopt_writes_rope_theta_beside_rope_parameters(tmp_path: Path):
    rope = {"rope_type": "default", "rope_theta": 500000.0}
    config, _ = convert(tmp_path, built(tmp_path, "modelopt", _both(_pop("rope_theta"), put(rope_parameters=rope))),
                        "modelopt", "modelopt")
    assert (config["rope_theta"], config["rope_parameters"]) == (500000.0, rope)


def test_modelopt_notes_the_yarn_its_exporter_injects_into_rope_parameters(tmp_path: Path):
    rope = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048, "rope_theta": 10000.0}
    _, said = convert(tmp_path, built(tmp_path, "modelopt", _both(_pop("rope_theta"), put(rope_parameters=rope))),
                      "modelopt", "vllm")
    assert said == [
        "the config's rope scaling is YaRN (factor 32.0, original_max_position_embeddings 2048), which ModelOpt's "
        "exporter injects (eagle_export_rope_scaling) into drafters trained without rope scaling: unless the training "
        "set YaRN itself, it did not use it; the engines apply it as written"]


@pytest.mark.parametrize("field", ["use_mtp_layernorm", "use_last_layernorm", "parallel_draft_step"])
def test_modelopt_an_absent_nvidia_field_is_its_default(tmp_path: Path, field: str):
    config, said = convert(tmp_path, built(tmp_path, "modelopt", _pop("eagle_config", field)), "modelopt", "modelopt")
    assert config["eagle_config"][field] == {"use_mtp_layernorm": False, "use_last_layernorm": True,
                                             "parallel_draft_step": 1}[field]
    assert said == []


def test_modelopt_an_absent_first_layer_flag_is_modelopts_default_true(tmp_path: Path):
    src = built(tmp_path, "modelopt", _pop("eagle_config", "use_input_layernorm_in_first_layer"))
    config, _ = convert(tmp_path / "a", src, "modelopt", "modelopt")
    assert config["eagle_config"]["use_input_layernorm_in_first_layer"] is True
    _, said = convert(tmp_path / "b", src, "modelopt", "vllm")
    assert said == [
        "WARNING: ModelOpt trained this drafter with hidden_norm(input_layernorm(h)) in its first layer; the vllm "
        "layout's engines compute hidden_norm(h), the same approximation they apply to the ModelOpt export itself (kept "
        "in eagle3-convert.json and restored by --to modelopt)"]


def test_eagle_refuses_a_one_layer_drafter_of_another_family(tmp_path: Path):
    src = built(tmp_path, "eagle", put(architectures=["LlamaForCausalLM"], model_type="qwen3"),
                DrafterSpec(capture_boundaries=None))
    assert refusal(tmp_path, src, "eagle", "vllm") == (
        "error: num_hidden_layers 1 / model_type 'qwen3': original EAGLE-3 builds exactly one Llama decoder layer "
        "[E-LAYERS-UNSUPPORTED] — hint: read it with the layout that wrote it (--from sglang or --from vllm)")


@pytest.mark.parametrize("rope, said", [
    ({"rope_type": "default", "factor": 2.0}, "default RoPE with factor"),
    ({"rope_type": "linear"}, "linear RoPE with factor None"),
    ({"rope_type": "linear", "factor": 2.0, "mrope_section": [1, 2], "beta_fast": 32.0},
     "linear RoPE with beta_fast, mrope_section"),
], ids=["a factor beside plain RoPE", "scaling without a factor", "two keys it has no place for"])
def test_eagle_refuses_rope_settings_econfig_cannot_hold(tmp_path: Path, rope: dict, said: str):
    src = built(tmp_path, "vllm", put(rope_scaling=rope))
    assert refusal(tmp_path, src, "vllm", "eagle", "--target", str(write_target(tmp_path / "target"))) == (
        f"error: {said}: original EAGLE-3 takes no rope settings but a type and a factor > 1 (EConfig) and would build "
        "other maths [E-ROPE-UNSUPPORTED] — hint: serve it with `--to sglang` or `--to vllm`")


def test_eagle_names_every_other_layouts_key_it_ignores(tmp_path: Path):
    src = built(tmp_path, "eagle", put(architectures=["LlamaForCausalLM"], norm_before_residual=True,
                                       num_aux_hidden_states=3), DrafterSpec(capture_boundaries=None))
    _, said = convert(tmp_path, src, "eagle", "vllm")
    assert said[-1] == "ignored norm_before_residual, num_aux_hidden_states: original EAGLE's code reads none of them"


@pytest.mark.parametrize("spec, with_target", [
    (MLA, False),  # an MLA drafter serves a DeepSeek/Kimi target: SGLang reads [2, 4, 5] there as boundaries [2, 4, 5]
    (DrafterSpec(capture_boundaries=(2, 4, 8), target_model_type="gpt_oss"), True),  # gpt-oss: a last id L is L
], ids=["MLA drafter", "gpt-oss target"])
def test_vllm_nested_ids_are_read_as_sglang_reads_them_on_the_target(tmp_path: Path, spec: DrafterSpec,
                                                                     with_target: bool):
    """The builder writes the boundaries in both places; on these targets SGLang reads the nested list as the same
    layers, so there is nothing to note."""
    args = ("--target", str(write_target(tmp_path / "target", spec))) if with_target else ()
    config, said = convert(tmp_path, build_drafter(tmp_path / "src", "vllm", spec), "vllm", "vllm", *args)
    assert said == []
    assert config["eagle_aux_hidden_state_layer_ids"] == list(spec.capture_boundaries)


def test_eagle_a_pickle_without_architectures_is_written_with_the_published_class(tmp_path: Path):
    """A SafeAILab checkpoint whose config names no class (detected by its pickle of midlayer.* tensors): re-saved
    as the eagle layout, it gets the class the published drafters name; carrying 'none' over made SGLang and vLLM
    refuse the output (E-ENGINE-REFUSES: model architectures [] are not supported)."""
    src = built(tmp_path, "eagle", _pop("architectures"), DrafterSpec(pickled=True))
    config, _ = convert(tmp_path, src, "eagle", "eagle", "--target", str(write_target(tmp_path / "target")))
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]


def test_vllm_keeps_only_its_own_extra_keys_in_the_sidecar(tmp_path: Path):
    """eagle3-convert.json records what the vllm layout alone holds (another spelling of its class), and nothing
    for a file that holds nothing of its own."""
    convert(tmp_path / "plain", build_drafter(tmp_path / "plain" / "src", "vllm"), "vllm", "vllm")
    assert json.loads((tmp_path / "plain" / "out" / "eagle3-convert.json").read_text())["layout_extra"] == {}
    convert(tmp_path / "own", built(tmp_path / "own", "vllm", put(architectures=["LlamaForCausalLM"])), "vllm", "vllm")
    assert json.loads((tmp_path / "own" / "out" / "eagle3-convert.json").read_text())["layout_extra"] == {
        "vllm": {"architectures": ["LlamaForCausalLM"]}}


def test_a_vllm_file_saved_as_a_pickle_is_taken_for_eagles_and_reads_with_from_vllm(tmp_path: Path):
    """vLLM's detection leaves pickles to the eagle layout (only SafeAILab's code saves pytorch_model.bin): such a
    file is detected as EAGLE's alone (not ambiguous), whose reader refuses its layers.* names with the way out."""
    src = build_drafter(tmp_path / "src", "vllm")
    (src / "model.safetensors").unlink()
    _write_pickle(src / "pytorch_model.bin", stored_tensors("vllm", DrafterSpec()))
    assert json.loads(run_cli("inspect", "--json", src).stdout)["layout"] == "eagle"
    result = run_cli("--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr).endswith("[E-KEY-UNKNOWN] — hint: read it with the layout that wrote it (--from "
                                             "sglang or --from vllm)")
    config, _ = convert(tmp_path, src, "vllm", "vllm")
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]


def test_eagle_takes_a_full_partial_rotary_factor(tmp_path: Path):
    """partial_rotary_factor 1 is the full head_dim EAGLE's code rotates: converted, and kept."""
    config, _ = convert(tmp_path, built(tmp_path, "vllm", put(partial_rotary_factor=1.0)), "vllm", "eagle", "--target",
                        str(write_target(tmp_path / "target")))
    assert config["partial_rotary_factor"] == 1.0


@pytest.mark.parametrize("dest", ["eagle", "modelopt"])
def test_rope_theta_is_recorded_as_derived_only_where_the_writer_added_it(tmp_path: Path, dest: str):
    """EAGLE and ModelOpt read rope_theta at the top level: written from rope_parameters where the source had none
    there, and named in eagle3-convert.json's derived_config_keys (dropped when read back); a source's own
    rope_theta is no derived key."""
    target = ("--target", str(write_target(tmp_path / "target")))
    convert(tmp_path / "own", build_drafter(tmp_path / "own" / "src", "vllm"), "vllm", dest, *target)
    assert "derived_config_keys" not in json.loads((tmp_path / "own" / "out" / "eagle3-convert.json").read_text())
    edit = _both(_pop("rope_theta"), put(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}))
    config, _ = convert(tmp_path / "derived", built(tmp_path / "derived", "vllm", edit), "vllm", dest, *target)
    assert config["rope_theta"] == 500000.0
    assert json.loads((tmp_path / "derived" / "out" / "eagle3-convert.json").read_text())["derived_config_keys"] == [
        "rope_theta"]


@pytest.mark.parametrize("arch, vllm_reason", [
    ("LlamaForCausalLM", "LlamaForCausalLM with draft_vocab_size and layers.* tensors (a community draft: vLLM builds "
                         "Eagle3LlamaForCausalLM from it)"),
    ("LlamaForCausalLMEAGLE3", "architecture LlamaForCausalLMEAGLE3 (LlamaForCausalLMEagle3 in another case) with "
                               "layers.* tensors"),
    ("EAGLE3LlamaForCausalLM", "architecture EAGLE3LlamaForCausalLM (TensorRT-LLM's name), flat config"),
], ids=["a community draft", "a class in another case", "TensorRT-LLM's class name"])
def test_vllm_weak_readings_beside_another_weak_one_are_ambiguous(tmp_path: Path, arch: str, vllm_reason: str):
    """These vLLM readings are guesses: beside the speculators layout's own guess (its objects without
    speculators_model_type), neither wins and the user is asked."""
    src = built(tmp_path, "vllm", _both(_pop("norm_before_residual"), put(
        architectures=[arch], transformer_layer_config={"model_type": "llama"})))
    result = run_cli("inspect", src)
    assert result.exit_code == 1
    assert last_line(result.stderr) == (
        f"error: {src}: the layout is ambiguous (speculators: config.json has speculators_config/transformer_layer_config;"
        f" vllm: {vllm_reason}) [E-LAYOUT-AMBIGUOUS] — hint: say which layout wrote it with --from (speculators or "
        "vllm); fix the findings below so the file says one thing")


def test_eagle_refuses_a_tensor_of_no_drafter_naming_its_layout(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=None)
    src = built(tmp_path, "eagle", put(architectures=["LlamaForCausalLM"]), spec)
    tensors = stored_tensors("eagle", spec)
    tensors["foo.weight"] = tensors["norm.weight"]
    write_safetensors(src / "model.safetensors", tensors)
    assert refusal(tmp_path, src, "eagle", "vllm") == (
        "error: tensor 'foo.weight' is not part of an EAGLE-3 drafter in the eagle layout [E-KEY-UNKNOWN] — hint: no "
        "engine loads it (SGLang skips it without a word, vLLM's loader fails on it); rename it to the layout's key or "
        "remove it (`eagle3-convert inspect SRC` lists the expected names)")


def test_eagle_refuses_recorded_boundaries_that_are_no_list_naming_the_sidecar(tmp_path: Path):
    convert(tmp_path / "first", build_drafter(tmp_path / "src", "vllm"), "vllm", "eagle", "--target",
            str(write_target(tmp_path / "target")))
    convert(tmp_path / "read-back", tmp_path / "first" / "out", "eagle", "vllm")
    read_back = json.loads((tmp_path / "read-back" / "out" / "eagle3-convert.json").read_text())
    assert read_back["layout_extra"] == {}  # the published class: nothing of the eagle layout's own to keep
    sidecar = tmp_path / "first" / "out" / "eagle3-convert.json"
    facts = json.loads(sidecar.read_text())
    facts["capture_boundaries"] = "x"
    sidecar.write_text(json.dumps(facts))
    assert refusal(tmp_path, tmp_path / "first" / "out", "eagle", "vllm") == (
        "error: eagle3-convert.json capture_boundaries is 'x' [E-CAPTURE-FIELD] — hint: it must be a list of integers")


# ------------------------------------------------------------------ modelopt.py, writing


def test_modelopt_refuses_four_states_without_capture_ids_naming_itself(tmp_path: Path):
    src = built(tmp_path, "vllm", _no_ids, DrafterSpec(num_aux=4, capture_boundaries=(1, 3, 5, 6)))
    assert refusal(tmp_path, src, "vllm", "modelopt") == (
        "error: the drafter fuses 4 captured states but names no capture layers; the modelopt layout's engine would "
        "capture its 3 default layers [E-CAPTURE-COUNT] — hint: add the capture ids the drafter was trained with to a "
        "copy of the source config.json")


@pytest.mark.parametrize("to", ["vllm", "speculators", "modelopt", "sglang"])
def test_a_negative_speculators_boundary_is_refused_where_it_is_read(tmp_path: Path, to: str):
    """Boundary -1 is no layer in the speculators convention (validate says E-CAPTURE-RANGE). The speculators reader
    took it as it stood, where vLLM's refuses it: `--to vllm` and `--to speculators` wrote it out, and the registry
    recorded it (found by issue 26's modelopt mutation pass). Every destination now refuses it at the reader."""
    src = built(tmp_path, "speculators", lambda c: c.__setitem__("eagle_aux_hidden_state_layer_ids", [-1, 2, 4]))
    assert refusal(tmp_path, src, "speculators", to) == (
        "error: eagle_aux_hidden_state_layer_ids [-1, 2, 4]: an id below 0 names no layer in the speculators "
        "convention [E-CAPTURE-RANGE] — hint: speculators ids are boundaries >= 0 (0: the embedding output): write "
        "the ids the drafter was trained on into a copy of config.json")


def test_modelopt_shields_a_file_sglang_misreads_on_the_target_named_by_the_flag(tmp_path: Path):
    """ModelOpt ids [0, 2, 4] (boundaries 1, 3, 5): SGLang on a DeepSeek target reads a list not starting at 1 as
    boundaries as written. Only --target says the target is DeepSeek's, and the shield is judged on it."""
    spec = DrafterSpec(capture_boundaries=(1, 3, 5), target_model_type="deepseek_v3")
    config, said = convert(tmp_path, build_drafter(tmp_path / "src", "vllm", spec), "vllm", "modelopt", "--target",
                           str(write_target(tmp_path / "target", spec)))
    assert (config["architectures"], config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]) == (
        ["Eagle3LlamaForCausalLM"], [0, 2, 4])
    assert said[-1] == ("architectures set to ['Eagle3LlamaForCausalLM'], a name vLLM resolves and SGLang refuses: "
                        "SGLang would load this file and serve it wrong (captures layers [0, 2, 4], trained on [1, 3, 5])")


def test_modelopt_names_itself_when_an_engine_it_is_for_would_serve_it_wrong(tmp_path: Path):
    """vLLM 0.18.0 reads no norm_before_fc: the ModelOpt file of such a drafter is refused, the layout named."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(norm_before_fc=True))
    assert refusal(tmp_path, src, "vllm", "modelopt", "--engine", "vllm==0.18.0") == (
        "error: the modelopt layout is for vLLM (V1 runner), vLLM (V2 runner), TensorRT-LLM (from source), and vLLM "
        "(V1 runner) would serve this file wrong: norm_before_fc True in training, False in vLLM (V1 runner) "
        "[E-ENGINE-WRONG] — hint: upgrade to vLLM ≥ 0.22.0, which serves this file as trained; or convert to a layout "
        "whose engine serves the drafter as trained (`--to vllm` serves every variant)")


# ------------------------------------------------------------------ modelopt.py, reading: keys and Vd


def test_modelopt_reads_through_the_key_table(tmp_path: Path):
    """A wrong type is refused as the key table words it (not as a missing eagle_config); a stray key is noted,
    beside every later note."""
    src = built(tmp_path / "a", "modelopt", put(eagle_config="x"))
    assert refusal(tmp_path / "a", src, "modelopt", "vllm") == (
        "error: eagle_config is 'x' (JSON string); the modelopt reader expects an object and would coerce it "
        "[E-CONFIG-FIELD] — hint: write eagle_config as an object in config.json")
    _, said = convert(tmp_path / "b", built(tmp_path / "b", "modelopt", put(foo_bar=1)), "modelopt", "vllm")
    assert said == ["foo_bar is no key the modelopt layout's producers write; carried verbatim, and no engine reads it"]


def test_modelopt_without_architectures_is_read(tmp_path: Path):
    config, said = convert(tmp_path, built(tmp_path, "modelopt", _pop("architectures")), "modelopt", "vllm")
    assert (config["architectures"], said) == (["LlamaForCausalLMEagle3"], [])


_FULL = DrafterSpec(draft_vocab_size=None)


def _without(tensors: dict[str, RawTensor], *names: str) -> dict[str, RawTensor]:
    return {n: t for n, t in tensors.items() if n not in names}


def _base_head(drop: str) -> dict[str, RawTensor]:
    """The builder's Vd = 32 export with the base model's [96, H] head copied in, and without `drop`."""
    tensors = stored_tensors("modelopt", DrafterSpec())
    tensors["lm_head.weight"] = stored_tensors("modelopt", _FULL)["lm_head.weight"]
    return _without(tensors, drop)


_BASE_HEAD = ("error: lm_head.weight is [96, H]: the base model's head, which ModelOpt copies in when the draft has "
              "none, but the drafter's vocab is Vd = 32: its own [32, H] head is missing [E-MODELOPT-BASE-HEAD] — "
              "hint: re-export the drafter together with its trained draft head")
_NO_HEAD = ("error: required tensor 'lm_head.weight' is missing [E-KEY-MISSING] — hint: the checkpoint is incomplete; "
            "engines would load it silently with random weights")


@pytest.mark.parametrize("spec, tensors, edit, line", [
    (DrafterSpec(), _base_head("d2t"), put(), _BASE_HEAD),  # Vd from draft_vocab_size
    (DrafterSpec(), _base_head("draft_vocab_size"), _pop("draft_vocab_size"), _BASE_HEAD),  # Vd from d2t
    (_FULL, _without(stored_tensors("modelopt", _FULL), "lm_head.weight"), _pop("draft_vocab_size"), _NO_HEAD),
    (_FULL, megatron(_without(stored_tensors("modelopt", _FULL), "lm_head.weight")),
     _both(_pop("draft_vocab_size"), FIRST_LAYER_NORM_ON), _NO_HEAD),
], ids=["declared Vd, base head", "Vd of d2t, base head", "no head", "Megatron, no head"])
def test_modelopt_vd_is_taken_from_the_config_then_d2t_then_the_head(tmp_path: Path, spec: DrafterSpec,
                                                                     tensors: dict, edit, line: str):
    assert refusal(tmp_path, modelopt_file(tmp_path, spec, tensors, edit), "modelopt", "vllm") == line


@pytest.mark.parametrize("tensors, edit, said", [
    (stored_tensors("modelopt", _FULL), _pop("draft_vocab_size"),
     ["lm_head.weight covers the full vocab and there is no d2t: ModelOpt copies the base model's head in when the "
      "draft trains none; engines use it as the draft head either way"]),
    (megatron(stored_tensors("modelopt", _FULL)), FIRST_LAYER_NORM_ON,
     ["ModelOpt Megatron export (midlayer.*): its first-layer norm is the engines' hidden_norm",
      "lm_head.weight covers the full vocab and there is no d2t: ModelOpt copies the base model's head in when the "
      "draft trains none; engines use it as the draft head either way"]),
], ids=["no draft_vocab_size, no d2t", "Megatron, Vd = V, no d2t"])
def test_modelopt_a_full_vocab_export_without_d2t_is_read(tmp_path: Path, tensors: dict, edit, said: list[str]):
    config, noted = convert(tmp_path, modelopt_file(tmp_path, _FULL, tensors, edit), "modelopt", "vllm")
    assert (config["draft_vocab_size"], noted) == (96, said)


def test_modelopt_a_draft_head_with_t2d_and_no_d2t_is_read_in_silence(tmp_path: Path):
    """The head is the draft's own [32, H]: no note about a full-vocab head, although there is no d2t."""
    tensors = _without(stored_tensors("modelopt", DrafterSpec()), "d2t")
    tensors["t2d"] = stored_tensors("sglang", DrafterSpec())["t2d"]
    config, said = convert(tmp_path, modelopt_file(tmp_path, DrafterSpec(), tensors), "modelopt", "vllm")
    assert (config["draft_vocab_size"], said) == (32, [])


def test_modelopt_merges_the_twin_norm_of_later_layers_and_refuses_an_orphan(tmp_path: Path):
    """Layers >= 1 of a ModelOpt file carry their pre-attention norm as hidden_norm (TensorRT-LLM) and
    input_layernorm (vLLM): read once, with a note; hidden_norm alone is SGLang's naming."""
    spec = DrafterSpec(num_layers=2)
    tensors = stored_tensors("modelopt", spec)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    _, said = convert(tmp_path / "a", modelopt_file(tmp_path / "a", spec, tensors), "modelopt", "vllm")
    assert said == ["merged layers.1.hidden_norm.weight into input_layernorm (identical weights): vLLM's layers >= 1 "
                    "normalise with input_layernorm and never read hidden_norm"]
    src = modelopt_file(tmp_path / "b", spec, _without(tensors, "layers.1.input_layernorm.weight"))
    assert refusal(tmp_path / "b", src, "modelopt", "vllm") == (
        "error: layers.1.hidden_norm.weight has no input_layernorm beside it: vLLM normalises layers >= 1 with "
        "input_layernorm and would leave it random [E-KEY-MISSING] — hint: the names look like sglang's: convert with "
        "--from sglang")


def test_modelopt_checks_the_fc_width_against_the_nested_ids(tmp_path: Path):
    src = built(tmp_path, "modelopt", nested("eagle_config", eagle_aux_hidden_state_layer_ids=[1, 3, 4, 6]))
    assert refusal(tmp_path, src, "modelopt", "vllm") == (
        "error: fc.weight fuses 3 captured states but the config lists 4 capture ids [1, 3, 4, 6] [E-CAPTURE-COUNT] — "
        "hint: the capture id list and the fc width must agree")


def test_modelopt_refuses_a_tensor_of_no_drafter_naming_itself(tmp_path: Path):
    tensors = stored_tensors("modelopt", DrafterSpec())
    tensors["foo.weight"] = tensors["norm.weight"]
    assert refusal(tmp_path, modelopt_file(tmp_path, DrafterSpec(), tensors), "modelopt", "vllm") == (
        "error: tensor 'foo.weight' is not part of an EAGLE-3 drafter in the modelopt layout [E-KEY-UNKNOWN] — hint: "
        "no engine loads it (SGLang skips it without a word, vLLM's loader fails on it); rename it to the layout's key "
        "or remove it (`eagle3-convert inspect SRC` lists the expected names)")


def test_modelopt_records_nvidias_fields_in_the_sidecar_and_nothing_without_them(tmp_path: Path):
    convert(tmp_path / "own", built(tmp_path / "own", "modelopt", put()), "modelopt", "vllm")
    assert json.loads((tmp_path / "own" / "out" / "eagle3-convert.json").read_text())["layout_extra"] == {
        "modelopt": {"eagle_config": NVIDIA_FIELDS}}
    plain = put(eagle_config={"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 4],
                              "use_input_layernorm_in_first_layer": False})
    convert(tmp_path / "plain", built(tmp_path / "plain", "modelopt", plain), "modelopt", "vllm")
    assert json.loads((tmp_path / "plain" / "out" / "eagle3-convert.json").read_text())["layout_extra"] == {}


NVIDIA_FIELDS = {"use_last_layernorm": True, "use_mtp_layernorm": False, "next_layer_regular": True,
                 "parallel_draft_step": 1, "parallel_draft_heads_num_layers": 1}
