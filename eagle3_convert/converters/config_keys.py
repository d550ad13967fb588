"""The config.json keys each layout's producers write, as data, and what a key outside them means.

Every key in a drafter config is one of:

- SEMANTIC for the layout: its reader reads it, and its value changes the model (dims, rope, the
  norm flags, the capture ids, the vocab sizes). A near miss of one (`hiden_size`,
  `eagle_confg`), a semantic key one level off (`use_aux_hidden_state` at the top level of an
  SGLang config, `hidden_size` at the top level of a speculators config) or one of the wrong
  JSON type is an ERROR: the reader would take the real key as absent (or `"false"` as true)
  and silently read another model.
- KNOWN: its producers write it (transformers' generic config attributes, MoE fields of the
  target family, training leftovers); carried verbatim or ignored, never a finding.
- FOREIGN: semantic in another layout but not read by this one (a vLLM `norm_before_residual`
  in an SGLang config): reported, never carried into the output, where it would shadow the
  destination's own reading.
- UNKNOWN: none of the above: reported (with a did-you-mean when it is close to a known key)
  and carried verbatim.

A key that one of transformers' model config classes defines (model_config_keys.txt, written by
tools/model_config_keys.py: AngelSlim's Hunyuan drafter carries its family's `eod_token_id`) is
no misspelling of a key we read, unless the key it resembles is one the decoder needs and the
config lacks it (`hidden_sizes` without `hidden_size`): then it is as likely a typo, and an error.

`key_issues(layout, config)` lists the findings; `refuse_key_errors` is what every reader calls
first, so convert and validate judge a config the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any, Callable, Iterable, Mapping

from .. import schemas
from ..drafter import MLA_KEYS, NORM_FLAGS, ROPE_KEYS
from ..capture_ids import IDS_KEY as CAPTURE_IDS
from ..errors import FormatError
from ..json_values import is_int, is_number, is_positive_int, short_repr

# ------------------------------------------------------------------------ the tables

# Attributes of transformers' PretrainedConfig (4.x and 5.x) that `to_dict` can write for any model.
TRANSFORMERS_COMMON = frozenset({
    "_name_or_path", "_attn_implementation_autoset", "_commit_hash", "add_cross_attention", "architectures",
    "bad_words_ids", "begin_suppress_tokens", "bos_token_id", "chunk_size_feed_forward",
    "cross_attention_hidden_size", "decoder_start_token_id", "diversity_penalty", "do_sample", "dtype",
    "early_stopping", "encoder_no_repeat_ngram_size", "eos_token_id", "exponential_decay_length_penalty",
    "finetuning_task", "forced_bos_token_id", "forced_eos_token_id", "id2label", "is_decoder",
    "is_encoder_decoder", "label2id", "length_penalty", "max_length", "min_length", "no_repeat_ngram_size",
    "num_beam_groups", "num_beams", "num_return_sequences", "output_attentions", "output_hidden_states",
    "output_scores", "pad_token_id", "prefix", "problem_type", "pruned_heads", "remove_invalid_values",
    "repetition_penalty", "return_dict", "return_dict_in_generate", "sep_token_id", "suppress_tokens",
    "task_specific_params", "temperature", "tf_legacy_loss", "tie_encoder_decoder", "tokenizer_class",
    "top_k", "top_p", "torch_dtype", "torchscript", "transformers_version", "typical_p", "use_bfloat16",
    "auto_map", "attn_implementation", "use_return_dict", "output_router_logits", "router_aux_loss_coef",
    "quantization_config",
})
# Decoder keys that transformers writes for the llama / qwen3 / deepseek_v3 / kimi_k2 configs a drafter
# is saved with (and the MoE fields ModelOpt's kimi_k2 template copies from the target), which no
# engine's EAGLE-3 drafter class reads.
DECODER_WRITTEN = frozenset({
    "initializer_range", "use_cache", "pretraining_tp", "attention_dropout", "max_window_layers", "sliding_window",
    "use_sliding_window", "layer_types", "bias_in_fc", "rope_interleave", "qk_head_dim",
    "moe_intermediate_size", "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "routed_scaling_factor",
    "scoring_func", "topk_method", "n_group", "topk_group", "norm_topk_prob", "first_k_dense_replace",
    "moe_layer_freq", "ep_size", "aux_loss_alpha", "seq_aux", "num_nextn_predict_layers", "num_experts",
    "num_local_experts", "experts_per_token", "decoder_sparse_step", "mlp_only_layers",
    "o_lora_rank",  # DeepSeek-V4 (transformers' DeepseekV4Config), one edit from the q_lora_rank written beside it
})
# HF decoder-config keys the canonical config models (every other key rides in hf_extra): semantic everywhere.
DECODER_SEMANTIC = frozenset({
    "model_type", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "num_hidden_layers", "rms_norm_eps", "hidden_act", "max_position_embeddings", "vocab_size",
    "attention_bias", "mlp_bias", "tie_word_embeddings", *ROPE_KEYS, *MLA_KEYS,
})
MODELOPT_NESTED = frozenset({"use_input_layernorm_in_first_layer", "use_last_layernorm", "use_mtp_layernorm",
                             "next_layer_regular", "parallel_draft_step", "parallel_draft_heads_num_layers"})


@dataclass(frozen=True)
class Level:
    """The keys of one JSON object of a layout's config: read (semantic) and merely written (known)."""

    semantic: frozenset[str]
    known: frozenset[str] = frozenset()
    children: tuple[tuple[str, "Level"], ...] = ()  # nested objects this level holds

    def child(self, key: str) -> "Level | None":
        return dict(self.children).get(key)

    @property
    def all(self) -> frozenset[str]:
        return self.semantic | self.known


