"""The README.md published with a drafter: YAML front matter for the Hub, and a body that says
which target it needs, which layers it captures in every engine's convention, and how to serve it.

Built with huggingface_hub's ModelCardData (front matter) and ModelCard (parsing it back; hub_client.card_text),
without its Jinja templates: the markdown is assembled here, so Jinja need not be installed.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import hub_client
from .capture_ids import block_diffusion_ids, capture_context, convention_table
from .names import CONVENTIONS
from .drafter import BLOCK_KINDS, KIND_LABELS, MATH_FLAGS, DrafterConfig
from .target_identity import TargetIdentity
from .converters.gguf_dflash import file_name as dflash_file_name
from .converters.gguf_file import file_name
from .engines import REFUSES, SERVING, release
from .engines.llamacpp import serve_argv
from .engines.trtllm import serve_snippet
from .sources import REPO_ID_RE, is_repo_id
from .sidecar import tool_name

ENGINE_TITLES = {"speculators": "speculators", "vllm": "vLLM", "eagle": "EAGLE (original)", "sglang": "SGLang",
                 "specforge": "SpecForge", "modelopt": "ModelOpt", "trtllm": "TensorRT-LLM"}
NUM_SPECULATIVE_TOKENS = 3
# The serve-time method of a block kind that has none of its own: DFlash2 runs as vLLM's method dflash
# (config/speculative.py has no dflash2; speculators/base.py maps it) and SGLang's DFLASH worker (srt/models/dflash.py)
SERVE_METHOD = {"dflash2": "dflash"}
TARGET_PLACEHOLDER = "TARGET_MODEL"


def card_tags(layout: str, engines: Sequence[str], kind: str = "eagle3") -> list[str]:
    tags = [kind if kind in BLOCK_KINDS else "eagle3", "speculative-decoding", layout]
    return tags + [e for e in engines if e not in tags]


def build_card(*, repo_id: str, layout: str, config: DrafterConfig, facts: dict[str, Any], report: Any,
               engines: Sequence[str], serves: Mapping[str, Any], license: str | None = None,
               drafter_revision: str | None = None, files: Sequence[str] = (), acceptance: Sequence[Any] = ()) -> str:
    """README.md for `repo_id`: `facts` are the published sidecar's, `report` the validation of the
    published files, `engines` those that serve `layout` (the tags), `serves` every engine's verdict on
    the published files (engines.serve_verdicts), which decides the serve commands, `acceptance` what `verify`
    measured of the drafter (registry.models.Acceptance, as the registry holds them)."""
    target = TargetIdentity.model_validate(facts["target"]) if facts.get("target") else config.target
    target_name = hub_repo_id(target.name_or_path if target else None)  # never a local path
    front_matter = {
        "base_model": target_name,
        "library_name": layout,  # each layout is named after the library that writes and loads it
        "tags": card_tags(layout, engines, config.kind),
        "license": license,
    }
    body = "\n".join([
        f"# {repo_id.split('/')[-1]}",
        "",
        _summary(layout, config, target_name, target),
        "",
        *_target_section(target, target_name, facts.get("from_registry")),
        *_capture_section(config, facts, target),
        *_drafter_section(config, facts),
        *serve_section(repo_id, layout, serves, target, target_name, drafter_revision, config, facts, files),
        *_acceptance_section(acceptance),
        *_lineage_section(facts, repo_id),
        *_validation_section(report),
        "---",
        "",
        (f"Published with {tool_name()}. `eagle3-convert.json` holds these facts in machine-readable form; "
         f"`eagle3-convert inspect {repo_id}` and `eagle3-convert validate {repo_id}` read them back."),
        "",
    ])
    return hub_client.card_text(front_matter, body)


def hub_repo_id(name: str | None) -> str | None:
    """`name` when it is a Hub repo id (org/name shape, and no local path here), else None."""
    return name if isinstance(name, str) and REPO_ID_RE.match(name) and is_repo_id(name) else None


def _local_name(target: TargetIdentity | None) -> str | None:
    """A target known only by a local path, shown by its directory name: the uploader's paths stay private."""
    name = target.name_or_path if target else None
    if not name or hub_repo_id(name):
        return None
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def _summary(layout: str, config: DrafterConfig, target_name: str | None, target: TargetIdentity | None) -> str:
    if target_name:
        who = f"[`{target_name}`](https://huggingface.co/{target_name})"
    elif _local_name(target):
        who = f"a local copy of `{_cell(_local_name(target))}` (no Hub repo recorded)"
    else:
        who = "a target model this checkpoint does not name"
    layers = "one decoder layer" if config.num_layers == 1 else f"{config.num_layers} decoder layers"
    if config.kind in BLOCK_KINDS:
        return (f"A {KIND_LABELS[config.kind]} (block-diffusion) draft model for speculative decoding with {who}, "
                f"in the **{layout}** layout. It is {layers} that read {config.num_aux_hidden_states} hidden "
                f"states of the target and draft a block of {config.algorithm.get('block_size')} positions in one "
                "pass, which the target then verifies; it borrows the target's embedding and head where it stores "
                "none, and works only with the target (and layers) it was trained on.")
    return (f"An [EAGLE-3](https://arxiv.org/abs/2503.01840) draft model for speculative decoding with {who}, "
            f"in the **{layout}** layout. It is {layers} that reads "
            + ("the target's final hidden state" if config.capture == "final" else
               f"{config.num_aux_hidden_states} hidden states of the target")
            + " and proposes tokens the target then verifies: it works only with the target (and capture layers) it "
            "was trained on.")


