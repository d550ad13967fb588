"""The SGLang layout, the layout machinery and the block-diffusion layouts, word for word (issue 26: the mutation
survivors of eagle3_convert/converters/sglang.py, layout.py and dflash.py; tools/MUTATION-RESULTS.md, session 7).
Builder-written checkpoints (tests/builders.py) with one change each, through the real CLI: its one-line refusal,
its notes, the config and tensors it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import DrafterSpec, RawTensor, build_drafter, config_for, stored_tensors, write_safetensors, write_target
from conftest import run_cli, tensor_hashes
from test_mutation_kills_converters import _both, built, convert_to, last_line, nested, put, written_config

IDS = "eagle_aux_hidden_state_layer_ids"


def refused(tmp_path: Path, *args: Any) -> str:
    """The one-line refusal of a conversion, which writes nothing."""
    result = run_cli("--no-record", *args, tmp_path / "out")
    assert result.exit_code == 1, result.stdout
    assert not (tmp_path / "out").exists()
    return last_line(result.stderr)


# ------------------------------------------------------------------ sglang.py, writing

def test_sglang_refuses_a_drafter_whose_mlp_has_biases(tmp_path: Path):
    """mlp_bias alone (no attention bias) is refused as attention biases are: SGLang's Eagle3 loader drops both."""
    spec = DrafterSpec(extra={"mlp_bias": True})
    tensors = stored_tensors("vllm", spec)
    widths = {"gate": spec.intermediate_size, "up": spec.intermediate_size, "down": spec.hidden_size}
    tensors.update({f"layers.0.mlp.{p}_proj.bias": RawTensor("BF16", (n,), bytes(2 * n)) for p, n in widths.items()})
    src = build_drafter(tmp_path / "src", "vllm", spec)
    write_safetensors(src / "model.safetensors", tensors)
    assert refused(tmp_path, "--from", "vllm", "--to", "sglang", src) == (
        "error: the drafter has bias tensors; SGLang's Eagle3 loader drops biases silently [E-BIAS-UNSUPPORTED] — "
        "hint: serve it with vLLM: `--to speculators` or `--to vllm`")


def test_sglang_names_itself_when_a_drafter_fuses_states_it_would_not_capture(tmp_path: Path):
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(num_aux=4, capture_boundaries=(1, 3, 5, 6)))
    config = json.loads((src / "config.json").read_text())
    config.pop(IDS)
    config["eagle_config"].pop(IDS)
    (src / "config.json").write_text(json.dumps(config))
    assert refused(tmp_path, "--from", "vllm", "--to", "sglang", src) == (
        "error: the drafter fuses 4 captured states but names no capture layers; the sglang layout's engine would "
        "capture its 3 default layers [E-CAPTURE-COUNT] — hint: add the capture ids the drafter was trained with to a "
        "copy of the source config.json")


@pytest.mark.parametrize("boundaries, target, line", [
    ((2, 4, 8), "llama",
     "error: sglang cannot capture boundary 8 (the output of block 7) on an 8-layer target: the capture would silently "
     "go missing [E-CAPTURE-UNREACHABLE] — hint: retrain the drafter on capturable layers, or serve it with vLLM "
     "(speculators/vllm layouts)"),
    ((1, 3, 5), "deepseek_v3",
     "error: no id list makes sglang (deepseek target family) capture boundaries [1, 3, 5] "
     "[E-CAPTURE-UNEXPRESSIBLE] — hint: this engine's id convention cannot express these capture layers; serve with "
     "vLLM instead")], ids=["the last block's output", "first boundary 1 on DeepSeek"])
def test_sglang_refuses_capture_layers_its_ids_cannot_spell(tmp_path: Path, boundaries, target, line):
    """SGLang reads only the nested ids: a file without them would capture its defaults in silence."""
    spec = DrafterSpec(capture_boundaries=boundaries, target_model_type=target)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    assert refused(tmp_path, "--to", "sglang", "--target", write_target(tmp_path / "target", spec), src) == line


def sidecar(path: Path) -> dict[str, Any]:
    return json.loads((path / "eagle3-convert.json").read_text())