# The rope objects (transformers 4 `rope_scaling`, 5 `rope_parameters`): every key changes the positions.
ROPE = Level(frozenset({
    "rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings", "low_freq_factor",
    "high_freq_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate",
    "short_factor", "long_factor", "partial_rotary_factor", "mrope_section", "mrope_interleaved"}))
_ROPE_CHILDREN = (("rope_parameters", ROPE), ("rope_scaling", ROPE))


def _flat(semantic: Iterable[str], known: Iterable[str] = (), eagle_semantic: Iterable[str] = (),
          eagle_known: Iterable[str] = ()) -> Level:
    """A flat HF-style config: the decoder keys at the top level, beside the layout's own."""
    children = _ROPE_CHILDREN
    if eagle_semantic or eagle_known:
        children += (("eagle_config", Level(frozenset(eagle_semantic), frozenset(eagle_known))),)
    return Level(DECODER_SEMANTIC | frozenset(semantic),
                 (TRANSFORMERS_COMMON | DECODER_WRITTEN | frozenset(known)) - DECODER_SEMANTIC - frozenset(semantic),
                 children)


_DECODER = Level(DECODER_SEMANTIC, TRANSFORMERS_COMMON | DECODER_WRITTEN, _ROPE_CHILDREN)

# One table per layout: what its producers write and what its reader reads.
LAYOUT_KEYS: dict[str, Level] = {
    # speculators 0.9 (trainer and converter): the decoder nested under transformer_layer_config.
    "speculators": Level(
        semantic=frozenset({"speculators_model_type", "transformer_layer_config", "draft_vocab_size",
                            "target_hidden_size", CAPTURE_IDS, "speculators_config", "mask_token_id", *NORM_FLAGS}),
        known=TRANSFORMERS_COMMON | frozenset({"speculators_version", "embed_requires_grad", "tie_word_embeddings",
                                               "has_no_defaults_at_init"}),
        children=(
            ("transformer_layer_config", _DECODER),
            ("speculators_config", Level(frozenset({"algorithm", "verifier"}),
                                         frozenset({"proposal_methods", "default_proposal_method"}),
                                         (("verifier", Level(frozenset({"name_or_path", "architectures"}))),))),
        )),
    # SGLang's LlamaForCausalLMEagle3 / Eagle3DeepseekV2ForCausalLM and SpecForge's export.
    "sglang": _flat({"architectures", "draft_vocab_size", "target_hidden_size", "eagle_config",
                     "num_aux_hidden_states", "norm_before_fc", "fc_norm", "use_aux_norm", "norm_output", "bias",
                     CAPTURE_IDS},
                    eagle_semantic={CAPTURE_IDS, "use_aux_hidden_state", "norm_before_fc"}),
    # vLLM-native Eagle3 configs.
    "vllm": _flat({"architectures", "draft_vocab_size", "target_hidden_size", "eagle_config", "num_aux_hidden_states",
                   CAPTURE_IDS, "pard_token", "ptd_token_id", "mask_token_id", *NORM_FLAGS},
                  eagle_semantic={CAPTURE_IDS, "use_aux_hidden_state", "norm_before_fc"},
                  eagle_known=MODELOPT_NESTED),
    # SafeAILab/EAGLE: a plain Llama config and draft_vocab_size.
    "eagle": _flat({"architectures", "draft_vocab_size", "target_hidden_size"}),
    # NVIDIA ModelOpt's HF export (llama and kimik2 templates of its export plugin).
    # The top-level id list is eagle3-convert's copy for vLLM, as boundaries, beside NVIDIA's nested one.
    # NeMo Automodel's LlamaEagle3DraftModel: the target's config plus its draft keys (converters/nemo.py).
    "nemo": _flat({"architectures", "draft_vocab_size", "target_hidden_size", "parallel_drafting", "mask_token_id",
                   "fc_norm", "norm_output", "num_aux_hidden_states"},
                  known={"attn_implementation", "num_depths", "down_sample_ratio", "down_sample_ratio_min",
                         "layer_types", "max_window_layers", "sliding_window", "use_sliding_window"}),
    # The Eagle 3.1 flags where TensorRT-LLM reads them (modeling_speculative.py @ 00679c66): norm_before_fc nested
    # (NVIDIA's gpt-oss exports), fc_norm and norm_output at the top, norm_output nested as return_hidden_post_norm.
    "modelopt": _flat({"architectures", "draft_vocab_size", "eagle_config", "target_hidden_size", CAPTURE_IDS,
                       "norm_before_fc", "fc_norm", "norm_output"},
                      known={"quantization_config"},
                      eagle_semantic={CAPTURE_IDS, "use_aux_hidden_state", "norm_before_fc", "return_hidden_post_norm",
                                      *MODELOPT_NESTED}),
}
# Keys some layout reads that are not the decoder's, at the top level of a flat config.
SEMANTIC_ANYWHERE = frozenset().union(*(lvl.semantic for lvl in LAYOUT_KEYS.values())) | frozenset(
    {"use_aux_hidden_state", *MODELOPT_NESTED})