def _target_section(target: TargetIdentity | None, target_name: str | None,
                    from_registry: dict[str, Any] | None) -> list[str]:
    if target is None:
        return ["## Target", "", "Not recorded in this checkpoint.", ""]
    model = target_name or (f"local copy: {_local_name(target)}" if _local_name(target) else None)
    rows = [("model", model), ("revision", target.revision or "not recorded"),
            ("architectures", ", ".join(target.architectures) or None), ("model type", target.model_type),
            ("layers", target.num_hidden_layers), ("hidden size", target.hidden_size),
            ("vocab size", target.vocab_size)]
    said = []
    if isinstance(from_registry, dict) and from_registry.get("drafter_id"):
        said = ["", (f"From the registry record of drafter {_cell(str(from_registry['drafter_id'])[:12])} (recorded "
                     f"{_cell(str(from_registry.get('recorded_at', ''))[:16].replace('T', ' '))} UTC): "
                     f"{_cell(' and '.join(from_registry.get('facts') or ['the target']))}, which the checkpoint's "
                     "own files do not state.")]
    return ["## Target", "", *_table(("", ""), [(name, f"`{_cell(value)}`") for name, value in rows
                                                 if value is not None]), *said, ""]


def _capture_section(config: DrafterConfig, facts: dict[str, Any], target: TargetIdentity | None) -> list[str]:
    boundaries = facts.get("capture_boundaries", config.capture_boundaries)
    if config.kind in BLOCK_KINDS:  # its own two spellings, not the EAGLE-3 engines' conventions
        return ["## Target layers", "", (
            f"The drafter fuses {config.num_aux_hidden_states} hidden states of the target, taken at capture "
            f"boundaries `{boundaries}` (indexes into Hugging Face `output_hidden_states`). speculators spells "
            f"them so (`aux_hidden_state_layer_ids`); the flat config of z-lab and SpecForge one lower "
            f"(`dflash_config.target_layer_ids` `{block_diffusion_ids(boundaries or [])}`)."), ""]
    if config.capture == "final":  # converters/final_state.py
        return ["## Capture layers", "", (
            "None: the drafter is fed the target's final hidden state, after its final norm, with no fc "
            "(`eagle_config.use_aux_hidden_state: false`). vLLM (its V1 runner; its V2 runner from 0.33.0) and SGLang "
            "feed it so when the flag is false; a config without the flag has them capture layers and serves it "
            "wrong."), ""]
    family, depth = capture_context(config.family, target, config.target)
    table = convention_table(boundaries, depth, family)
    if boundaries is None:
        where = (f"the engines' default layers (boundaries 2, L//2, L-3 of an L = {depth}-layer target)" if depth
                 else "the engines' default layers (boundaries 2, L//2, L-3 of an L-layer target)")
    else:
        where = f"capture boundaries `{boundaries}` (indexes into Hugging Face `output_hidden_states`)"
    lines = ["## Capture layers", "",
             (f"The drafter fuses {config.num_aux_hidden_states} hidden states of the target, taken at {where}. "
              "Each engine spells the same layers its own way; a config that names other layers loads without "
              "error and drafts badly. As each engine reads them:"), "",
             *_table([ENGINE_TITLES.get(e, e) for e in CONVENTIONS], [[f"`{_cell(table[e])}`" for e in CONVENTIONS]])]
    recorded = (facts.get("from_registry") or {}).get("capture_boundaries")
    if boundaries is None and recorded:
        record = str((facts.get("from_registry") or {}).get("drafter_id", ""))[:12]
        lines += ["", (f"**The training captured boundaries `{_cell(recorded)}`** (the registry record of drafter "
                       f"{_cell(record)}), but this checkpoint's config names no capture layers: engines capture "
                       "their defaults, which are those layers only on a target of the matching depth. To serve it "
                       "as trained, give the engine these layers, as each spells them: "
                       + "; ".join(f"{ENGINE_TITLES.get(e, e)} `{_cell(ids)}`"
                                   for e, ids in convention_table(recorded, depth, family).items()) + ".")]
    written = facts.get("ids_as_written") or {}
    if written:
        lines += ["", "As the configs this drafter was written in spell them: "
                  + "; ".join(f"{layout} `{ids}`" for layout, ids in written.items()) + "."]
    return lines + [""]


