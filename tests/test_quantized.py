"""Quantized drafters (issue 35 item 1): ModelOpt FP8 / NVFP4 EAGLE-3 heads read, converted with their scales byte
for byte, written with an ignore list every engine matches, and judged per engine release.

`tests/data/modelopt-quantized/eagle3-fp8` was written by the real ModelOpt 0.47.0 export on CPU
(`generate.py` beside it); the other drafters by tests/quant_builders.py, which follows that export."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import DrafterSpec
from conftest import DATA, edit_config, nothing_written, run_cli, tensor_hashes
from quant_builders import build_quantized, f32

REAL_FP8 = DATA / "modelopt-quantized" / "eagle3-fp8"
REAL_NVFP4 = DATA / "modelopt-quantized" / "eagle3-nvfp4"
# The real export is a 4-layer base's head with ids [0, 1]: say how they count, as its exporter does
REAL_CAPTURE = ("--capture-layers", "0,1", "--convention", "modelopt")


def _scales(path: Path) -> dict[str, str]:
    """sha256 of every quantized weight and scale, by module (the layouts' prefixes stripped)."""
    hashes = tensor_hashes(path)
    quantized = {n[:-len("_scale")] for n in hashes if n.endswith(".weight_scale")}
    out = {}
    for name, digest in hashes.items():
        if name.endswith(("_scale", "_scale_2")) or name in quantized:
            out[name.replace("midlayer.", "layers.0.")] = digest
    return out


def _quant_config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())["quantization_config"]


