"""validate's tensor findings (eagle3_convert/validate/tensors.py) word for word: code, message, hint and where
(issue 26: tests/test_validate.py checks each code fires, not what it says). Builder-written checkpoints
(tests/builders.py) changed in one place each, read back through the real CLI (`validate --json`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from builders import DrafterSpec, build_drafter, config_for, stored_tensors, write_safetensors, write_target
from conftest import run_cli
from test_validate import add_tensor, drop_tensor, edit_config, edit_header, edit_tensors

from eagle3_convert.safetensors_io import InMemoryTensor, read_tensor_table
from eagle3_convert.validate import check_capture_record, load_target_facts, validate_checkpoint


def ones(*shape: int) -> InMemoryTensor:
    n = 1
    for d in shape:
        n *= d
    return InMemoryTensor("BF16", shape, b"\x80\x3f" * n)


def zeros(*shape: int) -> InMemoryTensor:
    return InMemoryTensor("BF16", shape, bytes(len(ones(*shape).data)))


UNUSED_HINT = "set the config flag it belongs to, or remove the tensor"
MISSING_HINT = ("the checkpoint is incomplete: engines load it silently with random weights; re-export it from the "
                "training run")


def unused(name: str, why: str) -> dict[str, str]:
    return {"code": "E-KEY-UNUSED", "message": f"tensor {name} is not used by this drafter's config ({why}): engines "
            "drop it silently", "hint": UNUSED_HINT, "where": name}


# name -> (layout, DrafterSpec changes, the one change, the findings (error and warning) validate must give)
CASES: dict[str, tuple[str, dict[str, Any], Callable[[Path], None], list[dict[str, str]]]] = {
    "unknown": ("speculators", {}, add_tensor("backdoor.weight", ones(4)), [
        {"code": "E-KEY-UNKNOWN", "message": "tensor 'backdoor.weight' is no part of an EAGLE-3 drafter in the "
         "speculators layout: no engine loads it (SGLang skips it without a word, vLLM's loader fails on it)",
         "hint": "rename it to its drafter name or remove it (`eagle3-convert inspect {path}` lists the names)",
         "where": "backdoor.weight"}]),
    "fc-norm-off": ("speculators", {}, add_tensor("fc_norm.0.weight", ones(32)),
                    [unused("fc_norm.0.weight", "fc_norm is off")]),
    "fc-norm-past-the-last": ("speculators", {"fc_norm": True}, add_tensor("fc_norm.3.weight", ones(32)),
                              [unused("fc_norm.3.weight", "only 3 fc_norm weights exist")]),
    "input-norm": ("speculators", {}, add_tensor("input_norm.weight", ones(32)),
                   [unused("input_norm.weight", "norm_before_fc is off")]),
    "layer-past-the-last": ("speculators", {}, add_tensor("layers.1.post_attention_layernorm.weight", ones(32)),
                            [unused("layers.1.post_attention_layernorm.weight", "num_hidden_layers is 1")]),
    "bias": ("speculators", {}, add_tensor("layers.0.self_attn.q_proj.bias", ones(32)),
             [unused("layers.0.self_attn.q_proj.bias", "attention_bias / mlp_bias is off")]),
    "q-norm": ("speculators", {}, add_tensor("layers.0.self_attn.q_norm.weight", ones(8)),
               [unused("layers.0.self_attn.q_norm.weight", "a llama drafter has no q_norm/k_norm")]),
    "k-norm": ("speculators", {}, add_tensor("layers.0.self_attn.k_norm.weight", ones(8)),
               [unused("layers.0.self_attn.k_norm.weight", "a llama drafter has no q_norm/k_norm")]),
    "mla-only": ("speculators", {}, add_tensor("layers.0.self_attn.kv_a_proj_with_mqa.weight", ones(32)),
                 [unused("layers.0.self_attn.kv_a_proj_with_mqa.weight", "a llama drafter has no such tensor")]),
    "no-lm-head-small-vocab": ("speculators", {}, drop_tensor("lm_head.weight"), [
        {"code": "E-KEY-MISSING", "message": "required tensor lm_head.weight [32, 32] is missing; the target's "
         "[96, 32] head cannot stand in for it (it does not fit the d2t path)", "hint": MISSING_HINT,
         "where": "lm_head.weight"}]),
    "no-lm-head-full-vocab": ("speculators", {"draft_vocab_size": None}, drop_tensor("lm_head.weight"), [
        {"code": "E-KEY-MISSING", "message": "required tensor lm_head.weight [96, 32] is missing",
         "hint": MISSING_HINT, "where": "lm_head.weight"}]),
    "later-norm-twins-differ": ("sglang", {"num_layers": 2}, edit_tensors(
        lambda t: t.__setitem__("layers.1.hidden_norm.weight", zeros(32))), [
        {"code": "E-KEY-DUPLICATE", "message": "tensors 'layers.1.input_layernorm.weight' and "
         "'layers.1.hidden_norm.weight' hold different weights: vLLM reads the first, SGLang and TensorRT-LLM the "
         "second, and they would serve different drafters", "hint": "keep the trained weight under both names, or "
         "one of them", "where": "layers.1.hidden_norm.weight"}]),
    "later-norm-twins-differ, one at its initial ones": ("sglang", {"num_layers": 2}, edit_tensors(
        lambda t: t.__setitem__("layers.1.hidden_norm.weight", ones(32))), [
        {"code": "E-KEY-DUPLICATE", "message": "tensors 'layers.1.input_layernorm.weight' and "
         "'layers.1.hidden_norm.weight' hold different weights: vLLM reads the first, SGLang and TensorRT-LLM the "
         "second, and they would serve different drafters; 'layers.1.hidden_norm.weight' holds RMSNorm's initial "
         "ones, as a norm training never applied keeps them", "hint": "keep the trained weight under both names, or "
         "one of them", "where": "layers.1.hidden_norm.weight"}]),
    "one-weight-under-two-prefixes": ("sglang", {}, edit_tensors(
        lambda t: t.__setitem__("layers.0.input_layernorm.weight", t["midlayer.input_layernorm.weight"])), [
        {"code": "E-KEY-DUPLICATE", "message": "tensors 'layers.0.input_layernorm.weight' and "
         "'midlayer.input_layernorm.weight' both hold layers.0.input_layernorm.weight",
         "hint": "the checkpoint stores one weight twice under two prefixes: keep one",
         "where": "midlayer.input_layernorm.weight"}]),
    "a later norm under a second prefix": ("sglang", {"num_layers": 2}, edit_tensors(
        lambda t: t.__setitem__("model.layers.1.input_layernorm.weight", t["layers.1.input_layernorm.weight"])), [
        {"code": "E-KEY-DUPLICATE", "message": "tensors 'layers.1.hidden_norm.weight' and "
         "'model.layers.1.input_layernorm.weight' both hold layers.1.input_layernorm.weight",
         "hint": "the checkpoint stores one weight twice under two prefixes: keep one",
         "where": "model.layers.1.input_layernorm.weight"}]),
    "dtype": ("speculators", {}, edit_header(lambda h: h["norm.weight"].__setitem__("dtype", "I16")), [
        {"code": "E-DTYPE", "message": "tensor norm.weight has dtype I16; drafter weights are float tensors",
         "hint": "re-export the weights in bf16/fp16/fp32", "where": "norm.weight"}]),
    "shape": ("speculators", {}, edit_header(
        lambda h: h["layers.0.mlp.down_proj.weight"].__setitem__("shape", [64, 32])), [
        {"code": "E-SHAPE", "message": "tensor layers.0.mlp.down_proj.weight has shape [64, 32], the config implies "
         "[32, 64]", "hint": "config.json and the weights disagree: fix the config field the shape depends on, or "
         "re-export the weights", "where": "layers.0.mlp.down_proj.weight"}]),
    "fc and another tensor of the wrong shape": ("speculators", {}, edit_header(lambda h: (
        h["fc.weight"].__setitem__("shape", [64, 48]),
        h["layers.0.mlp.down_proj.weight"].__setitem__("shape", [64, 32]))),
        [{"code": "E-SHAPE-FC", "message": "fc.weight has 48 input columns, not a multiple of the target hidden size "
          "Ht=32", "hint": "set target_hidden_size in config.json to the target's hidden size", "where": "fc.weight"},
         {"code": "E-SHAPE", "message": "tensor layers.0.mlp.down_proj.weight has shape [64, 32], the config implies "
          "[32, 64]", "hint": "config.json and the weights disagree: fix the config field the shape depends on, or "
          "re-export the weights", "where": "layers.0.mlp.down_proj.weight"}]),
    "shape-of-a-renamed-tensor": ("sglang", {}, edit_header(
        lambda h: h["midlayer.mlp.down_proj.weight"].__setitem__("shape", [64, 32])), [
        {"code": "E-SHAPE", "message": "tensor midlayer.mlp.down_proj.weight (layers.0.mlp.down_proj.weight) has "
         "shape [64, 32], the config implies [32, 64]", "hint": "config.json and the weights disagree: fix the "
         "config field the shape depends on, or re-export the weights", "where": "midlayer.mlp.down_proj.weight"}]),
    "layer-count-beyond-the-tensors": ("speculators", {}, edit_config(
        lambda c: c["transformer_layer_config"].__setitem__("num_hidden_layers", 10 ** 9)), [
        {"code": "E-KEY-MISSING", "message": "config.json says 1000000000 decoder layers but the checkpoint holds 15 "
         "tensors", "hint": "the checkpoint is incomplete or num_hidden_layers is wrong",
         "where": "$.num_hidden_layers"}]),
}


def findings(path: Path) -> list[dict[str, str]]:
    result = run_cli("validate", path, "--json")
    return [{k: f[k] for k in ("code", "message", "hint", "where")}
            for f in json.loads(result.stdout)["findings"] if f["severity"] != "info"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_tensor_finding_says_what_is_wrong_where_and_what_to_do(name: str, tmp_path: Path):
    layout, changes, change, expected = CASES[name]
    path = build_drafter(tmp_path / "drafter", layout, DrafterSpec(), **changes)
    assert findings(path) == []
    change(path)
    assert findings(path) == [{k: v.format(path=path) for k, v in f.items()} for f in expected]


@pytest.mark.parametrize("layout", ["sglang", "vllm"])
def test_later_norm_twins_holding_the_same_weight_are_one_norm(layout: str, tmp_path: Path):
    """A 3-layer file with each later layer's norm under both engines' names, as we write it: no finding."""
    path = build_drafter(tmp_path / "drafter", layout, DrafterSpec(num_layers=3))
    stored, _ = read_tensor_table(path)
    assert {f"layers.{i}.{norm}.weight" for i in (1, 2) for norm in ("input_layernorm", "hidden_norm")} <= set(stored)
    assert findings(path) == []


def test_an_sglang_file_with_later_norms_under_hidden_norm_alone_is_clean(tmp_path: Path):
    """As SGLang's own trainers write a multi-layer drafter: no input_layernorm twin to compare with."""
    path = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec(num_layers=3))
    drop_tensor("layers.1.input_layernorm.weight", "layers.2.input_layernorm.weight")(path)
    assert findings(path) == []


