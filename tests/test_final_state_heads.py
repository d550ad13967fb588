"""Heads trained without aux states (issue 35): `eagle_config.use_aux_hidden_state: false`, no fc, the first layer
over [embedding, the target's final post-norm hidden state], as NVIDIA publishes them for gpt-oss-120b
(nvidia/gpt-oss-120b-Eagle3-v2, -short-context: vllm-project/vllm `_get_eagle3_use_aux_hidden_state_from_config`
names the first; sgl-project/sglang PR 32334 measured the second, "final post-norm hidden state", AL 1.921).

Before: every reader refused them as "EAGLE-1/2" (E-CONFIG-ALGORITHM), validate's E-CAPTURE-FC-BYPASSED told the user
to set the flag true (which would change the maths), and SGLang's reading called them served wrong. After: read,
converted where a layout nests the flag (modelopt, vllm, sglang), refused precisely elsewhere, judged per engine
release, measured by verify on the final state.

The file is built in code following the ModelOpt HF export (tests/builders.py `config_for("modelopt")`: NVIDIA's
eagle_config fields as its exporter writes them, modelopt/torch/export/unified_export_megatron.py) with the flag
false and no fc tensor, its first layer as the engines that served those heads build and load it (2H input,
hidden_norm: vLLM's and SGLang's Eagle3 classes), on a gpt-oss-family target. The published config.json and tensor
list are in none of the stored corpora: the shape is the engines', not copied from the Hub file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import DrafterSpec, RawTensor, config_for, stored_tensors, write_checkpoint
from conftest import nothing_written, run_cli, tensor_hashes

SPEC = DrafterSpec(target_model_type="gpt_oss", capture_boundaries=None)


def final_head(dest: Path, layout: str = "modelopt", spec: DrafterSpec = SPEC, keep_fc: bool = False) -> Path:
    config = config_for(layout, spec)
    config["eagle_config"]["use_aux_hidden_state"] = False
    tensors = {n: t for n, t in stored_tensors(layout, spec).items() if keep_fc or not n.startswith("fc.")}
    return write_checkpoint(dest, config, tensors)


def findings(*args) -> tuple[int, list[dict]]:
    result = run_cli("validate", "--json", *args)
    return result.exit_code, json.loads(result.stdout)["findings"]


def config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def test_validate_serves_it_as_trained_and_never_hints_the_flag(tmp_path: Path):
    src = final_head(tmp_path / "head")
    code, found = findings("--engine", "vllm", "--engine", "sglang", src)
    assert code == 0, found
    codes = {f["code"] for f in found}
    assert not codes & {"E-CAPTURE-FC-BYPASSED", "E-CAPTURE-COUNT", "E-SCHEMA", "E-ENGINE-WRONG"}, found
    assert not any("use_aux_hidden_state to true" in (f.get("hint") or "") for f in found)


def test_vllm_v2_runner_before_0_33_is_judged_wrong(tmp_path: Path):
    """The V2 runner set use_aux_hidden_state_outputs for every eagle3 config until 0.33.0 (read in the 0.32.0 and
    0.33.0 wheels; vLLM issue 40551); the V1 runner reads the flag in every release modelled."""
    src = final_head(tmp_path / "head")
    code, found = findings("--engine", "vllm==0.32.0", src)
    wrong = [f for f in found if f["code"] == "E-ENGINE-WRONG"]
    assert code == 1 and len(wrong) == 1, found
    assert "V2 runner" in wrong[0]["message"] and "issue 40551" in wrong[0]["message"]
    assert findings("--engine", "vllm==0.33.0", src)[0] == 0


@pytest.mark.parametrize("to", ["vllm", "sglang", "modelopt"])
def test_converts_where_the_layout_nests_the_flag_and_back(tmp_path: Path, to: str):
    src = final_head(tmp_path / "head")
    result = run_cli("--to", to, src, tmp_path / to)
    assert result.exit_code == 0, result.stderr
    written = config(tmp_path / to)
    assert written["eagle_config"]["use_aux_hidden_state"] is False
    assert "num_aux_hidden_states" not in written and "eagle_aux_hidden_state_layer_ids" not in written
    out = tensor_hashes(tmp_path / to / "model.safetensors")
    assert not any(name.startswith("fc.") for name in out)
    source = tensor_hashes(src / "model.safetensors")
    assert {h for n, h in out.items() if n != "t2d"} == set(source.values())  # every weight byte for byte
    back = run_cli("--to", "modelopt", tmp_path / to, tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    assert config(tmp_path / "back")["eagle_config"] == {**config(src)["eagle_config"]}
    assert run_cli("validate", "--engine", "vllm", "--engine", "sglang", tmp_path / to).exit_code == 0


@pytest.mark.parametrize("to", ["speculators", "eagle", "gguf"])
def test_layouts_that_cannot_say_it_refuse(tmp_path: Path, to: str):
    src = final_head(tmp_path / "head")
    result = run_cli("--to", to, src, tmp_path / "out")
    assert result.exit_code == 1 and "[E-FLAG-UNSUPPORTED]" in result.stderr, result.stderr
    assert "final hidden state" in result.stderr and "Traceback" not in result.stderr
    assert nothing_written(tmp_path, "out")


def test_the_flag_false_over_a_trained_fc_is_still_the_bypass(tmp_path: Path):
    """An EAGLE-3 head whose fc fuses 3 states with the flag false: engines skip that fc; the hint to set the flag
    true is right here, and convert refuses to guess (E-CONFIG-ALGORITHM)."""
    src = final_head(tmp_path / "head", "vllm", SPEC.with_(capture_boundaries=(2, 4, 5)), keep_fc=True)
    code, found = findings("--engine", "sglang", src)
    bypass = [f for f in found if f["code"] == "E-CAPTURE-FC-BYPASSED"]
    assert code == 1 and len(bypass) == 1 and "use_aux_hidden_state to true" in bypass[0]["hint"], found
    result = run_cli("--to", "sglang", src, tmp_path / "out")
    assert result.exit_code == 1 and "[E-CONFIG-ALGORITHM]" in result.stderr and "fc.weight" in result.stderr
    assert nothing_written(tmp_path, "out")


def test_a_first_layer_without_the_embedding_is_refused(tmp_path: Path):
    """ModelOpt's HF trainer builds its no-aux module with a plain first layer of width H (modeling_eagle.py): no
    engine's Eagle3 class (first layer 2H) loads it."""
    src = final_head(tmp_path / "head")
    tensors = {n: t for n, t in stored_tensors("modelopt", SPEC).items() if not n.startswith("fc.")}
    h = SPEC.hidden_size
    for proj in ("q_proj", "k_proj", "v_proj"):
        name = f"layers.0.self_attn.{proj}.weight"
        rows = tensors[name].shape[0]
        tensors[name] = RawTensor("BF16", (rows, h), tensors[name].data[: rows * h * 2])
    plain = write_checkpoint(tmp_path / "plain", config(src), tensors)
    result = run_cli("--to", "vllm", plain, tmp_path / "out")
    assert result.exit_code == 1 and "[E-CONFIG-ALGORITHM]" in result.stderr and "width 32" in result.stderr


