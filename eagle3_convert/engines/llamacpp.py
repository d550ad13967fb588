"""llama.cpp's own converter (`convert_hf_to_gguf.py`, b11434), from its source: docs/formats.md §7.1.

Facts: `transformer_layer_config` is merged into the top level; EAGLE-3 is detected only with
`draft_vocab_size` present and one layer; capture ids are the TOP-LEVEL list copied verbatim
(boundaries), else {2, L//2, L-3}: a nested list is silently replaced by the defaults;
exactly 3 ids at run time; norm_before_residual and norm_before_fc are top-level, default
false; fc_norm tensors fail conversion; norm_output is silently ignored; no Qwen3 q/k norms
and no MLA.

Sliding window: the eagle3 graph (`src/models/eagle3.cpp`, read at ggml-org/llama.cpp 8002c4ce and in the
pre-merge 0274f0fc) builds its attention input with `build_attn_inp_kv()`, not the sliding-window
`build_attn_inp_kv_iswa()`, and `load_arch_hparams` reads no window key: the drafter attends over the whole
context, whatever window it was trained with (a GGUF cannot say one either).

Activation: the same graph's MLP is `build_ffn(..., LLM_FFN_SILU, LLM_FFN_PAR, il)` (src/models/eagle3.cpp at
8002c4ce) and no GGUF key names another: a drafter trained with another `hidden_act` (a Gemma-4 draft's
gelu_pytorch_tanh, NVIDIA-NeMo/Automodel #3071) is served with silu, without a word.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection, Mapping

from ..converters.gguf_file import RECORD_KEY
from .common import (IDS_KEY, Reading, TargetContext, architectures, flag, has, id_list, nested, num_layers,
                     trained_window, window_ignored)
from .releases import Change, Releases

LABEL = "llama.cpp's converter (from source)"
RELEASE = "llama.cpp b11434"  # the build these rules were read from (docs/formats.md §7)
CONFIG_IDS = Change(
    "capture ids", "the converter wrote the defaults {2, L//2, L-3} from the target's depth, whatever the drafter's "
    "config says", "the top-level eagle_aux_hidden_state_layer_ids, else the defaults", None,
    "PR 25794 (merged 2026-07; in b11434; its first build is not established here: unknown)")
RELEASES = Releases("llamacpp", "llama.cpp", ("b11434",), (CONFIG_IDS,))  # the one build read
# llama-server's flags for an EAGLE-3 drafter (b11434; -md is --model-draft; the draft flags from PR #24593).
ACTIVATIONS = ("silu",)  # the eagle3 graph's one MLP activation (module doc)
SERVE_FLAGS = ("--spec-type", "draft-eagle3", "--spec-draft-n-max", "3", "--spec-draft-p-min", "0.0", "-np", "1",
               "-fa", "on")


# a DFlash GGUF (general.architecture dflash): llama.cpp's `--spec-type draft-dflash` (PR 22105); the draft length
# is clamped to the drafter's dflash.block_size there, so no --spec-draft-n-max is given
DFLASH_SERVE_FLAGS = ("--spec-type", "draft-dflash", "-np", "1", "-fa", "on")


def serve_argv(target_gguf: str, drafter_gguf: str) -> list[str]:
    """The llama-server command that drafts for the target's GGUF with our drafter GGUF."""
    flags = DFLASH_SERVE_FLAGS if Path(drafter_gguf).name.startswith("dflash-") else SERVE_FLAGS
    return ["llama-server", "-m", target_gguf, "-md", drafter_gguf, *flags]


MAX_LAYERS = 1  # the eagle3 graph: GGML_ASSERT(n_layer == 1); its converter detects one layer only
ARCHITECTURES = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator", "Eagle3DraftModel"}


def read_gguf(meta: Mapping[str, Any], names: Collection[str], record: Any = None) -> Reading:
    """A GGUF (`--to gguf`'s plan: {"gguf": its keys}) as llama.cpp's eagle3 loader reads it (b11434
    src/models/eagle3.cpp): eagle3.target_layers as written (exactly 3, in file order), both norm flags
    (absent = false), one layer, no fc_norm / norm_output / q-k norms; extra tensors refused."""
    r = Reading("llamacpp", "llama.cpp (GGUF)")
    if meta.get("general.architecture") != "eagle3":
        r.refusal = f"general.architecture is {meta.get('general.architecture')!r}, not eagle3"
        return r
    ids = id_list(meta.get("eagle3.target_layers"))
    if ids is None or len(ids) != 3:
        r.refusal = "EAGLE3 requires exactly 3 entries in 'extract_layers' (eagle3.target_layers)"
        return r
    if meta.get("eagle3.block_count") != MAX_LAYERS or has(names, r"^blk\.[1-9]") \
            or has(names, r"(q_norm|k_norm|fc_norm)"):
        r.refusal = "llama.cpp's eagle3 graph builds one Llama layer: wrong number of tensors"
        return r
    if has(names, r"^enc\.output_norm\.weight$") != (["enc.output_norm.weight"] if meta.get("eagle3.norm_before_fc")
                                                       else []):
        r.refusal = "enc.output_norm.weight and eagle3.norm_before_fc disagree: wrong number of tensors"
        return r
    r.family = "llama"
    r.captures = list(ids)
    r.flags = {"norm_before_residual": bool(meta.get("eagle3.norm_before_residual")),
               "norm_before_fc": bool(meta.get("eagle3.norm_before_fc")), "fc_norm": False, "norm_output": False}
    if ids != sorted(ids):
        r.silent.append(f"llama.cpp fuses eagle3.target_layers {ids} in file order; fc's column blocks follow "
                        "ascending layers")
    window = trained_window(_recorded_decoder(record))
    if window:
        r.caveats.append(window_ignored("llama.cpp", window))
    r.silent += _activation_ignored(_recorded_drafter(record))
    return r


