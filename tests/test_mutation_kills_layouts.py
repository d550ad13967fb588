"""The layouts' key tables and their E-KEY-* refusals, word for word (issue 26: mutation survivors of
eagle3_convert/converters/layout.py). Builder-written checkpoints (tests/builders.py), the real CLI."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from builders import DrafterSpec, RawTensor, build_drafter, stored_tensors, write_target
from conftest import run_cli, tensor_hashes
from test_caught_bugs import write_checkpoint
from test_validate import edit_config

# layout, the later-layer norm it reads, the one it leaves unread, its engine, the layout whose names these are
LATER_NORM_READERS = [("sglang", "hidden_norm", "input_layernorm", "SGLang", "vllm"),
                      ("vllm", "input_layernorm", "hidden_norm", "vLLM", "sglang")]


@pytest.mark.parametrize("layout, used, unused, engine, other", LATER_NORM_READERS,
                         ids=[row[0] for row in LATER_NORM_READERS])
def test_a_later_layer_with_only_the_norm_its_engine_never_reads_is_refused(tmp_path: Path, layout, used, unused,
                                                                            engine, other):
    """A 3-layer file whose layers 1 and 2 carry only the norm this layout's engine leaves unread: the engine would
    run them with a random norm. The refusal names the first such tensor and the layout the names belong to."""
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors(layout, spec)
    for i in (1, 2):
        del tensors[f"layers.{i}.{used}.weight"]
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)
    result = run_cli("--from", layout, "--to", "speculators", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: layers.1.{unused}.weight has no {used} beside it: {engine} normalises layers >= 1 with {used} and "
        f"would leave it random [E-KEY-MISSING] — hint: the names look like {other}'s: convert with --from {other}"
    ), result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("layout, used, unused, engine, other", LATER_NORM_READERS,
                         ids=[row[0] for row in LATER_NORM_READERS])
def test_one_later_layer_missing_its_read_norm_is_enough_to_refuse(tmp_path: Path, layout, used, unused, engine,
                                                                   other):
    """Layer 1 complete, layer 2 with only the unread norm: refused, naming layer 2."""
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors(layout, spec)
    del tensors[f"layers.2.{used}.weight"]
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)
    result = run_cli("--from", layout, "--to", "speculators", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert f"error: layers.2.{unused}.weight has no {used} beside it" in result.stderr.splitlines()[-1]


# Each layout's key table, both ways: the tensors convert writes are, name for name and byte for byte, those the
# independent builder (tests/builders.py) stores for that layout; and reading any layout's file gives back the
# builder's speculators (canonical) tensors. One layer (SGLang and EAGLE say midlayer.*) and three (every layer
# under layers.*, the later layers' norm under both engines' names).
LAYOUTS = ("speculators", "sglang", "vllm", "eagle", "modelopt")
ROUND_TRIPS = [(layers, layout) for layers in (1, 3) for layout in LAYOUTS if not (layout == "eagle" and layers > 1)]


@pytest.mark.parametrize("layers, layout", ROUND_TRIPS, ids=[f"{n}-layer {lay}" for n, lay in ROUND_TRIPS])
def test_convert_stores_each_tensor_under_the_builders_name(tmp_path: Path, layers: int, layout: str):
    spec = DrafterSpec(num_layers=layers)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--to", layout, "--target", target, "--verifier", "org/target", "--no-record", src,
                     tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors(layout, spec))


@pytest.mark.parametrize("layers, layout", ROUND_TRIPS, ids=[f"{n}-layer {lay}" for n, lay in ROUND_TRIPS])
def test_reading_each_layout_gives_the_canonical_tensors(tmp_path: Path, layers: int, layout: str):
    spec = DrafterSpec(num_layers=layers)
    src = build_drafter(tmp_path / "src", layout, spec)
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--from", layout, "--to", "speculators", "--target", target, "--verifier", "org/target",
                     "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors("speculators", spec))


def raw_hashes(tensors: dict) -> dict[str, str]:
    return {name: hashlib.sha256(t.data).hexdigest() for name, t in tensors.items()}


@pytest.mark.parametrize("layout, used, unused, engine, other", LATER_NORM_READERS,
                         ids=[row[0] for row in LATER_NORM_READERS])
def test_identical_later_norm_twins_are_merged_with_a_note(tmp_path: Path, layout, used, unused, engine, other):
    src = build_drafter(tmp_path / "src", layout, DrafterSpec(num_layers=3))
    result = run_cli("--from", layout, "--to", other, "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert (f"note: merged layers.1.{unused}.weight, layers.2.{unused}.weight into {used} (identical weights): "
            f"{engine}'s layers >= 1 normalise with {used} and never read {unused}") in result.stdout.splitlines()


def zeroed(t: RawTensor) -> RawTensor:
    return RawTensor(t.dtype, t.shape, bytes(len(t.data)))


def as_f16(t: RawTensor) -> RawTensor:
    return RawTensor("F16", t.shape, t.data)  # the same bytes, read as another dtype


@pytest.mark.parametrize("layout, used, unused, engine, other", LATER_NORM_READERS,
                         ids=[row[0] for row in LATER_NORM_READERS])
@pytest.mark.parametrize("layer, change", [(2, zeroed), (1, as_f16)], ids=["other bytes", "other dtype"])
def test_later_norm_twins_holding_different_weights_are_refused(tmp_path: Path, layout, used, unused, engine, other,
                                                                 layer: int, change):
    """Converting would keep one of the two; which one the drafter was trained with, only its owner knows."""
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors(layout, spec)
    tensors[f"layers.{layer}.{unused}.weight"] = change(tensors[f"layers.{layer}.{unused}.weight"])
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)
    result = run_cli("--from", layout, "--to", other, "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: tensors 'layers.{layer}.{used}.weight' and 'layers.{layer}.{unused}.weight' hold different weights "
        f"for one pre-attention norm: {engine} reads the first, the {other} layout's engine the second, and "
        f"converting would keep one of them [E-KEY-DUPLICATE] — hint: put the weight the drafter was trained to "
        "apply under both names in a copy of the source, then convert"), result.stderr
    assert not (tmp_path / "out").exists()


def renamed(tensors: dict[str, RawTensor], rename) -> dict[str, RawTensor]:
    return {rename(name): t for name, t in tensors.items()}


LEGACY_FC_NORMS = {"fc_norm.0.": "aux_norm_low.", "fc_norm.1.": "aux_norm_mid.", "fc_norm.2.": "aux_norm_high."}
# SGLang's spellings it reads and never writes: (spec, how the builder's SGLang names are respelled)
SGLANG_ALIASES = {
    "legacy fc_norm names": (DrafterSpec(fc_norm=True), lambda n: next(
        (n.replace(a, b, 1) for a, b in LEGACY_FC_NORMS.items() if n.startswith(a)), n)),
    "model.layers. prefix": (DrafterSpec(num_layers=3), lambda n: "model." + n if n.startswith("layers.") else n),
    "midlayer. as layer 0 of three": (DrafterSpec(num_layers=3), lambda n: n.replace("layers.0.", "midlayer.", 1)),
}


@pytest.mark.parametrize("alias", sorted(SGLANG_ALIASES))
def test_sglang_names_it_only_reads_convert_to_the_canonical_tensors(tmp_path: Path, alias: str):
    spec, rename = SGLANG_ALIASES[alias]
    tensors = renamed(stored_tensors("sglang", spec), rename)
    assert set(tensors) != set(stored_tensors("sglang", spec))
    src = write_checkpoint(tmp_path / "src", "sglang", spec, tensors)
    result = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors("vllm", spec))


def test_one_weight_under_two_prefixes_is_refused(tmp_path: Path):
    spec = DrafterSpec()
    tensors = stored_tensors("sglang", spec)
    tensors["layers.0.mlp.up_proj.weight"] = tensors["midlayer.mlp.up_proj.weight"]
    src = write_checkpoint(tmp_path / "src", "sglang", spec, tensors)
    result = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: tensors 'midlayer.mlp.up_proj.weight' and another name both map to 'layers.0.mlp.up_proj.weight' "
        "[E-KEY-DUPLICATE] — hint: the checkpoint stores one weight twice under two prefixes; keep one")


def test_a_tensor_no_drafter_has_is_refused(tmp_path: Path):
    spec = DrafterSpec()
    tensors = stored_tensors("vllm", spec)
    tensors["extra.weight"] = tensors["norm.weight"]
    src = write_checkpoint(tmp_path / "src", "vllm", spec, tensors)
    result = run_cli("--from", "vllm", "--to", "sglang", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: tensor 'extra.weight' is not part of an EAGLE-3 drafter in the vllm layout [E-KEY-UNKNOWN] — hint: "
        "no engine loads it (SGLang skips it without a word, vLLM's loader fails on it); rename it to the layout's "
        "key or remove it (`eagle3-convert inspect SRC` lists the expected names)")


def test_a_layout_refusal_has_its_message_hint_and_code(tmp_path: Path):
    """Layouts state their limits with refuse_unless: EAGLE builds one layer."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(num_layers=3))
    result = run_cli("--to", "eagle", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: the drafter has 3 decoder layers; original EAGLE-3 builds one [E-LAYERS-UNSUPPORTED] — hint: serve a "
        "multi-layer drafter with vLLM or SGLang (`--to vllm`)"), result.stderr


