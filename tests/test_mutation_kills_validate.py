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
from test_validate import IDS, add_tensor, drop_tensor, edit_config, edit_header, edit_tensors

from eagle3_convert.errors import UsageError
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
    # vLLM's loader raises on a name it has no parameter for, but skips an extra bias (docs/formats.md §6.2)
    effect = ("engines drop it silently" if name.endswith(".bias") else
              "no engine applies it (SGLang skips it without a word, vLLM's loader fails on it)")
    return {"code": "E-KEY-UNUSED", "message": f"tensor {name} is not used by this drafter's config ({why}): {effect}",
            "hint": UNUSED_HINT, "where": name}


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
    # issue 34: the trained twin is the drafter's (a warning); SGLang, judged here, applies the untrained one
    "later-norm-twins-differ, one at its initial ones": ("sglang", {"num_layers": 2}, edit_tensors(
        lambda t: t.__setitem__("layers.1.hidden_norm.weight", ones(32))), [
        {"code": "E-ENGINE-WRONG", "message": "SGLang applies 'layers.1.hidden_norm.weight', RMSNorm's initial ones, "
         "where the drafter was trained with 'layers.1.input_layernorm.weight': it would serve this file wrong",
         "hint": "write the trained norm under both names: `eagle3-convert --to sglang {path} drafter-sglang`",
         "where": "layers.1.hidden_norm.weight"},
        {"code": "W-KEY-UNTRAINED-TWIN", "message": "tensor 'layers.1.hidden_norm.weight' holds RMSNorm's initial "
         "ones, a norm training never applied, beside the trained 'layers.1.input_layernorm.weight': the drafter was "
         "trained with the latter; convert keeps it under both names and drops the untrained copy",
         "hint": "write the trained norm under both names: `eagle3-convert --to sglang {path} drafter-sglang`",
         "where": "layers.1.hidden_norm.weight"}]),
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
                 tensors=renamed("layers.0.", "midlayer."))
    assert got == [
        ('E-KEY-DROPPED', 'error', f"TensorRT-LLM drops tensor 'midlayer.{n}.weight' (layers.0.{n}.weight) silently: "
         f"it has no parameter named 'midlayer.{n}.weight'; the weight keeps its random initialisation",
         f"rename it to the name TensorRT-LLM loads ('layers.0.{n}.weight')", f"midlayer.{n}.weight", 'trtllm')
        for n in LLAMA_LAYER]


def test_a_record_against_the_config_each_way_it_can_differ():
    """check_capture_record (validate and convert call it with the sidecar's or the registry's ids): the embedding
    tap lost although boundary 1 is kept, other layers (its own default hint), and a config naming no ids."""
    [lost] = check_capture_record([1, 4, 5], [0, 4, 5], "the sidecar")
    assert (lost.code, lost.message) == (
        "E-CAPTURE-EMBEDDING", "the sidecar says the drafter was trained with the embedding output (boundary 0) among "
        "its taps [0, 4, 5], but config.json captures boundaries [1, 4, 5]")
    [other] = check_capture_record([2, 4, 6], [2, 4, 5], "the registry", where="$.x")
    assert (other.code, other.severity, other.message, other.hint, other.where) == (
        "E-CAPTURE-RECORD", "error", "the config captures boundaries [2, 4, 6], the registry says the drafter was "
        "trained on [2, 4, 5]", "convert again from the trained checkpoint, or fix the ids to the record", "$.x")
    [unnamed] = check_capture_record([2, 4, 5], [1, 3, 6], "the sidecar", names_none=True)
    assert (unnamed.code, unnamed.message) == (
        "E-CAPTURE-RECORD", "config.json names no capture ids, so its engines capture their default boundaries "
        "[2, 4, 5], the sidecar says the drafter was trained on [1, 3, 6]")


def test_ids_deleted_from_a_converted_file_are_restored_from_its_sidecar(tmp_path: Path):
    """A drafter trained on [1, 3, 6], converted to SGLang with its target (the sidecar records both), then its ids
    deleted from config.json: SGLang would capture its defaults, and the fix is the plain conversion."""
    spec = DrafterSpec(capture_boundaries=(1, 3, 6))
    source = build_drafter(tmp_path / "built", "vllm", spec)
    run_cli("--to", "sglang", "--no-record", "--target", write_target(tmp_path / "target", spec), source,
            tmp_path / "drafter")
    edit_config(lambda c: (c.pop(IDS), c["eagle_config"].pop(IDS)))(tmp_path / "drafter")
    result = run_cli("validate", tmp_path / "drafter", "--json")
    assert result.exit_code == 1
    got = [(f["code"], f["message"], f["hint"], f["where"], f["engine"])
           for f in json.loads(result.stdout)["findings"]]
    assert got == [
        ("E-CAPTURE-RECORD", "config.json names no capture ids, so its engines capture their default boundaries "
         "[2, 4, 5], eagle3-convert.json (written with another config.json) says the drafter was trained on [1, 3, 6]",
         f"`eagle3-convert --to sglang {tmp_path}/drafter drafter-sglang` restores them from the record",
         f"$.eagle_config.{IDS}", None),
        ("I-CAPTURE-DEFAULT", "config.json names no capture ids: SGLang captures its default boundaries [2, 4, 5]",
         None, None, "sglang")]


MLA = {"family": "deepseek_mla", "target_model_type": "deepseek_v3"}
LLAMA_LAYER = ("hidden_norm", "input_layernorm", "mlp.down_proj", "mlp.gate_proj", "mlp.up_proj",
               "post_attention_layernorm", "self_attn.k_proj", "self_attn.o_proj", "self_attn.q_proj",
               "self_attn.v_proj")
MLA_LAYER = ("hidden_norm", "input_layernorm", "mlp.down_proj", "mlp.gate_proj", "mlp.up_proj",
             "post_attention_layernorm", "self_attn.kv_a_layernorm", "self_attn.kv_a_proj_with_mqa",
             "self_attn.kv_b_proj",
             "self_attn.o_proj", "self_attn.q_a_layernorm", "self_attn.q_a_proj", "self_attn.q_b_proj")
DEFAULTS_DIFFER = (
    'W-CONFIG-DEFAULTS-DIFFER', 'warning', 'norm_before_residual is absent: vLLM serves a speculators config without '
    'it as true, the speculators library reads it as false (and convert refuses it)', 'write norm_before_residual '
    'into config.json, true or false as the drafter was trained (the speculators trainer writes true): no conversion '
    'can choose it for you', '$.norm_before_residual', None)


def renamed(old: str, new: str) -> Callable[[dict[str, Any]], Any]:
    """Every stored name starting with `old` starts with `new` instead."""
    return lambda t: [t.__setitem__(new + n[len(old):], t.pop(n)) for n in list(t) if n.startswith(old)]