def _activation_ignored(config: Mapping[str, Any]) -> list[str]:
    act = config.get("hidden_act", "silu")
    return [] if act in ACTIVATIONS else [f"llama.cpp's eagle3 graph applies silu where the drafter was trained "
                                          f"with hidden_act {act}"]


def _recorded_drafter(record: Any) -> Mapping[str, Any]:
    """The canonical drafter config our GGUF record carries: a plan's dict, or the JSON text stored in the file."""
    if isinstance(record, str):
        try:
            record = json.loads(record)
        except ValueError:
            return {}
        record = record.get(RECORD_KEY) if isinstance(record, dict) else None
    drafter = record.get("drafter") if isinstance(record, dict) else None
    return drafter if isinstance(drafter, dict) else {}


def _recorded_decoder(record: Any) -> Mapping[str, Any]:
    """The decoder keys our GGUF record carries (eagle3_convert.record: the drafter's hf_extra, where a trained
    window's sliding_window and layer_types ride)."""
    extra = _recorded_drafter(record).get("hf_extra")
    return extra if isinstance(extra, dict) else {}


def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext, release: str | None = None) -> Reading:
    if isinstance(config.get("gguf"), dict):  # a GGUF we write: llama.cpp loads it as written
        gguf = config["gguf"]
        return read_gguf(gguf, names, config.get(RECORD_KEY, gguf.get(RECORD_KEY)))
    r = Reading("llamacpp", LABEL)
    layer_cfg = config.get("transformer_layer_config")
    flat = {**config, **layer_cfg} if isinstance(layer_cfg, dict) else dict(config)
    archs = architectures(flat)
    if not any(a in ARCHITECTURES for a in archs):
        r.refusal = f"llama.cpp's converter has no EAGLE-3 model for architectures {archs}"
        return r
    if "draft_vocab_size" not in flat or num_layers(names) != MAX_LAYERS:
        r.refusal = "llama.cpp's converter does not detect it as EAGLE-3 (one layer and draft_vocab_size needed) " \
                    "and fails on its tensor names"
        return r
    if has(names, r"\.(q_norm|k_norm|q_a_proj|kv_a_proj_with_mqa)\.weight$") or has(names, r"^fc_norm\."):
        r.refusal = "llama.cpp's converter cannot map its tensors (q/k norms, MLA or fc_norm): conversion error"
        return r
    if has(names, r"^input_norm\.weight$") and not flag(flat, "norm_before_fc"):
        r.refusal = "llama.cpp reads norm_before_fc only at the top level: input_norm is left over and the load " \
                    "fails (wrong number of tensors)"
        return r
    ids = id_list(flat.get(IDS_KEY))
    k = len(ids) if ids else 3
    if k != 3 or (ids is None and id_list(nested(flat).get(IDS_KEY)) and len(nested(flat)[IDS_KEY]) != 3):
        r.refusal = "llama.cpp requires exactly 3 capture layers"
        return r
    r.family = "llama"
    if ids is None:
        r.captures_defaults(ctx.depth)
    else:
        r.captures = sorted(set(ids))
        if ids != sorted(ids):  # it fuses the states in the order listed; fc's column blocks ascend
            r.silent.append(f"llama.cpp fuses the captured states in the order listed {ids}, while fc's columns "
                            "follow ascending layers")
    r.flags = {"norm_before_residual": flag(flat, "norm_before_residual"),
               "norm_before_fc": flag(flat, "norm_before_fc"), "fc_norm": False, "norm_output": False}
    window = trained_window(config)
    if window:
        r.caveats.append(window_ignored("llama.cpp", window))
    if flag(flat, "norm_output"):
        r.silent.append("llama.cpp ignores norm_output")
        r.flags["norm_output"] = True  # said once, in silent
    r.silent += _activation_ignored(flat)
    return r