def _drafter_section(config: DrafterConfig, facts: dict[str, Any]) -> list[str]:
    vocab = f"{config.draft_vocab_size}"
    vocab += (" (equal to the target's: no d2t map)" if config.draft_vocab_size == config.vocab_size
              else " (`d2t` maps draft ids to target ids)")
    flags = ("flags", ", ".join(f"`{flag}`: {str(getattr(config, flag)).lower()}" for flag in MATH_FLAGS))
    if config.kind in BLOCK_KINDS:  # none of EAGLE-3's norm flags: its mask token and block instead
        flags = ("block", f"mask token `{config.mask_token_id}`, block size `{config.algorithm.get('block_size')}`")
    rows = [("family", f"`{config.family}`"), ("decoder layers", config.num_layers),
            ("hidden size", config.hidden_size),
            ("target hidden size", config.resolved_target_hidden_size),
            ("attention heads",
             f"{config.num_attention_heads} ({config.num_key_value_heads} KV) x {config.resolved_head_dim}"),
            ("intermediate size", config.intermediate_size),
            ("target vocab V", config.vocab_size), ("draft vocab Vd", vocab), flags,
            ("trained with", _cell(facts.get("trained_with")) if facts.get("trained_with") else None),
            ("drafter id", f"`{facts['drafter_id']}`" if facts.get("drafter_id") else None)]
    return ["## Drafter", "", *_table(("", ""), [(k, v) for k, v in rows if v is not None]), ""]


def serve_section(repo_id: str, layout: str, serves: Mapping[str, Any], target: TargetIdentity | None,
                   target_name: str | None, drafter_revision: str | None, config: DrafterConfig,
                   facts: dict[str, Any], files: Sequence[str]) -> list[str]:
    """A serve command (or YAML) for every engine whose verdict on the published files is that it serves
    them as trained, each naming the engine release it was judged for."""
    serving = {engine: v for engine, v in serves.items() if v.verdict in SERVING}
    model = target_name or TARGET_PLACEHOLDER
    target_revision = target.revision if target else None
    lines = ["## Serve", ""]
    if not serving:
        return lines + ["No engine this tool knows serves these files as trained: see the validation below.", ""]
    if not target_name and _local_name(target):
        lines += [f"The target was a local copy (`{_cell(_local_name(target))}`): replace `{TARGET_PLACEHOLDER}` "
                  "with the model it was trained on.", ""]
    elif not target_name:
        lines += [f"The target is not recorded: replace `{TARGET_PLACEHOLDER}` with the model it was trained on.",
                  ""]
    runners = [e for e in ("vllm-v1", "vllm-v2") if e in serving]
    block = config.kind in BLOCK_KINDS
    if runners:
        spec = {"method": SERVE_METHOD.get(config.kind, config.kind) if block else "eagle3", "model": repo_id,
                "num_speculative_tokens": config.block_tokens() if block else NUM_SPECULATIVE_TOKENS}
        if drafter_revision:
            spec["revision"] = drafter_revision
        argv = ["vllm", "serve", model, *(["--revision", target_revision] if target_revision else []),
                "--speculative-config", json.dumps(spec)]
        lines += ["### vLLM", "", _judged(release("vllm"), [serving[e] for e in runners]), "",
                  "```bash", _shell(argv), "```", ""]
        other = next((serves[e] for e in VLLM_RUNNERS if e in serves and e not in serving), None)
        if other is not None:
            lines += [f"Only with the {VLLM_RUNNERS[runners[0]]}: the {VLLM_RUNNERS[other.engine]} "
                      f"{'refuses it' if other.verdict == REFUSES else 'serves it WRONG'} ({_cell(other.why)}).", ""]
        if layout == "speculators" and target_name and not drafter_revision:
            lines += [f"Its config names the target, so `vllm serve {repo_id}` alone also starts it.", ""]
    if "sglang" in serving:
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model,
                *(["--revision", target_revision] if target_revision else []),
                "--speculative-algorithm", SERVE_METHOD.get(config.kind, config.kind).upper() if block else "EAGLE3",
                "--speculative-draft-model-path", repo_id,
                *(["--speculative-draft-model-revision", drafter_revision] if drafter_revision else []),
                *([] if block else ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                                    "--speculative-num-draft-tokens", "4"])]  # (a block drafter's is its block)
        lines += ["### SGLang", "", _judged(release("sglang"), [serving["sglang"]]), "",
                  "```bash", _shell(argv), "```", ""]
    if "trtllm" in serving:
        boundaries = facts.get("capture_boundaries", config.capture_boundaries)
        if boundaries is None:  # the file lost them; TensorRT-LLM takes them at serve time, so the record's serve
            boundaries = (facts.get("from_registry") or {}).get("capture_boundaries")
        _, depth = capture_context(config.family, target, config.target)
        snippet = serve_snippet(boundaries, depth, repo_id)
        lines += ["### TensorRT-LLM (from source, not loaded)", "",
                  _judged(release("trtllm"), [serving["trtllm"]]), "",
                  ("TensorRT-LLM takes the capture layers from its runtime configuration, not from this "
                   "checkpoint (`eagle3_layers_to_capture`, its output-of-block convention). Put this in the YAML "
                   f"given to `trtllm-serve {model} --extra_llm_api_options`:"), "",
                  "```yaml", snippet["yaml"], "```", ""]
    if "llamacpp" in serving:
        lines += _llamacpp_section(repo_id, layout, files, drafter_revision, serving["llamacpp"], config.kind)
    return lines