def unapplied(i: int) -> tuple:
    return ('E-KEY-UNAPPLIED', 'error', f"vLLM loads tensor 'layers.{i}.hidden_norm.weight' "
            f"(layers.{i}.input_layernorm.weight) into a norm it builds in every layer but never applies in layers >= "
            f"1; the norm it applies there, 'layers.{i}.input_layernorm.weight', keeps its initial ones",
            f"store the weight under 'layers.{i}.input_layernorm.weight' too (`eagle3-convert --to vllm "
            "{tmp}/drafter drafter-vllm` writes both names)", f'layers.{i}.hidden_norm.weight', 'vllm')


MODEL_BIAS_DROPPED = (
    'E-KEY-DROPPED', 'error', "vLLM drops tensor 'model.layers.0.self_attn.q_proj.bias' "
    "(layers.0.self_attn.q_proj.bias) silently: it adds `model.` itself, so 'model.layers.0.self_attn.q_proj.bias' "
    "matches no parameter; the weight keeps its random initialisation",
    "rename it to the name vLLM loads ('layers.0.self_attn.q_proj.bias')", 'model.layers.0.self_attn.q_proj.bias',
    'vllm')
FC_MISSING = ('E-KEY-MISSING', 'error', 'required tensor fc.weight [32, 64] is missing', 'the checkpoint is '
              'incomplete: engines load it silently with random weights; re-export it from the training run',
              'fc.weight', None)
