"""What every layout's reader and writer share: the decoder-config mapping, the shared reading
steps (k from fc, the tensor table, the vocab map, the sidecar), the shared refusals and the
capture-id writing. The checkpoint as read from disk is in converters/checkpoint.py, the
`Layout` interface and rename tables in converters/layout.py, the atomic writer in atomic.py;
their names stay importable from here, as the layout modules import them."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from pydantic import ValidationError

from ..atomic import CONFIG_NAME, check_destination, json_bytes, write_directory  # noqa: F401 (re-exported)
from ..capture_ids import DEEPSEEK_FAMILY, IDS_KEY, capture_context, ids_for_engine
from ..drafter import (BLOCK_HEADS, BLOCK_KINDS, FAMILY_BY_MODEL_TYPE, MLA_KEYS, MODEL_TYPE_BY_FAMILY, ROPE_KEYS,
                       Drafter, DrafterConfig, TargetIdentity, expected_shapes, optional_shapes, wrong_target_width)
from ..engines.vllm import MTP_MODEL_TYPES
from ..errors import CaptureConflict, FormatError, RefusalError, UsageError
from ..json_values import is_int, is_positive_int, short_repr
from ..safetensors_io import TensorSource
from ..vocab_map import DEFAULT_MAP_WAY_OUT, VocabMap, default_map, read_vocab_map, repair_absolute_d2t
from .checkpoint import MAX_CONFIG_BYTES, Checkpoint, load_checkpoint, read_json_file  # noqa: F401 (re-exported)
from ..quantization import companion, input_columns, stored_shape
from .quantized import read_quantization
from .config_keys import DECODER_SEMANTIC, NEVER_CARRIED, decoder_type_checks
from .layout import (  # noqa: F401 (re-exported)
    ARCHITECTURE_FAMILY, EAGLE3_ARCHITECTURES, KNOWN_CANONICAL, LATER_NORMS, MODELOPT_EAGLE_FIELDS, VOCAB_TENSORS,
    ConvertOptions, Detection, FlatMarkers, LayerRename, Layout, Rename, ShiftedLayers, WritePlan, canonical_tensors,
    drop_unused_layer_norms, flat_markers, refuse_unless, to_canonical, to_stored, with_both_later_norms)


# ------------------------------------------------------- decoder config mapping

# Top-level keys that are about the file, not the decoder (they stay top level in every layout).
TOP_KEYS = ("dtype", "torch_dtype", "transformers_version")


class DecoderKeyError(FormatError):
    """decoder_fields' refusal of one decoder key, `key` (validate names the JSON path it lies at)."""

    def __init__(self, key: str, message: str, hint: str, code: str = "E-CONFIG-FIELD"):
        super().__init__(message, hint, code=code)
        self.key = key


def _require_int(cfg: Mapping[str, Any], key: str, where: str) -> int:
    value = cfg.get(key)
    if not is_positive_int(value):
        raise DecoderKeyError(key, f"{where}: {key} is {short_repr(value)}; expected a positive integer",
                              f"fix {key} in config.json")
    return value


# 64x the largest tokenizer in use: a t2d mask is V bytes, so an absurd V is a memory bomb, not a model.
MAX_VOCAB_SIZE = 1 << 24


def _require_vocab_size(dec: Mapping[str, Any], where: str) -> int:
    vocab_size = _require_int(dec, "vocab_size", where)
    if vocab_size > MAX_VOCAB_SIZE:
        raise DecoderKeyError("vocab_size", f"{where}: vocab_size is {vocab_size}, more than any tokenizer (limit "
                              f"{MAX_VOCAB_SIZE})", "fix vocab_size in config.json")
    return vocab_size


def _check_optional_types(dec: Mapping[str, Any], where: str) -> None:
    for key, (ok, expected) in decoder_type_checks().items():
        value = dec.get(key)
        if value is not None and not ok(value):
            raise DecoderKeyError(key, f"{where}: {key} is {short_repr(value)}; expected {expected}",
                                  f"fix {key} in config.json")


