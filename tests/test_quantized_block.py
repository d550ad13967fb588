"""Quantized DFlash drafters (issue 35 item 1): each engine's loading judged (engines/quantized_block.py).

The files follow ModelOpt's examples/speculative_decoding/scripts/quantize_drafter.py (Model-Optimizer PR 2027, as
its review thread shows it): config.json copied from the drafter with a flat `quantization_config` (quant_method
modelopt / modelopt_fp4, the hf_quant_config keys, `ignore` = `exclude_modules`) and hf_quant_config.json beside it;
the weights and scales with the names, dtypes and shapes of the real ModelOpt 0.47.0 export in
tests/data/modelopt-quantized/ (tests/quant_builders.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import write_safetensors
from conftest import run_cli, tensor_hashes
from quant_builders import _fp8_weight, _nvfp4_weight, f32
from test_drafters_2026_block import BLOCK_DIFFUSION, body_tensors, shrink


def quantized_dflash(dest: Path, algo: str, plain: tuple[str, ...] = (), exclude: list[str] | None = None) -> Path:
    config = shrink(json.loads((BLOCK_DIFFUSION / "specforge-qwen3-8b-dflash.json").read_text()))
    out = {}
    for name, t in body_tensors(config, "dflash").items():
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is None or "norm" in module or module in plain:
            out[name] = t
        elif algo == "FP8":
            out[name], out[f"{module}.weight_scale"] = _fp8_weight(0, name, t.shape)
            out[f"{module}.input_scale"] = f32(0.02)
        else:
            out.update({f"{module}.{s}": q for s, q in _nvfp4_weight(0, name, t.shape).items()})
    exclude = list(plain) if exclude is None else exclude
    body = {"quant_algo": algo, "exclude_modules": exclude, **({"group_size": 16} if "FP4" in algo else {})}
    config["quantization_config"] = {"quant_method": "modelopt_fp4" if "FP4" in algo else "modelopt", **body,
                                     "ignore": exclude}
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    (dest / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": body}))
    write_safetensors(dest / "model.safetensors", out)
    return dest


def verdicts(path: Path) -> dict[str, tuple[str, str]]:
    report = json.loads(run_cli("validate", "--json", path).stdout)
    return {f["engine"]: (f["code"], f["message"]) for f in report["findings"] if f["engine"]}


def test_an_fp8_fc_is_served_unscaled_by_sglang_and_loaded_by_vllm(tmp_path: Path):
    """Before: OK with no finding. SGLang's DFlash fc is a plain nn.Linear (dflash.py:776): its scale is dropped."""
    said = verdicts(quantized_dflash(tmp_path / "q", "FP8"))
    assert said["sglang"][0] == "E-ENGINE-WRONG" and "fc.weight_scale" in said["sglang"][1], said
    assert "vllm" not in said, said


def test_a_packed_nvfp4_fc_is_refused_by_sglang(tmp_path: Path):
    said = verdicts(quantized_dflash(tmp_path / "q", "NVFP4"))
    assert said["sglang"][0] == "E-ENGINE-REFUSES" and "shape mismatch" in said["sglang"][1], said


def test_fc_left_plain_and_listed_is_served_as_trained(tmp_path: Path):
    report = json.loads(run_cli("validate", "--json", quantized_dflash(tmp_path / "q", "FP8", ("fc",))).stdout)
    assert report["ok"] and [f["code"] for f in report["findings"]] == ["I-KIND-BLOCK-DIFFUSION"], report


@pytest.mark.parametrize("exclude, engine", [([], "vllm"), (["fc", "*qkv_proj*"], "sglang")])
def test_an_ignore_list_that_disagrees_with_the_weights_is_named_per_engine(tmp_path: Path, exclude, engine):
    """fc plain but not listed: vLLM builds model.fc quantized and finds no scale; `*qkv_proj*` listed while the
    q/k/v weights carry scales: SGLang builds every qkv_proj unquantized (`*q_proj*` alone would not match `qkv_proj`) and drops their scales."""
    said = verdicts(quantized_dflash(tmp_path / "q", "FP8", ("fc",), exclude))
    assert engine in said and said[engine][0] in ("E-ENGINE-REFUSES", "E-ENGINE-WRONG"), said


def test_a_quantized_dflash_converts_to_the_flat_layout_with_its_scales_byte_for_byte(tmp_path: Path):
    """Both engines read the draft's own quantization_config from the flat config.json: written with `ignore`
    naming the plain fc as each engine does, every weight and scale copied byte for byte."""
    src = quantized_dflash(tmp_path / "q", "FP8", ("fc",), exclude=["fc"])
    dst = tmp_path / "out"
    done = run_cli("convert", src, dst, "--to", "dflash", "--no-record")
    assert done.exit_code == 0, done.stderr
    qc = json.loads((dst / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "modelopt" and qc["quant_algo"] == "FP8" and "fc" in qc["ignore"], qc
    hashes = tensor_hashes(src)
    assert "fc.weight" in hashes and "layers.0.self_attn.q_proj.weight_scale" in hashes
    assert tensor_hashes(dst) == hashes
    report = json.loads(run_cli("validate", "--json", dst).stdout)
    assert report["ok"] and [f["code"] for f in report["findings"]] == ["I-KIND-BLOCK-DIFFUSION"], report


def test_the_speculators_layout_refuses_a_quantized_dflash_pointing_at_the_flat_one(tmp_path: Path):
    done = run_cli("convert", quantized_dflash(tmp_path / "q", "FP8"), tmp_path / "out", "--to", "speculators",
                   "--verifier", "Qwen/Qwen3-8B", "--no-record")
    assert done.exit_code != 0 and "[E-QUANT-UNSUPPORTED]" in done.stderr and "--to dflash" in done.stderr
    assert "--to vllm" not in done.stderr and "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_scales_on_modules_whose_loading_was_not_read_give_no_verdict():
    """A quantized module outside the ones read (DFlash2's grouped convolution: vLLM builds it with the quant config,
    qwen3_dflash2.py:199, SGLang without): no verdict, never a pass."""
    from eagle3_convert.engines.common import UNKNOWN
    from eagle3_convert.engines.quantized_block import judge

    config = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": []}}
    names = ["fc.weight", "fc.weight_scale", "layers.0.attention_conv.proj.weight",
             "layers.0.attention_conv.proj.weight_scale"]
    for runner in ("vllm-v2", "sglang"):
        verdict, why = judge(runner, "dflash2", config, names)
        assert verdict == UNKNOWN and "attention_conv" in why, (runner, why)
    assert judge("sglang", "dflash", config, ["fc.weight"]) is None  # no scale: the plain reading decides


def test_a_draft_sglang_may_take_for_nemotron_35_gets_no_verdict_from_it(tmp_path: Path):
    """SGLang builds a quantizable fc for Nemotron 3.5's W4A16_NVFP4 drafts (is_nemotron_35_draft_config): that path
    was not read, so a packed fc there is no refusal of ours."""
    src = quantized_dflash(tmp_path / "q", "W4A16_NVFP4")
    config = json.loads((src / "config.json").read_text())
    config["has_embed_tokens"], config["has_lm_head"] = True, False
    (src / "config.json").write_text(json.dumps(config))
    said = verdicts(src)
    assert said["sglang"][0] == "W-ENGINE-UNKNOWN" and "Nemotron 3.5" in said["sglang"][1], said
