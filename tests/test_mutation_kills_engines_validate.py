"""Mutation survivors of the engine modules and of validate (issue 26, session 6), killed: each test says what a
mutant of eagle3_convert/capture_ids.py, engines/ or validate/ changed and nobody noticed, through the real CLI on
files the independent builders write (tests/builders.py), or through the engine modules' own entry points
(`engines.read_all`, `engines.serve_verdicts`) as validate and convert call them."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path
from typing import Any, Callable

import pytest

from builders import (DrafterSpec, RawTensor, build_drafter, config_for, stored_tensors, write_safetensors,
                      write_target)
from conftest import run_cli
from gguf_target import write_target_gguf
from test_caught_bugs import write_checkpoint
from test_validate import _ids

from eagle3_convert.engines import TargetContext, read_all, trtllm
from eagle3_convert.validate import load_target_facts, validate_checkpoint

IDS = "eagle_aux_hidden_state_layer_ids"
MLA = {"family": "deepseek_mla", "target_model_type": "deepseek_v3"}


# ------------------------------------------------------------------ capture_ids.capture_context: the MLA default

def test_an_mla_drafter_without_a_target_is_spelled_for_a_deepseek_target(tmp_path: Path):
    """No --target, no target in the config: an MLA drafter serves a DeepSeek/Kimi target, whose SGLang reads
    ids raw unless the first is 1 (docs/formats.md §4.2). The embedding tap (boundary 0) is then id 0 for
    SGLang, not -1 (which captures nothing on that family); inspect shows what convert writes."""
    src = build_drafter(tmp_path / "vllm", "vllm", DrafterSpec(capture_boundaries=(0, 3, 5), **MLA))
    shown = run_cli("inspect", src, "--json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["drafter"]["capture"] == {
        "boundaries": [0, 3, 5], "target_layers": None, "target_family": "deepseek",
        "per_engine": {"speculators": [0, 3, 5], "vllm": [0, 3, 5], "eagle": [0, 3, 5], "sglang": [0, 3, 5],
                       "specforge": [-1, 2, 4], "modelopt": [-1, 2, 4], "trtllm": [-1, 2, 4]}}
    done = run_cli("--to", "sglang", src, tmp_path / "sglang")
    assert done.exit_code == 0, done.stderr
    assert json.loads((tmp_path / "sglang" / "config.json").read_text())["eagle_config"][IDS] == [0, 3, 5]


def test_an_mla_sglang_file_without_a_target_is_read_as_a_deepseek_targets_sglang_reads_it(tmp_path: Path):
    """SGLang ids [2, 4, 5] on a DeepSeek target: the first id is not 1, so raw, boundaries [2, 4, 5] (any other
    family: +1, [3, 5, 6]). vLLM's ids are the boundaries."""
    src = build_drafter(tmp_path / "sglang", "sglang", DrafterSpec(capture_boundaries=(3, 5, 6), **MLA))
    assert json.loads((src / "config.json").read_text())["eagle_config"][IDS] == [2, 4, 5]
    done = run_cli("--to", "vllm", src, tmp_path / "vllm")
    assert done.exit_code == 0, done.stderr
    assert json.loads((tmp_path / "vllm" / "config.json").read_text())[IDS] == [2, 4, 5]


# ------------------------------------------------------------------ engines/trtllm.py, llamacpp.py, speculators.py