# Keys some layout reads inside eagle_config.
EAGLE_CONFIG_ANYWHERE = frozenset().union(*(lvl.child("eagle_config").semantic for lvl in LAYOUT_KEYS.values()
                                            if lvl.child("eagle_config") is not None))


def _semantic(level: Level) -> frozenset[str]:
    return level.semantic.union(*(_semantic(child) for _, child in level.children))


# Keys some layout reads, at any level.
SEMANTIC_AT_ANY_LEVEL = frozenset().union(*map(_semantic, LAYOUT_KEYS.values()))
# Never carried verbatim into another layout's config: each is read by SOME layout, so an unread copy
# would change what the destination's engine reads.
NEVER_CARRIED = (SEMANTIC_ANYWHERE - DECODER_SEMANTIC) | {"speculators_config", "transformer_layer_config"}


def _list_of(item: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(item(x) for x in v)


# How each JSON type the schemas give a key is checked, and said in a finding.
CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "positive": (is_positive_int, "a positive integer"),
    "integer": (is_int, "an integer"),  # (a token id: 0 is one; the schema's minimum says the rest)
    "number": (is_number, "a number"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "array of integer": (_list_of(is_int), "a list of integers"),
    "array of number": (_list_of(is_number), "a list of numbers"),
    "array of string": (_list_of(lambda x: isinstance(x, str)), "a list of strings"),
}
POSITIVE_NUMBER = (lambda v: is_number(v) and v > 0, "a positive number")  # a "number" with exclusiveMinimum 0
# Decoder keys base.decoder_fields types itself (with its own message); the key table checks the rest.
TYPED_BY_DECODER_FIELDS = DECODER_SEMANTIC - {"model_type", "num_hidden_layers"} - ROPE.semantic
# A null the reader takes as absent though the schema wants a value (validate reports the schema's finding):
# the speculators reader names no verifier.
NULL_READ_AS_ABSENT = frozenset({"name_or_path"})


@cache
def type_checks() -> dict[str, tuple[Callable[[Any], bool], str, bool]]:
    """key -> (check, expected, null allowed) for each semantic key whose wrong JSON type the readers' coercion
    would turn into another model (`"false"` read as true, a string width); the types are the shipped schemas'."""
    typed_here = SEMANTIC_AT_ANY_LEVEL - TYPED_BY_DECODER_FIELDS
    return {key: (*CHECKS[t.kind], t.nullable or key in NULL_READ_AS_ABSENT)
            for key, t in schemas.config_key_types().items() if key in typed_here}


@cache
def decoder_type_checks() -> dict[str, tuple[Callable[[Any], bool], str]]:
    """key -> (check, expected) for the optional decoder keys base.decoder_fields types before it reads them (it
    checks model_type, num_hidden_layers, the required widths and the MLA widths one by one): a string "1e-5" or
    "false" must be refused, not coerced (bool("false") is True). The types are the decoder schema's."""
    decoder = schemas.load_schema("decoder")
    types = schemas.config_key_types()
    optional = DECODER_SEMANTIC - {"model_type", "num_hidden_layers", *decoder["required"], *MLA_KEYS}
    return {key: POSITIVE_NUMBER if decoder["properties"][key].get("exclusiveMinimum") == 0 else CHECKS[types[key].kind]
            for key in decoder["properties"] if key in optional}


TYPE_CODES = {CAPTURE_IDS: "E-CAPTURE-FIELD"}  # the code of a wrong type, where not E-CONFIG-FIELD


# ---------------------------------------------------------------------- the judgement

@dataclass(frozen=True)
class KeyIssue:
    code: str  # E-CONFIG-KEY-TYPO / -PLACE, E-CONFIG-FIELD (a semantic key's type), W-CONFIG-KEY-UNKNOWN / -FOREIGN
    where: str  # JSON path, e.g. $.eagle_confg
    message: str
    hint: str

    @property
    def error(self) -> bool:
        return self.code.startswith("E-")


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap two neighbours), or limit + 1
    as soon as it must exceed `limit`."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit and min(prev) >= limit:  # no later row, swaps included, can come back under
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _squash(key: str) -> str:
    return "".join(c for c in key.lower() if c.isalnum())