def test_verify_feeds_the_final_post_norm_state(tmp_path: Path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from verify_fixtures import well_scaled, write_tiny_target

    from eagle3_convert.verify import acceptance, bind, prepare
    from eagle3_convert.verify.rounds import Drafting
    from eagle3_convert.verify.target import decode, load_target_model
    from eagle3_convert.verify_inputs import check_inputs

    drafter = well_scaled(final_head(tmp_path / "head", "vllm", SPEC.with_(target_layers=4)), seed=4)
    target = write_tiny_target(tmp_path / "target", layers=4)
    inputs = check_inputs(drafter, target, k=3, device="cpu")
    assert inputs.boundaries == [5]  # L + 1: the base model's output after its final norm
    loaded = load_target_model(inputs)
    maths, embed = bind(inputs.source.drafter, loaded)
    run = decode(loaded, Drafting(maths, inputs.boundaries, embed), "hello", 3, 6)
    with torch.no_grad():
        normed = loaded.model.model.norm(run.states[4])
    assert torch.allclose(run.states[5], normed, atol=1e-5)  # the post-norm state, not the last block's output
    assert maths.fuse([run.states[5]]) is run.states[5]  # no fc
    result = acceptance(prepare(drafter, target, ["hello world"], device="cpu", max_new_tokens=8), 3)
    assert result.capture_from == "final post-norm state" and 1.0 <= result.mean_accepted_length <= 4.0


def test_inspect_says_what_the_head_is_fed(tmp_path: Path):
    """Before: "fuses k=1 states" and "boundaries engine default", as if the engines captured their default layers."""
    result = run_cli("inspect", final_head(tmp_path / "head"))
    assert result.exit_code == 0, result.stderr
    assert "fuses        nothing: fed the target's final post-norm hidden state (no fc)" in result.stdout
    assert "capture      no layers" in result.stdout and "engine default" not in result.stdout
    assert "no verdict: the sources read do not say how TensorRT-LLM feeds" in result.stdout  # its YAML claims nothing


def test_capture_layers_given_for_it_are_refused(tmp_path: Path):
    src = final_head(tmp_path / "head")
    result = run_cli("--to", "vllm", "--capture-layers", "2,4,5", "--convention", "boundary", src, tmp_path / "out")
    assert result.exit_code == 1 and "[E-CAPTURE-COUNT]" in result.stderr
    assert "fed the target's final post-norm state" in result.stderr and nothing_written(tmp_path, "out")


def test_the_model_card_says_it_captures_no_layers(hub, tmp_path: Path):
    """Before: "reads 1 hidden states" taken at "the engines' default layers"."""
    src = final_head(tmp_path / "head")
    result = run_cli("publish", src, "test-user/final-head", "--endpoint", hub.url, "--token", "hf_final_token",
                     "--registry", tmp_path / "registry.db", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)["card"]
    assert "reads the target's final hidden state" in card and "default layers" not in card
    assert "None: the drafter is fed the target's final hidden state, after its final norm, with no fc" in card