L8 = TargetContext("default", 8)
NO_FLAGS = {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
LABELS = {"trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp's converter (from source)",
          "speculators": "speculators library"}
WINDOW = {"sliding_window": 64, "layer_types": ["sliding_attention"]}


def file(layout: str, change: Callable[[dict, set[str]], Any] = lambda c, n: None,
         **spec: Any) -> Callable[[], tuple[dict, list[str]]]:
    """config.json and the stored names `layout` writes for DrafterSpec(**spec), then `change(config, names)` (which
    edits both in place)."""
    def build() -> tuple[dict, list[str]]:
        s = DrafterSpec(**spec)
        config, names = config_for(layout, s), set(stored_tensors(layout, s))
        change(config, names)
        return config, sorted(names)
    return build


GONE = object()


def top(**values: Any) -> Callable[[dict, set[str]], None]:
    """Set (GONE: remove) top-level config keys."""
    def change(c: dict, n: set[str]) -> None:
        for key, value in values.items():
            c.pop(key) if value is GONE else c.__setitem__(key, value)
    return change


def nest(**values: Any) -> Callable[[dict, set[str]], None]:
    return lambda c, n: c.setdefault("eagle_config", {}).update(values)


def names(add: tuple[str, ...] = (), drop: tuple[str, ...] = ()) -> Callable[[dict, set[str]], None]:
    return lambda c, n: (n.update(add), n.difference_update(drop))


def both(*changes: Callable[[dict, set[str]], None]) -> Callable[[dict, set[str]], None]:
    return lambda c, n: [change(c, n) for change in changes] and None


def refused(why: str, **fields: Any) -> dict[str, Any]:
    return {"refusal": why, **fields}


def served(family: str = "llama", **fields: Any) -> dict[str, Any]:
    return {"family": family, "flags": NO_FLAGS | fields.pop("flags", {}), **fields}


TRT_RUNTIME = {"runtime": True, "undecided": {"peagle": trtllm.PEAGLE_UNDECIDED}}  # every file it serves
TRT_DROPS = "TensorRT-LLM drops {} without a word"
TRT_WINDOW = ("TensorRT-LLM attends over the whole context where the drafter was trained with a {0}-token sliding "
              "window: the maths differ past {0} tokens")
LLAMA_IDS = "llama.cpp requires exactly 3 capture layers"
LLAMA_NOT_EAGLE3 = ("llama.cpp's converter does not detect it as EAGLE-3 (one layer and draft_vocab_size needed) and "
                    "fails on its tensor names")
LLAMA_CANNOT_MAP = "llama.cpp's converter cannot map its tensors (q/k norms, MLA or fc_norm): conversion error"

GGUF_BLOCK = ("blk.0.attn_norm.weight", "blk.0.attn_norm_2.weight", "blk.0.attn_q.weight", "fc.weight", "d2t")
GGUF_META = {"general.architecture": "eagle3", "eagle3.target_layers": [2, 4, 5], "eagle3.block_count": 1}
GGUF_ONE_LAYER = "llama.cpp's eagle3 graph builds one Llama layer: wrong number of tensors"
GGUF_INPUT_NORM = "enc.output_norm.weight and eagle3.norm_before_fc disagree: wrong number of tensors"
# a GGUF's keys and tensor names (as converters/gguf.py names them) -> llama.cpp's reading (b11434 eagle3.cpp)
GGUF_CASES: dict[str, tuple[dict, tuple[str, ...], dict[str, Any]]] = {
    "as written": ({}, (), served(captures=[2, 4, 5])),
    "another architecture": ({"general.architecture": "llama"}, (), refused(
        "general.architecture is 'llama', not eagle3")),
    "two target layers": ({"eagle3.target_layers": [2, 5]}, (), refused(
        "EAGLE3 requires exactly 3 entries in 'extract_layers' (eagle3.target_layers)")),
    "no target layers": ({"eagle3.target_layers": None}, (), refused(
        "EAGLE3 requires exactly 3 entries in 'extract_layers' (eagle3.target_layers)")),
    "two blocks": ({"eagle3.block_count": 2}, (), refused(GGUF_ONE_LAYER)),
    "a second block's tensor": ({}, ("blk.1.attn_q.weight",), refused(GGUF_ONE_LAYER)),
    "q/k norms": ({}, ("blk.0.attn_q_norm.weight",), refused(GGUF_ONE_LAYER)),
    "fc_norm": ({}, ("fc_norm.0.weight",), refused(GGUF_ONE_LAYER)),
    "norm_before_fc without its norm": ({"eagle3.norm_before_fc": True}, (), refused(GGUF_INPUT_NORM)),
    "the input norm without norm_before_fc": ({}, ("enc.output_norm.weight",), refused(GGUF_INPUT_NORM)),
    "norm_before_fc with its norm": ({"eagle3.norm_before_fc": True}, ("enc.output_norm.weight",), served(
        captures=[2, 4, 5], flags={"norm_before_fc": True})),
    "norm_before_residual": ({"eagle3.norm_before_residual": True}, (), served(
        captures=[2, 4, 5], flags={"norm_before_residual": True})),
    "layers out of order": ({"eagle3.target_layers": [5, 2, 4]}, (), served(captures=[5, 2, 4], silent=[
        "llama.cpp fuses eagle3.target_layers [5, 2, 4] in file order; fc's column blocks follow ascending layers"])),
}


def gguf(meta: dict, stored: tuple[str, ...], plan: dict | None = None) -> Callable[[], tuple[dict, list[str]]]:
    """`--to gguf`'s plan of a GGUF: {"gguf": its keys}, GGUF_META changed by `meta` (None: removed), and the plan's
    other keys."""
    keys = {k: v for k, v in {**GGUF_META, **meta}.items() if v is not None}
    return lambda: ({"gguf": keys, **(plan or {})}, sorted(GGUF_BLOCK + stored))


RECORD = "eagle3_convert.record"  # the GGUF key of our record (the drafter's config, its hf_extra keys with it)
GGUF_WINDOW = ("llama.cpp attends over the whole context where the drafter was trained with a 64-token sliding "
               "window: the maths differ past 64 tokens")


# name -> (engine, the file, the target context, the reading expected beside the defaults of `Reading`)
READINGS: dict[str, tuple[str, Callable[[], tuple[dict, list[str]]], TargetContext, dict[str, Any]]] = {
    "trtllm: a ModelOpt file": ("trtllm", file("modelopt"), L8, served(**TRT_RUNTIME)),
    "trtllm: a speculators file": ("trtllm", file("speculators"), L8, refused(
        "TensorRT-LLM reads the config through transformers and needs a model_type (speculators configs have none)")),
    "trtllm: no model_type": ("trtllm", file("modelopt", top(model_type=GONE)), L8, refused(
        "TensorRT-LLM reads the config through transformers and needs a model_type (speculators configs have none)")),
    "trtllm: no draft_vocab_size beside d2t": ("trtllm", file("modelopt", top(draft_vocab_size=GONE)), L8, refused(
        "without draft_vocab_size TensorRT-LLM takes vocab_size as the draft vocabulary, and the drafter's d2t and "
        "smaller lm_head fail to load")),
    "trtllm: no draft_vocab_size, full vocabulary": ("trtllm", file("modelopt", top(draft_vocab_size=GONE),
                                                                    draft_vocab_size=None), L8,
                                                     served(**TRT_RUNTIME)),
    "trtllm: a null target_hidden_size": ("trtllm", file("modelopt", top(target_hidden_size=None)), L8,
                                          refused("TensorRT-LLM fails to size fc: target_hidden_size is null")),
    "trtllm: a target_hidden_size": ("trtllm", file("modelopt", target_hidden_size=48), L8, served(**TRT_RUNTIME)),
    "trtllm: kv_lora_rank builds MLA": ("trtllm", file("modelopt", top(kv_lora_rank=8)), L8,
                                        served("deepseek_mla", **TRT_RUNTIME)),
    "trtllm: kv_lora_rank 0 does not": ("trtllm", file("modelopt", top(kv_lora_rank=0)), L8, served(**TRT_RUNTIME)),
    "trtllm: norm_before_fc nested": ("trtllm", file("modelopt", nest(norm_before_fc=True)), L8,
                                      served(flags={"norm_before_fc": True}, **TRT_RUNTIME)),
    "trtllm: fc_norm wins over norm_before_fc": ("trtllm", file("modelopt", both(nest(norm_before_fc=True),
                                                                                top(fc_norm=True))), L8,
                                                 served(flags={"fc_norm": True}, **TRT_RUNTIME)),
    "trtllm: fc_norm nested is not read": ("trtllm", file("modelopt", nest(fc_norm=True)), L8, served(**TRT_RUNTIME)),
    "trtllm: return_hidden_post_norm nested": ("trtllm", file("modelopt", nest(return_hidden_post_norm=True)), L8,
                                               served(flags={"norm_output": True}, **TRT_RUNTIME)),
    "trtllm: norm_output at the top": ("trtllm", file("modelopt", top(norm_output=True)), L8,
                                       served(flags={"norm_output": True}, **TRT_RUNTIME)),
    "trtllm: norm_output nested is not read": ("trtllm", file("modelopt", nest(norm_output=True)), L8,
                                               served(**TRT_RUNTIME)),
    "trtllm: norm_before_residual never": ("trtllm", file("modelopt", both(top(norm_before_residual=True),
                                                                          nest(norm_before_residual=True))), L8,
                                           served(**TRT_RUNTIME)),
    "trtllm: norm_before_fc at the top only, input_norm stored": (
        "trtllm", file("modelopt", both(top(norm_before_fc=True), names(add=("input_norm.weight",)))), L8,
        served(silent=[TRT_DROPS.format("input_norm (it reads norm_before_fc only nested) (input_norm.weight)")],
               **TRT_RUNTIME)),
    "trtllm: norm_before_fc at the top and nested": (
        "trtllm", file("modelopt", both(top(norm_before_fc=True), nest(norm_before_fc=True),
                                        names(add=("input_norm.weight",)))), L8,
        served(flags={"norm_before_fc": True}, **TRT_RUNTIME)),
    "trtllm: norm_before_fc at the top, no input_norm": ("trtllm", file("modelopt", top(norm_before_fc=True)), L8,
                                                         served(**TRT_RUNTIME)),
    "trtllm: q/k norms": ("trtllm", file("modelopt", names(add=("layers.0.self_attn.q_norm.weight",
                                                               "layers.0.self_attn.k_norm.weight"))), L8,
                          served(silent=[TRT_DROPS.format("q/k norms (layers.0.self_attn.k_norm.weight, "
                                                          "layers.0.self_attn.q_norm.weight)")], **TRT_RUNTIME)),
    "trtllm: two layers as ModelOpt writes them": ("trtllm", file("modelopt", num_layers=2), L8,
                                                   served(**TRT_RUNTIME)),
    "trtllm: two layers, layer 1's norm only as input_layernorm": (
        "trtllm", file("modelopt", names(drop=("layers.1.hidden_norm.weight",)), num_layers=2), L8,
        served(silent=[TRT_DROPS.format("the pre-attention norm of layers >= 1 (it reads hidden_norm there) "
                                        "(layers.1.input_layernorm.weight)")], **TRT_RUNTIME)),
    "trtllm: two layers, layer 0 as midlayer.*": (
        "trtllm", file("modelopt", lambda c, n: [n.add(x.replace("layers.0.", "midlayer.")) or n.discard(x)
                                                 for x in list(n) if x.startswith("layers.0.")], num_layers=2), L8,
        served(silent=[TRT_DROPS.format("layer 0 stored as midlayer.* (a multi-layer drafter's is midlayer.0) "
                                        "(midlayer.hidden_norm.weight, midlayer.input_layernorm.weight, "
                                        "midlayer.mlp.down_proj.weight (+7 more))")], **TRT_RUNTIME)),
    "trtllm: a sliding window": ("trtllm", file("modelopt", top(**WINDOW)), L8,
                                 served(caveats=[TRT_WINDOW.format(64)], **TRT_RUNTIME)),
    "trtllm: a speculators file with a model_type": ("trtllm", file("speculators", top(model_type="llama")), L8,
                                                     refused("TensorRT-LLM reads the config through transformers and "
                                                             "needs a model_type (speculators configs have none)")),
    "trtllm: q/k norms and layer 1's norm as input_layernorm": (
        "trtllm", file("modelopt", names(add=("layers.0.self_attn.q_norm.weight",),
                                         drop=("layers.1.hidden_norm.weight",)), num_layers=2), L8,
        served(silent=[TRT_DROPS.format("q/k norms (layers.0.self_attn.q_norm.weight)"),
                       TRT_DROPS.format("the pre-attention norm of layers >= 1 (it reads hidden_norm there) "
                                        "(layers.1.input_layernorm.weight)")], **TRT_RUNTIME)),
    "trtllm: a window in a nested decoder config": ("trtllm", file("modelopt", top(transformer_layer_config=WINDOW)),
                                                    L8, served(caveats=[TRT_WINDOW.format(64)], **TRT_RUNTIME)),
    "trtllm: a nested decoder config without a window": ("trtllm", file("modelopt", top(
        transformer_layer_config={"model_type": "llama"}, **WINDOW)), L8, served(**TRT_RUNTIME)),
    "trtllm: a window without layer_types": ("trtllm", file("modelopt", top(sliding_window=64)), L8,
                                             served(**TRT_RUNTIME)),
    "trtllm: only full-attention layers": ("trtllm", file("modelopt", top(sliding_window=64,
                                                                          layer_types=["full_attention"])), L8,
                                           served(**TRT_RUNTIME)),
    "trtllm: a window of true": ("trtllm", file("modelopt", top(**{**WINDOW, "sliding_window": True})), L8,
                                 served(**TRT_RUNTIME)),
    "trtllm: a 1-token window": ("trtllm", file("modelopt", top(**{**WINDOW, "sliding_window": 1})), L8,
                                 served(caveats=[TRT_WINDOW.format(1)], **TRT_RUNTIME)),
    "llamacpp: a vLLM file": ("llamacpp", file("vllm"), L8, served(captures=[2, 4, 5])),
    "llamacpp: a speculators file, its layer config merged": ("llamacpp", file("speculators"), L8,
                                                              served(captures=[2, 4, 5])),
    "llamacpp: the layer config wins over the top level": (
        "llamacpp", file("speculators", lambda c, n: c["transformer_layer_config"].update(norm_before_residual=True)),
        L8, served(captures=[2, 4, 5], flags={"norm_before_residual": True})),
    "llamacpp: an unknown class": ("llamacpp", file("vllm", top(architectures=["Eagle3Qwen3ForCausalLM", 7])), L8,
                                   refused("llama.cpp's converter has no EAGLE-3 model for architectures "
                                           "['Eagle3Qwen3ForCausalLM']")),
    "llamacpp: a known class second": ("llamacpp", file("vllm", top(architectures=["X", "Eagle3DraftModel"])), L8,
                                       served(captures=[2, 4, 5])),
    "llamacpp: no draft_vocab_size": ("llamacpp", file("vllm", top(draft_vocab_size=GONE)), L8,
                                      refused(LLAMA_NOT_EAGLE3)),
    "llamacpp: two layers": ("llamacpp", file("vllm", num_layers=2), L8, refused(LLAMA_NOT_EAGLE3)),
    "llamacpp: q/k norms": ("llamacpp", file("vllm", names(add=("layers.0.self_attn.q_norm.weight",))), L8,
                            refused(LLAMA_CANNOT_MAP)),
    "llamacpp: MLA": ("llamacpp", file("vllm", names(add=("layers.0.self_attn.kv_a_proj_with_mqa.weight",))), L8,
                      refused(LLAMA_CANNOT_MAP)),
    "llamacpp: fc_norm": ("llamacpp", file("vllm", names(add=("fc_norm.0.weight",))), L8, refused(LLAMA_CANNOT_MAP)),
    "llamacpp: input_norm without norm_before_fc": ("llamacpp", file("vllm", names(add=("input_norm.weight",))), L8,
                                                    refused("llama.cpp reads norm_before_fc only at the top level: "
                                                            "input_norm is left over and the load fails (wrong "
                                                            "number of tensors)")),
    "llamacpp: input_norm with norm_before_fc": ("llamacpp", file("vllm", norm_before_fc=True), L8,
                                                 served(captures=[2, 4, 5], flags={"norm_before_fc": True})),
    "llamacpp: two ids": ("llamacpp", file("vllm", top(eagle_aux_hidden_state_layer_ids=[2, 5])), L8,
                          refused(LLAMA_IDS)),
    "llamacpp: four ids": ("llamacpp", file("vllm", top(eagle_aux_hidden_state_layer_ids=[2, 3, 4, 5])), L8,
                           refused(LLAMA_IDS)),
    "llamacpp: no top-level ids, two nested": ("llamacpp", file("vllm", both(
        top(eagle_aux_hidden_state_layer_ids=GONE), nest(eagle_aux_hidden_state_layer_ids=[2, 5]))), L8,
        refused(LLAMA_IDS)),
    "llamacpp: no ids at all": ("llamacpp", file("vllm", both(top(eagle_aux_hidden_state_layer_ids=GONE),
                                                              nest(eagle_aux_hidden_state_layer_ids=[]))),
                                TargetContext("default", 12), served(captures=[2, 6, 9], from_default=True)),
    "llamacpp: three nested ids replaced by the defaults": (
        "llamacpp", file("vllm", both(top(eagle_aux_hidden_state_layer_ids=GONE),
                                      nest(eagle_aux_hidden_state_layer_ids=[1, 3, 6]))), L8,
        served(captures=[2, 4, 5], from_default=True)),
    "llamacpp: no ids, depth unknown": ("llamacpp", file("vllm", top(eagle_aux_hidden_state_layer_ids=GONE)),
                                        TargetContext(), served(from_default=True)),
    "llamacpp: ids out of order": ("llamacpp", file("vllm", top(eagle_aux_hidden_state_layer_ids=[5, 2, 4])), L8,
                                   served(captures=[2, 4, 5], silent=[
                                       "llama.cpp fuses the captured states in the order listed [5, 2, 4], while "
                                       "fc's columns follow ascending layers"])),
    "llamacpp: norm_output": ("llamacpp", file("vllm", norm_output=True), L8, served(
        captures=[2, 4, 5], flags={"norm_output": True}, silent=["llama.cpp ignores norm_output"])),
    "llamacpp: norm_before_residual": ("llamacpp", file("vllm", norm_before_residual=True), L8, served(
        captures=[2, 4, 5], flags={"norm_before_residual": True})),
    "llamacpp: architectures as a string": ("llamacpp", file("vllm", top(architectures="Eagle3DraftModel")), L8,
                                            refused("llama.cpp's converter has no EAGLE-3 model for architectures []")),
    "llamacpp: no layer stored at all": ("llamacpp", file("vllm", lambda c, n: n.intersection_update(
        {"fc.weight", "lm_head.weight", "norm.weight", "d2t", "t2d"})), L8, served(captures=[2, 4, 5])),
    "llamacpp: a sliding window": ("llamacpp", file("vllm", top(**WINDOW)), L8, served(
        captures=[2, 4, 5], caveats=[GGUF_WINDOW])),
    "llamacpp: a GGUF plan recording a window": ("llamacpp", gguf({}, (), {RECORD: {"drafter": {"hf_extra": WINDOW}}}),
                                                 L8, served(captures=[2, 4, 5], label="llama.cpp (GGUF)",
                                                            caveats=[GGUF_WINDOW])),
    "llamacpp: a GGUF file recording a window": ("llamacpp", gguf({RECORD: json.dumps(
        {RECORD: {"drafter": {"hf_extra": WINDOW}}})}, ()), L8, served(captures=[2, 4, 5], label="llama.cpp (GGUF)",
                                                                        caveats=[GGUF_WINDOW])),
    "llamacpp: a GGUF record that is no JSON": ("llamacpp", gguf({RECORD: "{not json"}, ()), L8, served(
        captures=[2, 4, 5], label="llama.cpp (GGUF)")),
    "llamacpp: a GGUF record without hf_extra": ("llamacpp", gguf({RECORD: json.dumps({RECORD: {"drafter": {}}})}, ()),
                                                 L8, served(captures=[2, 4, 5], label="llama.cpp (GGUF)")),
    "speculators: its own file": ("speculators", file("speculators"), L8, served(captures=[2, 4, 5])),
    "speculators: a flat file": ("speculators", file("vllm"), L8, refused(
        "the speculators library reads only speculators-format configs (speculators_model_type)")),
    "speculators: another model kind": ("speculators", file("speculators", top(speculators_model_type="dflash")), L8,
                                        refused("the speculators library builds no EAGLE-3-style drafter for "
                                                "'dflash'")),
    "speculators: P-EAGLE": ("speculators", file("speculators", top(speculators_model_type="peagle")), L8,
                             served(captures=[2, 4, 5], kind="peagle")),
    "speculators: Qwen3": ("speculators", file("speculators", family="qwen3"), L8,
                           served("qwen3", captures=[2, 4, 5])),
    "speculators: no layer config": ("speculators", file("speculators", top(transformer_layer_config=GONE)), L8,
                                     refused("the speculators library has no Eagle3 draft layer for model_type None")),
    "speculators: another decoder": ("speculators", file("speculators", lambda c, n: c["transformer_layer_config"]
                                                         .update(model_type="mistral")), L8, refused(
        "the speculators library has no Eagle3 draft layer for model_type 'mistral'")),
    "speculators: norm_before_fc and fc_norm": ("speculators", file("speculators", top(norm_before_fc=True,
                                                                                       fc_norm=True)), L8,
                                                refused("norm_before_fc and "
                                                        "fc_norm are mutually exclusive", family="llama")),
    "speculators: every flag but one": ("speculators", file("speculators", top(
        norm_before_fc=True, norm_before_residual=True, norm_output=True)), L8, served(
        captures=[2, 4, 5], flags={"norm_before_fc": True, "norm_before_residual": True, "norm_output": True})),
    "speculators: fc_norm": ("speculators", file("speculators", top(fc_norm=True)), L8,
                             served(captures=[2, 4, 5], flags={"fc_norm": True})),
    "speculators: ids repeated and out of order": ("speculators", file("speculators", top(
        eagle_aux_hidden_state_layer_ids=[5, 2, 4, 2])), L8, served(captures=[2, 4, 5])),
    "speculators: an empty id list": ("speculators", file("speculators", top(eagle_aux_hidden_state_layer_ids=[])),
                                      L8, served(captures=[2, 4, 5], from_default=True)),
    "speculators: ids as strings": ("speculators", file("speculators", top(
        eagle_aux_hidden_state_layer_ids=["1", "3", "6"])), L8, served(captures=[2, 4, 5], from_default=True)),
    "speculators: no ids": ("speculators", file("speculators", top(eagle_aux_hidden_state_layer_ids=GONE)),
                            TargetContext("default", 12), served(captures=[2, 6, 9], from_default=True)),
    "speculators: no ids, depth unknown": ("speculators", file("speculators",
                                                               top(eagle_aux_hidden_state_layer_ids=None)),
                                           TargetContext(), served(from_default=True)),
    **{f"llamacpp: a GGUF, {name}": ("llamacpp", gguf(meta, stored), L8, {"label": "llama.cpp (GGUF)", **expected})
       for name, (meta, stored, expected) in GGUF_CASES.items()},
}


@pytest.mark.parametrize("name", sorted(READINGS))
def test_what_the_engine_reads_from_the_file(name: str):
    engine, build, ctx, expected = READINGS[name]
    config, stored = build()
    reading = dataclasses.asdict(read_all(config, stored, ctx, engines=(engine,))[engine])
    assert reading == {"engine": engine, "label": LABELS[engine], "refusal": None, "family": None, "kind": "eagle3",
                       "captures": None, "from_default": False, "runtime": False, "flags": {}, "silent": [],
                       "caveats": [], "undecided": {}, "capture": None, **expected}


# ------------------------------------------------------------------ engines/releases.py: the releases a user names

def validate_for(path: Path, *engines: str) -> tuple[int, dict]:
    done = run_cli("validate", path, "--json", *(arg for e in engines for arg in ("--engine", e)))
    return done.exit_code, json.loads(done.stdout)


def findings(report: dict) -> list[tuple[str, str, str | None]]:
    return [(f["code"], f["message"], f["hint"]) for f in report["findings"]]


def test_a_release_spelled_otherwise_is_judged_as_the_known_one(tmp_path: Path):
    src = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec())
    code, report = validate_for(src, "sglang==0.5.10.0")
    assert (code, report["releases"], report["findings"]) == (0, ["SGLang 0.5.10"], [])