CONFIG_CODES = ("CONFIG", "SCHEMA", "SHAPE", "KEY", "VOCAB", "TARGET", "CAPTURE-COUNT", "ROPE")
# name -> (judged()'s arguments, every finding it gives of the codes named there)
CASES7: dict[str, tuple[dict[str, Any], list[tuple]]] = {
    # validate/engine.py: how each engine loads the stored names (_engine_keys)
    "an MLA SGLang file with model.-prefixed layer names": (
        dict(layout="sglang", spec=MLA, tensors=renamed("midlayer.", "model.layers.0."), codes=("E-KEY",)),
        [('E-KEY-DROPPED', 'error', f"SGLang drops tensor 'model.layers.0.{n}.weight' (layers.0.{n}.weight) silently: "
          f"it adds `model.` itself, so 'model.layers.0.{n}.weight' matches no parameter; the weight keeps its random "
          "initialisation", f"rename it to the name SGLang loads ('midlayer.{n}.weight')",
          f'model.layers.0.{n}.weight', 'sglang') for n in MLA_LAYER]),
    "an SGLang (Llama) file with model.-prefixed layer names, which its Llama class loads": (
        dict(layout="sglang", tensors=renamed("midlayer.", "model.layers.0."), codes=("E-KEY",)), []),
    "an SGLang 2-layer file with the later norm under hidden_norm alone, for vLLM": (
        dict(layout="sglang", spec={"num_layers": 2, "capture_boundaries": None}, engines=["vllm"], codes=("E-KEY",),
             tensors=lambda t: t.pop("layers.1.input_layernorm.weight")), [unapplied(1)]),
    "an SGLang 3-layer file with the later norms under hidden_norm alone, for vLLM": (
        dict(layout="sglang", spec={"num_layers": 3, "capture_boundaries": None}, engines=["vllm"], codes=("E-KEY",),
             tensors=lambda t: (t.pop("layers.1.input_layernorm.weight"), t.pop("layers.2.input_layernorm.weight"))),
        [unapplied(1), unapplied(2)]),
    "an SGLang 2-layer file with the later norm under both names, for vLLM": (
        dict(layout="sglang", spec={"num_layers": 2, "capture_boundaries": None}, engines=["vllm"], codes=("E-KEY",)),
        []),
    "a vLLM file with a model.-prefixed bias and a model.-prefixed weight": (
        dict(layout="vllm", spec={"attention_bias": True}, codes=("E-KEY",), tensors=lambda t: (
            t.__setitem__("model.layers.0.self_attn.q_proj.bias", t.pop("layers.0.self_attn.q_proj.bias")),
            t.__setitem__("model.layers.0.self_attn.k_proj.weight", t.pop("layers.0.self_attn.k_proj.weight")))),
        [MODEL_BIAS_DROPPED,
         ('E-KEY-REFUSED', 'error', "vLLM fails to load this file: its loader raises on "
          "'model.layers.0.self_attn.k_proj.weight', a name that matches no parameter (it adds `model.` to every name "
          "but lm_head's itself)", "no conversion fixes this: writing the vllm layout is refused (tensor "
          "'model.layers.0.self_attn.k_proj.weight' is not part of an EAGLE-3 drafter in the vllm layout "
          "[E-KEY-UNKNOWN])", 'model.layers.0.self_attn.k_proj.weight', 'vllm')]),
    "a vLLM file with an unused model.layers.1 tensor: said once, as unused": (
        dict(layout="vllm", codes=("E-KEY",), tensors=lambda t: t.__setitem__("model.layers.1.mlp.up_proj.weight",
                                                                               t["layers.0.mlp.up_proj.weight"])),
        [('E-KEY-UNUSED', 'error', "tensor model.layers.1.mlp.up_proj.weight (layers.1.mlp.up_proj.weight) is not used "
          "by this drafter's config (num_hidden_layers is 1): no engine applies it (SGLang skips it without a word, "
          "vLLM's loader fails on it)",
          'set the config flag it belongs to, or remove the tensor', 'model.layers.1.mlp.up_proj.weight', None)]),
    "a vLLM file with an unused input_norm sorted before a model.-prefixed bias": (
        dict(layout="vllm", spec={"attention_bias": True}, codes=("E-KEY",), tensors=lambda t: (
            t.__setitem__("input_norm.weight", t["norm.weight"]),
            t.__setitem__("model.layers.0.self_attn.q_proj.bias", t.pop("layers.0.self_attn.q_proj.bias")))),
        [('E-KEY-UNUSED', 'error', "tensor input_norm.weight is not used by this drafter's config (norm_before_fc is "
          "off): no engine applies it (SGLang skips it without a word, vLLM's loader fails on it)",
          'set the config flag it belongs to, or remove the tensor',
          'input_norm.weight', None), MODEL_BIAS_DROPPED]),
    # validate/engine.py: the class each engine builds for the config (_engine_reads_config)
    "architectures a string, read as vLLM": (
        dict(layout="vllm", edit=lambda c: c.update(architectures="LlamaForCausalLMEagle3"), from_layout="vllm",
             codes=("ARCH", "SCHEMA", "FIELD")),
        [('E-CONFIG-FIELD', 'error', "architectures is 'LlamaForCausalLMEagle3' (JSON string); the vllm reader expects "
          "a list of strings and would coerce it", 'write architectures as a list of strings in config.json',
          '$.architectures', None),
         ('E-CONFIG-ARCH', 'error', 'architectures [] name no vLLM EAGLE-3 drafter class', "set architectures to "
          "['LlamaForCausalLMEagle3'], the class vLLM builds for a llama drafter", '$.architectures', 'vllm')]),
    "architectures naming no vLLM class": (
        dict(layout="sglang", edit=lambda c: c.update(architectures=["MistralForCausalLM"]), engines=["vllm"],
             from_layout="sglang", codes=("E-CONFIG-ARCH",)),
        [('E-CONFIG-ARCH', 'error', "architectures ['MistralForCausalLM'] name no vLLM EAGLE-3 drafter class",
          "set architectures to ['LlamaForCausalLMEagle3'], the class vLLM builds for a llama drafter",
          '$.architectures', 'vllm')]),
    "speculators without norm_before_residual, for the library alone": (
        dict(layout="speculators", edit=lambda c: c.pop("norm_before_residual"), engines=["speculators"],
             codes=("DEFAULTS",)), [DEFAULTS_DIFFER]),
    "speculators without norm_before_residual, for vLLM alone": (
        dict(layout="speculators", edit=lambda c: c.pop("norm_before_residual"), engines=["vllm"],
             codes=("DEFAULTS",)), [DEFAULTS_DIFFER]),
    # validate/engine.py: the engine modules' verdicts (check_engine_verdicts)
    "an SGLang file llama.cpp would serve wrong": (
        dict(layout="sglang", edit=lambda c: c["eagle_config"].update({IDS: [0, 3, 4]}), engines=["llamacpp"],
             codes=("ENGINE",)),
        [('E-ENGINE-WRONG', 'error', 'llama.cpp: captures its default layers {2, L//2, L-3}, never the trained '
          '[1, 4, 5]; it would serve this file wrong', 'write the file the engine reads right: `eagle3-convert '
          '--engine llamacpp --to vllm {tmp}/drafter drafter-vllm` (or the GGUF itself: eagle3-convert --to gguf '
          '--target-gguf TARGET.gguf)', None, 'llamacpp')]),
    "a 2-layer drafter for llama.cpp": (
        dict(layout="vllm", spec={"num_layers": 2}, engines=["llamacpp"], codes=("ENGINE",)),
        [('E-ENGINE-REFUSES', 'error', "llama.cpp: llama.cpp's converter does not detect it as EAGLE-3 (one layer and "
          "draft_vocab_size needed) and fails on its tensor names", 'no file makes llama.cpp serve a 2-layer drafter '
          '(it builds one layer); serve it with vLLM: `eagle3-convert --engine vllm --to vllm {tmp}/drafter '
          'drafter-vllm`', None,
          'llamacpp')]),
    "a speculators file without embed_tokens for mlx-vlm": (
        dict(layout="speculators", engines=["mlx-vlm"], codes=("ENGINE",)),
        [('E-ENGINE-REFUSES', 'error', "mlx-vlm (from source): mlx-vlm's drafter embeds tokens with its own "
          "embed_tokens, which this checkpoint does not store: the module is dropped at load and the first draft step "
          "fails", "write the speculators layout (eagle3-convert --to speculators {tmp}/drafter "
          "drafter-speculators), then add the target's embed_tokens.weight if the drafter stores none", None,
          'mlx-vlm')]),
    "a speculators file with embed_tokens for mlx-vlm": (
        dict(layout="speculators", spec={"embed_tokens": True}, engines=["mlx-vlm"], codes=("ENGINE",)),
        [('W-ENGINE-CAVEAT', 'warning', 'mlx-vlm captures only on targets whose model takes its hooks (gemma4, '
          'gemma4_unified, lfm2, minimax_m3_vl, muse_glimmer, qwen3_5 at 0.6.15)', 'serve it as the caveat says, or '
          'with an engine that reads the file in full: `eagle3-convert --engine vllm --to vllm {tmp}/drafter '
          'drafter-vllm`', None,
          'mlx-vlm'),
         ('I-ENGINE-READING', 'info', 'mlx-vlm (from source) 0.6.15: as-trained (captures [2, 4, 5], trained maths; '
          'mlx-vlm captures only on targets whose model takes its hooks (gemma4, gemma4_unified, lfm2, minimax_m3_vl, '
          'muse_glimmer, qwen3_5 at 0.6.15))', None, None, 'mlx-vlm')]),
    "an EAGLE file for LMDeploy": (
        dict(layout="eagle", engines=["lmdeploy"], codes=("ENGINE",)),
        [('E-ENGINE-REFUSES', 'error', "LMDeploy (from source): LMDeploy builds its EAGLE-3 drafter only from "
          "architectures[0] 'LlamaForCausalLM' (or a declared 'Eagle3LlamaForCausalLM'); ['LlamaForCausalLMEagle3'] "
          "have no EAGLE-3 rewrite there", 'write the eagle layout (eagle3-convert --to eagle {tmp}/drafter '
          'drafter-eagle), then set architectures to ["LlamaForCausalLM"], the name LMDeploy\'s docs load', None,
          'lmdeploy')]),
    "a P-EAGLE drafter for TensorRT-LLM, whose reading of it is not established": (
        dict(layout="vllm", spec={"peagle_mask_token_id": 5}, engines=["trtllm"], codes=("ENGINE",)),
        [('W-ENGINE-UNKNOWN', 'warning', "TensorRT-LLM (from source): TensorRT-LLM's sources read have no P-EAGLE mode "
          "(SpeculativeDecodingMode, _torch/speculative/interface.py @ 00b6d5a2; its PARD mode drafts from mask tokens "
          "without the target's hidden states): as Eagle3 it would draft autoregressively a drafter trained to draft "
          "in parallel, if its loader takes mask_hidden at all; not served as trained, whether loudly or not is not "
          "established", 'judge the file on the engine itself, or serve it with an engine whose reading is known '
          '(check one with validate --engine)', None, 'trtllm')]),
    "no ids, llama.cpp, the target's depth known": (
        dict(layout="vllm", spec={"capture_boundaries": None}, engines=["llamacpp"], target={}, codes=("ENGINE",)),
        [('I-ENGINE-READING', 'info', 'llama.cpp b11434: default-layers (captures its default layers, the trained '
          'ones)', None, None, 'llamacpp')]),
    "no ids, llama.cpp, no target": (
        dict(layout="vllm", spec={"capture_boundaries": None}, engines=["llamacpp"], codes=("ENGINE",)),
        [('I-ENGINE-READING', 'info', 'llama.cpp b11434: default-layers (captures its default layers {2, L//2, L-3}, '
          'as in training)', None, None, 'llamacpp')]),
    "a vLLM file for SGLang on a gpt-oss target: the releases read it by the target's family and depth": (
        dict(layout="vllm", spec={"capture_boundaries": (2, 4, 8), "target_model_type": "gpt_oss"},
             engines=["sglang"], target={}, codes=("ENGINE",)),
        [('I-ENGINE-RELEASES', 'info', 'SGLang releases disagree on this file: served as trained on ≥ 0.5.17; served '
          "WRONG on 0.5.12–0.5.16 (SGLang cannot capture boundaries [9] (the last block's output) and serves without "
          "them); served WRONG on 0.5.9–0.5.11 (SGLang cannot capture boundaries [9] (the last block's output) and "
          "serves without them; SGLang drops layers.0.* weights (it loads midlayer.* only) "
          "(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) "
          "without a word)", None, None, 'sglang')]),
    "SGLang without draft_vocab_size or lm_head": (
        dict(layout="sglang", edit=lambda c: c.pop("draft_vocab_size"), tensors=lambda t: t.pop("lm_head.weight"),
             codes=("ENGINE", "DRAFT-VOCAB")),
        [('E-CONFIG-DRAFT-VOCAB', 'error', 'config.json has no draft_vocab_size: SGLang fails to construct the '
          'drafter', 'set draft_vocab_size to the lm_head rows', '$.draft_vocab_size', 'sglang')]),
    "four capture ids: vLLM's caveat, once for its two runners": (
        dict(layout="vllm", spec={"num_aux": 4, "capture_boundaries": (2, 3, 4, 5)}, engines=["vllm"],
             codes=("ENGINE",)),
        [('W-ENGINE-CAVEAT', 'warning', '4 capture ids: some vLLM releases crash at start-up on 4 or more top-level '
          'ids (vLLM PR #54598, open)', 'serve it as the caveat says, or with an engine that reads the file in full: '
          '`eagle3-convert --engine vllm --to vllm {tmp}/drafter drafter-vllm`', None, 'vllm')]),
    "two caveats of mlx-vlm, in one line": (
        dict(layout="speculators", spec={"embed_tokens": True}, engines=["mlx-vlm"], codes=("W-ENGINE",),
             edit=lambda c: c["transformer_layer_config"].update(sliding_window=64,
                                                                  layer_types=["sliding_attention"])),
        [('W-ENGINE-CAVEAT', 'warning', 'mlx-vlm captures only on targets whose model takes its hooks (gemma4, '
          'gemma4_unified, lfm2, minimax_m3_vl, muse_glimmer, qwen3_5 at 0.6.15); mlx-vlm attends over the whole '
          'context where the drafter was trained with a 64-token sliding window: the maths differ past 64 tokens',
          'serve it as the caveat says, or with an engine that reads the file in full: `eagle3-convert --engine '
          'vllm --to vllm {tmp}/drafter drafter-vllm`', None, 'mlx-vlm')]),
    "fc_norm on vLLM 0.21.0: refused, said once for its two runners": (
        dict(layout="vllm", spec={"fc_norm": True}, engines=["vllm"], releases={"vllm": ["0.21.0"]},
             codes=("ENGINE",)),
        [('E-ENGINE-REFUSES', 'error', 'vLLM (V1 runner) 0.21.0 refuses this file: vLLM builds no fc_norm and fails to '
          'load fc_norm.* (KeyError)', 'upgrade to vLLM ≥ 0.22.0, which serves this file as trained', None,
          'vllm'),  # its own layout holds fc_norm as this file does: no file makes 0.21.0 load it
         ('I-ENGINE-RELEASES', 'info', 'vLLM releases disagree on this file: served as trained on ≥ 0.22.0; refused '
          'loudly on 0.18.0–0.21.0 (vLLM builds no fc_norm and fails to load fc_norm.* (KeyError))', None, None,
          'vllm')]),
    "an SGLang release this tool does not model: judged by the newest's rules": (
        dict(layout="sglang", engines=["sglang"], releases={"sglang": ["0.9.99"]}, codes=("ENGINE",)),
        [('W-ENGINE-RELEASE-UNKNOWN', 'warning', "SGLang 0.9.99 is newer than the newest release this tool models "
          "(0.5.23): judged by 0.5.23's rules", 'name the release this tool models that yours behaves as (0.5.9 to '
          '0.5.23), or check the verdict on SGLang 0.9.99 itself', None, 'sglang')]),
    # validate/config.py
    "a capture list as a string, then unknown keys": (
        dict(layout="sglang", codes=("KEY", "CAPTURE-FIELD"), edit=lambda c: (
            c["eagle_config"].__setitem__(IDS, "1,3,4"), c.__setitem__("zz_notes", 1),
            c.__setitem__("hiden_size", 32))),
        [('E-CAPTURE-FIELD', 'error', "eagle_config.eagle_aux_hidden_state_layer_ids is '1,3,4': not a short list of "
          "integers", 'write the capture ids as a list of integers', '$.eagle_config.eagle_aux_hidden_state_layer_ids',
          None),
         *(('W-CONFIG-KEY-UNKNOWN', 'warning', f"{key} is no key the sglang layout's producers write; carried "
            "verbatim, and no engine reads it", 'remove it if it is a leftover', f'$.{key}', None)
           for key in ("zz_notes", "hiden_size"))]),
    "speculators: transformer_layer_config a list": (
        dict(layout="speculators", edit=lambda c: c.__setitem__("transformer_layer_config", []),
             codes=("CONFIG", "SCHEMA")),
        [('E-CONFIG-FIELD', 'error', 'transformer_layer_config is [] (JSON array); the speculators reader expects an '
          'object and would coerce it', 'write transformer_layer_config as an object in config.json',
          '$.transformer_layer_config', None),
         ('E-CONFIG-FIELD', 'error', 'the speculators config has no transformer_layer_config object',
          "a speculators EAGLE-3 config nests the drafter's decoder config there", '$.transformer_layer_config',
          None)]),
    "speculators: a zero hidden_size in transformer_layer_config": (
        dict(layout="speculators", edit=lambda c: c["transformer_layer_config"].__setitem__("hidden_size", 0),
             codes=("CONFIG", "SCHEMA")),
        [('E-CONFIG-FIELD', 'error', 'transformer_layer_config: hidden_size is 0; expected a positive integer',
          'fix hidden_size in config.json', '$.transformer_layer_config.hidden_size', None)]),
    # validate/capture.py
    "a speculators file with its ids nested, for the library": (
        dict(layout="speculators", edit=lambda c: (c.pop(IDS), c.__setitem__("eagle_config", {IDS: [2, 4, 5]})),
             engines=["speculators"], codes=("CAPTURE",)),
        [('W-CAPTURE-CONVENTION', 'warning', 'eagle_config.eagle_aux_hidden_state_layer_ids [2, 4, 5] is read by '
          "SGLang as boundaries [3, 5, 6], while in the speculators layout's convention it means boundaries [2, 4, 5]",
          'no conversion fixes this: writing the speculators layout is refused (--from sglang cannot read it: the '
          "checkpoint is in the speculators layout (config.json has speculators_model_type 'eagle3'); the sglang "
          'reader refuses it (E-CONFIG-FIELD): config.json: hidden_size is None; expected a positive integer '
          '[E-FROM-MISMATCH])', '$.eagle_config.eagle_aux_hidden_state_layer_ids', None),
         ('W-CAPTURE-IDS-IGNORED', 'warning', 'the speculators library reads capture ids only from '
          'eagle_aux_hidden_state_layer_ids: it ignores eagle_config.eagle_aux_hidden_state_layer_ids [2, 4, 5] and '
          'captures its default boundaries {2, L//2, L-3}', 'write the ids where the speculators library reads them: '
          '`eagle3-convert --capture-layers 2,4,5 --convention speculators --to speculators {tmp}/drafter '
          'drafter-speculators` writes them there', '$.eagle_config.eagle_aux_hidden_state_layer_ids',
          'speculators')]),
    "a draft_vocab_size as a string: the head's rows size the drafter": (
        dict(layout="vllm", edit=lambda c: c.update(draft_vocab_size="32"), codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', "draft_vocab_size is '32' (JSON string); the vllm reader expects a positive "
          "integer and would coerce it", 'write draft_vocab_size as a positive integer in config.json',
          '$.draft_vocab_size', None),
         ('E-CONFIG-DRAFT-VOCAB', 'error', "draft_vocab_size is '32': vLLM then sizes the draft head for the full "
          "vocab V=96, but lm_head.weight has 32 rows", 'set draft_vocab_size to 32', '$.draft_vocab_size', 'vllm')]),
    "a zero target_hidden_size: the drafter's own width": (
        dict(layout="vllm", edit=lambda c: c.update(target_hidden_size=0), codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', 'target_hidden_size is 0 (JSON number); the vllm reader expects a positive '
          'integer and would coerce it', 'write target_hidden_size as a positive integer in config.json',
          '$.target_hidden_size', None)]),
    "SGLang's use_aux_norm read as fc_norm": (
        dict(layout="sglang", spec={"fc_norm": True}, edit=lambda c: c.update(use_aux_norm=c.pop("fc_norm")),
             codes=CONFIG_CODES), []),
    "ModelOpt's nested norm_before_fc": (dict(layout="modelopt", spec={"norm_before_fc": True}, codes=CONFIG_CODES),
                                         []),
    "vLLM's norm_output": (dict(layout="vllm", spec={"norm_output": True}, codes=CONFIG_CODES), []),
    "norm_before_residual, which SGLang has not": (
        dict(layout="vllm", spec={"norm_before_residual": True}, engines=["sglang"], codes=("UNSUPPORTED",)),
        [('E-ENGINE-UNSUPPORTED', 'error', 'norm_before_residual is true and SGLang has no such option: it would serve '
          'different maths or drop weights', 'no file makes SGLang serve this drafter as trained; serve it with vLLM, '
          'which supports every variant: `eagle3-convert --engine vllm --to vllm {tmp}/drafter drafter-vllm`', None,
          'sglang')]),
    "norm_output, which llama.cpp ignores": (
        dict(layout="vllm", spec={"norm_output": True}, engines=["llamacpp"], codes=("ENGINE",)),
        [('E-ENGINE-WRONG', 'error', 'llama.cpp: llama.cpp ignores norm_output; it would serve this file wrong',
          'no conversion fixes this: written in the vllm layout, llama.cpp b11434 would still serve it wrong: '
          'llama.cpp ignores norm_output [E-ENGINE-WRONG]', None, 'llamacpp')]),
    "vLLM's top-level norm_before_fc": (dict(layout="vllm", spec={"norm_before_fc": True}, codes=CONFIG_CODES), []),
    "a target_hidden_size as a string: the drafter's own width": (
        dict(layout="vllm", edit=lambda c: c.update(target_hidden_size="40"), codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', "target_hidden_size is '40' (JSON string); the vllm reader expects a positive "
          "integer and would coerce it", 'write target_hidden_size as a positive integer in config.json',
          '$.target_hidden_size', None)]),
    "a draft_vocab_size as a string, a head of 40 rows: the rows size the drafter": (
        dict(layout="vllm", spec={"draft_vocab_size": 40}, edit=lambda c: c.update(draft_vocab_size="40"),
             codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', "draft_vocab_size is '40' (JSON string); the vllm reader expects a positive "
          "integer and would coerce it", 'write draft_vocab_size as a positive integer in config.json',
          '$.draft_vocab_size', None),
         ('E-CONFIG-DRAFT-VOCAB', 'error', "draft_vocab_size is '40': vLLM then sizes the draft head for the full "
          "vocab V=96, but lm_head.weight has 40 rows", 'set draft_vocab_size to 40', '$.draft_vocab_size', 'vllm')]),
    "fewer key/value heads than the weights hold": (
        dict(layout="vllm", edit=lambda c: c.update(num_key_value_heads=3), codes=CONFIG_CODES),
        [('E-SHAPE', 'error', f'tensor layers.0.self_attn.{n}_proj.weight has shape [16, 64], the config implies '
          '[24, 64]', 'config.json and the weights disagree: fix the config field the shape depends on, or re-export '
          'the weights', f'layers.0.self_attn.{n}_proj.weight', None) for n in "kv"]),
    "no fc.weight: the declared count stands": (
        dict(layout="vllm", edit=lambda c: c.update(num_aux_hidden_states=2), tensors=lambda t: t.pop("fc.weight"),
             codes=CONFIG_CODES),
        [FC_MISSING, ('E-CAPTURE-COUNT', 'error', 'eagle_aux_hidden_state_layer_ids lists 3 capture ids [2, 4, 5] but '
                      'fc.weight fuses 2 states', 'the capture id list and the fc width must agree',
                      '$.eagle_aux_hidden_state_layer_ids', None)]),
    "no fc.weight: the id list's length stands": (
        dict(layout="vllm", edit=lambda c: (c.update({IDS: [2, 4]}), c["eagle_config"].update({IDS: [2, 4]})),
             tensors=lambda t: t.pop("fc.weight"), codes=CONFIG_CODES), [FC_MISSING]),
    "no fc.weight: the top-level list's length stands": (
        dict(layout="vllm", edit=lambda c: (c.update({IDS: [2, 4]}), c["eagle_config"].pop(IDS)),
             tensors=lambda t: t.pop("fc.weight"), codes=CONFIG_CODES), [FC_MISSING]),
    "no fc.weight: the nested list's length stands": (
        dict(layout="sglang", edit=lambda c: c["eagle_config"].update({IDS: [1, 3]}),
             tensors=lambda t: t.pop("fc.weight"), codes=CONFIG_CODES), [FC_MISSING]),
    "a ModelOpt Megatron export's midlayer.* names": (
        dict(layout="modelopt", tensors=renamed("layers.0.", "midlayer."), codes=CONFIG_CODES), []),
    "a ModelOpt export's midlayer.* names under model.": (
        dict(layout="modelopt", tensors=renamed("layers.0.", "model.midlayer."), codes=("E-KEY",)),
        [('E-KEY-DROPPED', 'error', f"TensorRT-LLM drops tensor 'model.midlayer.{n}.weight' (layers.0.{n}.weight) "
          f"silently: it adds `model.` itself, so 'model.midlayer.{n}.weight' matches no parameter; the weight keeps "
          f"its random initialisation", f"rename it to the name TensorRT-LLM loads ('midlayer.{n}.weight')",
          f'model.midlayer.{n}.weight', 'trtllm') for n in LLAMA_LAYER]),
    "no fc.weight and no count anywhere: three states": (
        dict(layout="vllm", edit=lambda c: (c.pop(IDS), c["eagle_config"].pop(IDS)),
             tensors=lambda t: t.pop("fc.weight"), codes=CONFIG_CODES),
        [('E-KEY-MISSING', 'error', 'required tensor fc.weight [32, 96] is missing', 'the checkpoint is incomplete: '
          'engines load it silently with random weights; re-export it from the training run', 'fc.weight', None)]),
    "no ids, a declared count: a target width fc does not fit is said as such": (
        dict(layout="vllm", edit=lambda c: (c.pop(IDS), c["eagle_config"].pop(IDS),
                                            c.update(num_aux_hidden_states=3, target_hidden_size=40)),
             codes=CONFIG_CODES),
        [('E-TARGET-HIDDEN-SIZE', 'error', "target_hidden_size is 40, but fc.weight's 96 input columns fuse 3 "
          "captured states of width 32", 'set target_hidden_size in config.json to 32 (or remove it: it defaults to '
          'hidden_size)', '$.target_hidden_size', None)]),
    "no ids, no count: fc's width against the target width alone": (
        dict(layout="vllm", edit=lambda c: (c.pop(IDS), c["eagle_config"].pop(IDS), c.update(target_hidden_size=40)),
             codes=CONFIG_CODES),
        [('E-SHAPE-FC', 'error', 'fc.weight has 96 input columns, not a multiple of the target hidden size Ht=40',
          "set target_hidden_size in config.json to the target's hidden size", 'fc.weight', None)]),
    "no ids, a count that is no integer: fc's width against the target width alone": (
        dict(layout="vllm", edit=lambda c: (c.pop(IDS), c["eagle_config"].pop(IDS),
                                            c.update(num_aux_hidden_states="3", target_hidden_size=40)),
             codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', "num_aux_hidden_states is '3' (JSON string); the vllm reader expects a positive "
          "integer and would coerce it", 'write num_aux_hidden_states as a positive integer in config.json',
          '$.num_aux_hidden_states', None),
         ('E-SHAPE-FC', 'error', 'fc.weight has 96 input columns, not a multiple of the target hidden size Ht=40',
          "set target_hidden_size in config.json to the target's hidden size", 'fc.weight', None)]),
    "a target_hidden_size fc's width does not fit, the target's own width given": (
        dict(layout="vllm", spec={"target_hidden_size": 64}, edit=lambda c: c.update(target_hidden_size=40), target={},
             codes=CONFIG_CODES),
        [('E-TARGET-HIDDEN-SIZE', 'error', "target_hidden_size is 40, but fc.weight's 192 input columns fuse 3 "
          "captured states of width 64; the target's hidden_size is 64", 'set target_hidden_size in config.json to 64',
          '$.target_hidden_size', None)]),
    "num_aux_hidden_states against fc's width": (
        dict(layout="vllm", edit=lambda c: c.update(num_aux_hidden_states=2), codes=CONFIG_CODES),
        [('E-CAPTURE-COUNT', 'error', 'num_aux_hidden_states is 2 but fc.weight fuses 3 states of width 32',
          'set num_aux_hidden_states to 3', '$.num_aux_hidden_states', None)]),
    "a target_hidden_size fc's width does not fit": (
        dict(layout="vllm", edit=lambda c: c.update(target_hidden_size=40), codes=CONFIG_CODES),
        [('E-TARGET-HIDDEN-SIZE', 'error', "target_hidden_size is 40, but fc.weight's 96 input columns fuse 3 "
          "captured states of width 32", 'set target_hidden_size in config.json to 32 (or remove it: it defaults to '
          'hidden_size)', '$.target_hidden_size', None)]),
    **{f"ModelOpt's exported YaRN under {key}": (
        dict(layout="modelopt", codes=CONFIG_CODES, edit=lambda c, key=key: c.update({key: {
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}})),
        [('I-ROPE-EXPORT-YARN', 'info', "the config's rope scaling is YaRN (factor 4.0, "
          "original_max_position_embeddings 4096), which ModelOpt's exporter injects (eagle_export_rope_scaling) "
          "into drafters trained without rope scaling: unless the training set YaRN itself, it did not use it; the "
          "engines apply it as written",
          "nothing to fix: it is ModelOpt's choice for long contexts (eagle_export_rope_scaling={} at export leaves it "
          "out)", f'$.{key}', None)]) for key in ("rope_scaling", "rope_parameters")},
    "a schema violation": (
        dict(layout="speculators", edit=lambda c: c.update(speculators_version=9), codes=CONFIG_CODES),
        [('E-SCHEMA', 'error', "config.json $.speculators_version: 9 is not of type 'string' (speculators schema)",
          'fix $.speculators_version in config.json', '$.speculators_version', None)]),
    "a nested model_type that is no string, said once": (
        dict(layout="speculators", edit=lambda c: c["transformer_layer_config"].update(model_type=7),
             codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', 'transformer_layer_config.model_type is 7 (JSON number); the speculators reader '
          'expects a string and would coerce it', 'write transformer_layer_config.model_type as a string in '
          'config.json', '$.transformer_layer_config.model_type', None)]),
    "a nested decoder of no drafter family": (
        dict(layout="speculators", edit=lambda c: c["transformer_layer_config"].update(model_type="gpt2"),
             codes=CONFIG_CODES),
        [('E-CONFIG-FAMILY', 'error', "transformer_layer_config: drafter model_type 'gpt2' is not an EAGLE-3 drafter "
          "family", 'known: deepseek_v2, deepseek_v3, kimi_k2, llama, qwen3', '$.transformer_layer_config.model_type',
          None)]),
    "a decoder key at the top of a speculators config: the misplacement, not the decoder's refusal": (
        dict(layout="speculators", codes=CONFIG_CODES,
             edit=lambda c: c.update(hidden_size=c["transformer_layer_config"].pop("hidden_size"))),
        [('E-CONFIG-KEY-PLACE', 'error', 'hidden_size is at the top level, but the speculators reader reads it as '
          'transformer_layer_config.hidden_size: it would be taken as absent', 'move it to '
          'transformer_layer_config.hidden_size', '$.hidden_size', None),
         ('E-SCHEMA', 'error', 'config.json $.transformer_layer_config.hidden_size: is required but absent '
          '(speculators schema)', 'fix $.transformer_layer_config.hidden_size in config.json',
          '$.transformer_layer_config.hidden_size', None)]),
    "an MLA drafter's zero kv_lora_rank": (
        dict(layout="vllm", spec=MLA, edit=lambda c: c.update(kv_lora_rank=0), codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', 'config.json: kv_lora_rank is 0; expected a positive integer',
          'fix kv_lora_rank in config.json', '$.kv_lora_rank', None)]),
    "an MLA drafter's zero hidden_size, said once": (
        dict(layout="vllm", spec=MLA, edit=lambda c: c.update(hidden_size=0), codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', 'config.json: hidden_size is 0; expected a positive integer',
          'fix hidden_size in config.json', '$.hidden_size', None)]),
    "zero layers, said once": (
        dict(layout="vllm", edit=lambda c: c.update(num_hidden_layers=0), codes=CONFIG_CODES),
        [('E-CONFIG-FIELD', 'error', 'num_hidden_layers is 0 (JSON number); the vllm reader expects a positive '
          'integer and would coerce it', 'write num_hidden_layers as a positive integer in config.json',
          '$.num_hidden_layers', None)]),
    "hidden_size misspelt: the typo, not the decoder's refusal": (
        dict(layout="vllm", edit=lambda c: c.update(hiden_size=c.pop("hidden_size")), codes=CONFIG_CODES),
        [('E-CONFIG-KEY-TYPO', 'error', "hiden_size is no vllm config key: did you mean 'hidden_size'? The reader "
          "would take hidden_size as absent and read another model", 'rename hiden_size to hidden_size in '
          'config.json', '$.hiden_size', None),
         ('E-SCHEMA', 'error', 'config.json $.hidden_size: is required but absent (vllm schema)',
          'fix $.hidden_size in config.json', '$.hidden_size', None)]),
    # validate/capture.py
    "ids only at the top of an SGLang file": (
        dict(layout="sglang", codes=("CAPTURE",), edit=lambda c: (c.__setitem__(IDS, [1, 3, 6]),
                                                                   c["eagle_config"].pop(IDS))),
        [('W-CAPTURE-CONVENTION', 'warning', "eagle_aux_hidden_state_layer_ids [1, 3, 6] is read by vLLM as boundaries "
          "[1, 3, 6], while in the sglang layout's convention it means boundaries [2, 4, 7]", 'keep one list where the '
          'serving engine reads it: move it to eagle_config.eagle_aux_hidden_state_layer_ids if it is in the sglang '
          'convention, or, if the ids are boundaries, convert with `eagle3-convert --from vllm --to sglang '
          '{tmp}/drafter drafter-sglang`', '$.eagle_aux_hidden_state_layer_ids', None),
         ('W-CAPTURE-IDS-IGNORED', 'warning', 'SGLang reads capture ids only from '
          'eagle_config.eagle_aux_hidden_state_layer_ids: it ignores eagle_aux_hidden_state_layer_ids [1, 3, 6] and '
          'captures its default boundaries {2, L//2, L-3}', 'write the ids where SGLang reads them: `eagle3-convert '
          '--from sglang --capture-layers 1,3,6 --convention sglang --to sglang {tmp}/drafter drafter-sglang` writes '
          'them there', '$.eagle_aux_hidden_state_layer_ids', 'sglang')]),
    "an SGLang file for vLLM, trained on other layers than vLLM's defaults": (
        dict(layout="sglang", spec={"capture_boundaries": (1, 3, 6)}, engines=["vllm"], target={}, codes=("CAPTURE",)),
        [('E-CAPTURE-MISMATCH', 'error', "vLLM's V1 runner falls back to eagle_config.eagle_aux_hidden_state_layer_ids "
          "[0, 2, 5] and reads it as boundaries [0, 2, 5], but the drafter was trained on boundaries [1, 3, 6]",
          'write the ids where vLLM reads them: `eagle3-convert --target {tmp}/target --to vllm {tmp}/drafter '
          'drafter-vllm` writes them there', '$.eagle_config.eagle_aux_hidden_state_layer_ids', 'vllm'),
         ('E-CAPTURE-MISMATCH', 'error', 'vLLM captures its default boundaries [2, 4, 5], but the drafter was trained '
          'on boundaries [1, 3, 6]', '`eagle3-convert --target {tmp}/target --to vllm {tmp}/drafter drafter-vllm` '
          'writes ids vLLM reads as [1, 3, 6]', '$.eagle_config.eagle_aux_hidden_state_layer_ids', 'vllm'),
         ('W-CAPTURE-IDS-IGNORED', 'warning', 'vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it '
          'ignores eagle_config.eagle_aux_hidden_state_layer_ids [0, 2, 5] and captures its default boundaries [2, 4, '
          '5] (its V1 runner instead falls back to that list, read as boundaries [0, 2, 5])', 'write the ids where '
          'vLLM reads them: `eagle3-convert --target {tmp}/target --to vllm {tmp}/drafter drafter-vllm` writes them '
          'there',
          '$.eagle_config.eagle_aux_hidden_state_layer_ids', 'vllm')]),
    "the embedding tap lost to vLLM's defaults: no SGLang note in the hint": (
        dict(layout="sglang", spec={"capture_boundaries": (0, 4, 5)}, engines=["vllm"], target={},
             codes=("CAPTURE",)),
        [('E-CAPTURE-EMBEDDING', 'error', 'the drafter was trained with the embedding output (boundary 0) among its '
          'taps [0, 4, 5], but vLLM captures its default boundaries [2, 4, 5]: the embedding tap is replaced by a '
          'block output', '`eagle3-convert --target {tmp}/target --to vllm {tmp}/drafter drafter-vllm` writes ids '
          'vLLM reads as [0, 4, 5]',
          '$.eagle_config.eagle_aux_hidden_state_layer_ids', 'vllm'),
         ('W-CAPTURE-IDS-IGNORED', 'warning', 'vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it '
          'ignores eagle_config.eagle_aux_hidden_state_layer_ids [-1, 3, 4] and captures its default boundaries [2, '
          '4, 5] (its V1 runner instead falls back to that list, which names no boundaries it reads: what it captures '
          'then is not established)', 'write the ids where vLLM reads them: `eagle3-convert --target {tmp}/target '
          '--to vllm {tmp}/drafter drafter-vllm` writes them there', '$.eagle_config.eagle_aux_hidden_state_layer_ids',
          'vllm')]),
    "ids only at the top of an SGLang file: the warning is SGLang's word, no verdict added": (
        dict(layout="sglang", codes=("ENGINE",), edit=lambda c: (c.__setitem__(IDS, [1, 3, 6]),
                                                                  c["eagle_config"].pop(IDS))), []),
    "an MLA drafter with a Llama architecture: the tensors, not the name, say the family": (
        dict(layout="vllm", spec=MLA, edit=lambda c: c.update(architectures=["LlamaForCausalLMEagle3"]),
             codes=("CONFIG", "SCHEMA", "KEY", "SHAPE")),
        [('E-CONFIG-ARCH', 'error', "architectures ['LlamaForCausalLMEagle3'] make vLLM build its llama drafter class, "
          "but the config describes a deepseek_mla drafter", "set architectures to ['Eagle3DeepseekV2ForCausalLM'], "
          "the class vLLM builds for a deepseek_mla drafter", '$.architectures', 'vllm')]),
    "vLLM told not to fuse the captured states": (
        dict(layout="vllm", edit=lambda c: c["eagle_config"].update(use_aux_hidden_state=False), codes=("CAPTURE",)),
        [('E-CAPTURE-FC-BYPASSED', 'error', "eagle_config.use_aux_hidden_state is false: vLLM passes the target's last "
          "hidden state alone and never applies fc.weight [32, 96]", 'set eagle_config.use_aux_hidden_state to true '
          '(an EAGLE-3 drafter fuses captured states)', '$.eagle_config.use_aux_hidden_state', 'vllm')]),
    "a boundary past a shallower target, TensorRT-LLM": (
        dict(layout="modelopt", spec={"capture_boundaries": (2, 4, 8)}, target={"target_layers": 6},
             codes=("CAPTURE",)),
        [('E-CAPTURE-RANGE', 'error', 'capture boundaries [2, 4, 8] include [8], outside [0, 6] of the 6-layer target',
          "check --target is the model the drafter was trained for, and the ids' convention",
          '$.eagle_config.eagle_aux_hidden_state_layer_ids', None),
         ('E-CAPTURE-UNREACHABLE', 'error', 'trtllm cannot capture boundary 8 (the output of block 7) on a 6-layer '
          'target: the capture would silently go missing', 'retrain the drafter on capturable layers, or serve it with '
          'vLLM (speculators/vllm layouts)', '$.eagle_config.eagle_aux_hidden_state_layer_ids', 'trtllm')]),
}