def test_real_modelopt_fp8_export_round_trips_its_scales_byte_for_byte(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(REAL_FP8, src)
    want = _scales(src)
    assert len(want) == 7 * 3 + 3  # seven layer linears and fc: weight, weight_scale, input_scale
    vllm = run_cli("convert", src, tmp_path / "vllm", "--to", "vllm", *REAL_CAPTURE)
    assert vllm.exit_code == 0, vllm.stderr
    back = run_cli("convert", tmp_path / "vllm", tmp_path / "modelopt", "--to", "modelopt")
    assert back.exit_code == 0, back.stderr
    for out in ("vllm", "modelopt"):
        assert _scales(tmp_path / out) == want
        qc = _quant_config(tmp_path / out)
        # the nested form ModelOpt's EAGLE exporter wrote becomes the flat one every release reads `ignore` from
        assert (qc["quant_method"], qc["quant_algo"]) == ("modelopt", "FP8")
        assert qc["ignore"] == ["lm_head"]  # the plain modules the file holds (it has no embed_tokens)


def test_real_modelopt_nvfp4_export_keeps_its_packed_weights_and_block_scales(tmp_path: Path) -> None:
    want = _scales(REAL_NVFP4)
    assert any(n.endswith("weight_scale_2") for n in want)
    result = run_cli("convert", REAL_NVFP4, tmp_path / "vllm", "--to", "vllm", *REAL_CAPTURE)
    assert result.exit_code == 0, result.stderr
    assert _scales(tmp_path / "vllm") == want
    qc = _quant_config(tmp_path / "vllm")
    assert (qc["quant_method"], qc["quant_algo"], qc["group_size"]) == ("modelopt_fp4", "NVFP4", 16)
    # SGLang's plain fc cannot take the packed [64, 64] weight of a [64, 128] layer: refused loudly
    sglang = run_cli("validate", REAL_NVFP4, "--engine", "sglang")
    assert "E-ENGINE-REFUSES [sglang]" in sglang.stdout and "half the columns" in sglang.stdout


def test_sglang_would_serve_a_quantized_fc_wrong(tmp_path: Path) -> None:
    """SGLang's fc is a plain torch.nn.Linear: the real export's FP8 fc would be loaded without its scale."""
    result = run_cli("convert", REAL_FP8, tmp_path / "out", "--to", "sglang", *REAL_CAPTURE)
    assert result.exit_code != 0 and "[E-ENGINE-WRONG]" in result.stderr
    assert "fc unquantized" in result.stderr and "Traceback" not in result.stderr
    assert nothing_written(tmp_path, "out")


@pytest.mark.parametrize("algo", ["FP8", "NVFP4"])
def test_every_layout_that_can_say_it_keeps_the_scales(tmp_path: Path, algo: str) -> None:
    src = build_quantized(tmp_path / "src", algo=algo, plain=("lm_head", "embed_tokens", "fc"))
    want = _scales(src)
    assert want and all(t in json.dumps(sorted(want)) for t in ("weight_scale", "input_scale"))
    prev = src
    for layout in ("sglang", "vllm", "modelopt", "sglang"):
        out = tmp_path / f"{layout}-{len(list(tmp_path.iterdir()))}"
        result = run_cli("convert", prev, out, "--to", layout)
        assert result.exit_code == 0, result.stderr
        assert _scales(out) == want, layout
        assert _quant_config(out)["quant_algo"] == algo
        checked = run_cli("validate", out)  # our own output: no error for any engine its layout is for
        assert checked.exit_code == 0, checked.stdout
        prev = out


@pytest.mark.parametrize("layout", ["speculators", "eagle", "gguf"])
def test_layouts_that_cannot_say_it_refuse(tmp_path: Path, layout: str) -> None:
    src = build_quantized(tmp_path / "src")
    result = run_cli("convert", src, tmp_path / "out", "--to", layout, "--verifier", "org/target")
    assert result.exit_code != 0 and "[E-QUANT-UNSUPPORTED]" in result.stderr
    assert f"the {layout} layout" in result.stderr and nothing_written(tmp_path, "out")


def test_vllm_refuses_a_quantized_embedding(tmp_path: Path) -> None:
    src = build_quantized(tmp_path / "src", layout="vllm", plain=("lm_head",))
    result = run_cli("validate", src, "--engine", "vllm")
    assert "embed_tokens.weight_scale" in result.stdout and "E-ENGINE-REFUSES [vllm]" in result.stdout
    # SGLang replaces the draft's embedding with the target's (same width): no alarm there
    sglang = run_cli("validate", src, "--engine", "sglang")
    assert "embed_tokens" not in sglang.stdout


def test_exclude_modules_is_read_by_newer_vllm_only(tmp_path: Path) -> None:
    """vLLM 0.24.0 reads config.json's list from `ignore` only (modelopt.py:316), 0.33.0 falls back to
    `exclude_modules` (:359): the plain lm_head is built quantized by 0.24.0 and fails to load."""
    src = build_quantized(tmp_path / "src", key="exclude_modules", plain=("lm_head", "embed_tokens"))
    old = run_cli("validate", src, "--engine", "vllm==0.24.0")
    assert "E-ENGINE-REFUSES [vllm]" in old.stdout and "lm_head" in old.stdout
    new = run_cli("validate", src, "--engine", "vllm==0.33.0")
    assert "E-ENGINE-REFUSES [vllm]" not in new.stdout
    fixed = run_cli("convert", src, tmp_path / "out", "--to", "vllm")
    assert fixed.exit_code == 0, fixed.stderr
    assert "E-ENGINE-REFUSES" not in run_cli("validate", tmp_path / "out", "--engine", "vllm==0.24.0").stdout


def test_a_bare_fc_entry_matches_vllms_model_fc(tmp_path: Path) -> None:
    """No false alarm: vLLM's ModelOpt config matches ignore entries as substrings too (modelopt.py:210-218)."""
    src = build_quantized(tmp_path / "src", plain=("lm_head", "embed_tokens", "fc"), ignore=["fc", "lm_head"])
    result = run_cli("validate", src, "--engine", "vllm")
    assert "E-ENGINE" not in result.stdout.replace("E-ENGINE-RELEASES", "")


def test_an_ignore_list_that_misses_a_plain_module_is_caught_and_rewritten(tmp_path: Path) -> None:
    src = build_quantized(tmp_path / "src", layout="vllm", plain=("lm_head", "embed_tokens", "fc"), ignore=[])
    vllm = run_cli("validate", src, "--engine", "vllm")
    assert "E-ENGINE-REFUSES [vllm]" in vllm.stdout and "model.fc quantized" in vllm.stdout
    in_sglang = build_quantized(tmp_path / "sglang", layout="sglang", plain=("lm_head", "embed_tokens", "fc"),
                                ignore=[])
    sglang = run_cli("validate", in_sglang, "--engine", "sglang")  # SGLang checks nothing: the plain lm_head goes wrong
    assert "E-ENGINE-WRONG [sglang]" in sglang.stdout and "builds lm_head quantized" in sglang.stdout
    out = tmp_path / "out"
    assert run_cli("convert", src, out, "--to", "vllm").exit_code == 0
    assert {"fc", "model.fc", "lm_head"} <= set(_quant_config(out)["ignore"])


def test_a_partly_quantized_fused_layer_is_refused(tmp_path: Path) -> None:
    src = build_quantized(tmp_path / "src", plain=("lm_head", "embed_tokens", "fc", "layers.0.self_attn.q_proj"))
    result = run_cli("convert", src, tmp_path / "out", "--to", "vllm")
    assert result.exit_code != 0 and "[E-QUANT-UNSUPPORTED]" in result.stderr and "qkv_proj" in result.stderr


def test_layers_quantized_differently_cannot_be_listed_for_both_engines(tmp_path: Path) -> None:
    spec = DrafterSpec(num_layers=2, embed_tokens=True)
    src = build_quantized(tmp_path / "src", spec=spec, plain=("lm_head", "embed_tokens", "fc",
                                                                "layers.1.mlp.down_proj"))
    result = run_cli("convert", src, tmp_path / "out", "--to", "vllm")
    assert result.exit_code != 0 and "[E-QUANT-UNSUPPORTED]" in result.stderr and "mlp.down_proj" in result.stderr


def test_a_scale_without_its_weight(tmp_path: Path) -> None:
    src = build_quantized(tmp_path / "src", plain=("lm_head", "embed_tokens"),
                          extra_tensors={"layers.1.mlp.down_proj.weight_scale": f32(0.5)})
    converted = run_cli("convert", src, tmp_path / "out", "--to", "vllm")
    assert converted.exit_code != 0 and "[E-QUANT-ORPHAN-SCALE]" in converted.stderr
    checked = run_cli("validate", src)
    assert "E-QUANT-ORPHAN-SCALE" in checked.stdout and checked.exit_code != 0


def test_scales_with_no_quantization_config(tmp_path: Path) -> None:
    src = build_quantized(tmp_path / "src")
    edit_config(src, lambda c: c.pop("quantization_config"))
    result = run_cli("convert", src, tmp_path / "out", "--to", "vllm")
    assert result.exit_code != 0 and "[E-QUANT-UNSUPPORTED]" in result.stderr and "hf_quant_config.json" in result.stderr


def test_another_quantization_method_is_refused_by_name(tmp_path: Path) -> None:
    src = build_quantized(tmp_path / "src", config_extra={"quant_method": "compressed-tensors"})
    result = run_cli("convert", src, tmp_path / "out", "--to", "vllm")
    assert result.exit_code != 0 and "[E-QUANT-UNSUPPORTED]" in result.stderr and "compressed-tensors" in result.stderr


def test_w4a16_per_engine_release(tmp_path: Path) -> None:
    """W4A16_NVFP4: SGLang 0.5.11 knows FP8 and NVFP4 only (modelopt_quant.py:1241), 0.5.23 serves it (:1673); vLLM
    derives no method for it from ModelOpt's nested form (model_arch_config_convertor.py:248-268)."""
    flat = build_quantized(tmp_path / "flat", algo="W4A16_NVFP4", plain=("lm_head", "embed_tokens", "fc"))
    assert "E-ENGINE-REFUSES [sglang]" in run_cli("validate", flat, "--engine", "sglang==0.5.11").stdout
    assert "E-ENGINE-REFUSES [sglang]" not in run_cli("validate", flat, "--engine", "sglang==0.5.23").stdout
    nested = build_quantized(tmp_path / "nested", layout="vllm", algo="W4A16_NVFP4", plain=("lm_head", "embed_tokens", "fc"))
    edit_config(nested, lambda c: c.update(quantization_config={
        "producer": {"name": "modelopt", "version": "0.47.0"},
        "quantization": {"quant_algo": "W4A16_NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "fc"]}}))
    result = run_cli("validate", nested, "--engine", "vllm")
    assert "Unknown ModelOpt quant algo" in result.stdout and "E-ENGINE-REFUSES [vllm]" in result.stdout


def test_inspect_shows_the_scheme_per_module(tmp_path: Path) -> None:
    shown = run_cli("inspect", REAL_NVFP4)
    assert shown.exit_code == 0, shown.stderr
    assert "quantized    NVFP4 (modelopt_fp4), per module:" in shown.stdout
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in shown.stdout.splitlines()
            if line.startswith("    ") and len(line.split()) >= 2 and line.split()[0] in ("fc", "lm_head")}
    assert rows == {"fc": "NVFP4", "lm_head": "plain F32"}
    data = json.loads(run_cli("inspect", REAL_FP8, "--json").stdout)["drafter"]["quantization"]
    assert data["scheme"]["algo"] == "FP8" and data["modules"]["layers.0.self_attn.q_proj"] == "FP8"


def test_the_registry_records_the_scheme(tmp_path: Path, registry_url, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(registry_url))
    assert run_cli("registry", "add", REAL_NVFP4, *REAL_CAPTURE).exit_code == 0
    plain = build_quantized(tmp_path / "q", algo="FP8", plain=("lm_head", "embed_tokens", "fc"))
    assert run_cli("convert", plain, tmp_path / "out", "--to", "vllm").exit_code == 0
    records = json.loads(run_cli("registry", "list", "--json").stdout)["records"]
    schemes = sorted((r["quantization"]["algo"], r["quantization"]["method"]) for r in records)
    assert schemes == [("FP8", "modelopt"), ("NVFP4", "modelopt_fp4")]


@pytest.mark.parametrize("release", ["0.24.0", "0.33.0"])
def test_the_hint_for_an_ignore_list_vllm_misreads_changes_its_verdict(tmp_path: Path, release: str) -> None:
    """The hint is run as printed (tests/test_hints.py's run_hint), and the file it wrote is judged again."""
    from test_hints import hint_commands, run_hint

    src = build_quantized(tmp_path / "src", layout="vllm", key="exclude_modules" if release == "0.24.0" else "ignore",
                          ignore=None if release == "0.24.0" else [], plain=("lm_head", "embed_tokens", "fc"))
    report = json.loads(run_cli("validate", "--json", src, "--engine", f"vllm=={release}").stdout)
    found = [f for f in report["findings"] if f["code"] == "E-ENGINE-REFUSES" and f["engine"] == "vllm"]
    assert found and "quantized" in found[0]["message"], report["findings"]
    commands = hint_commands([found[0]["hint"]])
    assert commands, found[0]["hint"]
    code, err = run_hint(commands[0], src, str(src), tmp_path / "hint")
    assert code == 0, err
    written = next(p for p in (tmp_path / "hint").iterdir())
    again = json.loads(run_cli("validate", "--json", written, "--engine", f"vllm=={release}").stdout)
    assert not [f for f in again["findings"] if f["code"] == "E-ENGINE-REFUSES"], again["findings"]


def test_dequantized_reference_weights_follow_modelopt(tmp_path: Path) -> None:
    """FP8: weight * scale; NVFP4: two e2m1 codes a byte, low nibble first, times block scale * global scale
    (NVFP4QTensor.dequantize, nvfp4_tensor.py:345-405 in nvidia-modelopt 0.47.0)."""
    import torch

    from eagle3_convert.verify.dequant import nvfp4

    packed = torch.tensor([[0x21, 0xF7] * 8], dtype=torch.uint8)  # codes 1, 2, 7, 15 -> 0.5, 1, 6, -6
    block = torch.tensor([[2.0, 0.5]]).to(torch.float8_e4m3fn)
    got = nvfp4(packed, block, torch.tensor(0.25))
    want = torch.tensor([0.5, 1.0, 6.0, -6.0] * 4) * 0.5
    assert torch.equal(got[0, :16], want) and torch.equal(got[0, 16:], want / 4)


@pytest.mark.parametrize("sample", [REAL_FP8, REAL_NVFP4])
def test_verify_builds_its_reference_from_a_quantized_drafter(sample: Path) -> None:
    import torch

    from eagle3_convert.convert import read_source
    from eagle3_convert.verify.reference import DrafterMaths

    drafter = read_source(str(sample)).drafter
    ref = DrafterMaths(drafter, torch.device("cpu"))
    assert not any(n.endswith(("_scale", "_scale_2")) for n in ref.w)
    fc = ref.w["fc.weight"]
    assert fc.dtype == torch.float32 and tuple(fc.shape) == (64, 128) and torch.isfinite(fc).all()
    assert fc.abs().max() > 0


def test_the_engines_matching_of_ignore_entries() -> None:
    """vLLM: exact (a fused layer by its shards, all or none), substring, fnmatch (modelopt.py:191-225, 0.33.0);
    SGLang: exact, then a glob fully matching the name or one dotted part (modelopt_quant.py:379-425, 0.5.23)."""
    from eagle3_convert.engines.quantized import sglang_excluded, sglang_prefix, vllm_excluded, vllm_prefix
    from eagle3_convert.quantization import ignore_entries

    assert vllm_excluded("model.fc", ["fc"]) is True  # a substring: no alarm for a bare fc
    assert vllm_excluded("model.layers.32.self_attn.qkv_proj", ["*self_attn.q_proj"]) is False
    assert vllm_excluded("model.layers.32.self_attn.qkv_proj", ["*qkv_proj"]) is True
    mixed = vllm_excluded("model.layers.32.self_attn.qkv_proj", ["model.layers.32.self_attn.q_proj"])
    assert isinstance(mixed, str) and "some but not all shards" in mixed
    assert sglang_excluded("model.qkv_proj", ["layers.0.self_attn.qkv_proj"]) is False  # SGLang names no layer
    assert sglang_excluded("model.down_proj", ["*down_proj"]) is True and sglang_excluded("lm_head", ["lm_"]) is False
    plain = ["fc", "lm_head"] + [f"layers.{i}.{t}" for i in (0, 1) for t in
                                 ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
    entries = ignore_entries(plain, 2)
    for module in plain:  # what we write reaches every engine's name of every plain module, at any target depth
        assert vllm_excluded(vllm_prefix(module, 61, True), entries) is True, module
        assert vllm_excluded(vllm_prefix(module, 61, False), entries) is True, module
        assert sglang_excluded(sglang_prefix(module), entries) is True, module