def test_a_llama_cpp_build_is_a_release_and_an_unknown_one_is_said_to_be(tmp_path: Path):
    """llama.cpp's builds are spelled b<number>: known (b11434) or not, they are release numbers, never refused as a
    spelling; an engine known in one release says that one."""
    src = build_drafter(tmp_path / "drafter", "vllm", DrafterSpec())
    code, report = validate_for(src, "llamacpp==b11434")
    assert (code, report["releases"]) == (0, ["llama.cpp b11434"])
    assert findings(report) == [
        ("I-ENGINE-READING", "llama.cpp b11434: as-trained (captures [2, 4, 5], trained maths)", None)]
    code, report = validate_for(src, "llamacpp==b11500")
    assert (code, report["releases"]) == (0, ["llama.cpp b11500"])
    assert findings(report) == [  # judged by the one build read, and said to be (issue 34)
        ("W-ENGINE-RELEASE-UNKNOWN", "llama.cpp b11500 is newer than the newest release this tool models (b11434): "
         "judged by b11434's rules", "name the release this tool models that yours behaves as (b11434), or check the "
         "verdict on llama.cpp b11500 itself"),
        ("I-ENGINE-READING", "llama.cpp b11500: as-trained (captures [2, 4, 5], trained maths)", None)]
    code, report = validate_for(src, "llamacpp==b100")
    assert findings(report)[0][1] == ("llama.cpp b100 is older than the oldest release this tool models (b11434): "
                                      "judged by b11434's rules")