VLLM_RUNNERS = {"vllm-v1": "V1 runner", "vllm-v2": "V2 runner"}



def _judged(engine_release: str, verdicts: Sequence[Any]) -> str:
    """The line under each serve command: the release the verdict was judged for, and the verdict (vLLM's
    runners named when there are two)."""
    whys = {v.why for v in verdicts}
    if len(verdicts) == 1:
        return f"Judged for {engine_release}: {_cell(verdicts[0].why)}."
    if len(whys) == 1:
        return f"Judged for {engine_release} (V1 and V2 runners): {_cell(whys.pop())}."
    return (f"Judged for {engine_release}: "
            + "; ".join(f"{VLLM_RUNNERS[v.engine]}: {_cell(v.why)}" for v in verdicts) + ".")


def _llamacpp_section(repo_id: str, layout: str, files: Sequence[str], drafter_revision: str | None,
                      verdict: Any, kind: str = "eagle3") -> list[str]:
    """How llama.cpp serves the drafter (`--spec-type draft-eagle3`): a GGUF as published, any other layout
    once converted to GGUF against the target's own GGUF (llama.cpp drafts only from a GGUF)."""
    ggufs = [f for f in files if f.endswith(".gguf")]
    judged = _judged(release("llamacpp"), [verdict])
    if layout != "gguf" or not ggufs:  # llama.cpp drafts from a GGUF: written against the target's own GGUF
        dest = f"{repo_id.split('/')[-1]}-gguf"
        convert = ["eagle3-convert", "--to", "gguf", repo_id, dest, "--target-gguf", "TARGET.gguf",
                   "--outtype", "bf16", *(["--revision", drafter_revision] if drafter_revision else [])]
        name = (dflash_file_name if kind == "dflash" else file_name)(Path(dest), "BF16")
        serve = serve_argv("TARGET.gguf", f"{dest}/{name}")
        return ["### llama.cpp", "", judged, "", "```bash", shlex.join(convert), _shell(serve), "```", "",
                "`TARGET.gguf` is the target model's own GGUF: its tokenizer, depth and width go into the drafter's "
                "GGUF.", ""]
    name = ggufs[0]
    download = ["hf", "download", repo_id, name, "--local-dir", ".",
                *(["--revision", drafter_revision] if drafter_revision else [])]
    serve = serve_argv("TARGET.gguf", name)
    return ["### llama.cpp", "", judged, "", "```bash", _shell(download), _shell(serve), "```", "",
            "`TARGET.gguf` is the target model's own GGUF, the one this drafter was converted against (its "
            "tokenizer is copied into the drafter). `llama-server -hfd "
            f"{repo_id}` downloads the drafter directly" + ("." if kind != "eagle3" else "; a file named "
            "`eagle3-*.gguf` beside the target's GGUF in one repository is picked up by `llama-server -hf REPO "
            "--spec-type draft-eagle3`."), ""]