MAX_KEY_LENGTH = 64  # longer than any key a producer writes: no near miss is looked for (a hostile key)


def near_miss(key: str, candidates: Iterable[str]) -> str | None:
    """The known key `key` most likely misspells (same letters ignoring case and separators, or a small edit)."""
    if len(key) > MAX_KEY_LENGTH:
        return None
    squashed = _squash(key)
    best: tuple[int, str] | None = None
    for cand in sorted(candidates):
        if cand == key:
            return None
        if _squash(cand) == squashed:
            return cand
        limit = 1 if len(cand) <= 6 else 2 if len(cand) <= 15 else 3
        if abs(len(cand) - len(key)) > limit:
            continue
        d = _edit_distance(key.lower(), cand.lower(), limit)
        if d <= limit and (best is None or d < best[0]):
            best = (d, cand)
    return best[1] if best else None


def _path(parent: str, key: str) -> str:
    """`$.a.b`; a key that is no identifier is quoted (repr: one line, however hostile) and cut short."""
    if key.isidentifier():
        return f"{parent}.{key}"
    text = repr(key)
    return f"{parent}.{text if len(text) <= 40 else text[:37] + '...'}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__)


def key_issues(layout: str, config: Mapping[str, Any]) -> list[KeyIssue]:
    """Every key of `config` outside what the `layout`'s producers write, and every semantic key of
    the wrong type. Layouts without a table (third-party plugins) yield none."""
    table = LAYOUT_KEYS.get(layout)
    if table is None:
        return []
    out: list[KeyIssue] = []
    _walk(layout, table, config, "$", None, out)
    unknown = [n for n, i in enumerate(out) if i.code == "W-CONFIG-KEY-UNKNOWN"]
    if len(unknown) > MAX_UNKNOWN_REPORTED:  # name the first ones, count the rest
        rest = set(unknown[MAX_UNKNOWN_REPORTED:])
        out = [i for n, i in enumerate(out) if n not in rest]
        out.append(KeyIssue("W-CONFIG-KEY-UNKNOWN", "$", f"and {len(rest)} more keys no {layout} producer writes",
                            "remove the leftovers"))
    return out