@pytest.mark.parametrize("layers", [1, 3])
def test_modelopt_reads_midlayer_only_as_the_one_layer_of_a_one_layer_file(tmp_path: Path, layers: int):
    """The Megatron exporter's midlayer.* is layer 0 of a one-layer drafter; in a deeper file it is no layer."""
    spec = DrafterSpec(num_layers=layers, modelopt_hf_trained=True)
    tensors = renamed(stored_tensors("modelopt", spec), lambda n: n.replace("layers.0.", "midlayer.", 1))
    src = write_checkpoint(tmp_path / "src", "modelopt", spec, tensors)
    result = run_cli("--from", "modelopt", "--to", "vllm", "--no-record", src, tmp_path / "out")
    if layers == 1:
        assert result.exit_code == 0, result.stderr
        assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors("vllm", spec))
    else:
        assert result.exit_code == 1
        assert "error: tensor 'midlayer.hidden_norm.weight' is not part of an EAGLE-3 drafter in the modelopt layout " \
               "[E-KEY-UNKNOWN]" in result.stderr.splitlines()[-1]


# ------------------------------------------------------------------ the markers that tell the flat layouts apart

def layout_line(path: Path) -> str:
    result = run_cli("inspect", path)
    return next(line.strip() for line in result.stdout.splitlines() if line.strip().startswith("layout "))


