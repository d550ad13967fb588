"""Issue 22, the multi-layer and Eagle 3.1 classes: each engine's loader as its source reads, shown through the real
CLI on files written by tests/builders.py (independently of our writers), then edited as the producer writes them.

- Multi-layer drafters: vLLM builds `hidden_norm` in every layer and applies `input_layernorm` in layers >= 1
  (llama_eagle3.py, 0.33.0), maps `midlayer.` to `layers.0.` at any depth and raises on names it has no module
  for (a `model.` prefix, `additional_layers.*`); SGLang 0.5.23 and TensorRT-LLM (modeling_speculative.py @
  00679c66) apply `hidden_norm` there; SGLang at 03d5a77 named layers >= 1 `additional_layers.{i-1}`. A later layer's norm stored under one name only is
  loaded unapplied by one engine (E-KEY-UNAPPLIED, never the E-KEY-DROPPED vLLM's loader contradicts); every
  layout whose engines differ writes both names, so every conversion keeps every trained tensor.
- vLLM's V1 runner reading a nested block-output list as boundaries is one rule: E-CAPTURE-MISMATCH, whatever the
  layer count or whether the target's depth is known.
- Eagle 3.1 flags in the ModelOpt layout, where TensorRT-LLM reads them: `norm_before_fc` nested (NVIDIA's gpt-oss
  exports, capturing the final boundary L), `fc_norm` and `norm_output` at the top, `return_hidden_post_norm` nested
  read as norm_output; TensorRT-LLM applies fc_norm OR input_norm, so both flags are refused naming them. SGLang's
  legacy `aux_norm_low/mid/high` are read as `fc_norm.{0,1,2}`.
- Sliding windows (speculators trains them through `layer_types`): vLLM applies them; SGLang only with its
  `--speculative-draft-window-size` flag and TensorRT-LLM never, and their verdicts say so.
- 4+ capture ids: read, converted, and vLLM's verdict names the start-up crash of some releases (PR #54598, open).
- RoPE in both spellings (SpecForge writes both): both carried.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter, config_for, stored_tensors, write_checkpoint, write_target
from conftest import run_cli, serve_line, tensor_hashes

BF16_ONE = b"\x80\x3f"


def findings(*args) -> tuple[int, list[dict]]:
    result = run_cli("validate", "--json", *args)
    return result.exit_code, json.loads(result.stdout)["findings"]


def config_of(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


# ------------------------------------------------------------------ later layers' norms, per engine loader

def sglang_named_only(dest: Path, layers: int = 2) -> Path:
    """A multi-layer drafter as an SGLang-only writer names it: layers >= 1 hold hidden_norm, no input_layernorm."""
    spec = DrafterSpec(num_layers=layers)
    tensors = stored_tensors("sglang", spec)
    for i in range(1, layers):
        del tensors[f"layers.{i}.input_layernorm.weight"]
    return write_checkpoint(dest, config_for("sglang", spec), tensors)


def test_vllm_loads_a_later_hidden_norm_unapplied_not_dropped(tmp_path: Path):
    """Before: E-KEY-DROPPED "vLLM has no parameter named 'layers.1.hidden_norm.weight'", which vLLM's loader
    contradicts (it builds hidden_norm in every layer). After: E-KEY-UNAPPLIED names the norm vLLM applies."""
    src = sglang_named_only(tmp_path / "src")
    code, found = findings("--engine", "vllm", src)
    assert code == 1
    assert "E-KEY-DROPPED" not in {f["code"] for f in found}, found
    unapplied = [f for f in found if f["code"] == "E-KEY-UNAPPLIED"]
    assert len(unapplied) == 1 and unapplied[0]["where"] == "layers.1.hidden_norm.weight", found
    assert "'layers.1.input_layernorm.weight', keeps its initial ones" in unapplied[0]["message"]
    # SGLang, whose layers >= 1 apply hidden_norm, reads the same file right
    code, found = findings("--engine", "sglang", src)
    assert code == 0 and not [f for f in found if f["code"].startswith("E-")], found

    # --to vllm writes both names with the one trained weight: nothing for either engine to leave at ones
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    out = tensor_hashes(tmp_path / "out")
    trained = tensor_hashes(src)["layers.1.hidden_norm.weight"]
    assert out["layers.1.input_layernorm.weight"] == out["layers.1.hidden_norm.weight"] == trained
    for engine in ("vllm", "sglang"):
        code, found = findings("--engine", engine, tmp_path / "out")
        assert not {"E-KEY-UNAPPLIED", "E-KEY-DROPPED", "E-ENGINE-WRONG"} & {f["code"] for f in found}, found


def test_midlayer_is_layer_0_at_any_depth_for_vllm(tmp_path: Path):
    """vLLM's hf_to_vllm_mapper maps the substring `midlayer.` to `layers.0.` whatever the depth: a 2-layer file
    naming layer 0 `midlayer.*` loads in full (before, its verdict said vLLM drops midlayer.* of a multi-layer
    drafter)."""
    spec = DrafterSpec(num_layers=2, capture_boundaries=None)
    tensors = {n.replace("layers.0.", "midlayer.", 1) if n.startswith("layers.0.") else n: t
               for n, t in stored_tensors("sglang", spec).items()}
    src = write_checkpoint(tmp_path / "src", config_for("sglang", spec), tensors)
    code, found = findings("--engine", "vllm", src)
    assert code == 0, found
    assert not [f for f in found if "midlayer" in f["message"]], found
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "serves with its default layers" in serve_line(result.stdout, "vLLM (V2 runner)")
    code, found = findings("--engine", "trtllm", src)  # TensorRT-LLM's multi-layer module is midlayer.{i}
    dropped = {f["where"] for f in found if f["code"] == "E-KEY-DROPPED" and f["engine"] == "trtllm"}
    assert code == 1 and "midlayer.self_attn.q_proj.weight" in dropped, found
    out = tensor_hashes(tmp_path / "out")
    assert out["layers.0.hidden_norm.weight"] == tensor_hashes(src)["midlayer.hidden_norm.weight"]


def test_trtllm_applies_hidden_norm_in_later_layers(tmp_path: Path):
    """TensorRT-LLM's Eagle3DecoderLayer builds no input_layernorm in layers >= 1 and applies hidden_norm: a
    ModelOpt file naming the later norm input_layernorm only is served with hidden_norm at ones. --to modelopt
    writes both names (before: the canonical input_layernorm only, so TensorRT-LLM left it at ones)."""
    spec = DrafterSpec(num_layers=2)
    tensors = stored_tensors("modelopt", spec)
    del tensors["layers.1.hidden_norm.weight"]
    vllm_named = write_checkpoint(tmp_path / "vllm-named", config_for("modelopt", spec), tensors)
    code, found = findings("--engine", "trtllm", vllm_named)
    wrong = [f for f in found if f["code"] == "E-ENGINE-WRONG"]
    assert code == 1 and len(wrong) == 1 and "layers.1.input_layernorm.weight" in wrong[0]["message"], found

    src = build_drafter(tmp_path / "src", "vllm", spec)
    result = run_cli("--no-record", "--to", "modelopt", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "WRONG" not in serve_line(result.stdout, "TensorRT-LLM (from source)")
    out = tensor_hashes(tmp_path / "out")
    assert out["layers.1.hidden_norm.weight"] == out["layers.1.input_layernorm.weight"] == \
        tensor_hashes(src)["layers.1.input_layernorm.weight"]
    # and back: the ModelOpt reader merges the twins it wrote, every trained tensor kept
    back = run_cli("--no-record", "--to", "vllm", tmp_path / "out", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)


def test_modelopt_reader_keeps_the_trained_later_norm(tmp_path: Path):
    """The ModelOpt reader, like the others, keeps the trained twin where the other holds RMSNorm's initial ones
    (issue 34; it was refused, E-KEY-DUPLICATE), and still refuses twins that differ otherwise."""
    spec = DrafterSpec(num_layers=2)
    tensors = stored_tensors("modelopt", spec)
    old = tensors["layers.1.hidden_norm.weight"]
    tensors["layers.1.hidden_norm.weight"] = type(old)(old.dtype, old.shape, BF16_ONE * old.shape[0])
    src = write_checkpoint(tmp_path / "src", config_for("modelopt", spec), tensors)
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    out = tensor_hashes(tmp_path / "out")
    assert out["layers.1.input_layernorm.weight"] == tensor_hashes(src)["layers.1.input_layernorm.weight"]
    tensors["layers.1.hidden_norm.weight"] = type(old)(old.dtype, old.shape, bytes(b ^ 1 for b in old.data))
    other = write_checkpoint(tmp_path / "other", config_for("modelopt", spec), tensors)
    refused = run_cli("--no-record", "--to", "vllm", other, tmp_path / "out-other")
    assert refused.exit_code == 1 and "[E-KEY-DUPLICATE]" in refused.stderr, refused.stderr
    assert not (tmp_path / "out-other").exists()


def test_the_forks_untrained_twin_is_dropped_and_named(tmp_path: Path):
    """The SpecForge fork's layer 1: input_layernorm trained, hidden_norm never applied (all ones). Before (issue 34):
    convert refused it, E-KEY-DUPLICATE, naming the untrained twin; vLLM (llama_eagle3.py) applies input_layernorm
    in layers >= 1, so the file is served as trained there. After: convert keeps the trained one and says so;
    validate for vLLM warns, for SGLang (which applies hidden_norm there) it errs."""
    spec = DrafterSpec(num_layers=2)
    tensors = stored_tensors("sglang", spec)
    old = tensors["layers.1.hidden_norm.weight"]
    tensors["layers.1.hidden_norm.weight"] = type(old)(old.dtype, old.shape, BF16_ONE * old.shape[0])
    src = write_checkpoint(tmp_path / "src", config_for("sglang", spec), tensors)
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert ("kept layers.1.input_layernorm.weight, the trained pre-attention norm of its layer, and dropped "
            "layers.1.hidden_norm.weight: it holds RMSNorm's initial ones") in result.stdout + result.stderr
    code, found = findings("--engine", "vllm", src)
    [warning] = [f for f in found if f["code"] == "W-KEY-UNTRAINED-TWIN"]
    assert "'layers.1.hidden_norm.weight' holds RMSNorm's initial ones" in warning["message"], warning
    assert not [f for f in found if f["code"] in ("E-KEY-DUPLICATE", "E-ENGINE-WRONG")], found
    code, found = findings("--engine", "sglang", src)
    [wrong] = [f for f in found if f["code"] == "E-ENGINE-WRONG"]
    assert code == 1 and wrong["engine"] == "sglang" and "applies 'layers.1.hidden_norm.weight'" in wrong["message"]
    assert "--to sglang" in wrong["hint"], wrong


def test_sglang_03d5a77_names_are_read_and_renamed_for_0_5_23(tmp_path: Path):
    """SGLang at 03d5a77 built layer 0 as `model.midlayer` and layers >= 1 as `model.additional_layers.{i-1}`
    (BasicDecoderLayer: hidden_norm applied, no input_layernorm); 0.5.23 names every layer `model.layers.{i}` and
    skips `additional_layers.*` without a word; vLLM's loader raises on them. Before: refused as unknown tensors.
    After: read as layers 1.., the 0.5.23 and vLLM verdicts say what they do, and --to sglang/vllm keep every weight."""
    spec = DrafterSpec(num_layers=3)
    renamed = {}
    for name, tensor in stored_tensors("sglang", spec).items():
        if name.startswith("layers.0."):
            name = "midlayer." + name[len("layers.0."):]
        elif name.startswith("layers."):
            index, rest = name[len("layers."):].split(".", 1)
            if rest.startswith("input_layernorm."):
                continue  # BasicDecoderLayer builds none
            name = f"additional_layers.{int(index) - 1}.{rest}"
        renamed[name] = tensor
    src = write_checkpoint(tmp_path / "src", config_for("sglang", spec), renamed)
    code, found = findings("--engine", "sglang", "--engine", "vllm", src)
    codes = {(f["code"], f.get("engine")) for f in found}
    assert ("E-ENGINE-WRONG", "sglang") in codes and ("E-KEY-REFUSED", "vllm") in codes, found
    assert not [f for f in found if f["code"] in ("E-KEY-UNKNOWN", "E-KEY-DROPPED")], found
    wrong = next(f for f in found if f["code"] == "E-ENGINE-WRONG")
    assert "SGLang drops additional_layers.*" in wrong["message"]

    before = tensor_hashes(src)
    for to in ("sglang", "vllm"):
        result = run_cli("--no-record", "--to", to, src, tmp_path / to)
        assert result.exit_code == 0, result.stderr
        out = tensor_hashes(tmp_path / to)
        for j in (0, 1):
            assert out[f"layers.{j + 1}.hidden_norm.weight"] == out[f"layers.{j + 1}.input_layernorm.weight"] == \
                before[f"additional_layers.{j}.hidden_norm.weight"]
            assert out[f"layers.{j + 1}.mlp.down_proj.weight"] == before[f"additional_layers.{j}.mlp.down_proj.weight"]
        assert out["layers.0.hidden_norm.weight"] == before["midlayer.hidden_norm.weight"]
        code, found = findings("--engine", to, tmp_path / to)
        assert not [f for f in found if f["code"].startswith("E-KEY") or f["code"] == "E-ENGINE-WRONG"], found


# ------------------------------------------------------------------ vLLM's V1 runner: one rule

@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("with_target", [False, True])
def test_v1_runner_reading_nested_ids_one_off_is_one_error(tmp_path: Path, layers: int, with_target: bool):
    """An SGLang file's nested block-output ids [1, 3, 4] (boundaries [2, 4, 5]) are read by vLLM's V1 runner as
    boundaries [1, 3, 4]. Before: a warning without --target, an error with it. After: the same error always."""
    spec = DrafterSpec(num_layers=layers)
    src = build_drafter(tmp_path / "src", "sglang", spec)
    args = ("--target", write_target(tmp_path / "target", spec)) if with_target else ()
    code, found = findings("--engine", "vllm", *args, src)
    v1 = [f for f in found if f["code"] == "E-CAPTURE-MISMATCH" and "V1 runner" in f["message"]]
    assert code == 1 and len(v1) == 1, found
    assert "boundaries [1, 3, 4]" in v1[0]["message"] and "[2, 4, 5]" in v1[0]["message"]
    assert not [f for f in found if f["code"] == "E-KEY-DROPPED"], found


# ------------------------------------------------------------------ Eagle 3.1 flags

def test_nvidia_gpt_oss_export_with_nested_norm_before_fc_and_the_final_boundary(tmp_path: Path):
    """NVIDIA's gpt-oss-120b-Eagle3-v3 shape: ModelOpt export, eagle_config.norm_before_fc, ids [23, 29, 35] of a
    36-layer gpt-oss target (boundaries [24, 30, 36], the last = L). Before: input_norm.weight refused as unused
    (the flag was not read). After: read, served as trained by TensorRT-LLM, converted with input_norm kept."""
    spec = DrafterSpec(target_layers=36, target_model_type="gpt_oss", capture_boundaries=(24, 30, 36),
                       norm_before_fc=True)
    src = build_drafter(tmp_path / "src", "modelopt", spec)
    assert config_of(src)["eagle_config"]["norm_before_fc"] is True and "norm_before_fc" not in config_of(src)
    target = write_target(tmp_path / "target", spec)
    code, found = findings("--engine", "trtllm", "--target", target, src)
    assert code == 0 and not [f for f in found if f["severity"] != "info"], found

    for to in ("vllm", "speculators", "sglang"):
        result = run_cli("--no-record", "--verifier", "openai/gpt-oss-120b", "--target", target, "--to", to, src,
                         tmp_path / to)
        assert result.exit_code == 0, result.stderr
        assert "boundaries [24, 30, 36]" in result.stdout
        assert tensor_hashes(tmp_path / to)["input_norm.weight"] == tensor_hashes(src)["input_norm.weight"]
    assert config_of(tmp_path / "speculators")["norm_before_fc"] is True
    # SGLang's gpt-oss rule (capture_ids): +1 unless max(ids) == L, so block outputs [23, 29, 35] capture [24, 30, 36]
    assert config_of(tmp_path / "sglang")["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [23, 29, 35]

    # the vLLM layout nests the flag too (vLLM reads it there first), so TensorRT-LLM reads it from that file as well
    assert config_of(tmp_path / "vllm")["eagle_config"]["norm_before_fc"] is True
    back = run_cli("--no-record", "--target", target, "--to", "modelopt", tmp_path / "vllm", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    assert config_of(tmp_path / "back")["eagle_config"]["norm_before_fc"] is True
    assert "eagle3_layers_to_capture: [23, 29, 35]" in serve_line(back.stdout, "TensorRT-LLM (from source)")


def test_fc_norm_and_norm_output_reach_tensorrt_llm_through_modelopt(tmp_path: Path):
    """Before: --to modelopt refused every Eagle 3.1 flag. After: written where TensorRT-LLM reads them (top level),
    every fc_norm weight kept, and TensorRT-LLM's verdict no longer wrong."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(fc_norm=True, norm_output=True))
    result = run_cli("--no-record", "--to", "modelopt", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = config_of(tmp_path / "out")
    assert (written["fc_norm"], written["norm_output"]) == (True, True)
    assert "WRONG" not in serve_line(result.stdout, "TensorRT-LLM (from source)")
    out, before = tensor_hashes(tmp_path / "out"), tensor_hashes(src)
    assert [out[f"fc_norm.{j}.weight"] for j in range(3)] == [before[f"fc_norm.{j}.weight"] for j in range(3)]


def test_return_hidden_post_norm_is_norm_output(tmp_path: Path):
    """TensorRT-LLM reads eagle_config.return_hidden_post_norm as norm_output: so does the ModelOpt reader, and the
    flag reaches the layouts that spell it norm_output (before: dropped, the drafter served with other maths)."""
    src = build_drafter(tmp_path / "src", "modelopt", DrafterSpec())
    config = config_of(src)
    config["eagle_config"]["return_hidden_post_norm"] = True
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert config_of(tmp_path / "out")["norm_output"] is True


@pytest.mark.parametrize("to, code", [("modelopt", "E-FLAG-UNSUPPORTED"), ("speculators", "E-FLAG-UNSUPPORTED")])
def test_norm_before_fc_with_fc_norm_is_refused_where_one_is_applied(tmp_path: Path, to: str, code: str):
    """speculators allows one of the two; TensorRT-LLM applies fc_norm and skips input_norm (apply_eagle3_fc).
    vLLM and SGLang apply both, so the drafter still goes there."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(norm_before_fc=True, fc_norm=True))
    result = run_cli("--no-record", "--verifier", "org/target", "--to", to, src, tmp_path / "out")
    assert result.exit_code == 1
    assert f"[{code}]" in result.stderr and "norm_before_fc" in result.stderr and "fc_norm" in result.stderr
    assert not (tmp_path / "out").exists()
    assert run_cli("--no-record", "--to", "sglang", src, tmp_path / "sglang").exit_code == 0
    engine = {"modelopt": "trtllm", "speculators": "speculators"}[to]
    code, found = findings("--engine", engine, src)
    if engine == "speculators":  # it refuses this (vLLM-layout) file outright: said as a refusal, not other maths
        assert code == 1 and [f["code"] for f in found if f["engine"] == engine] == ["E-ENGINE-REFUSES"], found
        return
    unsupported = [f for f in found if f["code"] == "E-ENGINE-UNSUPPORTED"]
    assert code == 1 and len(unsupported) == 1 and "norm_before_fc and fc_norm" in unsupported[0]["message"], found


def test_sglang_legacy_aux_norm_names_are_fc_norm(tmp_path: Path):
    """SGLang's legacy `use_aux_norm` with `aux_norm_low/mid/high` (its load_weights maps them to fc_norm.0-2)."""
    spec = DrafterSpec(fc_norm=True)
    tensors = stored_tensors("sglang", spec)
    for j, legacy in enumerate(("low", "mid", "high")):
        tensors[f"aux_norm_{legacy}.weight"] = tensors.pop(f"fc_norm.{j}.weight")
    config = config_for("sglang", spec)
    config["use_aux_norm"] = config.pop("fc_norm")
    src = write_checkpoint(tmp_path / "src", config, tensors)
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    out, before = tensor_hashes(tmp_path / "out"), tensor_hashes(src)
    assert [out[f"fc_norm.{j}.weight"] for j in range(3)] == [before[f"aux_norm_{x}.weight"] for x in ("low", "mid",
                                                                                                        "high")]
    assert config_of(tmp_path / "out")["fc_norm"] is True


# ------------------------------------------------------------------ sliding windows

def windowed(dest: Path, layer_types: list[str]) -> Path:
    spec = DrafterSpec(extra={"sliding_window": 16, "layer_types": layer_types, "use_sliding_window": True})
    return build_drafter(dest, "speculators", spec)


def test_sliding_window_verdicts_per_engine(tmp_path: Path):
    """speculators trains the window through layer_types. vLLM applies it (LlamaAttention reads layer_types);
    SGLang only with --speculative-draft-window-size; TensorRT-LLM never. Before: every verdict said trained
    maths. After: SGLang's and TensorRT-LLM's say the maths differ past the window, and what to pass."""
    src = windowed(tmp_path / "src", ["sliding_attention"])
    result = run_cli("--no-record", "--to", "sglang", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    sglang = serve_line(result.stdout, "SGLang")
    assert "serves as trained" in sglang and "--speculative-draft-window-size 16" in sglang
    assert "maths differ past 16 tokens" in serve_line(result.stdout, "TensorRT-LLM")
    written = config_of(tmp_path / "out")
    assert (written["sliding_window"], written["layer_types"]) == (16, ["sliding_attention"])  # carried

    code, found = findings("--engine", "sglang", "--engine", "trtllm", tmp_path / "out")
    caveats = {f["engine"]: f["message"] for f in found if f["code"] == "W-ENGINE-CAVEAT"}
    assert code == 0 and set(caveats) == {"sglang", "trtllm"}, found
    assert "--speculative-draft-window-size 16" in caveats["sglang"]

    to_vllm = run_cli("--no-record", "--to", "vllm", src, tmp_path / "vllm")
    assert to_vllm.exit_code == 0, to_vllm.stderr
    assert "window" not in serve_line(to_vllm.stdout, "vLLM (V2 runner)")

    full = windowed(tmp_path / "full", ["full_attention"])  # the control: a window no layer uses
    result = run_cli("--no-record", "--to", "sglang", full, tmp_path / "full-out")
    assert result.exit_code == 0 and "window" not in serve_line(result.stdout, "SGLang")


# ------------------------------------------------------------------ four capture ids

def test_four_capture_ids_convert_and_vllm_says_some_releases_crash(tmp_path: Path):
    spec = DrafterSpec(num_aux=4, capture_boundaries=(2, 4, 5, 7))
    src = build_drafter(tmp_path / "src", "vllm", spec)
    result = run_cli("--no-record", "--to", "sglang", src, tmp_path / "sglang")
    assert result.exit_code == 0, result.stderr
    sg = config_of(tmp_path / "sglang")
    assert sg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4, 6] and sg["num_aux_hidden_states"] == 4
    back = run_cli("--no-record", "--to", "vllm", tmp_path / "sglang", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    assert config_of(tmp_path / "back")["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5, 7]
    assert "PR #54598" in serve_line(back.stdout, "vLLM (V1 runner)")
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)


# ------------------------------------------------------------------ RoPE in both spellings

def test_both_rope_spellings_are_carried(tmp_path: Path):
    """SpecForge writes rope_theta/rope_scaling and rope_parameters side by side; engines read one or the other by
    release (SGLang 0.5.23 prefers rope_parameters, models/llama.py): both reach every layout that writes both."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 512}
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(extra={
        "rope_scaling": scaling, "rope_parameters": {**scaling, "rope_theta": 10000.0}}))
    result = run_cli("--no-record", "--verifier", "org/target", "--to", "speculators", src, tmp_path / "spec")
    assert result.exit_code == 0, result.stderr
    decoder = config_of(tmp_path / "spec")["transformer_layer_config"]
    assert decoder["rope_scaling"] == scaling and decoder["rope_parameters"]["rope_theta"] == 10000.0
    assert decoder["rope_theta"] == 10000.0
    back = run_cli("--no-record", "--to", "sglang", tmp_path / "spec", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    again = config_of(tmp_path / "back")
    assert (again["rope_scaling"], again["rope_parameters"], again["rope_theta"]) == (
        scaling, {**scaling, "rope_theta": 10000.0}, 10000.0)


def test_transformers_5_rope_gets_the_older_spelling_for_sglang(tmp_path: Path):
    """A drafter with only rope_parameters (transformers 5): the SGLang layout writes rope_theta and rope_scaling
    beside it (SGLang before 0.5.23 reads only those), and reading our output back drops what it derived."""
    parameters = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 512}
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec(extra={"rope_parameters": parameters}))
    config = config_of(src)
    del config["rope_theta"]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "sglang", src, tmp_path / "sglang")
    assert result.exit_code == 0, result.stderr
    written = config_of(tmp_path / "sglang")
    assert written["rope_parameters"] == parameters and written["rope_theta"] == 500000.0
    assert written["rope_scaling"] == {k: v for k, v in parameters.items() if k != "rope_theta"}
    back = run_cli("--no-record", "--to", "vllm", tmp_path / "sglang", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    again = config_of(tmp_path / "back")
    assert again["rope_parameters"] == parameters and "rope_scaling" not in again and "rope_theta" not in again