def test_a_tensorrt_llm_release_is_unknown_and_says_what_its_rules_rest_on(tmp_path: Path):
    """TensorRT-LLM's one known 'release' is a source snapshot, no version: a numbered release is judged by its rules
    (it was an internal error: comparing 1.0 with the snapshot's name raised), and the warning says what the rules
    rest on."""
    src = build_drafter(tmp_path / "drafter", "modelopt", DrafterSpec())
    code, report = validate_for(src, "trtllm==1.0")
    assert (code, report["releases"]) == (0, ["TensorRT-LLM 1.0"])
    assert findings(report)[0] == (
        "W-ENGINE-RELEASE-UNKNOWN", "TensorRT-LLM 1.0 is not a release this tool models (TensorRT-LLM's rules come "
        "from a 2026 source snapshot, not from a numbered release): judged by 2026-sources's rules",
        "name the release this tool models that yours behaves as (2026-sources; TensorRT-LLM's rules come from a "
        "2026 source snapshot, not from a numbered release), or check the verdict on TensorRT-LLM 1.0 itself")


def test_the_unknown_release_hint_works_the_snapshot_named_is_judged(tmp_path: Path, monkeypatch):
    """The hint above says to name TensorRT-LLM's snapshot: `--engine trtllm==2026-sources` (and the same in
    $EAGLE3_ENGINES) is judged on it, not refused as 'not a release number' (a hint that did not work)."""
    src = build_drafter(tmp_path / "drafter", "modelopt", DrafterSpec())
    code, report = validate_for(src, "trtllm==2026-sources")
    assert code == 0 and "W-ENGINE-RELEASE-UNKNOWN" not in [f[0] for f in findings(report)]
    monkeypatch.setenv("EAGLE3_ENGINES", "trtllm==2026-sources")
    done = run_cli("validate", src)
    assert done.exit_code == 0 and "W-ENGINE-RELEASE-UNKNOWN" not in done.stdout + done.stderr, done.stderr


def test_an_engine_or_release_spelled_wrong_is_refused_naming_the_spellings(tmp_path: Path):
    src = build_drafter(tmp_path / "drafter", "vllm", DrafterSpec())
    for engine, says in (
            ("tgi", "'tgi' is not an engine (one of speculators, vllm, vllm-v1, vllm-v2, sglang, trtllm, llamacpp, "
                    "mlx-vlm, lmdeploy, optionally ==RELEASE)"),
            ("sglang==", "'sglang==' names no release after =="),
            ("sglang==next", "'next' is not a release number (the releases modelled: 0.5.9 to 0.5.23)"),
            ("trtllm==next", "'next' is not a release number (the release modelled: 2026-sources)")):
        done = run_cli("validate", src, "--engine", engine)
        assert (done.exit_code, done.stderr.split(" — hint")[0]) == (
            2, f"error: Invalid value for '--engine': {says} [E-USAGE]")


# ------------------------------------------------------------------ validate/vocab.py: where a vocab finding points

VOCAB_SPEC = DrafterSpec()  # V 96, Vd 32
FULL = DrafterSpec(draft_vocab_size=None)  # Vd = V
VOCAB = stored_tensors("speculators", VOCAB_SPEC)
OFFSETS = list(struct.unpack(f"<{VOCAB_SPEC.vd}q", VOCAB["d2t"].data))
TARGET_IDS = [i + o for i, o in enumerate(OFFSETS)]


def i64(values: list[int]) -> RawTensor:
    return RawTensor("I64", (len(values),), struct.pack(f"<{len(values)}q", *values))


def mask(ids: list[int]) -> RawTensor:
    return RawTensor("BOOL", (VOCAB_SPEC.vocab_size,), bytes(int(i in ids) for i in range(VOCAB_SPEC.vocab_size)))


def vocab_report(tmp_path: Path, layout: str, tensors: dict[str, RawTensor],
                 spec: DrafterSpec = VOCAB_SPEC) -> list[tuple]:
    src = write_checkpoint(tmp_path / "drafter", layout, spec, tensors)
    done = run_cli("validate", src, "--json")
    return [(f["code"], f["message"], f["hint"], f["where"], f["engine"]) for f in json.loads(done.stdout)["findings"]
            if f["code"].startswith("E-VOCAB")]


REPAIR_HINT = ("only if you confirm it, repair it: `eagle3-convert --repair-d2t-absolute --to speculators {src} "
               "drafter-speculators` (d2t := d2t - arange(Vd))")
VOCAB_CASES = {  # name -> (layout, tensors, the vocab findings: code, message, hint, where, engine)
    "absolute ids": ("speculators", {**VOCAB, "d2t": i64(TARGET_IDS)}, [(
        "E-VOCAB-ABSOLUTE", "d2t holds absolute target ids, not offsets (target = draft + d2t): its values equal "
        "nonzero(t2d), and arange(Vd) + d2t exceeds the target vocab (6 of 32 entries >= 96); every engine would map "
        "draft tokens to the wrong target tokens", REPAIR_HINT, "d2t", None)]),
    "d2t and t2d disagree": ("speculators", {**VOCAB, "d2t": i64(OFFSETS[::-1])}, [(
        "E-VOCAB-MISMATCH", "d2t and t2d disagree: nonzero(t2d) != arange(Vd) + d2t",
        "the vocab map is inconsistent: re-export it from the training run", "d2t", None)]),
    "a short d2t": ("speculators", {**VOCAB, "d2t": i64(OFFSETS[:-1])}, [(
        "E-VOCAB-SHAPE", "d2t has shape [31], expected [32] (draft_vocab_size)",
        "config draft_vocab_size and d2t disagree", "d2t", None)]),
    "a t2d of another shape": ("speculators", {**VOCAB, "t2d": RawTensor("BOOL", (48,), bytes(48))}, [(
        "E-VOCAB-SHAPE", "t2d has shape [48], expected [96] (target vocab_size)",
        "config vocab_size and t2d disagree", "t2d", None)]),
    "a t2d marking one id too few": ("speculators", {**VOCAB, "t2d": mask(TARGET_IDS[:-1])}, [(
        "E-VOCAB-T2D", "t2d marks 31 target ids, expected draft_vocab_size 32", "t2d must have exactly Vd true "
        "entries", "t2d", None)]),
    "no map": ("speculators", {n: t for n, t in VOCAB.items() if n not in ("d2t", "t2d")}, [(
        "E-VOCAB-MISSING", "draft_vocab_size 32 differs from vocab_size 96 but the checkpoint has neither d2t nor t2d",
        "the draft->target vocabulary map is missing: re-export it with the checkpoint (d2t offsets, t2d mask)",
        "t2d", None)]),
    "t2d only, one id too few": ("sglang", {**{n: t for n, t in VOCAB.items() if n != "d2t"},
                                           "t2d": mask(TARGET_IDS[:-1])}, [(
        "E-VOCAB-T2D", "t2d marks 31 target ids, expected draft_vocab_size 32", "t2d must have exactly Vd true "
        "entries", "t2d", None),
        ("E-VOCAB-NO-D2T", "SGLang maps draft tokens with d2t and the checkpoint has only t2d: every draft token would "
         "map to the wrong target token", "no conversion fixes this: writing the sglang layout is refused (t2d marks "
         "31 target ids, expected draft_vocab_size 32 [E-VOCAB-T2D])", "d2t", "sglang")]),
    "d2t only, for the speculators library": ("speculators", {n: t for n, t in VOCAB.items() if n != "t2d"}, [(
        "E-VOCAB-NO-T2D", "the speculators library needs t2d (the target-vocab mask) and the checkpoint has only d2t",
        "`eagle3-convert --to speculators {src} drafter-speculators` rebuilds t2d from d2t", "t2d", "speculators")]),
    "d2t only, for SGLang": ("sglang", {n: t for n, t in VOCAB.items() if n != "t2d"}, []),
    "t2d only, for vLLM": ("vllm", {n: t for n, t in VOCAB.items() if n != "d2t"}, [(
        "E-VOCAB-NO-D2T", "vLLM maps draft tokens with d2t and the checkpoint has only t2d: every draft token would "
        "map to the wrong target token", "`eagle3-convert --to vllm {src} drafter-vllm` rebuilds d2t from t2d", "d2t",
        "vllm")]),
}


