"""speculators layout (vllm-project/speculators; vLLM serves it with `--model DIR`). docs/formats.md §2.1.

Keys are the canonical names (`layers.{i}.*`, unprefixed); the config nests the decoder
under `transformer_layer_config`; capture ids are top-level boundaries.
"""

from __future__ import annotations

from typing import Any

from ..capture_ids import IDS_KEY, engine_boundaries
from ..drafter import BLOCK_KINDS, KIND_LABELS, NORM_FLAGS, Drafter
from ..target_identity import TargetIdentity
from ..errors import FormatError, RefusalError
from .config_keys import refuse_key_errors
from . import dflash
from .layout import KIND_BY_SPECULATORS_TYPE, drafter_kind
from .base import (
    TOP_KEYS,
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    Rename,
    WritePlan,
    build_drafter,
    canonical_tensors,
    decoder_dict,
    decoder_fields,
    infer_num_aux,
    keep_model_type_spelling,
    modelopt_first_layer_note,
    refuse_unless,
    split_decoder_extra,
)

RENAMES: tuple[Rename, ...] = ()  # speculators names are the canonical names

FLAGS = NORM_FLAGS
# Top-level keys the canonical config models; any other top-level key rides in layout_extra.
MODELED = {"speculators_model_type", "transformer_layer_config", "draft_vocab_size", "target_hidden_size",
           IDS_KEY, "tie_word_embeddings", "speculators_config", "mask_token_id", *FLAGS, *TOP_KEYS}
# What each kind's config class writes (speculators models/{eagle3,peagle}/config.py: `architectures` default).
ARCHITECTURES = {"eagle3": "Eagle3Speculator", "peagle": "PEagleSpeculator"}
# speculators' save_pretrained writes these for its own remote-code loading; they mean nothing to engines.
ARTIFACTS = {"auto_map"}
DEFAULT_PROPOSAL = [{"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1,
                     "accept_tolerance": 0.0}]