def structural_family(architectures: Any, tensor_names: Iterable[str] = ()) -> str | None:
    """The drafter family the engines build from a flat config's architecture, when the tensors agree.

    SGLang and vLLM pick the drafter class by `architectures`, not by `model_type`: SpecForge's
    `kimi-k2-eagle3.json` is a `LlamaForCausalLMEagle3` with q/k/v tensors and `model_type: kimi_k2`.
    """
    archs = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    family = next((ARCHITECTURE_FAMILY[a] for a in archs if a in ARCHITECTURE_FAMILY), None)
    names = list(tensor_names)
    mla = any(".q_a_proj." in n or ".kv_a_proj_with_mqa." in n for n in names)
    attention = any(".q_proj." in n or ".k_proj." in n for n in names)
    if family is None or (names and mla == attention) or (mla and family != "deepseek_mla") or \
            (attention and family == "deepseek_mla"):
        return None  # no class named, or tensors that contradict it
    return family


def decoder_fields(dec: Mapping[str, Any], where: str, tensor_names: Iterable[str] = (),
                   notes: list[str] | None = None) -> dict[str, Any]:
    """Canonical fields from an HF-style decoder config (flat SGLang or speculators' transformer_layer_config).

    The family follows `model_type`, unless the architecture the engines build their class from (and the
    tensors) say otherwise: a model_type of no drafter family, or an MLA model_type on a q/k/v drafter.
    """
    model_type = dec.get("model_type", "llama")
    if not isinstance(model_type, str):
        raise DecoderKeyError("model_type", f"{where}: model_type is {short_repr(model_type)}; expected a string",
                              "fix model_type in config.json")
    _check_optional_types(dec, where)
    family = FAMILY_BY_MODEL_TYPE.get(model_type)
    built = structural_family(dec.get("architectures"), tensor_names)
    if built is not None and family != built and (family is None or "deepseek_mla" in (family, built)):
        if notes is not None:
            notes.append(f"model_type {model_type!r} read as a {built} drafter: the engines build their "
                         f"{built} class from architectures {dec.get('architectures')}, and the tensors agree; "
                         f"written as model_type {MODEL_TYPE_BY_FAMILY[built]!r}")
        family = built
    if family is None:
        raise DecoderKeyError("model_type", f"{where}: drafter model_type {model_type!r} is not an EAGLE-3 drafter "
                              f"family", f"known: {', '.join(sorted(FAMILY_BY_MODEL_TYPE))}", code="E-CONFIG-FAMILY")
    layers = dec.get("num_hidden_layers", 1)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        raise DecoderKeyError("num_hidden_layers", f"{where}: num_hidden_layers is {layers!r}",
                              "a drafter has at least one layer")
    fields: dict[str, Any] = {
        "family": family,
        "hidden_size": _require_int(dec, "hidden_size", where),
        "intermediate_size": _require_int(dec, "intermediate_size", where),
        "num_attention_heads": _require_int(dec, "num_attention_heads", where),
        "num_key_value_heads": dec.get("num_key_value_heads") or dec.get("num_attention_heads"),
        "head_dim": dec.get("head_dim"),
        "num_layers": layers,
        "vocab_size": _require_vocab_size(dec, where),
        "rope": {k: dec[k] for k in ROPE_KEYS if k in dec},
        "attention_bias": bool(dec.get("attention_bias", False)),
        "mlp_bias": bool(dec.get("mlp_bias", False)),
        "tie_word_embeddings": bool(dec.get("tie_word_embeddings", False)),
    }
    for key in ("rms_norm_eps", "hidden_act", "max_position_embeddings"):
        if dec.get(key) is not None:
            fields[key] = dec[key]
    # An absent eps is transformers' default for every drafter family's config class (Llama, Qwen3, DeepSeek-V3):
    # what the engines read, and what this tool then writes out explicitly.
    fields.setdefault("rms_norm_eps", 1e-6)
    if family == "deepseek_mla":
        # Every MLA width must be stated: the engines' fallbacks differ (vLLM 0, transformers DeepSeek-V3 sizes).
        fields["mla"] = {k: _require_int(dec, k, where) for k in MLA_KEYS}
    return fields