# ==================================================================================================================
# validate/capture.py, config.py and engine.py (issue 26, session 7): each test pins what a surviving mutant of those
# modules changed. Builder-written files (tests/builders.py) with one change each, judged by `validate_checkpoint`
# (what the CLI's validate calls) or the CLI itself; every finding compared in full: code, severity, message, hint,
# where and the engine it names.

def judged(tmp_path: Path, layout: str, spec: dict[str, Any] | None = None,
           edit: Callable[[dict[str, Any]], Any] | None = None,
           tensors: Callable[[dict[str, Any]], Any] | None = None, target: dict[str, Any] | None = None,
           codes: tuple[str, ...] = (), **options: Any) -> list[tuple]:
    """The findings validate gives a `layout` file of `spec`, its config.json changed by `edit` and its stored
    tensors by `tensors`, judged against a target written from the spec (with `target`'s changes) when given;
    only those whose code holds one of `codes` (all when none). Paths say {tmp}."""
    drafter = DrafterSpec(**(spec or {}))
    root = tmp_path / "drafter"
    root.mkdir()
    config = config_for(layout, drafter)
    if edit:
        edit(config)
    (root / "config.json").write_text(json.dumps(config))
    stored = dict(stored_tensors(layout, drafter))
    if tensors:
        tensors(stored)
    write_safetensors(root / "model.safetensors", stored)
    if target is not None:
        options["target"] = load_target_facts(str(write_target(tmp_path / "target", drafter.with_(**target))))
    report = validate_checkpoint(root, **options)
    return [tuple(v.replace(str(tmp_path), "{tmp}") if isinstance(v, str) else v
                  for v in (f.code, f.severity, f.message, f.hint, f.where, f.engine))
            for f in report.findings if not codes or any(c in f.code for c in codes)]