@pytest.mark.parametrize("name", sorted(VOCAB_CASES))
def test_each_vocab_finding_points_at_the_tensor_at_fault(tmp_path: Path, name: str):
    layout, tensors, expected = VOCAB_CASES[name]
    src = tmp_path / "drafter"
    assert vocab_report(tmp_path, layout, tensors) == [
        tuple(v.format(src=src) if isinstance(v, str) else v for v in row) for row in expected]


def test_a_full_vocabulary_drafter_needs_no_map_whatever_it_stores(tmp_path: Path):
    """Vd = V: a t2d marking every id, without d2t, is no fault for vLLM (which maps with d2t only when Vd < V)."""
    tensors = {**stored_tensors("vllm", FULL), "t2d": RawTensor("BOOL", (96,), b"\1" * 96)}
    assert "d2t" not in tensors
    assert vocab_report(tmp_path, "vllm", tensors, FULL) == []


# ------------------------------------------------------------------ validate/capture.py: each capture finding in full

# name -> (layout, DrafterSpec fields, the capture lists then written (tests/test_validate.py's _ids), whether the
# target's config is given, the engines checked (None: the layout's), every capture finding: code, severity,
# message, hint, where, engine). Paths in hints are {tmp}.
CAPTURE_CASES: dict[str, tuple[str, dict, dict, bool, list[str] | None, list[tuple]]] = {
    'a list too long to be capture ids': ('sglang', {}, {'top': list(range(65))}, False, None, [
        ('E-CAPTURE-FIELD',
         'error',
         'eagle_aux_hidden_state_layer_ids is [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, '
         '17, 18, 19, 20, 21...: not a short list of integers',
         'write the capture ids as a list of integers',
         '$.eagle_aux_hidden_state_layer_ids',
         None),
    ]),
    'a nested list as a string': ('sglang', {}, {'nested': '1,3,4'}, False, None, [
        ('E-CAPTURE-FIELD',
         'error',
         "eagle_config.eagle_aux_hidden_state_layer_ids is '1,3,4': not a short list of integers",
         'write the capture ids as a list of integers',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         None),
        ('I-CAPTURE-DEFAULT',
         'info',
         'config.json names no capture ids: SGLang captures its default boundaries {2, L//2, L-3}',
         None,
         None,
         'sglang'),
    ]),
    'a boundary id below 0': ('vllm', {}, {'top': [-1, 4, 5], 'nested': [-2, 3, 4]}, False, None, [
        ('E-CAPTURE-RANGE',
         'error',
         'eagle_aux_hidden_state_layer_ids [-1, 4, 5]: an id below 0 names no layer in the vllm convention',
         'fix the capture ids',
         '$.eagle_aux_hidden_state_layer_ids',
         None),
        ('E-CAPTURE-RANGE',
         'error',
         'vLLM reads eagle_aux_hidden_state_layer_ids [-1, 4, 5]: an id below 0 names no layer in its '
         'convention',
         'fix the capture ids',
         '$.eagle_aux_hidden_state_layer_ids',
         'vllm'),
    ]),
    'an SGLang id below -1': ('sglang', {}, {'nested': [-2, 3, 4]}, False, None, [
        ('E-CAPTURE-RANGE',
         'error',
         'eagle_config.eagle_aux_hidden_state_layer_ids [-2, 3, 4]: an id below -1 names no layer in the '
         'sglang convention',
         'fix the capture ids',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         None),
        ('E-CAPTURE-RANGE',
         'error',
         'SGLang reads eagle_config.eagle_aux_hidden_state_layer_ids [-2, 3, 4]: an id below -1 names no '
         'layer in its convention',
         'fix the capture ids',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'sglang'),
    ]),
    'no ids, a target': ('vllm', {}, {'top': None, 'nested': None}, True, None, [
        ('I-CAPTURE-DEFAULT',
         'info',
         'config.json names no capture ids: vLLM captures its default boundaries [2, 4, 5]',
         None,
         None,
         'vllm'),
    ]),
    'empty lists, a target': ('vllm', {}, {'top': [], 'nested': []}, True, None, [
        ('I-CAPTURE-DEFAULT',
         'info',
         'config.json names no capture ids: vLLM captures its default boundaries [2, 4, 5]',
         None,
         None,
         'vllm'),
    ]),
    'no ids, no target, TensorRT-LLM': ('modelopt', {'capture_boundaries': None}, {}, False, None, [
        ('I-CAPTURE-RUNTIME',
         'info',
         'TensorRT-LLM takes the capture layers from its runtime argument, not config.json; pass --target '
         'to learn which ids to give it',
         None,
         None,
         'trtllm'),
    ]),
    '-1 on a DeepSeek target': ('sglang', {'target_model_type': 'deepseek_v3', 'family': 'deepseek_mla'},
                                {'nested': [-1, 2, 4]}, True, None, [
        ('E-CAPTURE-UNREACHABLE',
         'error',
         'SGLang reads eagle_config.eagle_aux_hidden_state_layer_ids [-1, 2, 4] and captures nothing for '
         'some of them on a deepseek-family target (-1 names no layer there)',
         'retrain on capturable layers, or serve the drafter with vLLM',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'sglang'),
    ]),
    'one state as wide as the drafter': ('sglang', {'num_aux': 1, 'capture_boundaries': (4,)}, {}, False, None, [
        ('E-CAPTURE-FC-BYPASSED',
         'error',
         'fc.weight fuses k=1 states of width Ht=32 and k*Ht == H=32: SGLang applies fc only when the '
         'incoming width differs from H, so the trained fc is silently skipped',
         'serve this drafter with vLLM: `eagle3-convert --to vllm {tmp}/drafter drafter-vllm`',
         'fc.weight',
         'sglang'),
    ]),
    'two states, no ids': ('speculators', {'num_aux': 2, 'capture_boundaries': (2, 5)}, {'top': None}, True, None, [
        ('E-CAPTURE-COUNT',
         'error',
         'the speculators library captures its 3 default states but fc.weight fuses 2',
         'write the capture ids the drafter was trained with where the speculators library reads them',
         'fc.weight',
         'speculators'),
        ('E-CAPTURE-COUNT',
         'error',
         'vLLM captures its 3 default states but fc.weight fuses 2',
         'write the capture ids the drafter was trained with where vLLM reads them',
         'fc.weight',
         'vllm'),
        ('I-CAPTURE-DEFAULT',
         'info',
         'config.json names no capture ids: the speculators library captures its default boundaries [2, 4, '
         '5]',
         None,
         None,
         'speculators'),
        ('I-CAPTURE-DEFAULT',
         'info',
         'config.json names no capture ids: vLLM captures its default boundaries [2, 4, 5]',
         None,
         None,
         'vllm'),
    ]),
    'a nested list alone, a target': ('vllm', {}, {'top': None, 'nested': [1, 3, 6]}, True, None, [
        ('E-CAPTURE-MISMATCH',
         'error',
         'vLLM captures its default boundaries [2, 4, 5], but the drafter was trained on boundaries [1, 3, '
         '6]',
         'no conversion fixes this: writing the vllm layout is refused (capture ids are only in '
         "eagle_config: vLLM's V1 runner reads them as boundaries while its V2 runner ignores them and "
         'captures its defaults [E-CAPTURE-AMBIGUOUS])',
         '$.eagle_aux_hidden_state_layer_ids',
         'vllm'),
        ('W-CAPTURE-CONVENTION',
         'warning',
         'eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 6] is read by SGLang as boundaries [2, 4, '
         "7], while in the vllm layout's convention it means boundaries [1, 3, 6]",
         'no conversion fixes this: writing the vllm layout is refused (--from sglang leaves '
         "norm_before_residual unread, which the vllm layout's engines read: the checkpoint is in the vllm "
         'layout (top-level norm_before_residual (a vLLM key SGLang has not)) [E-FROM-MISMATCH])',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         None),
        ('W-CAPTURE-IDS-IGNORED',
         'warning',
         'vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it ignores '
         'eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 6] and captures its default boundaries [2, '
         '4, 5] (its V1 runner instead falls back to that list, read as boundaries [1, 3, 6])',
         'no conversion fixes this: writing the vllm layout is refused (capture ids are only in '
         "eagle_config: vLLM's V1 runner reads them as boundaries while its V2 runner ignores them and "
         'captures its defaults [E-CAPTURE-AMBIGUOUS])',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'vllm'),
    ]),
    'an SGLang file for vLLM, a target': ('sglang', {}, {}, True, ['vllm'], [
        ('E-CAPTURE-MISMATCH',
         'error',
         "vLLM's V1 runner falls back to eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 4] and reads "
         'it as boundaries [1, 3, 4], but the drafter was trained on boundaries [2, 4, 5]',
         'write the ids where vLLM reads them: `eagle3-convert --target {tmp}/target --to vllm {tmp}/drafter '
         'drafter-vllm` writes them there',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'vllm'),
        ('W-CAPTURE-IDS-IGNORED',
         'warning',
         'vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it ignores '
         'eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 4] and captures its default boundaries [2, '
         '4, 5], which here equals the sglang reading [2, 4, 5] (its V1 runner instead falls back to that '
         'list, read as boundaries [1, 3, 4])',
         'write the ids where vLLM reads them: `eagle3-convert --target {tmp}/target --to vllm {tmp}/drafter '
         'drafter-vllm` writes them there',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'vllm'),
    ]),
    'an SGLang file for vLLM': ('sglang', {}, {}, False, ['vllm'], [
        ('E-CAPTURE-MISMATCH',
         'error',
         "vLLM's V1 runner falls back to eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 4] and reads "
         'it as boundaries [1, 3, 4], but the drafter was trained on boundaries [2, 4, 5]',
         'write the ids where vLLM reads them: `eagle3-convert --to vllm {tmp}/drafter drafter-vllm` writes '
         'them there',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'vllm'),
        ('W-CAPTURE-IDS-IGNORED',
         'warning',
         'vLLM reads capture ids only from eagle_aux_hidden_state_layer_ids: it ignores '
         'eagle_config.eagle_aux_hidden_state_layer_ids [1, 3, 4] and captures its default boundaries {2, '
         'L//2, L-3} (its V1 runner instead falls back to that list, read as boundaries [1, 3, 4])',
         'write the ids where vLLM reads them: `eagle3-convert --to vllm {tmp}/drafter drafter-vllm` writes '
         'them there',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'vllm'),
    ]),
    'the embedding tap, for SGLang': ('vllm', {'capture_boundaries': (0, 4, 5)}, {'nested': [0, 4, 5]}, True,
                                      ['sglang'], [
        ('E-CAPTURE-EMBEDDING',
         'error',
         'the drafter was trained with the embedding output (boundary 0) among its taps [0, 4, 5], but '
         'SGLang reads eagle_config.eagle_aux_hidden_state_layer_ids [0, 4, 5] as boundaries [1, 5, 6]: the '
         'embedding tap is replaced by a block output',
         '`eagle3-convert --target {tmp}/target --to sglang {tmp}/drafter drafter-sglang` writes ids SGLang '
         'reads as [0, 4, 5] (SGLang captures the embedding with id -1)',
         '$.eagle_config.eagle_aux_hidden_state_layer_ids',
         'sglang'),
    ]),

}