def model_refusal(exc: ValidationError) -> tuple[str, FormatError]:
    """A config value the canonical model refuses, which no reader checks first (an rms_norm_eps that is an integer
    past a float's range): the field, and the refusal convert and validate give."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "config"
    return field, FormatError(f"config.json: {field}: {first['msg']} (got {str(first.get('input'))[:60]!r})",
                              "fix that field in config.json", code="E-CONFIG-FIELD")


def decoder_dict(cfg: DrafterConfig) -> dict[str, Any]:
    """The HF decoder config of a canonical drafter (verbatim extras and rope fields included)."""
    dec: dict[str, Any] = dict(cfg.hf_extra)
    dec.update({
        "model_type": cfg.hf_extra.get("model_type", MODEL_TYPE_BY_FAMILY[cfg.family]),
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "num_hidden_layers": cfg.num_layers,
        "rms_norm_eps": cfg.rms_norm_eps,
        "hidden_act": cfg.hidden_act,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": cfg.tie_word_embeddings,
    })
    if cfg.head_dim is not None:
        dec["head_dim"] = cfg.head_dim
    if cfg.max_position_embeddings is not None:
        dec["max_position_embeddings"] = cfg.max_position_embeddings
    if cfg.family != "deepseek_mla":
        dec["attention_bias"] = cfg.attention_bias
        dec["mlp_bias"] = cfg.mlp_bias
    dec.update(cfg.rope)
    if cfg.mla:
        dec.update(cfg.mla)
    return dec


def split_decoder_extra(dec: Mapping[str, Any], also_known: set[str]) -> dict[str, Any]:
    """Decoder keys the canonical config does not model, kept verbatim (not NEVER_CARRIED: keys some layout
    reads, whose unread copy would shadow the destination's)."""
    return {k: v for k, v in dec.items()
            if k not in DECODER_SEMANTIC and k not in also_known and k not in TOP_KEYS and k not in NEVER_CARRIED}


def keep_model_type_spelling(dec: Mapping[str, Any], fields: dict[str, Any], extra: dict[str, Any]) -> None:
    # deepseek_v3 and kimi_k2 are one family but keep the spelling the source used; a spelling of another
    # family (kimi_k2 on a Llama-class drafter) is not kept: the family's own model_type is written.
    model_type = dec.get("model_type")
    if model_type and model_type != MODEL_TYPE_BY_FAMILY[fields["family"]] and \
            FAMILY_BY_MODEL_TYPE.get(model_type) == fields["family"] and model_type not in MTP_MODEL_TYPES:
        extra["model_type"] = model_type  # (a spelling vLLM would turn into DeepSeek MTP is not kept)
    elif model_type and FAMILY_BY_MODEL_TYPE.get(model_type) == "deepseek_mla" and fields["family"] != "deepseek_mla":
        # The drafter's config says which target it serves: SGLang's Kimi/DeepSeek targets read capture ids their way.
        fields.setdefault("target", TargetIdentity(model_type=model_type))



# ------------------------------------------------------------ shared reading

def infer_num_aux(fc: TensorSource | None, cfg_fields: Mapping[str, Any], declared: int | None,
                  ids: list[int] | None) -> int:
    """k from the fc width (k * Ht), cross-checked against the ids and any declared count."""
    declared_ht = cfg_fields.get("target_hidden_size")
    if declared_ht is not None and not is_positive_int(declared_ht):
        raise FormatError(f"target_hidden_size is {short_repr(declared_ht)}; expected a positive integer or null",
                          "fix target_hidden_size in config.json", code="E-CONFIG-FIELD")
    ht = declared_ht or cfg_fields["hidden_size"]
    if fc is None or len(fc.shape) != 2:
        return declared or (len(ids) if ids else 3)
    width = input_columns(fc)
    wrong = wrong_target_width(width, len(ids) if ids else declared, declared_ht, cfg_fields["hidden_size"])
    if wrong:
        raise FormatError(*wrong, code="E-TARGET-HIDDEN-SIZE")
    if width % ht:
        raise FormatError(f"fc.weight has {width} input columns, not a multiple of the target hidden size {ht}",
                          "check target_hidden_size in config.json", code="E-SHAPE-FC")
    k = width // ht
    if ids is not None and len(ids) != k:
        raise FormatError(f"fc.weight fuses {k} captured states but the config lists {len(ids)} capture ids {ids}",
                          "the capture id list and the fc width must agree", code="E-CAPTURE-COUNT")
    if declared is not None and declared != k:
        raise FormatError(f"num_aux_hidden_states is {declared} but fc.weight fuses {k} states",
                          "fix num_aux_hidden_states in config.json", code="E-CAPTURE-COUNT")
    return k


def check_tensor_table(drafter: Drafter) -> None:
    """Every tensor the config implies is present with its shape; nothing the config does not explain."""
    layers = drafter.config.num_layers
    if layers > len(drafter.tensors):  # every layer needs several tensors; and expected_shapes is linear in this
        raise FormatError(f"config.json says {layers} layers but the checkpoint holds {len(drafter.tensors)} tensors",
                          "the checkpoint is incomplete or num_hidden_layers is wrong", code="E-KEY-MISSING")
    expected = expected_shapes(drafter.config)
    optional = optional_shapes(drafter.config)
    missing = sorted(set(expected) - set(drafter.tensors))
    if missing:
        raise FormatError(f"required tensor {missing[0]!r} is missing" +
                          (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                          "the checkpoint is incomplete; engines would load it silently with random weights",
                          code="E-KEY-MISSING")
    for name, src in drafter.tensors.items():
        if companion(name):
            continue  # a scale: its weight is checked (read_quantization refused scales without one)
        want = expected.get(name) or optional.get(name)
        if want is None and drafter.config.kind in BLOCK_KINDS and name.startswith(tuple(BLOCK_HEADS)):
            continue  # DSpark's heads: checked against the config that builds them (converters/dflash.py)
        if want is not None and f"{name}_scale" in drafter.tensors:
            want = stored_shape(want, src.dtype)
        if want is None:
            raise RefusalError(f"tensor {name!r} is not used by this drafter's config "
                               "(a flag is off or the layer count is wrong)",
                               "engines drop such tensors silently; fix the config flag or remove the tensor",
                               code="E-KEY-UNUSED")
        if tuple(src.shape) != want:
            raise FormatError(f"tensor {name!r} has shape {list(src.shape)}, the config implies {list(want)}",
                              "config.json and the weights disagree", code="E-SHAPE")


def read_vocab(ckpt: Checkpoint, vocab_size: int, draft_vocab_size: int, options: ConvertOptions):
    """The checkpoint's vocab map (None: the full target vocab), repaired when --repair-d2t-absolute asks."""
    if options.repair_d2t_absolute:
        vocab = _repaired_vocab(ckpt, vocab_size, draft_vocab_size)
    else:
        vocab = ckpt.vocab_map(vocab_size, draft_vocab_size)
    return None if vocab is None or vocab.is_identity else vocab


def _repaired_vocab(ckpt: Checkpoint, vocab_size: int, draft_vocab_size: int) -> VocabMap | None:
    d2t, t2d = ckpt.tensors.get("d2t"), ckpt.tensors.get("t2d")
    try:  # the repair is for one fault only: a d2t that holds absolute ids
        ckpt.vocab_map(vocab_size, draft_vocab_size)
    except FormatError as exc:
        if exc.code != "E-VOCAB-ABSOLUTE":
            raise
    else:
        raise UsageError("--repair-d2t-absolute was given, but d2t already holds offsets"
                         + (" that agree with t2d" if t2d is not None else "")
                         + ": subtracting arange(Vd) would break a healthy vocabulary map",
                         "drop --repair-d2t-absolute", code="E-REPAIR-NOT-NEEDED")
    d2t = repair_absolute_d2t(d2t) if d2t is not None else d2t
    return read_vocab_map(d2t, t2d, vocab_size, draft_vocab_size)


def source_config(ckpt: Checkpoint) -> dict[str, Any]:
    """config.json less the keys our own writer derived for an engine (the sidecar lists them; `a.b` is key b
    of the object a)."""
    derived = (ckpt.sidecar or {}).get("derived_config_keys") or []
    config = {k: v for k, v in ckpt.config.items() if k not in derived}
    for parent, _, child in (k.partition(".") for k in derived if "." in k):
        if isinstance(config.get(parent), dict):
            config[parent] = {k: v for k, v in config[parent].items() if k != child}
    return config


# What a YaRN rope object means when it leaves these out, spelled out: transformers' `_compute_yarn_parameters`
# takes `beta_fast or 32`, `beta_slow or 1` and, without both mscales, the attention factor 0.1 ln(factor) + 1,
# which mscale 1 over mscale_all_dim 0 also gives (SGLang, vLLM and SpecForge divide the two). SpecForge passes
# each key as read, None when absent, over its own defaults, and fails on None (docs/formats.md §2.2).
YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}


def is_yarn(rope: Any) -> bool:
    return isinstance(rope, dict) and str(rope.get("rope_type") or rope.get("type") or "").lower() == "yarn"


def with_yarn_defaults(config: dict[str, Any]) -> list[str]:
    """Write transformers' YaRN defaults into `config`'s YaRN rope objects that leave them out (the same maths
    for every reader); returns the keys added, as `rope_scaling.beta_fast`, for derived_config_keys."""
    added = []
    for parent in ("rope_scaling", "rope_parameters"):
        rope = config.get(parent)
        if is_yarn(rope):
            missing = {k: v for k, v in YARN_DEFAULTS.items() if k not in rope}
            config[parent] = {**rope, **missing}
            added += [f"{parent}.{k}" for k in missing]
    return added


def build_drafter(ckpt: Checkpoint, fields: dict[str, Any], tensors: dict[str, TensorSource],
                  options: ConvertOptions, notes: list[str]) -> Drafter:
    """The end of every layout's read: sidecar facts, canonical config, vocab map, tensor-table check."""
    restore_from_sidecar(ckpt, fields)
    fields["quantization"] = read_quantization(ckpt, tensors)
    if fields.get("tie_word_embeddings") and "lm_head.weight" in tensors:
        # Lossless: the trained head is stored, and the flag means nothing else for a drafter (speculators'
        # SpeculatorModel.__init__ and SpecForge's AutoDraftModelConfig.from_file force it false to train).
        # Carried true, SGLang would replace the head with embed_tokens (engines/sglang.py).
        fields["tie_word_embeddings"] = False
        notes.append("tie_word_embeddings is true but lm_head.weight is the drafter's own trained tensor: "
                     "written false (a drafter never trains tied; SGLang would serve embed_tokens as its head)")
    cfg = DrafterConfig(**fields)
    vocab = read_vocab(ckpt, cfg.vocab_size, cfg.draft_vocab_size, options)
    implied = default_map(vocab)
    if implied:  # carried as it is: only the trainer knows the ids it selected
        notes.append(f"WARNING: {implied} [W-VOCAB-DEFAULT]; the map is written as read: {DEFAULT_MAP_WAY_OUT}")
    drafter = Drafter(cfg, tensors, vocab, notes)
    check_tensor_table(drafter)
    return drafter


def restore_from_sidecar(ckpt: Checkpoint, cfg: dict[str, Any]) -> None:
    """Facts our own earlier output carried beside config.json (other layouts' keys, the target)."""
    if not ckpt.sidecar:
        return
    carried = ckpt.sidecar.get("layout_extra")
    if isinstance(carried, dict):
        for layout, extra in carried.items():
            if isinstance(extra, dict):
                cfg["layout_extra"].setdefault(layout, extra)
    flags = ckpt.sidecar.get("flags")
    if isinstance(flags, dict) and flags.get("input_layernorm_on_hidden") is True:
        cfg["input_layernorm_on_hidden"] = True  # ModelOpt's first-layer fact, which no other layout's config holds
    target = ckpt.sidecar.get("target")
    if isinstance(target, dict):
        try:
            known = TargetIdentity.model_validate(target)
        except ValueError:
            return
        cfg["target"] = TargetIdentity.merged(cfg.get("target"), known)



# ------------------------------------------------------------ shared refusals

def modelopt_first_layer_note(cfg: DrafterConfig, layout: str) -> list[str]:
    """ModelOpt's HF trainer computes hidden_norm(input_layernorm(h)) in the first layer, where every engine
    computes hidden_norm(h). vLLM, SGLang and TensorRT-LLM serve NVIDIA's own exports with that approximation,
    so converting changes nothing about what is served: a warning, and the fact rides in the sidecar (and
    back into `--to modelopt`)."""
    if not cfg.input_layernorm_on_hidden:
        return []
    return [f"WARNING: ModelOpt trained this drafter with hidden_norm(input_layernorm(h)) in its first layer; the "
            f"{layout} layout's engines compute hidden_norm(h), the same approximation they apply to the ModelOpt "
            "export itself (kept in eagle3-convert.json and restored by --to modelopt)"]


def refuse_uncaptured_states(cfg: DrafterConfig, layout: str) -> None:
    """Without capture ids every engine captures 3 default layers; an fc of another width gets garbage."""
    refuse_unless(cfg.capture_boundaries is not None or cfg.num_aux_hidden_states == 3 or cfg.capture == "final",
                  f"the drafter fuses {cfg.num_aux_hidden_states} captured states but names no capture layers; "
                  f"the {layout} layout's engine would capture its 3 default layers",
                  "add the capture ids the drafter was trained with to a copy of the source config.json",
                  "E-CAPTURE-COUNT")


def flat_fields(raw: Mapping[str, Any], modeled: set[str], tensor_names: Iterable[str] = (),
                notes: list[str] | None = None) -> dict[str, Any]:
    """Canonical fields shared by the flat HF-style layouts (SGLang, vLLM, EAGLE, ModelOpt)."""
    fields: dict[str, Any] = decoder_fields(raw, "config.json", tensor_names, notes)
    extra = split_decoder_extra(raw, modeled)
    keep_model_type_spelling(raw, fields, extra)
    fields["hf_extra"] = extra
    if raw.get("target_hidden_size") is not None:
        fields["target_hidden_size"] = raw["target_hidden_size"]
    fields["top_extra"] = {k: raw[k] for k in TOP_KEYS if k in raw}
    return fields


def int_list(value: Any, where: str) -> list[int] | None:
    """A capture-id list as written (None or [] = not given); anything else is a format error."""
    if value is None or value == []:
        return None
    if not isinstance(value, list) or not all(is_int(x) for x in value):
        raise FormatError(f"{where} is {value!r}", "it must be a list of integers", code="E-CAPTURE-FIELD")
    return value


def write_capture_ids(config: dict[str, Any], eagle: dict[str, Any], cfg: DrafterConfig, options: ConvertOptions,
                      nested_convention: str, nested_required: bool) -> None:
    """The capture layers where every engine reads them: BOUNDARIES at the top level (vLLM's V1 and V2
    runners, llama.cpp's converter) and `nested_convention` ids in eagle_config (SGLang, ModelOpt).
    A nested list the convention cannot spell is left out when not required (SGLang then reads
    its defaults, and `engines.shield_from_sglang` makes it refuse the file instead)."""
    if cfg.capture_boundaries is None:
        return
    family, depth = capture_context(cfg.family, options.target, cfg.target)
    config[IDS_KEY] = list(cfg.capture_boundaries)
    try:
        eagle[IDS_KEY] = ids_for_engine(nested_convention, cfg.capture_boundaries,
                                                                   family, depth)
    except RefusalError:
        if nested_required:
            raise


def given_capture(options: ConvertOptions) -> list[int] | None:
    """Boundaries the user stated with --capture-layers: they settle which of two readings is meant."""
    given = options.training_capture
    return list(given[0]) if given and options.capture_stated else None


def check_top_level_copy(raw: Mapping[str, Any], boundaries: list[int] | None, nested_reader: str,
                         options: ConvertOptions) -> list[int] | None:
    """A nested-id layout may carry the same layers at the top level as boundaries (for vLLM); a top-level
    list that names other layers is a trap (each engine would capture different ones): refused unless
    --capture-layers says which of the two the drafter was trained on. Returns the boundaries."""
    top = int_list(raw.get(IDS_KEY), IDS_KEY)
    if top is None or boundaries is None or sorted(set(top)) == sorted(set(boundaries)):
        return boundaries
    given = given_capture(options)
    if given is not None and sorted(given) in (sorted(top), sorted(boundaries)):
        return given
    raise CaptureConflict(
        f"the top-level eagle_aux_hidden_state_layer_ids {top} (vLLM reads them as boundaries {top}) and "
        f"eagle_config.eagle_aux_hidden_state_layer_ids (read by {nested_reader} as boundaries {boundaries}) "
        "name different layers", [(nested_reader, sorted(boundaries)), ("vLLM", sorted(top))])


# Vocabulary sizes that name a DeepSeek/Kimi target, whose SGLang capture path reads ids its own way.
DEEPSEEK_VOCABS = {129280: "deepseek_v3", 163840: "kimi_k2"}


def infer_target(ckpt: Checkpoint, raw: Mapping[str, Any], drafter_family: str,
                 options: ConvertOptions) -> tuple[TargetIdentity | None, str | None]:
    """Who the target is, for id conventions that depend on its family: --target, else our sidecar, else
    what the drafter's own config betrays (a DeepSeek/Kimi model_type on a Llama-style drafter, as
    SpecForge's kimi-k2 config writes; a DeepSeek/Kimi vocabulary size). Returns the target and, when it
    was inferred, what it was inferred from (to be said, never assumed in silence)."""
    if options.target is not None and options.target.model_type:
        return options.target, None
    side = (ckpt.sidecar or {}).get("target")
    if isinstance(side, dict) and side.get("model_type"):
        try:
            return TargetIdentity.model_validate(side), None
        except ValueError:
            pass
    betrayed = target_betrayed_by(raw, drafter_family)
    return betrayed if betrayed is not None else (options.target, None)


def target_betrayed_by(raw: Mapping[str, Any], drafter_family: str) -> tuple[TargetIdentity, str] | None:
    """A DeepSeek/Kimi target the drafter's own config names (a DeepSeek/Kimi model_type on a Llama-style
    drafter, or such a vocabulary size), and what names it; None when the config says nothing of it."""
    model_type, vocab = raw.get("model_type"), raw.get("vocab_size")
    if drafter_family != "deepseek_mla" and model_type in DEEPSEEK_FAMILY:
        return TargetIdentity(model_type=model_type), f"the drafter config's model_type {model_type!r}"
    if vocab in DEEPSEEK_VOCABS:
        return (TargetIdentity(model_type=DEEPSEEK_VOCABS[vocab], vocab_size=vocab),
                f"vocab_size {vocab}, the {DEEPSEEK_VOCABS[vocab]} vocabulary")
    return None