@pytest.mark.parametrize("name", sorted(CASES7))
def test_each_finding_of_capture_config_and_engine_in_full(name: str, tmp_path: Path):
    arguments, expected = CASES7[name]
    assert judged(tmp_path, **arguments) == expected


@pytest.mark.parametrize("layout", ["vllm", "speculators"])
@pytest.mark.parametrize("key, value", [("num_key_value_heads", 0), ("head_dim", 0), ("rms_norm_eps", "1e-5")])
def test_a_refused_optional_decoder_key_is_named_and_hides_no_schema_finding(layout: str, key: str, value: Any,
                                                                               tmp_path: Path):
    """decoder_fields refuses an optional key of the wrong type (num_key_value_heads 0, a string eps): the finding
    names that key, and the schema's other findings stay. It used to point at the whole decoder config ("$" in a
    flat config), and as every schema path of a flat config lies under "$", the schema's findings were all dropped."""
    nested = layout == "speculators"
    decoder = (lambda c: c["transformer_layer_config"]) if nested else (lambda c: c)
    got = judged(tmp_path, layout, edit=lambda c: (decoder(c).update({key: value}), c.update(torch_dtype=5)),
                 codes=CONFIG_CODES)
    expected = "a positive number" if key == "rms_norm_eps" else "a positive integer"
    place = "transformer_layer_config" if nested else "config.json"
    assert got == [
        ('E-CONFIG-FIELD', 'error', f"{place}: {key} is {value!r}; expected {expected}", f'fix {key} in config.json',
         f"$.{'transformer_layer_config.' if nested else ''}{key}", None),
        ('E-SCHEMA', 'error', f"config.json $.torch_dtype: 5 is not of type 'string', 'null' ({layout} schema)",
         'fix $.torch_dtype in config.json', '$.torch_dtype', None)]