def test_sglang_derives_no_rope_theta_the_source_names(tmp_path: Path):
    """rope_theta is derived (and dropped when the file is read back) only when the source spells the rope in
    rope_parameters alone: a source's own rope_theta is the drafter's, and survives the next conversion."""
    spec = DrafterSpec()
    convert_to(tmp_path, build_drafter(tmp_path / "src", "vllm", spec), "vllm", "sglang")
    assert "derived_config_keys" not in sidecar(tmp_path / "out")
    result = run_cli("--to", "vllm", "--no-record", tmp_path / "out", tmp_path / "again")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == written_config("llama", spec, "sglang",
                                                                                         "vllm")


_YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}
_YARN = {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0, "original_max_position_embeddings": 512}
# the source's rope keys (rope_theta dropped) -> the keys SGLang's writer derives for older releases
ROPE_SPELLINGS = {
    "rope_parameters, default": ({"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
                                 ["rope_theta"]),
    "rope_parameters without a rope_type": ({"rope_parameters": {"rope_theta": 500000.0}}, ["rope_theta"]),
    "rope_parameters, linear": ({"rope_parameters": {"rope_type": "linear", "rope_theta": 500000.0, "factor": 2.0}},
                                ["rope_theta", "rope_scaling"]),
    "rope_parameters and rope_scaling, linear": (
        {"rope_parameters": {"rope_type": "linear", "rope_theta": 500000.0, "factor": 2.0},
         "rope_scaling": {"rope_type": "linear", "factor": 2.0}}, ["rope_theta"]),
    "rope_parameters, YaRN": ({"rope_parameters": _YARN}, [
        "rope_theta", "rope_scaling", *(f"rope_scaling.{k}" for k in _YARN_DEFAULTS),
        *(f"rope_parameters.{k}" for k in _YARN_DEFAULTS)]),
}


@pytest.mark.parametrize("case", sorted(ROPE_SPELLINGS))
def test_sglang_rope_keys_written_for_older_releases_are_dropped_when_read_back(tmp_path: Path, case: str):
    """SpecForge's two spellings: rope_theta beside rope_parameters, and rope_scaling when the rope is scaled.
    The keys the writer adds are recorded as derived (the sidecar), so that converting on gives the source's
    config back, not the source's plus what SGLang needed (YaRN's defaults written out included)."""
    rope, derived = ROPE_SPELLINGS[case]
    spec = DrafterSpec()

    def respell(config: dict[str, Any]) -> None:
        del config["rope_theta"]
        config.update(rope)

    convert_to(tmp_path, built(tmp_path, "vllm", respell, spec), "vllm", "sglang")
    assert sidecar(tmp_path / "out")["derived_config_keys"] == derived
    result = run_cli("--to", "vllm", "--no-record", tmp_path / "out", tmp_path / "again")
    assert result.exit_code == 0, result.stderr
    want = written_config("llama", spec, "vllm", "vllm")
    respell(want)
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == want


def test_sglang_names_its_layout_when_the_release_asked_for_would_refuse_the_file(tmp_path: Path):
    """SGLang before 0.5.12 builds one decoder layer: `--engine sglang==0.5.11` makes a 2-layer file unwritable."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(num_layers=2))
    assert refused(tmp_path, "--to", "sglang", "--engine", "sglang==0.5.11", src) == (
        "error: the sglang layout is for SGLang, and SGLang would refuse it: EAGLE3 currently only "
        "supports 1 layer (num_hidden_layers != 1) [E-ENGINE-REFUSES] — hint: upgrade to SGLang ≥ 0.5.12, which serves "
        "this file as trained; or convert to a layout whose engine serves the drafter as trained (`--to vllm` serves "
        "every variant)")
    upgraded = run_cli("--no-record", "--to", "sglang", "--engine", "sglang==0.5.12", src, tmp_path / "out")
    assert upgraded.exit_code == 0, upgraded.stderr  # the hint's release writes it


# ------------------------------------------------------------------ sglang.py, reading

def test_sglang_names_config_json_when_a_decoder_field_is_of_the_wrong_type(tmp_path: Path):
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm", built(tmp_path, "sglang", put(hidden_size="32"))) == (
        "error: config.json: hidden_size is '32'; expected a positive integer [E-CONFIG-FIELD] — hint: fix hidden_size "
        "in config.json")


def test_sglang_says_it_reads_a_model_type_of_no_drafter_family_as_the_class_its_architecture_builds(tmp_path: Path):
    config, said = convert_to(tmp_path, built(tmp_path, "sglang", put(model_type="mistral")), "sglang", "vllm")
    assert config["model_type"] == "llama"
    assert said[0] == ("model_type 'mistral' read as a llama drafter: the engines build their llama class from "
                       "architectures ['LlamaForCausalLMEagle3'], and the tensors agree; written as model_type 'llama'")


def test_sglang_reads_a_config_without_architectures_when_told_the_layout(tmp_path: Path):
    """--from sglang on a flat config that names no class: SGLang's own class for the family is written."""
    config, _ = convert_to(tmp_path, built(tmp_path, "sglang", lambda c: c.pop("architectures")), "sglang", "sglang")
    assert config == written_config("llama", DrafterSpec(), "sglang", "sglang")


def test_sglang_keeps_the_deepseek_v2_spelling_of_an_mla_drafter(tmp_path: Path):
    spec = DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3")
    config, _ = convert_to(tmp_path, built(tmp_path, "sglang", put(model_type="deepseek_v2"), spec), "sglang", "sglang")
    assert config["model_type"] == "deepseek_v2"


def _qwen3_read_as_sglang(config: dict[str, Any]) -> None:
    """A vLLM Qwen3 drafter's file respelled as SGLang's: its class, SGLang's nested ids, no vLLM-only key."""
    config.update(architectures=["LlamaForCausalLMEagle3"])
    config.pop("norm_before_residual")
    config["eagle_config"][IDS] = [b - 1 for b in config[IDS]]


def test_sglang_hint_for_a_family_it_has_no_class_for_names_the_class_that_builds_it(tmp_path: Path):
    """Before: 'set architectures to ['?']', a hint naming no class (SGLang builds none for Qwen3)."""
    src = built(tmp_path, "vllm", _qwen3_read_as_sglang, DrafterSpec(family="qwen3"))
    assert refused(tmp_path, "--to", "vllm", src) == (
        "error: architectures ['LlamaForCausalLMEagle3'] make SGLang build its llama drafter class, but the config "
        "describes a qwen3 drafter [E-CONFIG-FAMILY] — hint: SGLang has no qwen3 drafter class; vLLM builds "
        "Eagle3Qwen3ForCausalLM: set architectures to ['Eagle3Qwen3ForCausalLM'] and convert with --from vllm")
    config = json.loads((src / "config.json").read_text())
    config["architectures"] = ["Eagle3Qwen3ForCausalLM"]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--from", "vllm", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr  # the hint works


def test_sglang_reads_norm_before_fc_where_it_reads_it_first_nested(tmp_path: Path):
    """llama_eagle3.py reads eagle_config.norm_before_fc first: a file that sets it only there applies it."""
    spec = DrafterSpec(norm_before_fc=True)

    def nest(config: dict[str, Any]) -> None:
        config["eagle_config"]["norm_before_fc"] = config.pop("norm_before_fc")

    config, _ = convert_to(tmp_path, built(tmp_path, "sglang", nest, spec), "sglang", "vllm")
    assert config == written_config("norm_before_fc", spec, "sglang", "vllm")


def test_sglang_refuses_a_norm_output_of_false_specforge_trained_without_a_final_norm(tmp_path: Path):
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm", built(tmp_path, "sglang", put(norm_output=False))) == (
        "error: config.json sets norm_output: false: SpecForge trains such a drafter with no final norm before lm_head "
        "(compute_logits, llama3_eagle.py); SGLang applies one, as vLLM, TensorRT-LLM and llama.cpp do, and would "
        "serve it wrong [E-ENGINE-WRONG] — hint: no layout serves this drafter as trained; if SpecForge did not train "
        "it, delete the key (absent, SGLang and SpecForge both apply the final norm)")