def test_tensorrt_llm_loads_the_later_layers_hidden_norm_it_applies(tmp_path: Path):
    """TensorRT-LLM builds and applies hidden_norm in layers >= 1 (engines/trtllm.py LATER_NORM_APPLIED): an SGLang
    2-layer file with layer 1's norm under hidden_norm alone, as SGLang's trainers write it, loses nothing there.
    validate used to call that weight dropped ("no parameter named 'layers.1.hidden_norm.weight'") and advise the
    rename to input_layernorm, the one name TensorRT-LLM drops."""
    got = judged(tmp_path, "sglang", {"num_layers": 2}, tensors=lambda t: t.pop("layers.1.input_layernorm.weight"),
                 engines=["trtllm"])
    assert got == [
        ('I-CAPTURE-RUNTIME', 'info', 'TensorRT-LLM takes the capture layers from its runtime argument, not '
         'config.json: pass ids [1, 3, 4] (block outputs) to capture boundaries [2, 4, 5]', None, None, 'trtllm')]


def test_tensorrt_llm_drops_a_layer_0_stored_as_midlayer_in_a_multi_layer_file(tmp_path: Path):
    """Its loader reads midlayer.* only for a one-layer drafter: every weight of a 2-layer file's midlayer.* is
    dropped silently, each said once with the name it loads ("it has no parameter named ..."), not "adds model."."""
    got = judged(tmp_path, "sglang", {"num_layers": 2}, engines=["trtllm"], codes=("E-KEY",),
                 tensors=lambda t: [t.__setitem__(n.replace("layers.0.", "midlayer."), t.pop(n))
                                    for n in list(t) if n.startswith("layers.0.")])
    assert got == [
        ('E-KEY-DROPPED', 'error', f"TensorRT-LLM drops tensor 'midlayer.{n}.weight' (layers.0.{n}.weight) silently: "
         f"it has no parameter named 'midlayer.{n}.weight'; the weight keeps its random initialisation",
         f"rename it to the name TensorRT-LLM loads ('layers.0.{n}.weight')", f"midlayer.{n}.weight", 'trtllm')
        for n in ("hidden_norm", "input_layernorm", "mlp.down_proj", "mlp.gate_proj", "mlp.up_proj",
                  "post_attention_layernorm", "self_attn.k_proj", "self_attn.o_proj", "self_attn.q_proj",
                  "self_attn.v_proj")]