def test_a_config_naming_another_verifier_than_its_sidecar(tmp_path: Path):
    """A converted speculators drafter whose config.json was edited afterwards to name another verifier: the sidecar
    (written with the config before) names the one it knew. No fact tells the two names apart or together: a
    warning whose hint records the new name for that target, never one that throws the sidecar away (issue 33)."""
    source = build_drafter(tmp_path / "built", "speculators", DrafterSpec())
    assert run_cli("--to", "speculators", "--no-record", source, tmp_path / "drafter").exit_code == 0
    edit_config(lambda c: c["speculators_config"]["verifier"].update(name_or_path="org/other-model"))(
        tmp_path / "drafter")
    result = run_cli("validate", tmp_path / "drafter", "--json")
    assert result.exit_code == 0
    assert [(f["code"], f["message"], f["hint"], f["where"]) for f in json.loads(result.stdout)["findings"]] == [
        ("W-TARGET-UNTOLD", "config.json's target is 'org/other-model', eagle3-convert.json (written with another "
         "config.json) says 'org/target-model': no fact of either tells whether they are one model",
         "if org/other-model names the model the drafter was trained on, `eagle3-convert registry add "
         f"{tmp_path}/drafter --verifier org/other-model` records it as a name of that target",
         "$.speculators_config.verifier.name_or_path")]


