"""config.json: the layout's key table, the decoder config the drafter is built from, the JSON Schema."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from ..converters.final_state import flag_false
from ..quantization import input_columns
from .. import schemas
from ..converters.base import DecoderKeyError, decoder_fields, is_yarn, model_refusal
from ..converters.config_keys import key_issues
from ..converters.modelopt import exported_yarn
from ..converters.layout import KNOWN_CANONICAL, VOCAB_TENSORS, drafter_kind, to_canonical
from ..converters.sglang import refuse_fc_bias
from ..drafter import KINDS, DrafterConfig, wrong_target_width
from ..engines.common import id_list
from ..errors import RefusalError
from ..json_values import is_positive_int
from .context import IDS_KEY, Context
from .findings import from_error


def check_keys(ctx: Context) -> None:
    """The layout's key table (converters/config_keys): the same judgement its reader makes first."""
    for issue in key_issues(ctx.layout.name, ctx.config):
        if issue.code == "E-CAPTURE-FIELD":
            continue  # read_capture_ids reports the list itself
        ctx.add(issue.code, issue.message, issue.hint, where=issue.where)


def read_config(ctx: Context) -> DrafterConfig | None:
    check_keys(ctx)
    raw = ctx.config
    where = "$"
    dec: Any = raw
    if ctx.speculators_format:
        dec, where = raw.get("transformer_layer_config"), "$.transformer_layer_config"
        if not isinstance(dec, dict):
            ctx.add("E-CONFIG-FIELD", "the speculators config has no transformer_layer_config object",
                    "a speculators EAGLE-3 config nests the drafter's decoder config there", where=where)
            return None
    try:
        fields = decoder_fields(dec, "config.json" if where == "$" else "transformer_layer_config",
                                ctx.raw.tensors if where == "$" else ())
    except DecoderKeyError as exc:
        key_path = f"{where}.{exc.key}"
        if not any(f.where == key_path or f.code in ("E-CONFIG-KEY-TYPO", "E-CONFIG-KEY-PLACE")
                   for f in ctx.out):  # the key table already named the cause
            ctx.out.append(from_error(exc, where=key_path))
        return None
    if ctx.layout.name == "sglang":
        try:
            refuse_fc_bias(raw)
        except RefusalError as exc:  # the reader's refusal, and why nothing below can judge the drafter
            ctx.out.append(replace(from_error(exc, where="$.bias"), message=f"{exc.message}; SGLang builds a bias "
                                   "on fc and on each layer's o_proj (none on q/k/v), which the drafter validate "
                                   "checks has no place for: no tensor of this file is checked"))
            return None
    layers = fields["num_layers"]
    ctx.intents = {name: _intent(ctx, name, layers) for name in ctx.raw.tensors if name not in VOCAB_TENSORS}
    head = ctx.tensor("lm_head.weight")
    vd = raw.get("draft_vocab_size")
    if not is_positive_int(vd):  # (a head of no rows is no vocabulary: the tensor check names its shape)
        vd = head.shape[0] if head is not None and len(head.shape) == 2 and head.shape[0] else fields["vocab_size"]
    ht = raw.get("target_hidden_size")
    fields.update(
        draft_vocab_size=vd,
        target_hidden_size=ht if is_positive_int(ht) else None,
        norm_before_residual=raw.get("norm_before_residual") is True,
        norm_before_fc=raw.get("norm_before_fc", ctx.eagle.get("norm_before_fc")) is True,
        fc_norm=raw.get("fc_norm", raw.get("use_aux_norm")) is True,
        norm_output=raw.get("norm_output") is True,
    )
    kind = drafter_kind(raw)[0]
    if kind in KINDS:  # (DFlash and DSpark: refused where the layout is detected)
        fields["kind"] = kind
    if not ctx.speculators_format and flag_false(ctx.eagle) and ctx.tensor("fc.weight") is None:
        fields.update(capture="final", num_aux_hidden_states=1)  # fed the target's final state (final_state.py)
    else:
        fields["num_aux_hidden_states"] = _num_aux(ctx, fields)
    try:
        return DrafterConfig(**fields)
    except ValidationError as exc:  # a decoder value no reader checks first, said as convert says it
        field, error = model_refusal(exc)
        ctx.out.append(from_error(error, where=f"{where}.{field}"))
        return None


def _intent(ctx: Context, stored: str, layers: int) -> str | None:
    """The canonical tensor this layout means by `stored` (None: no drafter tensor at all)."""
    name = to_canonical(stored, ctx.layout_rules, layers)
    if not KNOWN_CANONICAL.match(name) and stored.startswith("model."):
        name = to_canonical(stored[len("model."):], ctx.layout_rules, layers)  # the prefix HF classes add
    return name if KNOWN_CANONICAL.match(name) else None


def _num_aux(ctx: Context, fields: dict[str, Any]) -> int:
    """k, the number of captured states: from fc's width when it is readable."""
    ht = fields["target_hidden_size"] or fields["hidden_size"]
    lists = [x for x in (id_list(ctx.config.get(IDS_KEY)), id_list(ctx.eagle.get(IDS_KEY))) if x]
    declared = ctx.config.get("num_aux_hidden_states")
    fallback = declared if is_positive_int(declared) else (len(lists[0]) if lists else 3)
    fc = ctx.tensor("fc.weight")
    if fc is None or len(fc.shape) != 2:
        return fallback
    width = input_columns(fc)
    count = len(lists[0]) if lists else (declared if is_positive_int(declared) else None)
    wrong = wrong_target_width(width, count, fields["target_hidden_size"], fields["hidden_size"],
                               ctx.target.hidden_size if ctx.target else None)
    if wrong:  # said once; the later checks judge the drafter at the width its weights have
        ctx.add("E-TARGET-HIDDEN-SIZE", *wrong, where="$.target_hidden_size")
        fields["target_hidden_size"] = width // count
        return count
    if width % ht or not width:
        ctx.add("E-SHAPE-FC", f"fc.weight has {width} input columns, not a multiple of the target hidden "
                f"size Ht={ht}", "set target_hidden_size in config.json to the target's hidden size",
                where="fc.weight")
        return fallback
    k = width // ht
    if is_positive_int(declared) and declared != k:
        ctx.add("E-CAPTURE-COUNT", f"num_aux_hidden_states is {declared} but fc.weight fuses {k} states of width "
                f"{ht}", f"set num_aux_hidden_states to {k}", where="$.num_aux_hidden_states")
    return k


def check_rope(ctx: Context) -> None:
    """A ModelOpt export's YaRN scaling, which its exporter injects into drafters trained without one."""
    said = exported_yarn(ctx.config) if ctx.layout.name == "modelopt" else None
    if said:
        key = next(k for k in ("rope_scaling", "rope_parameters") if is_yarn(ctx.config.get(k)))
        ctx.add("I-ROPE-EXPORT-YARN", said, "nothing to fix: it is ModelOpt's choice for long contexts "
                "(eagle_export_rope_scaling={} at export leaves it out)", where=f"$.{key}")


def check_schema(ctx: Context) -> None:
    named = {f.where for f in ctx.out if f.where}
    for v in schemas.violations(ctx.layout.name, ctx.config) or []:
        # a specific finding already explains this field (or the value that holds it)
        if not any(v.path == n or v.path.startswith((n + "[", n + ".")) for n in named):
            ctx.add("E-SCHEMA", f"config.json {v.path}: {v.message} ({ctx.layout.name} schema)",
                    f"fix {v.path} in config.json", where=v.path)

