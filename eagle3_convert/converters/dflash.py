"""Block-diffusion drafters (DFlash, DSpark) in their two layouts. docs/formats.md §2.8.

The `dflash` layout is the flat config z-lab and SpecForge write (`DFlashDraftModel` / `DSparkDraftModel`: the
drafter's Qwen3 decoder config at the top level, its target layers and mask token in `dflash_config`); the
speculators layout (`speculators_model_type: dflash|dspark`) nests the decoder in `transformer_layer_config` and
names the same layers one higher, as boundaries (`aux_hidden_state_layer_ids`). Both store the same tensor names
(`layers.*`, `fc`, `hidden_norm`, `norm`; DSpark adds `markov_head.*`, `confidence_head.*`): speculators'
converters copy them as-is (`convert/dflash/converter.py`, `convert/dspark/converter.py`).

Neither direction needs the verifier's weights: the embedding and head are the verifier's, frozen. A file without
them borrows them at load time (vLLM and SGLang share the target's; speculators' `from_pretrained` calls
`load_verifier_weights`, which fills them from `speculators_config.verifier.name_or_path`), and a file with them
keeps them: every tensor is carried byte for byte.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..capture_ids import block_diffusion_boundaries, block_diffusion_ids
from ..drafter import BLOCK_HEADS, BLOCK_KINDS, KIND_LABELS as LABEL, Drafter
from ..engines.block_diffusion import (FULL, NON_CAUSAL_DEFAULT, SLIDING, by_type, layer_types, served_causality,
                                       trained_causality)
from ..target_identity import TargetIdentity
from ..errors import FormatError, RefusalError
from ..json_values import is_int
from . import dflash2
from .base import (
    TOP_KEYS,
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    WritePlan,
    build_drafter,
    decoder_dict,
    decoder_fields,
    infer_num_aux,
    keep_model_type_spelling,
    split_decoder_extra,
)
from .layout import VOCAB_TENSORS, drafter_kind

# The flat architecture each kind is written with (SpecForge configs/qwen3-8b-{dflash,dspark}.json) and the
# speculators class (speculators models/{dflash,dspark}/config.py `architectures` default).
# DFlash2's one name is both (speculators models/dflash2/config.py; vLLM 0.33.0 registry.py and SGLang 0.5.23
# srt/models/dflash.py register it).
FLAT_ARCHITECTURE = {"dflash": "DFlashDraftModel", "dspark": "DSparkDraftModel", "dflash2": "DFlash2DraftModel"}
SPECULATORS_ARCHITECTURE = {"dflash": "DFlashSpeculator", "dspark": "DSparkSpeculator",
                            "dflash2": "DFlash2DraftModel"}
# The algorithm's own fields (speculators spells them flat; SpecForge nests all but block_size in dflash_config;
# deepseek-ai's dense DSpark and speculators' DSparkConverter read them at the top level).
DSPARK_HEAD_KEYS = ("markov_rank", "markov_head_type", "enable_confidence_head", "confidence_head_with_markov")
# What the engines read of a flat DSpark config at the top level (qwen3_dspark.py, SGLang dspark.py / dspark_config.py)
DSPARK_TOP_KEYS = (*DSPARK_HEAD_KEYS, "sample_from_anchor")
# Keys of the flat config that are not the decoder's
FLAT_KEYS = {"architectures", "auto_map", "block_size", "dflash_config", "num_target_layers", "target_layer_ids",
             "mask_token_id", "draft_vocab_size", "target_hidden_size", *DSPARK_TOP_KEYS}
SPECULATORS_KEYS = {"architectures", "auto_map", "speculators_model_type", "speculators_version", "speculators_config",
                    "transformer_layer_config", "draft_vocab_size", "target_hidden_size", "aux_hidden_state_layer_ids",
                    "mask_token_id", *TOP_KEYS}
IDS = {"speculators": "aux_hidden_state_layer_ids", "dflash": "dflash_config.target_layer_ids"}
# Each layout's spelling of the draft block's causality (engines/block_diffusion.py `trained_causality` reads both):
# the flat `dflash_config.causal` holds for every layer, speculators' flag for the sliding ones
CAUSALITY_KEYS = ("causal", "sliding_window_non_causal")
# The lowest id each layout's list can hold, the embedding output: speculators' ids are boundaries (its converter
# writes a flat id + 1), the flat ids one lower (hidden_states[-1] would be the last layer)
LOWEST_ID = {"speculators": (0, "speculators ids are boundaries >= 0 (0: the embedding output)"),
             "dflash": (-1, "dflash ids are target layers >= -1 (-1: the embedding output; readers take "
                            "hidden_states[id + 1])")}


def _ids(value: Any, layout: str) -> list[int]:
    where = IDS[layout]
    if not (isinstance(value, list) and value and all(is_int(x) for x in value)):
        raise FormatError(f"{where} is {value!r}: the target layers the drafter reads (vLLM and SGLang build it "
                          "from them)", f"write {where} into config.json, as the drafter was trained",
                          code="E-CONFIG-FIELD")
    lowest, meaning = LOWEST_ID[layout]
    if min(value) < lowest:
        raise FormatError(f"{where} {value}: an id below {lowest} names no layer in the {layout} convention",
                          f"{meaning}: write the ids the drafter was trained on into a copy of config.json",
                          code="E-CAPTURE-RANGE")
    return list(value)


def _mask_token(value: Any, where: str, kind: str) -> int:
    if not (is_int(value) and value >= 0):
        raise FormatError(f"{where} is {value!r}: a {LABEL[kind]} drafter fills its block with this token (vLLM's "
                          "proposer fails without it)", f"write {where} into config.json (the token it was trained "
                          "with)", code="E-CONFIG-FIELD")
    return value


def _one_value(nested: Mapping[str, Any], top: Mapping[str, Any], key: str) -> Any:
    """A key SpecForge nests in dflash_config and other producers write at the top level: one value, or refused."""
    inner, outer = nested.get(key), top.get(key)
    if inner is not None and outer is not None and inner != outer:
        raise FormatError(f"dflash_config.{key} is {inner!r} but the top-level {key} is {outer!r}",
                          "engines read one or the other: keep the trained value in both", code="E-CONFIG-FIELD")
    return inner if inner is not None else outer


def _read(ckpt: Checkpoint, options: ConvertOptions, kind: str, dec: Mapping[str, Any], where: str,
          boundaries: list[int], mask_token_id: int, algorithm: dict[str, Any], vd: Any, ht: Any,
          layout_extra: dict[str, dict[str, Any]], target: TargetIdentity | None) -> Drafter:
    notes = list(ckpt.notes)
    fields: dict[str, Any] = decoder_fields(dec, where)
    extra = split_decoder_extra(dec, FLAT_KEYS)
    keep_model_type_spelling(dec, fields, extra)
    vd = fields["vocab_size"] if vd is None else vd
    if not (is_int(vd) and vd > 0):
        raise FormatError(f"draft_vocab_size is {vd!r}", "set draft_vocab_size to the lm_head rows",
                          code="E-CONFIG-FIELD")
    if kind == "dflash2":
        dflash2.check(algorithm, fields["hidden_size"], fields["vocab_size"], vd,
                      "dflash_config." if where == "config.json" else "")
    if kind == "dspark" and not (is_int(algorithm.get("markov_rank")) and algorithm["markov_rank"] >= 0):
        raise FormatError(f"markov_rank is {algorithm.get('markov_rank')!r}: DSpark's Markov head is sized by it",
                          "write markov_rank into config.json, as the drafter was trained", code="E-CONFIG-FIELD")
    tensors = {name: ref for name, ref in ckpt.tensors.items() if name not in VOCAB_TENSORS}
    if vd < fields["vocab_size"] and "lm_head.weight" not in tensors:
        raise FormatError(f"the drafter drafts {vd} of {fields['vocab_size']} tokens but stores no lm_head.weight",
                          "the verifier's full head cannot stand in for a reduced one (vLLM refuses: "
                          "qwen3_dspark.py); add the drafter's lm_head", code="E-KEY-MISSING")
    _check_heads(kind, algorithm, tensors)
    _check_attention(dec, algorithm, where, fields["num_layers"])
    fields.update(kind=kind, hf_extra=extra, draft_vocab_size=vd, target_hidden_size=ht, mask_token_id=mask_token_id,
                  capture_boundaries=boundaries, algorithm=algorithm, layout_extra=layout_extra,
                  top_extra={k: v for k, v in ckpt.config.items() if k in TOP_KEYS})
    fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields, None, boundaries)
    if target is not None:
        fields["target"] = target
    return build_drafter(ckpt, fields, tensors, options, notes)


def _check_attention(dec: Mapping[str, Any], algorithm: Mapping[str, Any], where: str, layers: int) -> None:
    """What decides each layer's window and causality, as every reader needs it (SpecForge's
    `resolve_dflash_attention_layout`, vLLM's `_resolve_layer_attention`, SGLang's `get_dflash_layer_types`)."""
    types = dec.get("layer_types")
    if types is not None and not (isinstance(types, list) and len(types) == layers and set(types) <= {SLIDING, FULL}):
        raise FormatError(f"{where}: layer_types is {types!r}", f"one \"{SLIDING}\" or \"{FULL}\" per layer "
                          f"({layers}), as the drafter was trained", code="E-CONFIG-FIELD")
    window = dec.get("sliding_window")
    if types and SLIDING in types and not (is_int(window) and window > 0):
        raise FormatError(f"{where}: layer_types has sliding layers but sliding_window is {window!r}", "write the "
                          "trained window (vLLM, SGLang and SpecForge refuse a sliding layer without one)",
                          code="E-CONFIG-FIELD")
    for key, value in (("is_causal", dec.get("is_causal")), *((k, algorithm.get(k)) for k in CAUSALITY_KEYS)):
        if value is not None and not isinstance(value, bool):
            raise FormatError(f"{key} is {value!r}: it says which layers attend causally within the draft block",
                              f"write {key} as true or false, as the drafter was trained", code="E-CONFIG-FIELD")


def _check_heads(kind: str, algorithm: Mapping[str, Any], tensors: Mapping[str, Any]) -> None:
    """DSpark's heads are present exactly when its config builds them (their shapes depend on the head type and
    are not checked here); DFlash has none."""
    for prefix, key in BLOCK_HEADS.items():
        stored = sorted(n for n in tensors if n.startswith(prefix))
        built = kind == "dspark" and bool(algorithm.get(key))
        if built and not stored:
            raise FormatError(f"{key} is {algorithm.get(key)!r} but no {prefix}* tensor is stored",
                              "the checkpoint is incomplete: engines would build that head with random weights",
                              code="E-KEY-MISSING")
        if stored and not built:
            raise RefusalError(f"tensor {stored[0]!r} belongs to a head this {LABEL[kind]} config does not build "
                               f"({key} is {algorithm.get(key)!r})", "engines drop such tensors silently; fix "
                               f"{key} or remove the tensor", code="E-KEY-UNUSED")


# ----------------------------------------------------------------- the speculators layout's side

def read_speculators(ckpt: Checkpoint, options: ConvertOptions, kind: str) -> Drafter:
    raw = ckpt.config
    dec = raw.get("transformer_layer_config")
    if not isinstance(dec, dict):
        raise FormatError("speculators config has no transformer_layer_config object",
                          f"a speculators {LABEL[kind]} config nests the drafter's decoder config there",
                          code="E-CONFIG-FIELD")
    boundaries = _ids(raw.get(IDS["speculators"]), "speculators")
    mask = _mask_token(raw.get("mask_token_id"), "mask_token_id", kind)
    algorithm = {k: v for k, v in raw.items() if k not in SPECULATORS_KEYS}
    if kind == "dflash2":  # said explicitly: the flat layout has no default for it
        algorithm.setdefault("sliding_window_non_causal", NON_CAUSAL_DEFAULT["dflash2"])
    if kind == "dspark" and "sample_from_anchor" not in algorithm:
        raise RefusalError("sample_from_anchor is absent: speculators' DSparkSpeculatorConfig reads it as true, vLLM's "
                           "update_dspark as false, so the file names no single drafter",
                           "write sample_from_anchor (as the drafter was trained) into a copy of config.json and "
                           "convert that", code="E-CONFIG-DEFAULTS-DIFFER")
    spec_cfg = raw.get("speculators_config") if isinstance(raw.get("speculators_config"), dict) else {}
    verifier = spec_cfg.get("verifier") if isinstance(spec_cfg.get("verifier"), dict) else {}
    target = None
    if verifier.get("name_or_path"):
        archs = verifier.get("architectures")
        target = TargetIdentity(name_or_path=verifier["name_or_path"], architectures=archs if isinstance(archs, list)
                                else [])
    own = {"speculators_config": {k: v for k, v in spec_cfg.items() if k != "verifier"}}
    return _read(ckpt, options, kind, dec, "transformer_layer_config", boundaries, mask, algorithm,
                 raw.get("draft_vocab_size"), raw.get("target_hidden_size"), {"speculators": own}, target)


def plan_speculators(drafter: Drafter, options: ConvertOptions) -> WritePlan:
    cfg = drafter.config
    target = options.verifier or cfg.target
    if target is None or not target.name_or_path:
        raise RefusalError(f"the speculators layout must name its verifier: speculators' from_pretrained loads a "
                           f"{LABEL[cfg.kind]} drafter's embedding and head from it (load_verifier_weights), and this "
                           "drafter does not say which it is", "pass --verifier ORG/TARGET_MODEL (the model it was "
                           "trained against)", code="E-VERIFIER-MISSING")
    algorithm = {k: v for k, v in cfg.algorithm.items() if k not in CAUSALITY_KEYS}
    algorithm["sliding_window_non_causal"], notes = _speculators_non_causal(cfg)
    proposal = {"proposal_type": "greedy", "speculative_tokens": cfg.block_tokens(), "verifier_accept_k": 1,
                "accept_tolerance": 0.0}
    spec_cfg: dict[str, Any] = {"default_proposal_method": "greedy", "proposal_methods": [proposal]}
    spec_cfg.update(cfg.layout_extra.get("speculators", {}).get("speculators_config", {}))
    spec_cfg["algorithm"] = cfg.kind
    spec_cfg["verifier"] = {"name_or_path": target.name_or_path, "architectures": target.architectures}
    config: dict[str, Any] = {
        "architectures": [SPECULATORS_ARCHITECTURE[cfg.kind]],
        "speculators_model_type": cfg.kind,
        "speculators_version": "0.9.0",
        **algorithm,
        **cfg.top_extra,
        "speculators_config": spec_cfg,
        "transformer_layer_config": dict(sorted(decoder_dict(cfg).items())),
        "draft_vocab_size": cfg.draft_vocab_size,
        "target_hidden_size": cfg.target_hidden_size,
        IDS["speculators"]: cfg.capture_boundaries,
        "mask_token_id": cfg.mask_token_id,
    }
    return WritePlan("speculators", dict(sorted(config.items())), _tensors(drafter), notes)


def _speculators_non_causal(cfg: Any) -> tuple[bool, list[str]]:
    """The sliding_window_non_causal that makes vLLM apply the trained causality (update_dflash turns a DFlash's
    into every layer's), and the speculators library too where one does; the value read, where both do."""
    trained, said = trained_causality(cfg), cfg.algorithm.get("sliding_window_non_causal")
    probe = {"speculators_model_type": cfg.kind, "transformer_layer_config": decoder_dict(cfg)}
    right = {runner: [v for v in (False, True) if served_causality(runner, {**probe, "sliding_window_non_causal": v})
                      == trained] for runner in ("vllm-v2", "speculators")}
    if not right["vllm-v2"]:
        causal = [i for i, c in enumerate(trained) if c]
        raise RefusalError(f"this {LABEL[cfg.kind]} drafter's layers {causal} were trained causal within the draft "
                           f"block and the others bidirectional (layer_types), and vLLM reads a speculators config's "
                           "one sliding_window_non_causal as every layer's causality (update_dflash)",
                           "keep the flat layout, which says it per layer (`--to dflash`: vLLM's V2 runner and SGLang "
                           "serve it as trained)", code="E-CAUSALITY-UNEXPRESSIBLE")
    both = [v for v in right["vllm-v2"] if v in right["speculators"]] or right["vllm-v2"]
    value = said if said in both else both[0]
    if said is None or said == value:
        return value, []
    return value, [f"sliding_window_non_causal written as {str(value).lower()}, not {str(said).lower()}: vLLM's "
                   f"update_dflash applies it to every layer, and these layers attend "
                   f"{'causally' if trained[0] else 'bidirectionally'} within the draft block as trained"]


def _tensors(drafter: Drafter) -> dict[str, Any]:
    tensors = dict(drafter.tensors)
    if drafter.vocab is not None:
        tensors["d2t"] = drafter.vocab.d2t_tensor()
        tensors["t2d"] = drafter.vocab.t2d_tensor()
    return tensors


# ----------------------------------------------------------------- the flat layout

def _flat_causal(cfg: Any) -> tuple[bool | None, bool]:
    """(dflash_config.causal, whether `is_causal` says it too) of a flat file. Where layer_types alone (causal exactly
    where a layer slides) gives the trained causality, nothing more is needed (a causal read is kept); else one value
    holds for every layer (a speculators drafter's flag makes the sliding ones alike) and is written in both: vLLM
    reads either, is_causal first, SGLang only is_causal."""
    if isinstance(cfg.hf_extra.get("is_causal"), bool):
        return None, False  # written with the decoder config, and read before dflash_config.causal
    trained = trained_causality(cfg)
    if trained == by_type(layer_types(cfg)):
        return cfg.algorithm.get("causal"), False
    return trained[0], True


class DFlashLayout(Layout):
    name = "dflash"
    summary = "z-lab / SpecForge DFlashDraftModel, DSparkDraftModel (block diffusion); vLLM and SGLang serve it"
    engine = "specforge"  # dflash_config.target_layer_ids = boundary - 1 (z-lab reads hidden_states[id + 1])
    home_engines = ("vllm-v1", "vllm-v2", "sglang")
    kinds = BLOCK_KINDS

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        kind, named = drafter_kind(ckpt.config)
        if kind in BLOCK_KINDS and "speculators_model_type" not in ckpt.config:
            return Detection(self.name, True, f"config.json has {named}")
        return None

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = ckpt.config
        kind, named = drafter_kind(raw)
        if kind not in BLOCK_KINDS:
            raise FormatError(f"config.json has {named}, not a DFlash, DSpark or DFlash2 architecture",
                              f"the {self.name} layout holds {', '.join(FLAT_ARCHITECTURE.values())} drafters",
                              code="E-CONFIG-ALGORITHM")
        nested = raw.get("dflash_config")
        if nested is not None and not isinstance(nested, dict):
            raise FormatError(f"dflash_config is {nested!r}", "it must be an object", code="E-CONFIG-FIELD")
        nested = dict(nested or {})
        ids = _one_value(nested, raw, "target_layer_ids")
        boundaries = block_diffusion_boundaries(_ids(ids, self.name))
        mask = _mask_token(_one_value(nested, raw, "mask_token_id"), "dflash_config.mask_token_id", kind)
        algorithm = {k: v for k, v in nested.items() if k not in ("target_layer_ids", "mask_token_id")}
        for key in ("block_size", *DSPARK_TOP_KEYS):
            value = _one_value(nested, raw, key)
            if value is not None:
                algorithm[key] = value
        notes = []
        if kind == "dspark" and "sample_from_anchor" not in algorithm:
            # what a flat DSpark file means without it: SGLang's get_dspark_sample_from_anchor and vLLM's DSpark
            # speculator both default to true (SpecForge writes none)
            algorithm["sample_from_anchor"] = True
            notes.append("sample_from_anchor absent: read as true, as vLLM and SGLang read a flat DSpark config")
        depth = raw.get("num_target_layers")
        target = TargetIdentity(num_hidden_layers=depth) if is_int(depth) and depth > 0 else None
        own = {k: raw[k] for k in ("auto_map",) if k in raw}
        drafter = _read(ckpt, options, kind, raw, "config.json", boundaries, mask, algorithm,
                        raw.get("draft_vocab_size"), raw.get("target_hidden_size"), {self.name: own} if own else {},
                        target)
        drafter.notes += notes
        return drafter

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        boundaries = cfg.capture_boundaries or []
        nested = {k: v for k, v in cfg.algorithm.items() if k not in ("block_size", *CAUSALITY_KEYS)}
        causal, whole = _flat_causal(cfg)
        if causal is not None:
            nested["causal"] = causal
        nested.update(mask_token_id=cfg.mask_token_id, target_layer_ids=block_diffusion_ids(boundaries))
        config: dict[str, Any] = {
            **decoder_dict(cfg),
            **cfg.layout_extra.get(self.name, {}),
            **cfg.top_extra,
            "architectures": [FLAT_ARCHITECTURE[cfg.kind]],
            "dflash_config": dict(sorted(nested.items())),
        }
        if whole:
            config["is_causal"] = causal
        if "block_size" in cfg.algorithm:
            config["block_size"] = cfg.algorithm["block_size"]
            if cfg.kind == "dflash2":  # its convolutions count positions by it; SGLang (dflash_utils.py) and
                # TensorRT-LLM (modeling_dflash.py) read dflash_config's first
                config["dflash_config"]["block_size"] = cfg.algorithm["block_size"]
        if cfg.draft_vocab_size != cfg.vocab_size:
            config["draft_vocab_size"] = cfg.draft_vocab_size
        if cfg.target_hidden_size is not None:
            config["target_hidden_size"] = cfg.target_hidden_size
        depth = (options.target or cfg.target or TargetIdentity()).num_hidden_layers
        if depth:
            config["num_target_layers"] = depth
        notes = []
        if cfg.kind == "dspark":
            # vLLM's Qwen3DSparkModel and SGLang's build_markov_head read the heads' fields at the top level,
            # speculators' DSparkConverter reads them and the ids there too; SpecForge reads dflash_config.
            config.update({k: nested[k] for k in (*DSPARK_TOP_KEYS, "mask_token_id", "target_layer_ids")
                           if k in nested})
            notes.append("the DSpark fields are written in dflash_config (SpecForge reads them there) and at the top "
                         "level (vLLM, SGLang and speculators' converter read them there)")
        return WritePlan(self.name, dict(sorted(config.items())), _tensors(drafter), notes)


LAYOUT = DFlashLayout()
