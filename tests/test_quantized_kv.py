"""KV-cache scales of a quantized drafter (issue 35 item 1): ModelOpt writes them beside k_proj / v_proj
(`self_attn.k_proj.k_scale`, `self_attn.v_proj.v_scale`: postprocess_state_dict in
modelopt/torch/export/quant_utils.py) with `kv_cache_quant_algo` in the config. They are companions (renamed with
their module, copied byte for byte); vLLM loads them, SGLang skips them (engines/quantized.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import DrafterSpec, stored_name
from conftest import run_cli, tensor_hashes
from quant_builders import build_quantized, f32

PLAIN = ("lm_head", "fc", "embed_tokens")


def with_kv_scales(dest: Path, kv_algo: str | None = "FP8") -> Path:
    spec = DrafterSpec(embed_tokens=True)
    extra = {stored_name("sglang", spec, f"layers.0.self_attn.{p}_proj.weight")[:-len("weight")] + f"{p}_scale":
             f32(s) for p, s in (("k", 1.0), ("v", 1.25))}
    return build_quantized(dest, "sglang", spec, plain=PLAIN, extra_tensors=extra,
                           config_extra={"kv_cache_quant_algo": kv_algo} if kv_algo else None)


def test_kv_scales_are_companions_renamed_with_their_module_byte_for_byte(tmp_path: Path):
    """Before: E-KEY-UNKNOWN ("vLLM's loader fails on it"), which vLLM does not (it renames them to
    self_attn.attn.k_scale)."""
    src = with_kv_scales(tmp_path / "src")
    done = run_cli("convert", src, tmp_path / "out", "--to", "vllm", "--no-record")
    assert done.exit_code == 0, done.stderr
    before, after = tensor_hashes(src), tensor_hashes(tmp_path / "out")
    for p in "kv":
        assert after[f"layers.0.self_attn.{p}_proj.{p}_scale"] == before[f"midlayer.self_attn.{p}_proj.{p}_scale"]
    qc = json.loads((tmp_path / "out" / "config.json").read_text())["quantization_config"]
    assert qc["kv_cache_quant_algo"] == "FP8", qc
    report = json.loads(run_cli("validate", "--json", tmp_path / "out").stdout)
    assert report["ok"] and report["findings"] == [], report


@pytest.mark.parametrize("kv_algo, caveat", [("FP8", True), (None, False)])
def test_sglang_skipping_the_kv_scales_is_a_caveat_when_the_cache_is_quantized(tmp_path: Path, kv_algo, caveat):
    report = json.loads(run_cli("validate", "--json", "--engine", "sglang", with_kv_scales(tmp_path / "s", kv_algo))
                        .stdout)
    said = [(f["code"], f["engine"]) for f in report["findings"]]
    assert said == ([("W-ENGINE-CAVEAT", "sglang")] if caveat else []), said
    if caveat:
        assert "k_scale" in report["findings"][0]["message"]


def test_tensorrt_llm_gives_no_verdict_on_a_quantized_drafter_and_says_what_was_read(tmp_path: Path):
    """TensorRT-LLM's quant-config reading was read (hf_quant_config.json first, the target's KV-cache algo), its
    module-name matching was not: no verdict, with that reason."""
    report = json.loads(run_cli("validate", "--json", "--engine", "trtllm", with_kv_scales(tmp_path / "s")).stdout)
    unknown = [f for f in report["findings"] if f["code"] == "W-ENGINE-UNKNOWN" and f["engine"] == "trtllm"]
    assert len(unknown) == 1 and "hf_quant_config.json" in unknown[0]["message"], report["findings"]
    assert "KV-cache algo from the target" in unknown[0]["message"]


def test_a_kv_scale_not_beside_its_projection_stays_an_unknown_key(tmp_path: Path):
    """Only ModelOpt's spelling (`k_proj.k_scale`) is a companion; `self_attn.k_scale` is no weight's scale."""
    spec = DrafterSpec(embed_tokens=True)
    extra = {stored_name("sglang", spec, "layers.0.self_attn.o_proj.weight")[:-len("o_proj.weight")] + "k_scale":
             f32(1.0)}
    src = build_quantized(tmp_path / "s", "sglang", spec, plain=PLAIN, extra_tensors=extra)
    codes = [f["code"] for f in json.loads(run_cli("validate", "--json", src).stdout)["findings"]]
    assert "E-KEY-UNKNOWN" in codes, codes
