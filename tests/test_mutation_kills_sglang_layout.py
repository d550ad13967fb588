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
from test_mutation_kills_converters import built, convert_to, last_line, nested, notes, put, written_config

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
        "error: the sglang layout is for SGLang, and SGLang would refuse it: SGLang refuses it: EAGLE3 currently only "
        "supports 1 layer (num_hidden_layers != 1) [E-ENGINE-REFUSES] — hint: convert to a layout whose engine serves "
        "the drafter as trained (`--to vllm` serves every variant)")


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