MAX_UNKNOWN_REPORTED = 20
MAX_STRAYS_EXAMINED = 200  # beyond this many keys outside the tables the config is refused (bounded work)


def _walk(layout: str, level: Level, obj: Mapping[str, Any], where: str,
          parent: tuple[Level, str, Mapping[str, Any]] | None, out: list[KeyIssue]) -> None:
    siblings = [(name, lvl) for name, lvl in level.children]
    for key, value in obj.items():
        path = _path(where, key)
        if key in level.semantic:
            check = type_checks().get(key)
            if check is not None and not (value is None and check[2]) and not check[0](value):
                out.append(KeyIssue(TYPE_CODES.get(key, "E-CONFIG-FIELD"), path, f"{path[2:]} is "
                                    f"{short_repr(value, 60)} (JSON {_json_type(value)}); the {layout} reader expects "
                                    f"{check[1]} and would coerce it",
                                    f"write {path[2:]} as {check[1]} in config.json"))
                continue
            child = level.child(key)
            if child is not None and isinstance(value, dict):
                _walk(layout, child, value, path, (level, where, obj), out)
            continue
        if key in level.known:
            continue
        if len(out) >= MAX_STRAYS_EXAMINED:  # bounded work: a config this odd is no drafter config
            out.append(KeyIssue("E-CONFIG-FIELD", where, f"{where[2:] or 'config.json'} has more than "
                                f"{MAX_STRAYS_EXAMINED} keys outside the {layout} layout's: not a drafter config",
                                "point at the drafter's own config.json"))
            return
        issue = _judge_stray(layout, level, obj, key, path, where, parent, siblings)
        out.append(issue)
        if issue.code == "W-CONFIG-KEY-FOREIGN" and key == "eagle_config" and isinstance(value, dict):
            # another layout's object: its ids are that layout's business, but a key of ours misplaced in it is not
            # (ModelOpt's nested fields are among the keys some layout reads there)
            _walk(layout, Level(EAGLE_CONFIG_ANYWHERE), value, path, (level, where, obj), out)


def _copy(path: str, home: str, value: Any, there: Any) -> KeyIssue | None:
    """A key one level off that repeats the value where the reader reads it: a harmless copy."""
    if there is _MISSING or there != value:
        return None
    return KeyIssue("W-CONFIG-KEY-UNKNOWN", path, f"{path[2:]} repeats {home[2:]} (same value); nothing reads this "
                    "copy", "remove the copy")


_MISSING: Any = object()


def _instead(home: str, there: Any) -> str:
    if there is _MISSING:
        return "it would be taken as absent"
    return f"the reader uses {home[2:]} = {short_repr(there, 60)} instead"