@pytest.mark.parametrize("with_eagle_config, reason", [
    (True, "sglang (LlamaForCausalLMEagle3 config with eagle_config and no top-level ids)"),
    (False, "sglang (LlamaForCausalLMEagle3 flat config without layout markers (vLLM reads it the same way))")])
def test_an_sglang_file_without_ids_is_told_by_its_eagle_config(tmp_path: Path, with_eagle_config: bool, reason):
    path = build_drafter(tmp_path / "src", "sglang", DrafterSpec(num_layers=3, capture_boundaries=None))
    if not with_eagle_config:
        edit_config(lambda c: c.pop("eagle_config"))(path)
    assert layout_line(path) == f"layout       {reason}"


def test_a_flat_config_without_architectures_is_no_known_layout(tmp_path: Path):
    path = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    edit_config(lambda c: c.pop("architectures"))(path)
    result = run_cli("inspect", path)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(
        f"error: {path}: not a known EAGLE-3 drafter layout (config.json has neither speculators_model_type nor an "
        "Eagle3 architecture) [E-LAYOUT-UNKNOWN]"), result.stderr


def quantization_config(path: Path) -> None:
    edit_config(lambda c: c.__setitem__("quantization_config", {"quant_method": "modelopt"}))(path)


def hf_quant_config(path: Path) -> None:
    (path / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "FP8"}}')


@pytest.mark.parametrize("quantize, line", [
    (quantization_config, "error: the quantization config names no quant_algo: vLLM and SGLang refuse it ('Missing "
                          "quant_algo') [E-QUANT-UNSUPPORTED] — hint: add the quant_algo ModelOpt exported with (FP8, "
                          "NVFP4, ...)"),
    (hf_quant_config, "error: the config says the drafter is quantized (FP8) but no weight carries a scale: vLLM and "
                      "SGLang would build quantized layers and find nothing to load into their scales "
                      "[E-QUANT-UNSUPPORTED] — hint: if the weights are plain, remove quantization_config (and "
                      "hf_quant_config.json); else copy the scale tensors from the ModelOpt export"),
])
def test_a_quantization_config_the_weights_do_not_bear_out_is_refused(tmp_path: Path, quantize, line: str):
    src = build_drafter(tmp_path / "src", "modelopt", DrafterSpec())
    quantize(src)
    result = run_cli("--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == line, result.stderr
