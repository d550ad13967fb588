"""The other misreads of issue 35 §2, each through the real CLI on a file shaped as its producer publishes it
(written by tests/builders.py, independently of our writers, then edited as the producer writes it).

- Default vocabulary maps: a trainer that never loaded its selected vocabulary saves its default buffers, and every
  engine serves them as offsets without a word. An all-zero d2t with Vd < V is "the first Vd target ids" (what vLLM
  assumes of a file with no d2t: NeMo Automodel before #2447, whose acceptance collapsed), even beside a t2d[:Vd] of
  True; verl-SpeCo's default d2t = arange(Vd) (before its #67) maps draft i to target 2i. validate warns
  (W-VOCAB-DEFAULT) naming the map; convert says so and writes the map as read.
- Activations: a Gemma-4 draft (NeMo Automodel #3071) trains with hidden_act gelu_pytorch_tanh. SGLang's and vLLM's
  MLP classes raise "Unsupported activation: X. Only silu is supported for now." (engines/sglang.py, engines/vllm.py,
  per release read); llama.cpp's eagle3 graph applies silu whatever the drafter trained (engines/llamacpp.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter
from conftest import nothing_written, run_cli, serve_line, tensor_hashes
from test_drafters_2026 import nemo_drafter
from test_validate import edit_tensors, i64

VD, V = 32, 96  # DrafterSpec's draft and target vocabularies


def findings(stdout: str) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(stdout)["findings"]}


# ------------------------------------------------------------ default vocabulary maps

def test_an_all_zero_d2t_beside_the_default_t2d_is_warned_as_the_first_vd_ids(tmp_path: Path):
    # the default pair: all-zero d2t and t2d[:Vd] True (SpecForge-style files: midlayer.*, both tensors)
    src = build_drafter(tmp_path / "zero", "sglang", DrafterSpec(vocab_ids=tuple(range(VD))))
    result = run_cli("validate", src, "--json")
    assert result.exit_code == 0, result.stdout
    found = findings(result.stdout)["W-VOCAB-DEFAULT"]
    assert found["severity"] == "warning" and found["where"] == "d2t"
    assert f"first {VD} target ids (0..{VD - 1})" in found["message"]
    assert "draft token i as target token i" in found["message"] and "vLLM" in found["message"]
    assert "re-export d2t" in found["hint"]

    out = run_cli("--to", "vllm", src, tmp_path / "out")
    assert out.exit_code == 0, out.stderr
    assert "[W-VOCAB-DEFAULT]" in out.stdout + out.stderr and "written as read" in out.stdout + out.stderr
    assert tensor_hashes(tmp_path / "out")["d2t"] == tensor_hashes(src)["d2t"]  # never changed silently


def test_an_arange_d2t_is_warned_as_draft_i_to_target_2i(tmp_path: Path):
    # verl-SpeCo's default d2t (llama_eagle.py, modeling_peagle.py before #67) in a layout that stores no t2d
    src = build_drafter(tmp_path / "arange", "modelopt", DrafterSpec(vocab_ids=tuple(range(0, 2 * VD, 2))))
    result = run_cli("validate", src)
    assert result.exit_code == 0, result.stdout
    assert "W-VOCAB-DEFAULT" in result.stdout and f"arange({VD})" in result.stdout
    assert "target token 2i" in result.stdout

    out = run_cli("--to", "sglang", src, tmp_path / "out")
    assert out.exit_code == 0, out.stderr
    assert "[W-VOCAB-DEFAULT]" in out.stdout + out.stderr and "target token 2i" in out.stdout + out.stderr


def test_verl_specos_default_pair_is_absolute_and_its_repair_is_still_the_default(tmp_path: Path):
    # both of verl-SpeCo's default buffers: d2t = arange(Vd) beside t2d[:Vd] True. d2t then holds the ids t2d marks
    # (absolute); the repair gives the map its loss trained on, which is still no selected vocabulary
    src = build_drafter(tmp_path / "speco", "sglang", DrafterSpec(vocab_ids=tuple(range(VD))))
    edit_tensors(lambda t: t.__setitem__("d2t", i64(list(range(VD)))))(src)
    result = run_cli("validate", src)
    assert result.exit_code != 0 and "E-VOCAB-ABSOLUTE" in result.stdout

    out = run_cli("--repair-d2t-absolute", "--to", "vllm", src, tmp_path / "out")
    assert out.exit_code == 0, out.stderr
    assert "[W-VOCAB-DEFAULT]" in out.stdout + out.stderr and f"first {VD} target ids" in out.stdout + out.stderr


def test_a_selected_vocabulary_is_not_warned(tmp_path: Path):
    src = build_drafter(tmp_path / "selected", "sglang", DrafterSpec())
    result = run_cli("validate", src)
    assert result.exit_code == 0 and "W-VOCAB-DEFAULT" not in result.stdout


# ------------------------------------------------------------ activations

def gemma4_draft(dest: Path) -> Path:
    """A Gemma-4 draft as NeMo Automodel's Gemma4Eagle3DraftModel saves it (#3071): LlamaEagle3DraftModel, Gemma's
    GeGLU as hidden_act gelu_pytorch_tanh, the global RoPE flattened to rope_theta 1e6."""
    src = nemo_drafter(dest, DrafterSpec(capture_boundaries=None))
    config = json.loads((src / "config.json").read_text())
    config.update(hidden_act="gelu_pytorch_tanh", rope_theta=1000000.0)
    (src / "config.json").write_text(json.dumps(config, indent=2))
    return src


ACT_REFUSAL = "Unsupported activation: gelu_pytorch_tanh. Only silu is supported for now."


@pytest.mark.parametrize("to", ["sglang", "vllm"])
def test_a_gemma4_draft_is_refused_for_the_engines_whose_mlp_takes_only_silu(tmp_path: Path, to: str):
    result = run_cli("--no-record", "--to", to, gemma4_draft(tmp_path / "src"), tmp_path / "out")
    assert result.exit_code == 1 and result.stderr.count("error: ") == 1 and "Traceback" not in result.stderr
    assert ACT_REFUSAL in result.stderr and "[E-ENGINE-REFUSES]" in result.stderr
    assert "--to vllm" not in result.stderr  # vLLM refuses it alike: no way out to offer
    assert nothing_written(tmp_path, "out")


def test_a_gemma4_draft_is_judged_per_engine_and_release(tmp_path: Path):
    out = tmp_path / "out"
    result = run_cli("--no-record", "--verifier", "org/gemma-4-target", "--to", "speculators",
                     gemma4_draft(tmp_path / "src"), out)
    assert result.exit_code == 0, result.stderr
    assert ACT_REFUSAL in serve_line(result.stdout, "vLLM (V1 runner)")
    assert "serves it WRONG: llama.cpp's eagle3 graph applies silu" in serve_line(result.stdout, "llama.cpp")
    for engine in ("vllm==0.24.0", "vllm==0.33.0"):
        found = findings(run_cli("validate", "--json", "--engine", engine, out).stdout)
        assert ACT_REFUSAL in found["E-ENGINE-REFUSES"]["message"], found
    found = findings(run_cli("validate", "--json", "--engine", "llamacpp", out).stdout)
    assert "trained with hidden_act gelu_pytorch_tanh" in found["E-ENGINE-WRONG"]["message"]


@pytest.mark.parametrize("release", ["0.5.11", "0.5.23"])
def test_sglang_refuses_a_gelu_draft_in_every_release_read(tmp_path: Path, release: str):
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "hidden_act": "gelu_pytorch_tanh"}))
    found = findings(run_cli("validate", "--json", "--engine", f"sglang=={release}", src).stdout)
    assert ACT_REFUSAL in found["E-ENGINE-REFUSES"]["message"], found