def _judge_stray(layout: str, level: Level, obj: Mapping[str, Any], key: str, path: str, where: str,
                 parent: tuple[Level, str, Mapping[str, Any]] | None, siblings: list[tuple[str, Level]]) -> KeyIssue:
    # One level off: a key this layout reads in a nested object (or in the enclosing one).
    for name, child in siblings:
        if key in child.semantic and not name.startswith("rope_"):
            home = _path(_path(where, name), key)
            nested = obj.get(name)
            there = nested.get(key, _MISSING) if isinstance(nested, dict) else _MISSING
            return _copy(path, home, obj[key], there) \
                or KeyIssue("E-CONFIG-KEY-PLACE", path, f"{path[2:]} is at {where[2:] or 'the top level'}, but the "
                            f"{layout} reader reads it as {home[2:]}: {_instead(home, there)}",
                            f"move it to {home[2:]}")
    if parent is not None and key in parent[0].semantic:
        home = _path(parent[1], key)
        there = parent[2].get(key, _MISSING)
        return _copy(path, home, obj[key], there) \
            or KeyIssue("E-CONFIG-KEY-PLACE", path, f"{path[2:]} is nested, but the {layout} reader reads "
                        f"{home[2:] if parent[1] != '$' else key + ' at the top level'}: {_instead(home, there)}",
                        f"move it to {home[2:]}")
    top_level = parent is None
    # Semantic for another layout, at the level that layout reads it: not read here, never carried.
    if (top_level and key in SEMANTIC_ANYWHERE) or (where == "$.eagle_config" and key in EAGLE_CONFIG_ANYWHERE):
        return KeyIssue("W-CONFIG-KEY-FOREIGN", path, f"{path[2:]} is read by other layouts' engines but not by "
                        f"the {layout} layout's: ignored, and never carried into another layout's config",
                        "if the file was written for another layout, convert with --from that layout")
    semantic = level.semantic | {name for name, _ in siblings} | {k for _, c in siblings for k in c.semantic}
    if top_level:
        semantic |= SEMANTIC_ANYWHERE | DECODER_SEMANTIC
    # A key already in this object is no misspelling's target: renaming to it would write a duplicate key, and a
    # producer that writes both means two things (issue 22).
    guess = near_miss(key, {k for k in level.all | semantic if k not in obj})
    if key in model_config_keys() and guess not in NEEDED:  # a family's own field (eod_token_id): no typo of ours
        return KeyIssue("W-CONFIG-KEY-UNKNOWN", path, f"{path[2:]} is a field of transformers' model configs (the "
                        f"target family's), not one the {layout} layout reads: carried verbatim, and no engine reads "
                        "it", "remove it if it is a leftover")
    if guess is not None and guess in semantic:
        return KeyIssue("E-CONFIG-KEY-TYPO", path, f"{path[2:]} is no {layout} config key: did you mean {guess!r}? "
                        f"The reader would take {guess} as absent and read another model",
                        f"rename {path[2:]} to {guess} in config.json")
    if guess is not None:
        return KeyIssue("W-CONFIG-KEY-UNKNOWN", path, f"{path[2:]} is no {layout} config key (did you mean "
                        f"{guess!r}?); carried verbatim", f"rename it to {guess}, or remove it")
    return KeyIssue("W-CONFIG-KEY-UNKNOWN", path, f"{path[2:]} is no key the {layout} layout's producers write; "
                    "carried verbatim, and no engine reads it", "remove it if it is a leftover")


# The keys a reader needs to build the drafter at all (the decoder's, the class names): a near miss of one that the
# config lacks is an error even when some model family defines the near-miss key.
NEEDED = DECODER_SEMANTIC | {"architectures"}


@cache
def model_config_keys() -> frozenset[str]:
    """Every attribute name of transformers' model config classes (the list shipped beside this module)."""
    text = files(__package__).joinpath("model_config_keys.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def refuse_key_errors(layout: str, config: Mapping[str, Any], notes: list[str]) -> None:
    """What every reader calls first: an error-level key issue refuses the read; the rest become notes."""
    issues = key_issues(layout, config)
    for issue in issues:
        if issue.error:
            raise FormatError(issue.message, issue.hint, code=issue.code)
    for issue in issues:
        notes.append(issue.message)


def foreign_semantic_keys(layout: str, config: Mapping[str, Any]) -> list[str]:
    """Keys of `config` that other layouts' engines read and this layout's reader leaves unread."""
    return [issue.where for issue in key_issues(layout, config) if issue.code == "W-CONFIG-KEY-FOREIGN"]
