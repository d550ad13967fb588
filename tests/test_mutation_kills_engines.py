"""What SGLang's and vLLM's rules (eagle3_convert/engines/sglang.py, vllm.py) read from a file, word for word
(issue 26: mutation survivors). Each case is a builder-written config (tests/builders.py) and its stored names,
changed in one place, read by `engines.read_all` as validate and convert call it; the whole reading is compared:
the refusal, the family, the captured boundaries, the maths flags, and each silent drop or misreading."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from builders import DrafterSpec, config_for, stored_tensors

from eagle3_convert.engines import TargetContext, read_all
from eagle3_convert.engines.vllm import SHORTCUT_REFUSES

NO_FLAGS = {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
IDS = "eagle_aux_hidden_state_layer_ids"
REAL_CONFIGS = Path(__file__).parent / "data" / "real-configs"
LABELS = {"sglang": "SGLang", "vllm-v1": "vLLM (V1 runner)", "vllm-v2": "vLLM (V2 runner)"}


def refused(why: str) -> dict[str, Any]:
    return {"refusal": why, "family": None, "captures": None, "from_default": False, "flags": {}, "silent": []}


def served(captures: list[int] | None, *silent: str, family: str = "llama", from_default: bool = False,
           **flags: bool) -> dict[str, Any]:
    return {"refusal": None, "family": family, "captures": captures, "from_default": from_default,
            "flags": NO_FLAGS | flags, "silent": list(silent)}


def file(layout: str, change: Callable[[dict, list[str]], list[str] | None] = lambda c, n: None,
         **spec: Any) -> Callable[[], tuple[dict, list[str]]]:
    """config.json and the stored names `layout` writes for DrafterSpec(**spec), then `change(config, names)`
    (which may return the new names as a list)."""
    def build() -> tuple[dict, list[str]]:
        s = DrafterSpec(**spec)
        config, names = config_for(layout, s), sorted(stored_tensors(layout, s))
        changed = change(config, names)
        return config, sorted(changed if isinstance(changed, list) else names)
    return build


def nested_ids(ids: list[int]) -> Callable[[dict, list[str]], None]:
    return lambda c, n: c["eagle_config"].__setitem__(IDS, ids)


def verifier(value: Any) -> Callable[[dict, list[str]], None]:
    return lambda c, n: c["speculators_config"]["verifier"].__setitem__("name_or_path", value)


def real_config(name: str, change: Callable[[dict], Any] = lambda c: None,
                **spec: Any) -> Callable[[], tuple[dict, list[str]]]:
    """A real config of tests/data/real-configs, changed by `change`, beside the names the builder stores for a
    vLLM-layout DrafterSpec(**spec)."""
    def build() -> tuple[dict, list[str]]:
        config = json.loads((REAL_CONFIGS / name).read_text())
        change(config)
        return config, sorted(stored_tensors("vllm", DrafterSpec(**spec)))
    return build


L8 = TargetContext("default", 8)
PEAGLE = {"kind": "peagle"}
NO_MASK_TOKEN = "vLLM fails to build the P-EAGLE config: update_peagle reads config_dict['mask_token_id']"
NO_PARALLEL_DRAFTING_TOKEN = ("for parallel drafting, the draft model config must have "
                              "`pard_token` or `ptd_token_id`")
BIASES = [f"midlayer.self_attn.{p}_proj.bias" for p in "qkvo"]

# name -> (engine, the file, the target context, the reading expected)
CASES: dict[str, tuple[str, Callable[[], tuple[dict, list[str]]], TargetContext, dict[str, Any]]] = {
    "sglang: its own file": ("sglang", file("sglang"), L8, served([2, 4, 5])),
    "sglang: a speculators file": ("sglang", file("speculators"), L8, refused(
        "model architectures ['Eagle3Speculator'] are not supported")),
    "sglang: a speculators file naming an SGLang class": ("sglang", file("speculators", lambda c, n: c.__setitem__(
        "architectures", ["LlamaForCausalLMEagle3"])), L8, refused(
        "model architectures ['LlamaForCausalLMEagle3'] are not supported")),
    "sglang: a gpt-oss target, ids up to L read as boundaries": ("sglang", file("sglang", nested_ids([2, 12, 24])),
                                                                 TargetContext("gpt_oss", 24), served([2, 12, 24])),
    "sglang: a gpt-oss target, ids below L read as block outputs": ("sglang", file("sglang", nested_ids([1, 11, 23])),
                                                                    TargetContext("gpt_oss", 24), served([2, 12, 24])),
    "sglang: no use_aux_hidden_state": ("sglang", file("sglang", lambda c, n: c["eagle_config"].pop(
        "use_aux_hidden_state")), L8, served([2, 4, 5])),
    "sglang: one id, no target_hidden_size, so Ht is H": ("sglang", file("sglang", lambda c, n: (
        c["eagle_config"].__setitem__(IDS, [3]), c.pop("target_hidden_size", None))), L8,
        served([4], "SGLang skips fc: k*Ht == H (1*32)")),
    "sglang: a vLLM-only class": ("sglang", file("sglang", lambda c, n: c.__setitem__(
        "architectures", ["Eagle3LlamaForCausalLM"])), L8, refused(
        "model architectures ['Eagle3LlamaForCausalLM'] are not supported")),
    "sglang: no draft_vocab_size": ("sglang", file("sglang", lambda c, n: c.pop("draft_vocab_size")), L8, refused(
        "SGLang fails to construct the drafter: config.json has no draft_vocab_size")),
    "sglang: target_hidden_size null": ("sglang", file("sglang", lambda c, n: c.__setitem__(
        "target_hidden_size", None)), L8, refused("SGLang fails to construct fc: target_hidden_size is null")),
    "sglang: a 2-layer MLA drafter": ("sglang", file("sglang", family="deepseek_mla", num_layers=2), L8, served(
        [2, 4, 5], "SGLang's MLA class builds 1 layer and drops the other 1", family="deepseek_mla")),
    "sglang: a 1-layer MLA drafter": ("sglang", file("sglang", family="deepseek_mla"), L8,
                                      served([2, 4, 5], family="deepseek_mla")),
    "sglang: no ids, depth known": ("sglang", file("sglang", capture_boundaries=None), L8,
                                    served([2, 4, 5], from_default=True)),
    "sglang: no ids, depth unknown": ("sglang", file("sglang", capture_boundaries=None), TargetContext(),
                                      served(None, from_default=True)),
    "sglang: the last block's output": ("sglang", file("sglang", nested_ids([0, 2, 7])), L8, served(
        [1, 3, 8], "SGLang cannot capture boundaries [8] (the last block's output) and serves without them")),
    "sglang: ids up to the last block but one": ("sglang", file("sglang", nested_ids([0, 2, 6])), L8,
                                                 served([1, 3, 7])),
    "sglang: -1 on a DeepSeek target": ("sglang", file("sglang", nested_ids([-1, 2, 4])),
                                        TargetContext("deepseek", 8), served(
        None, "SGLang captures nothing for ids [-1, 2, 4] on a deepseek-family target")),
    "sglang: a top-level list is not read": ("sglang", file("sglang", lambda c, n: c.__setitem__(IDS, [1, 2, 3])),
                                             L8, served([2, 4, 5])),
    "sglang: flags top-level and nested": ("sglang", file("sglang", lambda c, n: (
        c["eagle_config"].__setitem__("norm_before_fc", True), c.update(use_aux_norm=True, norm_output=True))), L8,
        served([2, 4, 5], norm_before_fc=True, fc_norm=True, norm_output=True)),
    "sglang: norm_before_fc at the top level": ("sglang", file("sglang", lambda c, n: c.update(
        norm_before_fc=True, fc_norm=True, norm_before_residual=True)), L8,
        served([2, 4, 5], norm_before_fc=True, fc_norm=True)),
    "sglang: the MLA class has no norm_before_fc": ("sglang", file("sglang", lambda c, n: (
        c.update(norm_before_fc=True, fc_norm=True, norm_output=True), n + ["input_norm.weight"])[1],
        family="deepseek_mla"), L8, served(
        [2, 4, 5], "SGLang drops input_norm (norm_before_fc) (input_norm.weight) without a word",
        family="deepseek_mla", fc_norm=True, norm_output=True)),
    "sglang: the llama class reads input_norm": ("sglang", file("sglang", lambda c, n: (
        c.__setitem__("norm_before_fc", True), n + ["input_norm.weight"])[1]), L8,
        served([2, 4, 5], norm_before_fc=True)),
    "sglang: the MLA class, input_norm stored but norm_before_fc off": ("sglang", file("sglang", lambda c, n: n + [
        "input_norm.weight"], family="deepseek_mla"), L8, served([2, 4, 5], family="deepseek_mla")),
    "sglang: the MLA class drops a bias and input_norm": ("sglang", file("sglang", lambda c, n: (
        c.__setitem__("norm_before_fc", True), n + ["input_norm.weight", "midlayer.mlp.up_proj.bias"])[1],
        family="deepseek_mla"), L8, served(
        [2, 4, 5], "SGLang drops bias tensors (midlayer.mlp.up_proj.bias) without a word",
        "SGLang drops input_norm (norm_before_fc) (input_norm.weight) without a word", family="deepseek_mla")),
    "sglang: four later layers with input_layernorm alone": ("sglang", file("sglang", lambda c, n: [
        x for x in n if not (".hidden_norm." in x and not x.startswith(("layers.0.", "midlayer.")))], num_layers=5),
        L8, served([2, 4, 5], "SGLang loads layers.1.input_layernorm.weight, layers.2.input_layernorm.weight, "
                   "layers.3.input_layernorm.weight into a norm it never applies in layers >= 1 (it normalises them "
                   "with hidden_norm, left at its initial ones)")),
    "sglang: its earlier additional_layers.* names": ("sglang", file("sglang", lambda c, n: n + [
        "model.additional_layers.0.mlp.up_proj.weight", "additional_layers.0.mlp.down_proj.weight"], num_layers=2),
        L8, served([2, 4, 5], "SGLang drops additional_layers.* (it names every layer model.layers.{i}) "
                   "(additional_layers.0.mlp.down_proj.weight, model.additional_layers.0.mlp.up_proj.weight) "
                   "without a word")),
    "sglang: a llama drafter trained with a sliding window": ("sglang", file("sglang", lambda c, n: c.update(
        sliding_window=64, layer_types=["sliding_attention"])), L8, served([2, 4, 5]) | {"caveats": [
            "SGLang attends over the whole context where the drafter was trained with a 64-token sliding window: "
            "the maths differ past 64 tokens unless launched with --speculative-draft-window-size 64"]}),
    "sglang: an MLA drafter's window is not the llama class's caveat": ("sglang", file("sglang", lambda c, n: c.update(
        sliding_window=64, layer_types=["sliding_attention"]), family="deepseek_mla"), L8,
        served([2, 4, 5], family="deepseek_mla")),
    # SGLang feeds the target's final post-norm state (its verdict on a head with a trained fc: WRONG, _fed)
    "sglang: use_aux_hidden_state false": ("sglang", file("sglang", lambda c, n: c["eagle_config"].__setitem__(
        "use_aux_hidden_state", False)), L8, {**served([2, 4, 5]), "capture": "final"}),
    "sglang: one id, k*Ht == H": ("sglang", file("sglang", lambda c, n: (
        c["eagle_config"].__setitem__(IDS, [3]), c.__setitem__("target_hidden_size", 32))), L8,
        served([4], "SGLang skips fc: k*Ht == H (1*32)")),
    "sglang: no ids, 3*Ht == H": ("sglang", file("sglang", lambda c, n: c.update(
        hidden_size=48, target_hidden_size=16), capture_boundaries=None), L8,
        served([2, 4, 5], "SGLang skips fc: k*Ht == H (3*16)", from_default=True)),
    "sglang: no target_hidden_size, 3*H != H": ("sglang", file("sglang", lambda c, n: c.pop(
        "target_hidden_size", None)), L8, served([2, 4, 5])),
    "sglang: biases, q norm, a later input_layernorm alone": ("sglang", file("sglang", lambda c, n: [
        x for x in n if x != "layers.1.hidden_norm.weight"] + BIASES + ["midlayer.self_attn.q_norm.weight"],
        num_layers=2), L8, served(
        [2, 4, 5],
        "SGLang drops bias tensors (midlayer.self_attn.k_proj.bias, midlayer.self_attn.o_proj.bias, "
        "midlayer.self_attn.q_proj.bias (+1 more)) without a word",
        "SGLang drops q/k norms (it has no Qwen3 drafter class) (midlayer.self_attn.q_norm.weight) without a word",
        "SGLang loads layers.1.input_layernorm.weight into a norm it never applies in layers >= 1 (it normalises "
        "them with hidden_norm, left at its initial ones)")),
    "sglang: three biases, a k norm": ("sglang", file("sglang", lambda c, n: n + BIASES[:3] + [
        "midlayer.self_attn.k_norm.weight"]), L8, served(
        [2, 4, 5], "SGLang drops bias tensors (midlayer.self_attn.k_proj.bias, midlayer.self_attn.q_proj.bias, "
        "midlayer.self_attn.v_proj.bias) without a word",
        "SGLang drops q/k norms (it has no Qwen3 drafter class) (midlayer.self_attn.k_norm.weight) without a word")),
    "sglang: tied embeddings beside a stored head": ("sglang", file("sglang", lambda c, n: c.__setitem__(
        "tie_word_embeddings", True)), L8, served(
        [2, 4, 5], "SGLang ties lm_head to embed_tokens (tie_word_embeddings is true) and never loads the trained "
        "lm_head.weight")),
    "sglang: tied embeddings, no stored head": ("sglang", file("sglang", lambda c, n: (
        c.__setitem__("tie_word_embeddings", True), [x for x in n if x != "lm_head.weight"])[1]), L8,
        served([2, 4, 5])),

    "vllm: its own file": ("vllm-v1", file("vllm"), L8, served([2, 4, 5])),
    "vllm: a speculators file": ("vllm-v1", file("speculators"), L8, served([2, 4, 5])),
    "vllm: speculators, a mistral decoder": ("vllm-v1", file("speculators", lambda c, n: c[
        "transformer_layer_config"].__setitem__("model_type", "mistral")), L8, refused(
        "vLLM's speculators path has no Eagle3 class for model_type 'mistral'")),
    "vllm: speculators, no decoder config": ("vllm-v1", file("speculators", lambda c, n: c.__setitem__(
        "transformer_layer_config", [])), L8,
        refused("vLLM's speculators path has no Eagle3 class for model_type None")),
    "vllm: speculators, a qwen3 decoder": ("vllm-v2", file("speculators", family="qwen3"), L8,
                                           served([2, 4, 5], family="qwen3", norm_before_residual=False)),
    # a local verifier is a way of starting vLLM (its `vllm serve DRAFTER` shortcut), not a refusal of the file: a caveat
    **{f"vllm: verifier {value}": ("vllm-v2", file("speculators", verifier(value)), L8, {**served([2, 4, 5]), "caveats": [
        SHORTCUT_REFUSES.format(verifier=value, method="eagle3")]}) for value in ("./model", "/model", "~/model",
                                                                                  "org/model/sub")},
    **{f"vllm: verifier {value!r} is no path": ("vllm-v2", file("speculators", verifier(value)), L8, served([2, 4, 5]))
       for value in ("org/model", "", 5, None)},
    "vllm: a verifier that is not a mapping": ("vllm-v2", file("speculators", lambda c, n: c[
        "speculators_config"].__setitem__("verifier", "./model")), L8, served([2, 4, 5])),
    "vllm: no speculators_config": ("vllm-v2", file("speculators", lambda c, n: c.__setitem__(
        "speculators_config", "x")), L8, served([2, 4, 5])),
    "vllm: a DeepSeek MTP model_type": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        "model_type", "deepseek_v32")), L8, refused(
        "vLLM takes a deepseek_v32 draft config for DeepSeek MTP: model architectures ['Eagle3DeepSeekMTPModel'] "
        "are not supported")),
    "vllm: an unknown class": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        "architectures", ["MistralForCausalLM"])), L8, refused(
        "model architectures ['MistralForCausalLM'] are not supported")),
    "vllm: a plain class name": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        "architectures", [5, "LlamaForCausalLM"])), L8, served([2, 4, 5])),
    "vllm: the first class it knows": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        "architectures", ["MistralForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLMEagle3"])), L8,
        served([2, 4, 5], family="qwen3")),
    "vllm: top-level ids, sorted and deduplicated": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        IDS, [5, 2, 5])), L8, served([2, 5])),
    "vllm V1: the nested list when there is no top-level one": ("vllm-v1", file("vllm", lambda c, n: (
        c.pop(IDS), c["eagle_config"].__setitem__(IDS, [1, 3, 6]))), L8, served([1, 3, 6])),
    "vllm V2: never the nested list": ("vllm-v2", file("vllm", lambda c, n: (
        c.pop(IDS), c["eagle_config"].__setitem__(IDS, [1, 3, 6]))), L8, served([2, 4, 5], from_default=True)),
    "vllm V1: no list, depth known": ("vllm-v1", file("vllm", capture_boundaries=None), L8,
                                      served([2, 4, 5], from_default=True)),
    "vllm V2: no list, depth unknown": ("vllm-v2", file("vllm", capture_boundaries=None), TargetContext(),
                                        served(None, from_default=True)),
    "vllm: speculators without norm_before_residual": ("vllm-v1", file("speculators", lambda c, n: c.pop(
        "norm_before_residual")), L8, served([2, 4, 5], norm_before_residual=True)),
    "vllm: speculators with norm_before_residual null": ("vllm-v1", file("speculators", lambda c, n: c.__setitem__(
        "norm_before_residual", None)), L8, served([2, 4, 5], norm_before_residual=True)),
    "vllm: native without norm_before_residual": ("vllm-v1", file("vllm", lambda c, n: c.pop(
        "norm_before_residual")), L8, served([2, 4, 5])),
    "vllm: every flag on": ("vllm-v1", file("vllm", lambda c, n: c.update(
        norm_before_residual=True, norm_before_fc=True, fc_norm=True, norm_output=True)), L8,
        served([2, 4, 5], norm_before_residual=True, norm_before_fc=True, fc_norm=True, norm_output=True)),
    "vllm: the MLA class has no norm_before_fc": ("vllm-v1", file("vllm", lambda c, n: c.update(
        model_type="kimi_k2", norm_before_residual=True, norm_before_fc=True, fc_norm=True, norm_output=True),
        family="deepseek_mla"), L8, served([2, 4, 5], family="deepseek_mla", norm_before_residual=True,
                                           fc_norm=True, norm_output=True)),
    "vllm: norm_before_fc nested": ("vllm-v1", file("vllm", lambda c, n: c["eagle_config"].__setitem__(
        "norm_before_fc", True)), L8, served([2, 4, 5], norm_before_fc=True)),
    "vllm: weights under model.": ("vllm-v1", file("vllm", lambda c, n: ["model." + x for x in n[:5]] + n[5:],
                                                   num_layers=2), L8, served([2, 4, 5]) | {"refusal": (
        "vLLM fails to load it: its loader raises on 'model.d2t' (no module or parameter of that name; it adds "
        "model. itself)")}),
    "vllm: midlayer and a later hidden_norm alone in a 2-layer file": ("vllm-v1", file("vllm", lambda c, n: [
        x.replace("layers.0.", "midlayer.") for x in n if x != "layers.1.input_layernorm.weight"], num_layers=2), L8,
        served([2, 4, 5], "vLLM loads layers.1.hidden_norm.weight into a norm it never applies in layers >= 1 (it "
               "normalises them with input_layernorm, left at its initial ones)")),
    "vllm: four later layers with hidden_norm alone": ("vllm-v1", file("vllm", lambda c, n: [
        x for x in n if not (".input_layernorm." in x and not x.startswith("layers.0."))], num_layers=5), L8,
        served([2, 4, 5], "vLLM loads layers.1.hidden_norm.weight, layers.2.hidden_norm.weight, "
               "layers.3.hidden_norm.weight into a norm it never applies in layers >= 1 (it normalises them with "
               "input_layernorm, left at its initial ones)")),
    "vllm: four capture ids": ("vllm-v1", file("vllm", num_aux=4, capture_boundaries=(1, 2, 4, 5)), L8,
                               served([1, 2, 4, 5]) | {"caveats": [
                                   "4 capture ids: some vLLM releases crash at start-up on 4 or more top-level ids "
                                   "(vLLM PR #54598, open)"]}),
    "vllm: midlayer in a 1-layer file": ("vllm-v1", file("vllm", lambda c, n: [
        x.replace("layers.0.", "midlayer.") for x in n]), L8, served([2, 4, 5])),
    # P-EAGLE (parallel drafting): speculators' "peagle" needs mask_token_id; a flat P-EAGLE class needs the token
    # where the proposer reads it, pard_token or ptd_token_id. Served or refused, the reading's kind is "peagle".
    "vllm: speculators P-EAGLE with its mask token": ("vllm-v1", file("speculators", peagle_mask_token_id=7), L8,
                                                      served([2, 4, 5]) | PEAGLE),
    "vllm: speculators P-EAGLE, mask token 0": ("vllm-v2", file("speculators", peagle_mask_token_id=0), L8,
                                                served([2, 4, 5]) | PEAGLE),
    **{f"vllm: speculators P-EAGLE, {how}": ("vllm-v1", file("speculators", change, peagle_mask_token_id=7), L8,
                                             refused(NO_MASK_TOKEN) | PEAGLE)
       for how, change in (("no mask token", lambda c, n: c.pop("mask_token_id")),
                           ("mask token null", lambda c, n: c.__setitem__("mask_token_id", None)))},
    # a block-diffusion drafter named by speculators: no EAGLE-3 class reads it, whatever else the file holds
    **{f"vllm: speculators_model_type {kind}": ("vllm-v1", file("speculators", lambda c, n, kind=kind: c.__setitem__(
        "speculators_model_type", kind)), L8, refused(
        f"vLLM's speculators path builds no drafter for {kind!r} here") | {"kind": None})
       for kind in ("dflash", "dspark")},
    "vllm: speculators_model_type null": ("vllm-v2", file("speculators", lambda c, n: c.__setitem__(
        "speculators_model_type", None)), L8, refused("vLLM's speculators path builds no drafter for None here")
        | {"kind": None}),
    "vllm: P-EAGLE with pard_token": ("vllm-v1", file("vllm", peagle_mask_token_id=7), L8,
                                      served([2, 4, 5]) | PEAGLE),
    "vllm: P-EAGLE with ptd_token_id": ("vllm-v2", file("vllm", lambda c, n: c.__setitem__(
        "ptd_token_id", c.pop("pard_token")), peagle_mask_token_id=7), L8, served([2, 4, 5]) | PEAGLE),
    **{f"vllm: {arch} with pard_token": ("vllm-v1", file("vllm", lambda c, n, arch=arch: c.__setitem__(
        "architectures", [arch]), peagle_mask_token_id=7), L8, served([2, 4, 5], family=family) | PEAGLE)
       for arch, family in (("PeagleLlamaForCausalLM", "llama"), ("PeagleQwen3ForCausalLM", "qwen3"))},
    "vllm: P-EAGLE after an EAGLE-3 class": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        "architectures", ["Eagle3LlamaForCausalLM", "PEagleDraftModel"]), peagle_mask_token_id=7), L8,
        served([2, 4, 5]) | PEAGLE),
    **{f"vllm: P-EAGLE ({arch}) with no parallel-drafting token": ("vllm-v1", file(
        "vllm", lambda c, n, arch=arch: (c.pop("pard_token"), c.__setitem__("architectures", [arch])),
        peagle_mask_token_id=7), L8, refused(NO_PARALLEL_DRAFTING_TOKEN) | PEAGLE)
       for arch in ("PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM")},
    # SpecForge's own P-EAGLE config (tests/data/real-configs) names no token: vLLM refuses it as written
    "vllm: SpecForge's P-EAGLE config": ("vllm-v2", real_config("specforge-qwen3-8b-peagle.json", num_layers=4), L8,
                                         refused(NO_PARALLEL_DRAFTING_TOKEN) | PEAGLE),
    "vllm: SpecForge's P-EAGLE config with a pard_token": ("vllm-v2", real_config(
        "specforge-qwen3-8b-peagle.json", lambda c: c.__setitem__("pard_token", 151669), num_layers=4), L8,
        served([2, 4, 5], from_default=True) | PEAGLE),
}


QWEN3_AS_LLAMA = ("vLLM builds Eagle3LlamaForCausalLM for a qwen3 speculators config and fails to load its "
                  "q_norm/k_norm (KeyError)")
NO_FC_NORM = "vLLM builds no fc_norm and fails to load fc_norm.* (KeyError)"
# name -> (engine, the file, the release read, the reading expected), on L8: each vLLM release boundary
# (engines/vllm.py's Changes), the last release that reads the fact the old way and the first that reads it the new way
FLAG_FALSE = lambda c, n: c["eagle_config"].__setitem__("use_aux_hidden_state", False)  # noqa: E731
V2_FEEDS_CAPTURED = ("the V2 runner ignores eagle_config.use_aux_hidden_state false and feeds the captured states to "
                     "a head with no fc (vLLM issue 40551)")
RELEASE_CASES: dict[str, tuple[str, Callable[[], tuple[dict, list[str]]], str, dict[str, Any]]] = {
    "vllm 0.23.0: speculators, a qwen3 decoder": ("vllm-v1", file("speculators", family="qwen3"), "0.23.0",
                                                  refused(QWEN3_AS_LLAMA)),
    "vllm 0.24.0: speculators, a qwen3 decoder": ("vllm-v2", file("speculators", family="qwen3"), "0.24.0",
                                                  served([2, 4, 5], family="qwen3")),
    "vllm 0.23.0: speculators, a llama decoder": ("vllm-v2", file("speculators"), "0.23.0", served([2, 4, 5])),
    "vllm 0.23.0: the Qwen3 class": ("vllm-v1", file("vllm", family="qwen3"), "0.23.0", refused(
        "model architectures ['Eagle3Qwen3ForCausalLM'] are not supported")),
    "vllm 0.24.0: the Qwen3 class": ("vllm-v2", file("vllm", family="qwen3"), "0.24.0",
                                     served([2, 4, 5], family="qwen3")),
    "vllm 0.21.0: fc_norm stored": ("vllm-v1", file("vllm", fc_norm=True, norm_output=True), "0.21.0",
                                    refused(NO_FC_NORM)),
    "vllm 0.21.0: fc_norm stored, flag off": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__("fc_norm", False),
                                                              fc_norm=True), "0.21.0", served([2, 4, 5])),
    "vllm 0.21.0: fc_norm on, none stored": ("vllm-v2", file("vllm", lambda c, n: c.update(fc_norm=True)),
                                             "0.21.0", served([2, 4, 5])),
    "vllm 0.21.0: the MLA class skips fc_norm": ("vllm-v1", file("vllm", lambda c, n: c.__setitem__(
        "model_type", "kimi_k2"), family="deepseek_mla", fc_norm=True, norm_output=True), "0.21.0",
        served([2, 4, 5], family="deepseek_mla")),
    "vllm 0.22.0: fc_norm stored": ("vllm-v2", file("vllm", fc_norm=True, norm_output=True), "0.22.0",
                                    served([2, 4, 5], fc_norm=True, norm_output=True)),
    "vllm 0.24.0: speculators, fc_norm stored": ("vllm-v1", file("speculators", fc_norm=True, norm_output=True),
                                                 "0.24.0", refused(NO_FC_NORM)),
    "vllm 0.25.0: speculators, fc_norm stored": ("vllm-v2", file("speculators", fc_norm=True, norm_output=True),
                                                 "0.25.0", served([2, 4, 5], fc_norm=True, norm_output=True)),
    "vllm 0.21.0 V1: not the nested list": ("vllm-v1", file("vllm", lambda c, n: (
        c.pop(IDS), c["eagle_config"].__setitem__(IDS, [1, 3, 6]))), "0.21.0", served([2, 4, 5], from_default=True)),
    "vllm 0.22.0 V1: the nested list": ("vllm-v1", file("vllm", lambda c, n: (
        c.pop(IDS), c["eagle_config"].__setitem__(IDS, [1, 3, 6]))), "0.22.0", served([1, 3, 6])),
    "vllm 0.18.1: speculators, norm_before_fc": ("vllm-v1", file("speculators", norm_before_fc=True), "0.18.1",
                                                 served([2, 4, 5])),
    "vllm 0.19.0: speculators, norm_before_fc": ("vllm-v2", file("speculators", norm_before_fc=True), "0.19.0",
                                                 served([2, 4, 5], norm_before_fc=True)),
    "vllm 0.18.1: norm_before_fc at the top level": ("vllm-v1", file("vllm", norm_before_fc=True), "0.18.1",
                                                     served([2, 4, 5], norm_before_fc=True)),
    "vllm 0.32.0: the V2 runner ignores use_aux_hidden_state false": ("vllm-v2", file("vllm", FLAG_FALSE), "0.32.0",
                                                                       served([2, 4, 5], V2_FEEDS_CAPTURED)),
    "vllm 0.33.0: the V2 runner reads use_aux_hidden_state false": ("vllm-v2", file("vllm", FLAG_FALSE), "0.33.0",
                                                                     {**served([2, 4, 5]), "capture": "final"}),
    "vllm 0.18.0: the V1 runner reads use_aux_hidden_state false": ("vllm-v1", file("vllm", FLAG_FALSE), "0.18.0",
                                                                     {**served([2, 4, 5]), "capture": "final"}),
    "vllm 0.21.0: norm_before_fc nested": ("vllm-v1", file("vllm", lambda c, n: c["eagle_config"].__setitem__(
        "norm_before_fc", True)), "0.21.0", served([2, 4, 5])),
}

# What each engine module says it feeds a head (engines/common.Reading.capture): vLLM and SGLang read
# eagle_config.use_aux_hidden_state (true in every file here); the others do not decide it.
FEEDS = {"sglang": "aux", "vllm-v1": "aux", "vllm-v2": "aux"}

@pytest.mark.parametrize("name", sorted(CASES))
def test_what_the_engine_reads_from_the_file(name: str):
    engine, build, ctx, expected = CASES[name]
    config, names = build()
    reading = dataclasses.asdict(read_all(config, names, ctx, engines=(engine,))[engine])
    assert reading == {"engine": engine, "label": LABELS[engine], "kind": "eagle3", "runtime": False, "caveats": [],
                       "undecided": {}, "capture": FEEDS.get(engine),
                       **expected}


def test_vllm_refuses_a_verifier_that_names_a_directory_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`org/model` is a Hub repo id, unless a directory of that name exists where vLLM runs: then its `vllm serve
    DRAFTER` shortcut refuses it as a path (0.33.0), and the verdict's caveat says so with the command that serves
    it; the file itself is served (--speculative-config never reads the verifier)."""
    config, names = file("speculators", verifier("org/model"))()
    monkeypatch.chdir(tmp_path)
    assert read_all(config, names, L8, engines=("vllm-v1",))["vllm-v1"].caveats == []
    (tmp_path / "org" / "model").mkdir(parents=True)
    reading = read_all(config, names, L8, engines=("vllm-v1",))["vllm-v1"]
    assert reading.refusal is None and reading.caveats == [
        "only as `vllm serve TARGET --speculative-config '{\"model\": \"DRAFTER\", \"method\": \"eagle3\"}'`: the "
        "`vllm serve DRAFTER` shortcut takes its target from the verifier name 'org/model', a local path where it runs "
        "(0.33.0 refuses it: Speculators verifier must name a remote model repository; 0.24.0 loads that path)"]


@pytest.mark.parametrize("name", sorted(RELEASE_CASES))
def test_what_a_vllm_release_reads_from_the_file(name: str):
    engine, build, release, expected = RELEASE_CASES[name]
    config, names = build()
    reading = dataclasses.asdict(read_all(config, names, L8, engines=(engine,), releases={"vllm": release})[engine])
    assert reading == {"engine": engine, "label": LABELS[engine], "kind": "eagle3", "runtime": False, "caveats": [],
                       "undecided": {}, "capture": FEEDS.get(engine),
                       **expected}