class SpeculatorsLayout(Layout):
    name = "speculators"
    summary = "vllm-project/speculators trainer and converter; vLLM serves it with `vllm serve --speculative-config`"
    engine = "speculators"
    renames = RENAMES
    home_engines = ("speculators", "vllm-v1", "vllm-v2")
    kinds = ("eagle3", "peagle", "dflash", "dspark", "dflash2")

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        cfg = ckpt.config
        named = cfg.get("speculators_model_type")
        if isinstance(named, str) and named in KIND_BY_SPECULATORS_TYPE:
            return Detection(self.name, True, f"config.json has speculators_model_type {named!r}")
        if "speculators_config" in cfg or "transformer_layer_config" in cfg:
            return Detection(self.name, False, "config.json has speculators_config/transformer_layer_config")
        return None

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = ckpt.config
        kind, _ = drafter_kind(raw)
        if kind in BLOCK_KINDS:  # DFlash, DSpark: their own config class (converters/dflash.py)
            return dflash.read_speculators(ckpt, options, kind)
        key_notes: list[str] = []
        refuse_key_errors(self.name, raw, key_notes)
        if kind not in self.kinds:
            raise FormatError(f"speculators_model_type is {raw.get('speculators_model_type')!r}, not one of "
                              f"{', '.join(repr(k) for k in self.kinds)}",
                              f"this tool converts {', '.join(KIND_LABELS[k] for k in self.kinds)} drafters only",
                              code="E-CONFIG-ALGORITHM")
        dec = raw.get("transformer_layer_config")
        if not isinstance(dec, dict):
            raise FormatError("speculators config has no transformer_layer_config object",
                              "a speculators EAGLE-3 config nests the drafter's decoder config there",
                              code="E-CONFIG-FIELD")
        fields: dict[str, Any] = decoder_fields(dec, "transformer_layer_config")
        extra = split_decoder_extra(dec, set())
        keep_model_type_spelling(dec, fields, extra)
        fields["hf_extra"] = extra
        vd = raw.get("draft_vocab_size", fields["vocab_size"])
        if not isinstance(vd, int) or isinstance(vd, bool) or vd <= 0:
            raise FormatError(f"draft_vocab_size is {vd!r}", "set draft_vocab_size to the lm_head rows",
                              code="E-CONFIG-FIELD")
        fields["draft_vocab_size"] = vd
        fields["target_hidden_size"] = raw.get("target_hidden_size")
        notes = list(ckpt.notes) + key_notes
        for flag in FLAGS:
            fields[flag] = bool(raw.get(flag, False))
        if "norm_before_residual" not in raw:
            # The engines disagree on what the file means: vLLM serves it as true, the library reads false.
            raise RefusalError("norm_before_residual is absent: vLLM serves this speculators config as true, the "
                               "speculators library reads it as false, so the file names no single drafter",
                               "write norm_before_residual (true or false, as the drafter was trained; the "
                               "speculators trainer writes true) into a copy of config.json and convert that",
                               code="E-CONFIG-DEFAULTS-DIFFER")
        ids = raw.get(IDS_KEY)  # its type is config_keys' to check (E-CAPTURE-FIELD), before any reader runs
        if ids is not None and engine_boundaries(self.engine, ids) is None:  # as vLLM's reader refuses it
            raise FormatError(f"{IDS_KEY} {ids}: an id below 0 names no layer in the speculators convention",
                              "speculators ids are boundaries >= 0 (0: the embedding output): write the ids the "
                              "drafter was trained on into a copy of config.json", code="E-CAPTURE-RANGE")
        fields["capture_boundaries"] = ids
        fields["kind"] = kind
        if kind == "peagle":
            fields["mask_token_id"] = required_mask_token(raw.get("mask_token_id"))
        tensors = canonical_tensors(ckpt, RENAMES, fields["num_layers"], self.name)
        fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields, None, ids)
        verifier = (raw.get("speculators_config") or {}).get("verifier") if isinstance(
            raw.get("speculators_config"), dict) else None
        if isinstance(verifier, dict) and verifier.get("name_or_path"):
            archs = verifier.get("architectures")
            fields["target"] = TargetIdentity(
                name_or_path=verifier["name_or_path"],
                architectures=archs if isinstance(archs, list) else [])
        fields["top_extra"] = {k: raw[k] for k in TOP_KEYS if k in raw}
        own = {k: v for k, v in raw.items() if k not in MODELED and k not in ARTIFACTS}
        spec_cfg = raw.get("speculators_config")
        if isinstance(spec_cfg, dict):
            own["speculators_config"] = {k: v for k, v in spec_cfg.items() if k != "verifier"}
        dropped = sorted(ARTIFACTS & raw.keys())
        if dropped or (ckpt.path / "config.py").exists():
            notes.append("ignored speculators save artifacts (auto_map, config.py): engines do not use them")
        fields["layout_extra"] = {self.name: own}
        return build_drafter(ckpt, fields, tensors, options, notes)

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        if cfg.kind in BLOCK_KINDS:
            return dflash.plan_speculators(drafter, options)
        refuse_unless(cfg.family in ("llama", "qwen3"),
                      f"the speculators layout has no {cfg.family} (MLA) drafter class",
                      "serve an MLA drafter with SGLang or vLLM-native (`--to vllm`)", "E-FAMILY-UNSUPPORTED")
        refuse_unless(not (cfg.norm_before_fc and cfg.fc_norm),
                      "norm_before_fc and fc_norm are both true; speculators allows only one of them",
                      "this drafter cannot be expressed in the speculators layout", "E-FLAG-UNSUPPORTED")
        refuse_unless(cfg.capture_boundaries is not None or cfg.num_aux_hidden_states == 3,
                      f"the drafter fuses {cfg.num_aux_hidden_states} captured states but names no capture layers; "
                      "speculators would size fc for 3", "pass --target so the capture layers can be written out",
                      "E-CAPTURE-COUNT")
        target = options.verifier or cfg.target
        if target is None or not target.name_or_path:
            raise RefusalError("the speculators layout must name its verifier (target model) and this drafter "
                               "does not say which it is", "pass --verifier ORG/TARGET_MODEL (the model it was "
                               "trained against)", code="E-VERIFIER-MISSING")
        if cfg.kind == "peagle":
            required_mask_token(cfg.mask_token_id)  # a flat source may name none
        own = dict(cfg.layout_extra.get(self.name, {}))
        spec_cfg: dict[str, Any] = {"default_proposal_method": "greedy", "proposal_methods": DEFAULT_PROPOSAL}
        spec_cfg.update(own.pop("speculators_config", {}))
        spec_cfg["algorithm"] = cfg.kind
        spec_cfg["verifier"] = {"name_or_path": target.name_or_path, "architectures": target.architectures}
        config: dict[str, Any] = {
            "architectures": [ARCHITECTURES[cfg.kind]],
            "speculators_model_type": cfg.kind,
            "speculators_version": "0.9.0",
            # (a training flag; PEagleSpeculatorConfig defaults it to true: P-EAGLE trains its embedding)
            "embed_requires_grad": cfg.kind == "peagle",
            **own,
            **cfg.top_extra,
            "speculators_config": spec_cfg,
            "transformer_layer_config": dict(sorted(decoder_dict(cfg).items())),
            "draft_vocab_size": cfg.draft_vocab_size,
            "target_hidden_size": cfg.target_hidden_size,
            IDS_KEY: cfg.capture_boundaries,
            "tie_word_embeddings": cfg.tie_word_embeddings,
            # Written explicitly always: vLLM and the library disagree on the default of an absent key.
            **{flag: getattr(cfg, flag) for flag in FLAGS},
            **({"mask_token_id": cfg.mask_token_id} if cfg.kind == "peagle" else {}),
        }
        tensors = dict(drafter.tensors)
        if drafter.vocab is not None:
            tensors["d2t"] = drafter.vocab.d2t_tensor()
            tensors["t2d"] = drafter.vocab.t2d_tensor()
        return WritePlan(self.name, dict(sorted(config.items())), tensors, modelopt_first_layer_note(cfg, self.name))


def required_mask_token(value: Any) -> int:
    """P-EAGLE's mask token: vLLM's update_peagle reads `config_dict["mask_token_id"]` (a KeyError when absent),
    and the drafter was trained to see it at every parallel position."""
    if value is None or not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError(f"mask_token_id is {value!r}: a P-EAGLE drafter needs the token id its parallel positions "
                          "were trained with (vLLM reads it as pard_token and fails without it)",
                          "write mask_token_id (SpecForge logs it as peagle_mask_token_id; speculators' trainer "
                          "takes it from --mask-token-id) into a copy of config.json, then convert that",
                          code="E-CONFIG-FIELD")
    return value


LAYOUT = SpeculatorsLayout()