@pytest.mark.parametrize("spec, edit", [
    (DrafterSpec(norm_before_fc=True), put(norm_output=False)),  # a flag SpecForge's class never reads: for an engine
    (DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"), put(norm_output=False)),  # not SpecForge's
], ids=["written for an engine", "the MLA class"])
def test_sglang_reads_norm_output_false_from_files_specforges_llama_class_did_not_train(tmp_path: Path, spec, edit):
    config, _ = convert_to(tmp_path, built(tmp_path, "sglang", edit, spec), "sglang", "sglang")
    assert "norm_output" not in config  # false: the usual final norm, SGLang's default
    assert config == written_config("x", spec, "sglang", "sglang")


# ------------------------------------------------------------------ layout.py: the later-layer norm twins

_ONES = {"BF16": b"\x80\x3f", "F16": b"\x00\x3c", "F32": b"\x00\x00\x80\x3f"}  # 1.0, little-endian


def ones(dtype: str, n: int) -> RawTensor:
    return RawTensor(dtype, (n,), _ONES[dtype] * n)


@pytest.mark.parametrize("hidden, input_, untrained", [
    ("random", "BF16", "input_layernorm"), ("F32", "random", "hidden_norm"), ("random", "F16", "input_layernorm"),
    ("F32", "BF16", None)], ids=["input_layernorm ones", "hidden_norm ones (F32)", "F16 ones", "both ones"])
def test_differing_later_norm_twins_keep_the_one_training_applied(tmp_path: Path, hidden, input_, untrained):
    """The untrained twin is told apart only when exactly one of the two is all ones (in its own dtype): the other
    is kept under every name written, and said (issue 34: it was refused); else no choice is made."""
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors("sglang", spec)
    for norm, value in (("hidden_norm", hidden), ("input_layernorm", input_)):
        if value != "random":
            tensors[f"layers.1.{norm}.weight"] = ones(value, spec.hidden_size)
    src = built(tmp_path, "sglang", put(), spec)
    write_safetensors(src / "model.safetensors", tensors)
    if untrained is None:
        assert refused(tmp_path, "--from", "sglang", "--to", "vllm", src) == (
            "error: tensors 'layers.1.hidden_norm.weight' and 'layers.1.input_layernorm.weight' hold different weights "
            "for one pre-attention norm: SGLang reads the first, the vllm layout's engine the second, and converting "
            "would keep one of them [E-KEY-DUPLICATE] — hint: put the weight the drafter was trained to apply under "
            "both names in a copy of the source, then convert")
        return
    trained = "hidden_norm" if untrained == "input_layernorm" else "input_layernorm"
    result = run_cli("--no-record", "--from", "sglang", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert (f"note: kept layers.1.{trained}.weight, the trained pre-attention norm of its layer, and dropped "
            f"layers.1.{untrained}.weight: it holds RMSNorm's initial ones, a norm training never applied"
            ) in result.stdout.splitlines() + result.stderr.splitlines(), result.stdout + result.stderr
    out = tensor_hashes(tmp_path / "out")
    assert out["layers.1.hidden_norm.weight"] == out["layers.1.input_layernorm.weight"] == tensors[
        f"layers.1.{trained}.weight"].sha256


# ------------------------------------------------------------------ layout.py: the names SGLang only reads

def raw_hashes(tensors: dict[str, RawTensor]) -> dict[str, str]:
    return {name: t.sha256 for name, t in tensors.items()}


@pytest.mark.parametrize("prefix", ["additional_layers.", "model.additional_layers."])
def test_sglang_03d5a77s_additional_layers_are_layers_one_up(tmp_path: Path, prefix: str):
    """SGLang at 03d5a77 kept layer 0 as midlayer.* and layer i >= 1 as additional_layers.{i - 1}."""
    spec = DrafterSpec(num_layers=3)

    def old_name(name: str) -> str:
        if name.startswith("layers.0."):
            return name.replace("layers.0.", "midlayer.", 1)
        if name.startswith("layers."):
            index, rest = name.removeprefix("layers.").split(".", 1)
            return f"{prefix}{int(index) - 1}.{rest}"
        return name

    src = built(tmp_path, "sglang", put(), spec)
    write_safetensors(src / "model.safetensors", {old_name(n): t for n, t in stored_tensors("sglang", spec).items()})
    convert_to(tmp_path, src, "sglang", "vllm")
    assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors("vllm", spec))


# ------------------------------------------------------------------ layout.py: the drafter kinds a layout holds

def test_each_kind_refusal_names_where_the_drafter_can_go(tmp_path: Path):
    from test_drafters_2026_block import specforge_drafter

    peagle = build_drafter(tmp_path / "peagle", "speculators", DrafterSpec(peagle_mask_token_id=3))
    assert refused(tmp_path, "--to", "sglang", peagle) == (
        "error: the drafter is a peagle drafter (speculators_model_type 'peagle'), and the sglang layout holds eagle3 "
        "drafters only [E-KIND-UNSUPPORTED] — hint: convert it to the speculators layout (`--to speculators`, served "
        "by vLLM)")
    for kind, arch in (("dflash", "DFlashDraftModel"), ("dspark", "DSparkDraftModel")):
        src = specforge_drafter(tmp_path / kind, kind)
        assert refused(tmp_path, "--to", "sglang", src) == (
            f"error: the drafter is a {kind} drafter (architectures [{arch!r}]), and the sglang layout holds eagle3 "
            "drafters only: a block-diffusion drafter (plain decoder layers over its own target layers, a masked block "
            "drafted in one pass), which no EAGLE-3 class builds [E-KIND-UNSUPPORTED] — hint: convert it to the "
            "speculators or dflash layout (`--to speculators`, `--to dflash`: vLLM and SGLang serve them)")
    eagle3 = build_drafter(tmp_path / "eagle3", "sglang", DrafterSpec())
    assert refused(tmp_path, "--to", "dflash", eagle3) == (
        "error: the drafter is a eagle3 drafter (no kind named (EAGLE-3)), and the dflash layout holds dflash, "
        "dspark and dflash2 drafters only [E-KIND-UNSUPPORTED] — hint: convert it to an EAGLE-3 layout: its own, sglang (`--to "
        "sglang`), or `--to vllm` (vLLM serves every variant)")
    native = build_drafter(tmp_path / "native", "vllm", DrafterSpec())  # its own is vllm: named once
    assert refused(tmp_path, "--to", "dflash", native).endswith(
        "[E-KIND-UNSUPPORTED] — hint: convert it to the vllm layout (`--to vllm`): vLLM serves every variant")


# ------------------------------------------------------------------ sglang.py: which layers the ids name

def _ids_on_top(config: dict[str, Any]) -> None:
    config[IDS] = config["eagle_config"].pop(IDS)


@pytest.mark.parametrize("given, written", [("0,2,5", [0, 2, 5]), ("1,3,6", [1, 3, 6])],
                         ids=["the list as boundaries", "the list as block outputs"])
def test_sglang_top_level_ids_take_the_reading_capture_layers_names(tmp_path: Path, given: str, written: list[int]):
    """Top-level ids [0, 2, 5] only: boundaries [0, 2, 5] (vLLM's reading) or [1, 3, 6] (block outputs + 1):
    --capture-layers, naming either, settles which."""
    spec = DrafterSpec(capture_boundaries=(1, 3, 6))
    config, said = convert_to(tmp_path, built(tmp_path, "sglang", _ids_on_top, spec), "sglang", "speculators",
                              "--target", str(write_target(tmp_path / "target", spec)), "--verifier", spec.verifier,
                              "--capture-layers", given, "--convention", "boundary")
    assert config[IDS] == written
    assert said == [f"capture layers {written} taken from --capture-layers (boundary ids {written}): config.json "
                    "names none"]


def test_sglang_top_level_ids_are_ambiguous_when_capture_layers_names_neither_reading(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=(1, 3, 6))
    assert refused(tmp_path, "--from", "sglang", "--to", "speculators", "--capture-layers", "2,4,6", "--convention",
                   "boundary", built(tmp_path, "sglang", _ids_on_top, spec)) == (
        "error: capture ids [0, 2, 5] are only at the top level; SGLang ignores them there and captures its defaults, "
        "while vLLM reads the same list as boundaries [E-CAPTURE-AMBIGUOUS] — hint: say how the training counted "
        "them: add `--capture-layers 0,2,5 --convention sglang` (SGLang block outputs) or `--convention boundary` "
        "(vLLM boundaries)")


KIMI = DrafterSpec(target_layers=61, capture_boundaries=(3, 31, 59))


@pytest.mark.parametrize("ids, note", [
    ([2, 30, 58], "SGLang ids [2, 30, 58] read as boundaries [2, 30, 58], SGLang's reading for a deepseek-family "
                  "target, inferred from the drafter config's model_type 'kimi_k2' (without --target; on other targets "
                  "SGLang reads [3, 31, 59])"),
    ([1, 29, 57], None)], ids=["read raw on Kimi", "read +1 on every target"])
def test_sglang_says_when_a_target_it_inferred_changes_how_the_ids_read(tmp_path: Path, ids: list[int], note):
    """SpecForge's Kimi-K2.5 export: a Llama-style drafter with model_type kimi_k2. SGLang reads ids raw on a Kimi
    target unless the first is 1 (then +1, as everywhere): said only when the reading differs."""
    src = built(tmp_path, "sglang", _both(put(model_type="kimi_k2"), nested("eagle_config", **{IDS: ids})), KIMI)
    config, said = convert_to(tmp_path, src, "sglang", "speculators", "--verifier", "moonshotai/Kimi-K2.5")
    assert config[IDS] == [2, 30, 58]  # the same boundaries either way
    assert [n for n in said if n.startswith("SGLang ids")] == ([note] if note else [])


def test_sglang_records_the_target_a_deepseek_vocabulary_names(tmp_path: Path):
    """A DeepSeek-V3 vocabulary (129280 tokens) names the target family SGLang reads the ids for: the ids are read
    raw, said, and the target family is recorded beside the output (the writers spell the ids for it)."""
    spec = DrafterSpec(vocab_size=129280, target_layers=61, capture_boundaries=(3, 31, 59))
    src = built(tmp_path, "sglang", nested("eagle_config", **{IDS: [2, 30, 58]}), spec)
    config, said = convert_to(tmp_path, src, "sglang", "speculators", "--verifier", "deepseek-ai/DeepSeek-V3")
    assert config[IDS] == [2, 30, 58]
    assert "inferred from vocab_size 129280, the deepseek_v3 vocabulary (without --target" in " ".join(said)
    assert sidecar(tmp_path / "out")["target"]["model_type"] == "deepseek_v3"


# ------------------------------------------------------------------ layout.py: class names in another case

@pytest.mark.parametrize("arch, meant, spec", [
    ("Eagle3LLamaforCausalLM", "Eagle3LlamaForCausalLM", DrafterSpec()),  # AngelSlim's qwen3-4b-eagle3.json
    ("eagle3deepseekv3forcausallm", "Eagle3DeepseekV3ForCausalLM",
     DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"))])
def test_a_class_name_in_another_case_is_read_as_the_class_vllm_resolves(tmp_path: Path, arch: str, meant: str, spec):
    """Eagle3LlamaForCausalLM (vLLM's) and EAGLE3LlamaForCausalLM (TensorRT-LLM's) differ in case only: the name
    vLLM resolves is the one meant."""
    config, said = convert_to(tmp_path, built(tmp_path, "vllm", put(architectures=[arch]), spec), "vllm", "vllm")
    assert said[0] == (f"architectures [{arch!r}]: {arch} is {meant} in another case; engines match class names "
                       "exactly and refuse it: read as that class and written with the destination's own name")
    assert config["architectures"] == [{"llama": "LlamaForCausalLMEagle3",
                                        "deepseek_mla": "Eagle3DeepseekV2ForCausalLM"}[spec.family]]


@pytest.mark.parametrize("named", [["eagle3"], {"kind": "eagle3"}], ids=["a list", "an object"])
def test_validate_reports_a_speculators_model_type_that_is_no_string(tmp_path: Path, named):
    """Before: 'internal error: TypeError: unhashable type: 'list'' (exit 3): the speculators library's and vLLM's
    replays looked it up as a kind. Now it is no kind, as drafter_kind reads it; the key finding says what is wrong."""
    src = built(tmp_path, "speculators", put(speculators_model_type=named))
    result = run_cli("validate", "--json", src)
    assert result.exit_code == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert ("E-CONFIG-FIELD", "$.speculators_model_type") in {(f["code"], f["where"]) for f in findings}


# ------------------------------------------------------------------ layout.py: the markers that tell the flat layouts apart

def _only_top_level_ids(config: dict[str, Any]) -> None:
    config.pop("norm_before_residual")
    config["eagle_config"].pop(IDS)


def _sglang_ids_nested_vllm_ids_on_top(config: dict[str, Any]) -> None:
    """Both levels name the same layers, each in its reader's convention (SGLang's nested ids are boundaries - 1)."""
    config.pop("norm_before_residual")
    config["eagle_config"][IDS] = [b - 1 for b in config[IDS]]


DETECTED = {  # (builder layout, spec, change) -> inspect's layout line
    "midlayer.* tensors": ("sglang", DrafterSpec(), None,
                           "sglang (LlamaForCausalLMEagle3 config with midlayer.* tensors (SpecForge))"),
    "nested ids only": ("sglang", DrafterSpec(num_layers=3), None,
                        "sglang (LlamaForCausalLMEagle3 config with eagle_config and no top-level ids)"),
    "ids at both levels, no norm_before_residual": ("vllm", DrafterSpec(), _sglang_ids_nested_vllm_ids_on_top,
                                                   "sglang (LlamaForCausalLMEagle3 config with eagle_config and ids "
                                                   "nested and at the top level)"),
    "norm_before_residual": ("vllm", DrafterSpec(), None,
                             "vllm (top-level norm_before_residual (a vLLM key SGLang has not))"),
    "top-level ids only": ("vllm", DrafterSpec(), _only_top_level_ids,
                           "vllm (top-level eagle_aux_hidden_state_layer_ids only (vLLM reads its ids there; SGLang and "
                           "ModelOpt nest them))"),
    "pytorch_model.bin": ("eagle", DrafterSpec(pickled=True), None,
                          "eagle (pytorch_model.bin with midlayer.* tensors (SafeAILab EAGLE))"),
}


@pytest.mark.parametrize("case", sorted(DETECTED))
def test_each_flat_layout_is_told_by_its_markers(tmp_path: Path, case: str):
    layout, spec, change, line = DETECTED[case]
    src = build_drafter(tmp_path / "src", layout, spec)
    if change is not None:
        config = json.loads((src / "config.json").read_text())
        change(config)
        (src / "config.json").write_text(json.dumps(config))
    result = run_cli("inspect", src)
    assert result.exit_code == 0, result.stderr
    assert [ln.strip() for ln in result.stdout.splitlines() if ln.strip().startswith("layout ")] == [
        f"layout       {line}"]


def test_sglang_reads_an_mla_drafters_ids_for_a_deepseek_target_without_saying_it_inferred_one(tmp_path: Path):
    """An MLA drafter serves DeepSeek/Kimi targets only: ids [2, 4, 5] read raw there (not +1), and no target is
    'inferred' from its deepseek_v3 model_type, which names the drafter's own family."""
    spec = DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3")
    config, said = convert_to(tmp_path, built(tmp_path, "sglang", nested("eagle_config", **{IDS: [2, 4, 5]}), spec),
                              "sglang", "vllm")
    assert config[IDS] == [2, 4, 5]
    assert said == []


def test_sglang_reads_ids_up_to_the_depth_of_a_gpt_oss_target_as_boundaries(tmp_path: Path):
    """On gpt-oss, SGLang reads a list reaching the target's depth L as boundaries: [2, 4, 8] on 8 layers."""
    spec = DrafterSpec(target_model_type="gpt_oss", target_layers=8, capture_boundaries=(2, 4, 8))
    src = built(tmp_path, "sglang", nested("eagle_config", **{IDS: [2, 4, 8]}), spec)
    config, _ = convert_to(tmp_path, src, "sglang", "vllm", "--target", str(write_target(tmp_path / "target", spec)))
    assert config[IDS] == [2, 4, 8]


@pytest.mark.parametrize("ids, shown", [("135", "'135' (JSON string)"), ([1, "3", 4], "[1, '3', 4] (JSON array)")])
def test_sglang_nested_ids_of_the_wrong_type_are_refused_by_the_key_table(tmp_path: Path, ids, shown: str):
    src = built(tmp_path, "sglang", nested("eagle_config", **{IDS: ids}))
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm", src) == (
        f"error: eagle_config.eagle_aux_hidden_state_layer_ids is {shown}; the sglang reader expects a list of "
        "integers and would coerce it [E-CAPTURE-FIELD] — hint: write eagle_config.eagle_aux_hidden_state_layer_ids "
        "as a list of integers in config.json")


def test_sglang_a_top_level_copy_naming_other_layers_is_refused_until_capture_layers_says_which(tmp_path: Path):
    src = built(tmp_path, "sglang", put(**{IDS: [1, 3, 6]}))  # nested [1, 3, 4]: SGLang reads [2, 4, 5]
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm", src) == (
        "error: the top-level eagle_aux_hidden_state_layer_ids [1, 3, 6] (vLLM reads them as boundaries [1, 3, 6]) and "
        "eagle_config.eagle_aux_hidden_state_layer_ids (read by SGLang as boundaries [2, 4, 5]) name different layers "
        "[E-CAPTURE-CONFLICT] — hint: say which the drafter was trained on: add `--capture-layers 2,4,5 --convention "
        "boundary` (the SGLang reading) or add `--capture-layers 1,3,6 --convention boundary` (the vLLM reading); a "
        "file written for vLLM (boundaries in both places) reads right with --from vllm")
    config, _ = convert_to(tmp_path, src, "sglang", "vllm", "--capture-layers", "1,3,6", "--convention", "boundary")
    assert config[IDS] == [1, 3, 6]


def test_sglang_names_its_layout_for_a_tensor_no_drafter_has(tmp_path: Path):
    spec = DrafterSpec()
    tensors = stored_tensors("sglang", spec)
    tensors["extra.weight"] = tensors["norm.weight"]
    src = built(tmp_path, "sglang", put(), spec)
    write_safetensors(src / "model.safetensors", tensors)
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm", src).startswith(
        "error: tensor 'extra.weight' is not part of an EAGLE-3 drafter in the sglang layout [E-KEY-UNKNOWN]")


def test_sglang_refuses_a_declared_state_count_the_fc_does_not_fuse(tmp_path: Path):
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm",
                   built(tmp_path, "sglang", put(num_aux_hidden_states=4))) == (
        "error: num_aux_hidden_states is 4 but fc.weight fuses 3 states [E-CAPTURE-COUNT] — hint: fix "
        "num_aux_hidden_states in config.json")