@pytest.mark.parametrize("name", sorted(CAPTURE_CASES))
def test_each_capture_finding_word_for_word(tmp_path: Path, name: str):
    layout, spec, ids, with_target, engines, expected = CAPTURE_CASES[name]
    drafter = DrafterSpec(**spec)
    path = build_drafter(tmp_path / "drafter", layout, drafter)
    if ids:
        _ids(**ids)(path)
    options: dict[str, Any] = {"engines": engines} if engines else {}
    if with_target:
        options["target"] = load_target_facts(str(write_target(tmp_path / "target", drafter)))
    got = [(f.code, f.severity, f.message, f.hint, f.where, f.engine)
           for f in validate_checkpoint(path, **options).findings if "CAPTURE" in f.code]
    assert got == [tuple(v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for v in row)
                   for row in expected]


# ------------------------------------------------------------------ validate/engine.py: each engine finding in full

def keep(config: dict) -> None:
    pass


LAYERS_0 = {f"midlayer.{n}.weight": f"layers.0.{n}.weight" for n in (
    "hidden_norm", "input_layernorm", "mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "post_attention_layernorm",
    "self_attn.k_proj", "self_attn.o_proj", "self_attn.q_proj", "self_attn.v_proj")}  # SGLang reads them from 0.5.12
# name -> (layout, DrafterSpec fields, an edit of config.json, stored names renamed (None: dropped), whether the
# target's config is given, the engines checked (None: the layout's), the releases judged (None: the newest))
ENGINE_CASES: dict[str, tuple[str, dict, Callable[[dict], Any], dict, bool, list[str] | None, dict | None]] = {
    "a Qwen3 drafter for SGLang": ("vllm", {"family": "qwen3"}, keep, {}, False, ["sglang"], None),
    "SGLang without draft_vocab_size": ("sglang", {}, lambda c: c.pop("draft_vocab_size"), {}, False, None, None),
    "vLLM with a null draft_vocab_size": ("vllm", {}, lambda c: c.update(draft_vocab_size=None), {}, False, None,
                                          None),
    "vLLM with draft_vocab_size as full as lm_head": ("vllm", {"draft_vocab_size": None},
                                                      lambda c: c.update(draft_vocab_size=None), {}, False, None,
                                                      None),
    "SGLang with a null target_hidden_size": ("sglang", {}, lambda c: c.update(target_hidden_size=None), {}, False,
                                              None, None),
    "vLLM with a null target_hidden_size": ("vllm", {}, lambda c: c.update(target_hidden_size=None), {}, False, None,
                                            None),
    "a speculators file for SGLang": ("speculators", {}, keep, {}, False, ["sglang"], None),
    "a flat file for the speculators library": ("vllm", {}, keep, {}, False, ["speculators"], None),
    "the MLA class for a Llama drafter, SGLang": ("sglang", {}, lambda c: c.update(
        architectures=["Eagle3DeepseekV2ForCausalLM"]), {}, False, None, None),
    "kv_lora_rank on a Llama drafter, TensorRT-LLM": ("modelopt", {}, lambda c: c.update(kv_lora_rank=8), {}, False,
                                                      None, None),
    "speculators without norm_before_residual": ("speculators", {}, lambda c: c.pop("norm_before_residual"), {},
                                                 False, None, None),
    "speculators without norm_before_residual, for SGLang": ("speculators", {},
                                                             lambda c: c.pop("norm_before_residual"), {}, False,
                                                             ["sglang"], None),
    "a model.-prefixed name for SGLang": ("sglang", {}, keep, {
        "midlayer.hidden_norm.weight": "model.midlayer.hidden_norm.weight"}, False, None, None),
    "two model.-prefixed names for vLLM": ("vllm", {}, keep, {
        "layers.0.hidden_norm.weight": "model.layers.0.hidden_norm.weight",
        "layers.0.mlp.up_proj.weight": "model.layers.0.mlp.up_proj.weight"}, False, None, None),
    "one model.-prefixed name for vLLM": ("vllm", {}, keep, {
        "layers.0.mlp.up_proj.weight": "model.layers.0.mlp.up_proj.weight"}, False, None, None),
    "layer 1's norm only as input_layernorm, SGLang": ("sglang", {"num_layers": 2}, keep,
                                                       {"layers.1.hidden_norm.weight": None}, False, None, None),
    "a sliding window, SGLang": ("sglang", {}, lambda c: c.update(sliding_window=64,
                                                                  layer_types=["sliding_attention"]), {}, False,
                                 None, None),
    "layers.0 names for SGLang 0.5.11": ("sglang", {}, keep, LAYERS_0, True, ["sglang"], {"sglang": ["0.5.11"]}),
    "the MLA class for SGLang 0.5.11": ("sglang", {"family": "deepseek_mla", "target_model_type": "deepseek_v3"},
                                        keep, {}, True, ["sglang"], {"sglang": ["0.5.11"]}),
    "three SGLang releases": ("sglang", {}, keep, LAYERS_0, True, ["sglang"],
                              {"sglang": ["0.5.11", "0.5.10", None]}),
    "both vLLM runners of 0.21.0": ("sglang", {}, keep, {}, True, ["vllm"], {"vllm": ["0.21.0"]}),
    "P-EAGLE without its mask token": ("speculators", {"peagle_mask_token_id": 5}, lambda c: c.pop("mask_token_id"),
                                       {}, False, ["vllm"], None),
}
ENGINE_CODES = ("ENGINE", "E-CONFIG-ARCH", "E-CONFIG-DRAFT-VOCAB", "E-CONFIG-TARGET-HIDDEN-NULL",
                "W-CONFIG-DEFAULTS-DIFFER", "E-KEY-UNAPPLIED", "E-KEY-REFUSED", "E-KEY-DROPPED")