def test_a_vocab_size_past_any_tokenizer_is_named_and_hides_no_schema_finding(tmp_path: Path):
    """The decoder's refusal of an absurd vocab_size (a memory bomb for the t2d mask) names vocab_size; it used to
    name "$", under which lies every schema path of a flat config, and the schema's findings were dropped."""
    got = judged(tmp_path, "vllm", edit=lambda c: c.update(vocab_size=1 << 25, torch_dtype=5), codes=CONFIG_CODES)
    assert got == [
        ('E-CONFIG-FIELD', 'error', 'config.json: vocab_size is 33554432, more than any tokenizer (limit 16777216)',
         'fix vocab_size in config.json', '$.vocab_size', None),
        ('E-SCHEMA', 'error', "config.json $.torch_dtype: 5 is not of type 'string', 'null' (vllm schema)",
         'fix $.torch_dtype in config.json', '$.torch_dtype', None)]


@pytest.mark.parametrize("engines", [["foo"], ["sglang", "vllm-v1"]])
def test_the_library_refuses_an_engine_it_cannot_judge(engines: list[str], tmp_path: Path):
    """validate_checkpoint(engines=...) takes engine names (the CLI maps vllm-v1 to vllm): any other name used to
    judge nothing, in silence, and report the file clean of it."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec())
    with pytest.raises(UsageError, match=f"^unknown engine {engines[-1]!r}$") as refused:
        validate_checkpoint(src, engines=engines)
    assert refused.value.hint == "name one of speculators, vllm, sglang, trtllm, llamacpp, mlx-vlm, lmdeploy"
    assert validate_checkpoint(src, engines=["sglang", "vllm"]).engines == ["sglang", "vllm"]