def test_sglang_drops_a_false_nested_norm_before_fc(tmp_path: Path):
    """The flag is read (false) and written only where true: the nested false is not carried as a key of its own."""
    config, _ = convert_to(tmp_path, built(tmp_path, "sglang", nested("eagle_config", norm_before_fc=False)), "sglang",
                           "sglang")
    assert config == written_config("llama", DrafterSpec(), "sglang", "sglang")


def test_sglang_refuses_ids_that_name_more_states_than_the_fc_fuses(tmp_path: Path):
    assert refused(tmp_path, "--from", "sglang", "--to", "vllm",
                   built(tmp_path, "sglang", nested("eagle_config", **{IDS: [1, 2, 3, 4]}))) == (
        "error: fc.weight fuses 3 captured states but the config lists 4 capture ids [1, 2, 3, 4] [E-CAPTURE-COUNT] — "
        "hint: the capture id list and the fc width must agree")


def test_sglang_records_no_keys_of_its_own_for_a_plain_file(tmp_path: Path):
    """eagle_config {use_aux_hidden_state: true} is what the writer writes anyway: nothing to carry (the sidecar)."""
    convert_to(tmp_path, build_drafter(tmp_path / "src", "sglang", DrafterSpec()), "sglang", "vllm")
    assert sidecar(tmp_path / "out")["layout_extra"] == {}