# every finding of validate/engine.py's codes: code, severity, message, hint, where, engine ({tmp}: the test's dir)
ENGINE_FINDINGS: dict[str, list[tuple]] = {
    'a Qwen3 drafter for SGLang': [  # SGLang refuses its class loudly: no maths is served (issue 34's agreement)
        ('E-ENGINE-REFUSES',
         'error',
         "SGLang: model architectures ['Eagle3Qwen3ForCausalLM'] are not supported",
         'no file makes SGLang serve this drafter as trained; serve it with vLLM, which supports every '
         'variant: `eagle3-convert --engine vllm --to vllm {tmp}/drafter drafter-vllm`',
         None,
         'sglang'),
    ],
    'SGLang without draft_vocab_size': [
        ('E-CONFIG-DRAFT-VOCAB',
         'error',
         'config.json has no draft_vocab_size: SGLang fails to construct the drafter',
         'set draft_vocab_size to 32',
         '$.draft_vocab_size',
         'sglang'),
    ],
    'vLLM with a null draft_vocab_size': [
        ('E-CONFIG-DRAFT-VOCAB',
         'error',
         'draft_vocab_size is None: vLLM then sizes the draft head for the full vocab V=96, but '
         'lm_head.weight has 32 rows',
         'set draft_vocab_size to 32',
         '$.draft_vocab_size',
         'vllm'),
    ],
    'vLLM with draft_vocab_size as full as lm_head': [],
    'SGLang with a null target_hidden_size': [
        ('E-CONFIG-TARGET-HIDDEN-NULL',
         'error',
         'target_hidden_size is null: SGLang checks only that the key exists and sizes fc from None',
         "remove the key when Ht == H, or set it to the target's hidden size",
         '$.target_hidden_size',
         'sglang'),
    ],
    'vLLM with a null target_hidden_size': [],
    'a speculators file for SGLang': [
        ('E-CONFIG-ARCH',
         'error',
         'SGLang does not read speculators-format configs (speculators_model_type)',
         'write the config SGLang reads: `eagle3-convert --to sglang {tmp}/drafter drafter-sglang`',
         '$.architectures',
         'sglang'),
    ],
    'a flat file for the speculators library': [
        ('E-CONFIG-ARCH',
         'error',
         'the speculators library reads only speculators-format configs; this is a flat vllm config',
         'no conversion fixes this: writing the speculators layout is refused (the speculators layout must '
         'name its verifier (target model) and this drafter does not say which it is [E-VERIFIER-MISSING])',
         '$.architectures',
         'speculators'),
    ],
    'the MLA class for a Llama drafter, SGLang': [
        ('E-CONFIG-ARCH',
         'error',
         "architectures ['Eagle3DeepseekV2ForCausalLM'] make SGLang build its deepseek_mla drafter class, but "
         'the config describes a llama drafter',
         "set architectures to ['LlamaForCausalLMEagle3'], the class SGLang builds for a llama drafter",
         '$.architectures',
         'sglang'),
        ('I-ENGINE-RELEASES',
         'info',
         'SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 (builds its deepseek_mla drafter '
         'class for a llama drafter); refused loudly on 0.5.9–0.5.11 (model architectures '
         "['Eagle3DeepseekV2ForCausalLM'] are not supported)",
         None,
         None,
         'sglang'),
    ],
    'kv_lora_rank on a Llama drafter, TensorRT-LLM': [
        ('E-CONFIG-ARCH',
         'error',
         'TensorRT-LLM builds its deepseek_mla drafter class for this config, but the config describes a '
         'llama drafter',
         'write the config TensorRT-LLM reads: `eagle3-convert --to modelopt {tmp}/drafter drafter-modelopt`',
         '$.architectures',
         'trtllm'),
    ],
    'speculators without norm_before_residual': [
        ('W-CONFIG-DEFAULTS-DIFFER',
         'warning',
         'norm_before_residual is absent: vLLM serves a speculators config without it as true, the '
         'speculators library reads it as false (and convert refuses it)',
         'write norm_before_residual into config.json, true or false as the drafter was trained (the '
         'speculators trainer writes true): no conversion can choose it for you',
         '$.norm_before_residual',
         None),
    ],
    'speculators without norm_before_residual, for SGLang': [
        ('E-CONFIG-ARCH',
         'error',
         'SGLang does not read speculators-format configs (speculators_model_type)',
         'no conversion fixes this: writing the sglang layout is refused (norm_before_residual is absent: '
         'vLLM serves this speculators config as true, the speculators library reads it as false, so the file '
         'names no single drafter [E-CONFIG-DEFAULTS-DIFFER])',
         '$.architectures',
         'sglang'),
    ],
    'a model.-prefixed name for SGLang': [
        ('E-KEY-DROPPED',
         'error',
         "SGLang drops tensor 'model.midlayer.hidden_norm.weight' (layers.0.hidden_norm.weight) silently: it "
         "adds `model.` itself, so 'model.midlayer.hidden_norm.weight' matches no parameter; the weight keeps "
         'its random initialisation',
         "rename it to the name SGLang loads ('midlayer.hidden_norm.weight')",
         'model.midlayer.hidden_norm.weight',
         'sglang'),
    ],
    'two model.-prefixed names for vLLM': [
        ('E-KEY-REFUSED',
         'error',
         "vLLM fails to load this file: its loader raises on 'model.layers.0.hidden_norm.weight', a name that "
         "matches no parameter (it adds `model.` to every name but lm_head's itself); 1 more such names",
         'no conversion fixes this: writing the vllm layout is refused (tensor '
         "'model.layers.0.hidden_norm.weight' is not part of an EAGLE-3 drafter in the vllm layout "
         '[E-KEY-UNKNOWN])',
         'model.layers.0.hidden_norm.weight',
         'vllm'),
    ],
    'one model.-prefixed name for vLLM': [
        ('E-KEY-REFUSED',
         'error',
         "vLLM fails to load this file: its loader raises on 'model.layers.0.mlp.up_proj.weight', a name that "
         "matches no parameter (it adds `model.` to every name but lm_head's itself)",
         'no conversion fixes this: writing the vllm layout is refused (tensor '
         "'model.layers.0.mlp.up_proj.weight' is not part of an EAGLE-3 drafter in the vllm layout "
         '[E-KEY-UNKNOWN])',
         'model.layers.0.mlp.up_proj.weight',
         'vllm'),
    ],
    "layer 1's norm only as input_layernorm, SGLang": [
        ('E-ENGINE-WRONG',
         'error',
         'SGLang: SGLang loads layers.1.input_layernorm.weight into a norm it never applies in layers >= 1 '
         '(it normalises them with hidden_norm, left at its initial ones); it would serve this file wrong',
         'no conversion fixes this: writing the sglang layout is refused (layers.1.input_layernorm.weight has '
         'no hidden_norm beside it: SGLang normalises layers >= 1 with hidden_norm and would leave it random '
         '[E-KEY-MISSING])',
         None,
         'sglang'),
        ('I-ENGINE-RELEASES',
         'info',
         'SGLang releases disagree on this file: served WRONG on ≥ 0.5.12 (SGLang loads '
         'layers.1.input_layernorm.weight into a norm it never applies in layers >= 1 (it normalises them '
         'with hidden_norm, left at its initial ones)); refused loudly on 0.5.9–0.5.11 ('
         'EAGLE3 currently only supports 1 layer (num_hidden_layers != 1))',
         None,
         None,
         'sglang'),
    ],
    'a sliding window, SGLang': [
        ('W-ENGINE-CAVEAT',
         'warning',
         'SGLang attends over the whole context where the drafter was trained with a 64-token sliding window: '
         'the maths differ past 64 tokens unless launched with --speculative-draft-window-size 64',
         'serve it as the caveat says, or with an engine that reads the file in full: `eagle3-convert --engine '
         'vllm --to vllm {tmp}/drafter drafter-vllm`',
         None,
         'sglang'),
    ],
    'layers.0 names for SGLang 0.5.11': [
        ('E-ENGINE-WRONG',
         'error',
         'SGLang 0.5.11: SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 '
         'more)) without a word; it would serve this file wrong',
         'upgrade to SGLang ≥ 0.5.12, which serves this file as trained; or write the file the engine reads '
         'right: `eagle3-convert --target {tmp}/target --engine sglang==0.5.11 --to sglang {tmp}/drafter drafter-sglang`',
         None,
         'sglang'),
        ('I-ENGINE-RELEASES',
         'info',
         'SGLang releases disagree on this file: served as trained on ≥ 0.5.12; served WRONG on 0.5.9–0.5.11 '
         '(SGLang drops layers.0.* weights (it loads midlayer.* only) (layers.0.hidden_norm.weight, '
         'layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) without a word)',
         None,
         None,
         'sglang'),
    ],
    'the MLA class for SGLang 0.5.11': [
        ('E-ENGINE-REFUSES',
         'error',
         'SGLang 0.5.11 refuses this file: model architectures '
         "['Eagle3DeepseekV2ForCausalLM'] are not supported",
         'upgrade to SGLang ≥ 0.5.12, which serves this file as trained',  # no file of its own makes 0.5.11 build it
         None,
         'sglang'),
        ('I-ENGINE-RELEASES',
         'info',
         'SGLang releases disagree on this file: served as trained on ≥ 0.5.12; refused loudly on '
         "0.5.9–0.5.11 (model architectures ['Eagle3DeepseekV2ForCausalLM'] are not "
         'supported)',
         None,
         None,
         'sglang'),
    ],
    'three SGLang releases': [
        ('E-ENGINE-WRONG',
         'error',
         'SGLang 0.5.11: SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 '
         'more)) without a word; it would serve this file wrong',
         'upgrade to SGLang ≥ 0.5.12, which serves this file as trained; or write the file the engine reads '
         'right: `eagle3-convert --target {tmp}/target --engine sglang==0.5.11 --to sglang {tmp}/drafter drafter-sglang`',
         None,
         'sglang'),
        ('E-ENGINE-WRONG',
         'error',
         'SGLang 0.5.10: SGLang drops layers.0.* weights (it loads midlayer.* only) '
         '(layers.0.hidden_norm.weight, layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 '
         'more)) without a word; it would serve this file wrong',
         'upgrade to SGLang ≥ 0.5.12, which serves this file as trained; or write the file the engine reads '
         'right: `eagle3-convert --target {tmp}/target --engine sglang==0.5.10 --to sglang {tmp}/drafter drafter-sglang`',
         None,
         'sglang'),
        ('I-ENGINE-RELEASES',
         'info',
         'SGLang releases disagree on this file: served as trained on ≥ 0.5.12; served WRONG on 0.5.9–0.5.11 '
         '(SGLang drops layers.0.* weights (it loads midlayer.* only) (layers.0.hidden_norm.weight, '
         'layers.0.input_layernorm.weight, layers.0.mlp.down_proj.weight (+7 more)) without a word)',
         None,
         None,
         'sglang'),
    ],
    'both vLLM runners of 0.21.0': [
        ('I-ENGINE-RELEASES',
         'info',
         'vLLM releases disagree on this file: served WRONG on ≥ 0.22.0 (captures layers [1, 3, 4], trained '
         'on [2, 4, 5]); served as trained (its default layers) on 0.18.0–0.21.0',
         None,
         None,
         'vllm'),
    ],
    'P-EAGLE without its mask token': [
        ('E-ENGINE-REFUSES',
         'error',
         'vLLM (V1 runner): vLLM fails to build the P-EAGLE config: update_peagle reads '
         "config_dict['mask_token_id']",
         'add the field the engine names to a copy of config.json (for P-EAGLE, the mask token the drafter '
         'was trained with)',
         None,
         'vllm'),
    ],

}