def _acceptance_section(measured: Sequence[Any]) -> list[str]:
    if not measured:
        return []
    rows = []
    for m in measured:
        repo = hub_repo_id(m.target_name_or_path)
        local = m.target_name_or_path.rstrip("/").rsplit("/", 1)[-1]  # a local copy by its directory name only
        target = f"`{_cell(repo)}`" if repo else f"a local copy `{_cell(local)}`"
        rows.append((target, f"`{_cell(m.target_revision[:12])}`" if m.target_revision else "not recorded", m.k,
                     f"{m.mean_accepted_length:.2f}", " / ".join(f"{rate:.2f}" for rate in m.per_position),
                     f"{m.prompts} (`{m.prompts_sha256[:12]}`), {m.max_new_tokens} tokens each",
                     f"`{m.capture_boundaries}`", f"{m.device}, {m.measured_at:%Y-%m-%d}"))
    return ["## Measured acceptance", "",
            ("Measured with `eagle3-convert verify`: the target generates greedily from the prompts and the drafter "
             "drafts k tokens a round from its hidden states, as SGLang and vLLM draft. The mean accepted length is "
             "tokens per target forward, the bonus token counted (1 = no draft accepted, k + 1 = all); the "
             "acceptance by position is the share of rounds that accepted each draft."), "",
            *_table(("target", "revision", "k", "mean accepted length", "acceptance by position", "prompts (sha256)",
                     "capture boundaries", "measured on"), rows), ""]


def _lineage_section(facts: dict[str, Any], repo_id: str) -> list[str]:
    edges = [e for e in facts.get("lineage") or [] if isinstance(e, dict)]
    if not edges:
        return []
    lines = ["## Lineage", ""]
    for edge in edges:
        source, dest = edge.get("source") or {}, edge.get("dest") or {}
        lines.append(f"- {_where(source, repo_id)} → {_where(dest, repo_id)} ({_cell(edge.get('tool'))})")
    return lines + [""]


def _where(location: dict[str, Any], repo_id: str) -> str:
    """A lineage end as the card shows it: Hub copies by repo id, local ones by directory name only."""
    uri = str(location.get("uri") or "")
    layout = _cell(location.get("layout"))
    if uri.startswith("hf://"):
        repo = uri[len("hf://"):].partition("@")[0]
        if repo == repo_id:
            return f"{layout} in this repository"
        return f"{layout} in [`{repo}`](https://huggingface.co/{repo})"
    return f"{layout} in a local directory `{_cell(uri.rstrip('/').rsplit('/', 1)[-1])}`"


def _validation_section(report: Any) -> list[str]:
    counts = ", ".join(f"{report.count(s)} {s}{'s' if report.count(s) != 1 and s != 'info' else ''}"
                       for s in ("error", "warning", "info"))
    lines = ["## Validation", "",
             (f"`eagle3-convert validate` on the published files, replaying how {_engines_load(report.engines)} "
              f"them: {counts}.")]
    shown = [f for f in report.findings if f.severity != "error"]
    if shown:
        lines.append("")
        lines += [f"- `{f.code}`{f' ({f.engine})' if f.engine else ''}: {_cell(f.message)}" for f in shown]
    return lines + [""]


def _engines_load(engines: Sequence[str]) -> str:
    """'SGLang loads', 'speculators and vLLM load', 'the engines load'."""
    titles = [ENGINE_TITLES.get(e, e) for e in engines]
    if not titles:
        return "the engines load"
    names = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
    return f"{names} {'loads' if len(titles) == 1 else 'load'}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(v) for v in row) + " |" for row in rows)]


def _cell(value: Any) -> str:
    """Text from a config, made safe for one markdown table cell or inline code span."""
    return " ".join(str(value).split()).replace("|", "\\|").replace("`", "'")


def _shell(argv: Sequence[str]) -> str:
    """The command with each `--option value` on a line of its own, as serve commands are usually shown."""
    lines: list[list[str]] = [[]]
    for word in (shlex.quote(a) for a in argv):
        if word.startswith("--"):
            lines.append([])
        lines[-1].append(word)
    return " \\\n  ".join(" ".join(line) for line in lines)