@pytest.mark.parametrize("name", sorted(ENGINE_CASES))
def test_each_engine_finding_word_for_word(tmp_path: Path, name: str):
    layout, spec, edit, renamed, with_target, engines, releases = ENGINE_CASES[name]
    drafter = DrafterSpec(**spec)
    root = tmp_path / "drafter"
    root.mkdir()
    config = config_for(layout, drafter)
    edit(config)
    (root / "config.json").write_text(json.dumps(config))
    tensors = {renamed.get(n, n): t for n, t in stored_tensors(layout, drafter).items()}
    write_safetensors(root / "model.safetensors", {n: t for n, t in tensors.items() if n is not None})
    options: dict[str, Any] = {"engines": engines, "releases": releases}
    if with_target:
        options["target"] = load_target_facts(str(write_target(tmp_path / "target", drafter)))
    got = [(f.code, f.severity, f.message, f.hint, f.where, f.engine)
           for f in validate_checkpoint(root, **options).findings if any(c in f.code for c in ENGINE_CODES)]
    assert got == [tuple(v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for v in row)
                   for row in ENGINE_FINDINGS[name]]


def test_a_cut_vocab_map_is_reported_once_as_truncation(tmp_path: Path):
    """t2d, stored last, loses its last bytes: the file is truncated, and the map is not judged on bytes it lacks."""
    src = write_checkpoint(tmp_path / "drafter", "speculators", VOCAB_SPEC, VOCAB)
    weights = src / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    done = run_cli("validate", src, "--json")
    assert [(f["code"], f["message"], f["where"]) for f in json.loads(done.stdout)["findings"]] == [(
        "E-FILE-TRUNCATED", f"{weights} is truncated: its header promises 31328 data bytes, only 31320 are present; "
        "1 tensor(s) from 't2d' on are incomplete", "model.safetensors")]


def test_a_cut_d2t_in_its_own_shard_is_reported_once_as_truncation(tmp_path: Path):
    """d2t alone in the first of two shards loses its last bytes; t2d, in the second, is whole."""
    src = write_checkpoint(tmp_path / "drafter", "speculators", VOCAB_SPEC, {})
    (src / "model.safetensors").unlink()
    shards = {"model-00001-of-00002.safetensors": {"d2t": VOCAB["d2t"]},
              "model-00002-of-00002.safetensors": {n: t for n, t in VOCAB.items() if n != "d2t"}}
    for name, tensors in shards.items():
        write_safetensors(src / name, tensors)
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: shard for shard, tensors in shards.items() for n in tensors}}))
    first = src / "model-00001-of-00002.safetensors"
    first.write_bytes(first.read_bytes()[:-8])
    done = run_cli("validate", src, "--json")
    assert [(f["code"], f["message"], f["where"]) for f in json.loads(done.stdout)["findings"]] == [(
        "E-FILE-TRUNCATED", f"{first} is truncated: its header promises 256 data bytes, only 248 are present; "
        "1 tensor(s) from 'd2t' on are incomplete", "model-00001-of-00002.safetensors")]


# ------------------------------------------------------------------ engines/trtllm.py: the serve snippet

NO_DEPTH = ("the drafter names no capture layers and the target's depth L is unknown: TensorRT-LLM will capture its "
            "defaults {1, L//2-1, L-4}, right only if training used the defaults (give --target for the ids)")
NO_EMBEDDING = ("TensorRT-LLM cannot capture boundary 0 (the embedding output): its id -1 means the final norm's "
                "output")
SNIPPETS = {  # name -> (dir name, boundaries, --target given, eagle3_layers_to_capture (None: left out), why)
    "trained layers, a dir name to quote": ("a drafter", (2, 4, 5), False, [1, 3, 4], None),
    "boundary 1, the lowest it captures": ("drafter", (1, 4, 5), False, [0, 3, 4], None),
    "the embedding output": ("drafter", (0, 4, 5), False, None, NO_EMBEDDING),
    "no layers, no target": ("drafter", None, False, None, NO_DEPTH),
    "no layers, the target's defaults": ("drafter", None, True, [1, 3, 4], None),
}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_the_tensorrt_llm_snippet_inspect_prints(tmp_path: Path, name: str):
    dirname, boundaries, with_target, ids, why = SNIPPETS[name]
    spec = DrafterSpec(capture_boundaries=boundaries)
    src = build_drafter(tmp_path / dirname, "modelopt", spec)
    target = ("--target", write_target(tmp_path / "target", spec)) if with_target else ()
    done = run_cli("inspect", src, "--json", *target)
    assert done.exit_code == 0, done.stderr
    shown_dir = json.dumps(str(src)) if " " in dirname else str(src)
    config = {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": str(src)}
    yaml = ["speculative_config:", "  decoding_type: Eagle3", "  max_draft_len: 3",
            f"  speculative_model_dir: {shown_dir}"]
    if ids is not None:
        config["eagle3_layers_to_capture"] = ids
        yaml.append(f"  eagle3_layers_to_capture: {ids}")
    else:
        yaml.append(f"  # eagle3_layers_to_capture not given: {why}")
    assert json.loads(done.stdout)["drafter"]["trtllm_serve"] == {
        "speculative_config": config, "yaml": "\n".join(yaml), "layers_unknown": why, "note": None}


def test_convert_to_gguf_prints_the_llama_server_command_that_drafts_with_it(tmp_path: Path):
    """llama-server's flags for an EAGLE-3 drafter (b11434: -md the drafter, the draft flags of PR #24593)."""
    spec = DrafterSpec()
    src = build_drafter(tmp_path / "drafter", "speculators", spec)
    target = write_target_gguf(tmp_path / "target.gguf", layers=spec.target_layers, hidden=spec.ht,
                               vocab=spec.vocab_size)
    done = run_cli("--to", "gguf", "--target-gguf", target, src, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.stderr
    drafter = str(tmp_path / "out" / "eagle3-out-BF16.gguf")
    argv = ["llama-server", "-m", str(target), "-md", drafter, "--spec-type", "draft-eagle3", "--spec-draft-n-max", "3",
            "--spec-draft-p-min", "0.0", "-np", "1", "-fa", "on"]
    assert json.loads(done.stdout)["llama_server"] == {"gguf": drafter, "argv": argv, "command": " ".join(argv)}
