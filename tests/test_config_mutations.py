"""A config-mutation corpus (issue 12): no change to config.json changes the drafter in silence.

Built from every sample config in tests/data and from tests/builders.py configs of each layout:
each key (top level, and one level into eagle_config, transformer_layer_config, speculators_config
and the rope objects) is deleted, renamed to a near miss, moved between the top level and its
nested object, and given a wrong JSON type. For every mutation either

- the canonical drafter that `read_source` (what convert reads) makes of the file is unchanged, or
- validate reports a finding at WARNING or above that the unmutated file did not have, AND convert
  refuses the file (read_source raises a one-line Eagle3Error).

A deletion may also leave the drafter changed in exactly the way the engines read the absent key
(`ABSENT_MEANS`): the file then says another, unambiguous thing, and the tool reads it as the engines
do. Those are counted apart, not as silent.

Reads configs and safetensors headers only (weights are symlinked, never copied).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from builders import DrafterSpec, build_drafter
from conftest import DATA, copy_sample, edit_config, run_cli
from eagle3_convert.validate import validate_checkpoint
from eagle3_convert.convert import read_source
from eagle3_convert.errors import Eagle3Error

# Sample checkpoints in tests/data, with the --from a user needs for each (None: detection decides).
SAMPLES: dict[str, str] = {
    "specforge-sglang": "auto", "speculators-trained": "auto", "speculators-fullvocab-qwen3": "auto",
    "eagle-original": "auto", "h8-sglang-ids-toplevel-only": "vllm", "h2-d2t-absolute": "auto",
    "h4-missing-lm_head": "auto", "h6-truncated": "auto",
}
# Builder drafters: one per layout, and the variants that exercise the flags, the MLA and Qwen3 families.
BUILT: dict[str, tuple[str, DrafterSpec]] = {
    "built-speculators": ("speculators", DrafterSpec()),
    "built-speculators-qwen3-flags": ("speculators", DrafterSpec(family="qwen3", norm_before_residual=True,
                                                                 fc_norm=True, norm_output=True)),
    "built-sglang": ("sglang", DrafterSpec()),
    "built-sglang-mla": ("sglang", DrafterSpec(family="deepseek_mla")),
    "built-sglang-nbf": ("sglang", DrafterSpec(norm_before_fc=True, norm_output=True, target_hidden_size=48)),
    "built-vllm": ("vllm", DrafterSpec(norm_before_residual=True)),
    "built-vllm-qwen3-k4": ("vllm", DrafterSpec(family="qwen3", num_aux=4, capture_boundaries=(1, 2, 4, 5))),
    "built-eagle": ("eagle", DrafterSpec(capture_boundaries=None)),
    "built-modelopt": ("modelopt", DrafterSpec()),
    "built-modelopt-mla": ("modelopt", DrafterSpec(family="deepseek_mla")),
}
NESTED = ("eagle_config", "transformer_layer_config", "speculators_config", "rope_parameters", "rope_scaling")

# What every engine reads when a key is absent, as the canonical field it sets: a deletion that changes
# the drafter exactly so is the file saying another thing, read as the engines read it.
ABSENT_MEANS: dict[str, Callable[[dict[str, Any]], None]] = {
    "eagle_aux_hidden_state_layer_ids": lambda s: s.update(capture_boundaries=None),  # the engine default
    "eagle_config": lambda s: s.update(capture_boundaries=None),
    "norm_output": lambda s: s.update(norm_output=False),
    "max_position_embeddings": lambda s: s.update(max_position_embeddings=None),
    "rms_norm_eps": lambda s: s.update(rms_norm_eps=1e-6),  # transformers' LlamaConfig / Qwen3Config default
    "hidden_act": lambda s: s.update(hidden_act="silu"),
    # ModelOpt's EagleConfig default; no serving engine reads the key at all
    "use_input_layernorm_in_first_layer": lambda s: s.update(input_layernorm_on_hidden=True),
}
ROPE_KEYS = ("rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor")


@dataclass
class Tally:
    size: int = 0
    unchanged: int = 0
    refused: int = 0
    absent_default: int = 0
    silent: list[str] = field(default_factory=list)
    refused_without_finding: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ the mutations

def near_miss(key: str) -> str:
    """A one-edit misspelling: a middle letter dropped (two letters swapped in short keys)."""
    if len(key) <= 4:
        return key[1] + key[0] + key[2:]
    middle = len(key) // 2
    if key[middle] == "_":
        middle += 1
    return key[:middle] + key[middle + 1:]


def wrong_type(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()  # "false" is truthy
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 1
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, dict):
        return [value]
    return "null"


def mutations(config: dict[str, Any], layout: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, description, mutated config) for every key, top level and one level nested."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    home = "transformer_layer_config" if layout == "speculators" else "eagle_config"
    paths: list[tuple[str, ...]] = [(k,) for k in config]
    for parent in NESTED:
        if isinstance(config.get(parent), dict):
            paths += [(parent, k) for k in config[parent]]
    for parent in ("transformer_layer_config",):
        for inner in ("rope_parameters", "rope_scaling"):
            if isinstance(config.get(parent), dict) and isinstance(config[parent].get(inner), dict):
                paths += [(parent, inner, k) for k in config[parent][inner]]

    def at(cfg: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        obj = cfg
        for part in path[:-1]:
            obj = obj[part]
        return obj

    for path in paths:
        name = ".".join(path)
        key = path[-1]
        deleted = copy.deepcopy(config)
        del at(deleted, path)[key]
        out.append(("delete", f"delete {name}", deleted))
        renamed = copy.deepcopy(config)
        obj = at(renamed, path)
        obj[near_miss(key)] = obj.pop(key)
        out.append(("rename", f"rename {name} -> {near_miss(key)}", renamed))
        retyped = copy.deepcopy(config)
        at(retyped, path)[key] = wrong_type(at(retyped, path)[key])
        out.append(("type", f"{name} as {type(wrong_type(at(config, path)[key])).__name__}", retyped))
        if len(path) == 1 and key != home:
            moved = copy.deepcopy(config)
            value = moved.pop(key)
            nested = moved.setdefault(home, {})
            if isinstance(nested, dict):
                nested[key] = value
                out.append(("move", f"move {name} into {home}", moved))
        elif len(path) == 2 and path[0] == home:
            moved = copy.deepcopy(config)
            value = moved[home].pop(key)
            moved[key] = value
            out.append(("move", f"move {name} to the top level", moved))
    return out


# ------------------------------------------------------------------ the judgement

def canonical(path: Path, from_layout: str) -> dict[str, Any]:
    """The drafter convert reads: semantic config, vocab map and tensor names (what the drafter id covers)."""
    drafter = read_source(str(path), from_layout).drafter
    sem = drafter.config.semantic_dict()
    if sem["family"] == "deepseek_mla":  # MLA attention has no kv-head count or head_dim: the latent widths rule
        sem.pop("num_key_value_heads")
        sem.pop("head_dim")
    sem["vocab"] = list(drafter.vocab.target_ids) if drafter.vocab is not None else None
    sem["tensors"] = sorted(drafter.tensors)
    return sem


CRASHES: list[str] = []


def problems(path: Path, from_layout: str, label: str = "") -> set[tuple[str, str | None]]:
    try:
        report = validate_checkpoint(path, from_layout=from_layout)
    except Exception as exc:  # noqa: BLE001 - a traceback is the bug this corpus looks for
        CRASHES.append(f"{label}: validate raised {type(exc).__name__}: {str(exc)[:120]}")
        return set()
    return {(f.code, f.where) for f in report.findings if f.severity in ("error", "warning")}


def workspace(tmp: Path, src: Path) -> Path:
    """A copy of `src`'s weights (hard links where possible), once: only config.json is ever rewritten."""
    dest = tmp / "mutant"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir()
    for item in src.iterdir():
        if item.name != "config.json":
            try:
                os.link(item, dest / item.name)
            except OSError:
                shutil.copy2(item, dest / item.name)
    return dest


def run_corpus(name: str, src: Path, layout: str, from_layout: str, tmp: Path, tally: Tally) -> None:
    config = json.loads((src / "config.json").read_text())
    try:
        before = canonical(src, from_layout)
    except Eagle3Error:
        before = None  # a hazard sample: every mutation must still be refused with a finding, never crash
    baseline = problems(src, from_layout)
    work = workspace(tmp, src)
    for kind, what, mutated in mutations(config, layout):
        tally.size += 1
        (work / "config.json").write_text(json.dumps(mutated))
        label = f"{name}: {what}"
        try:
            after = canonical(work, from_layout)
        except Eagle3Error as exc:
            assert "\n" not in exc.message and exc.code and exc.hint, label
            tally.refused += 1
            if not (problems(work, from_layout, label) - baseline) and before is not None:
                tally.refused_without_finding.append(f"{label} [{exc.code}] {exc.message[:100]}")
            continue
        if after == before:
            tally.unchanged += 1
            continue
        if kind == "delete" and before is not None:
            expected = copy.deepcopy(before)
            key = what.split()[-1].split(".")[-1]
            if key in ABSENT_MEANS:
                ABSENT_MEANS[key](expected)
            if key in ROPE_KEYS or what.split()[-1].split(".")[0] in ("rope_parameters", "rope_scaling") or \
                    ".rope_" in what:
                expected["rope"] = after["rope"]  # the rope the engines default to: checked by the read below
            if after == expected:
                tally.absent_default += 1
                continue
        diff = {k: (before.get(k) if before else None, after.get(k)) for k in after
                if before is None or before.get(k) != after.get(k)}
        tally.silent.append(f"{label}: {str(diff)[:160]}")


def test_no_config_mutation_changes_the_drafter_in_silence(tmp_path: Path, capsys):
    tally = Tally()
    sources: list[tuple[str, Path, str, str]] = []
    for sample, from_layout in SAMPLES.items():
        src = DATA / sample / "checkpoint"
        layout = "speculators" if "speculators_model_type" in json.loads((src / "config.json").read_text()) \
            else "sglang"
        sources.append((sample, src, layout, from_layout))
    for name, (layout, spec) in BUILT.items():
        sources.append((name, build_drafter(tmp_path / name, layout, spec), layout, "auto"))
    for name, src, layout, from_layout in sources:
        run_corpus(name, src, layout, from_layout, tmp_path, tally)
    with capsys.disabled():
        print(f"\nconfig-mutation corpus: {tally.size} mutations of {len(sources)} configs; "
              f"{tally.unchanged} leave the drafter unchanged, {tally.refused} refused, "
              f"{tally.absent_default} deletions read as the engines' default; "
              f"silent semantic changes: {len(tally.silent)}")
        for line in tally.silent[:40]:
            print("  SILENT", line)
        for line in tally.refused_without_finding[:40]:
            print("  NO-FINDING", line)
        for line in CRASHES[:40]:
            print("  CRASH", line)
    assert not tally.silent
    assert not tally.refused_without_finding
    assert not CRASHES
    assert tally.size > 1000


# ------------------------------------------------------------ the issue's stories, through the CLI

def test_a_typo_of_eagle_config_is_an_error_and_a_refusal(tmp_path: Path):
    src = edit_config(copy_sample(tmp_path, "specforge-sglang"),
                      lambda c: c.__setitem__("eagle_confg", c.pop("eagle_config")))
    validated = run_cli("validate", src)
    assert validated.exit_code == 1 and "E-CONFIG-KEY-TYPO" in validated.stdout
    assert "did you mean 'eagle_config'" in validated.stdout
    converted = run_cli("--to", "vllm", "--no-record", src, tmp_path / "out")
    assert converted.exit_code == 1 and "[E-CONFIG-KEY-TYPO]" in converted.stderr
    assert not (tmp_path / "out").exists()


def test_a_typo_of_a_dimension_names_the_key_not_its_absence(tmp_path: Path):
    src = edit_config(copy_sample(tmp_path, "specforge-sglang"),
                      lambda c: c.__setitem__("hiden_size", c.pop("hidden_size")))
    converted = run_cli("--to", "vllm", "--no-record", src, tmp_path / "out")
    assert converted.exit_code == 1
    assert "hiden_size" in converted.stderr and "did you mean 'hidden_size'" in converted.stderr
    assert "is None" not in converted.stderr


def test_a_key_another_layout_reads_is_never_carried_into_the_output(tmp_path: Path):
    """SGLang reads use_aux_norm as fc_norm: a vLLM file's stray copy must not switch it on in the output."""
    src = edit_config(build_drafter(tmp_path / "v", "vllm", DrafterSpec()),
                      lambda c: c.__setitem__("use_aux_norm", True))
    assert "W-CONFIG-KEY-FOREIGN" in run_cli("validate", src).stdout
    converted = run_cli("--to", "sglang", "--no-record", src, tmp_path / "out")
    assert converted.exit_code == 0, converted.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "use_aux_norm" not in written and not written.get("fc_norm")


def test_an_explicit_from_that_leaves_the_ids_unread_is_refused_by_convert_and_validate(tmp_path: Path):
    src = copy_sample(tmp_path, "specforge-sglang")
    converted = run_cli("--from", "eagle", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert converted.exit_code == 1 and "[E-FROM-MISMATCH]" in converted.stderr
    assert "eagle_config" in converted.stderr and "--from sglang" in converted.stderr
    validated = run_cli("validate", "--from", "eagle", src)
    assert validated.exit_code == 1 and "E-FROM-MISMATCH" in validated.stdout


def test_from_sglang_on_a_speculators_file_says_what_the_file_is(tmp_path: Path):
    src = copy_sample(tmp_path, "speculators-trained")
    converted = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert converted.exit_code == 1 and "[E-FROM-MISMATCH]" in converted.stderr
    assert "speculators layout" in converted.stderr and "--from speculators" in converted.stderr


def test_an_mla_drafter_named_eagle3_deepseek_v3_is_no_schema_error_for_vllm(tmp_path: Path):
    for layout in ("modelopt", "vllm"):
        src = edit_config(build_drafter(tmp_path / layout, layout, DrafterSpec(family="deepseek_mla")),
                    lambda c: c.__setitem__("architectures", ["Eagle3DeepseekV3ForCausalLM"]))
        validated = run_cli("validate", "--engine", "vllm", "--json", src)
        errors = [f for f in json.loads(validated.stdout)["findings"] if f["severity"] == "error"]
        assert "E-SCHEMA" not in {f["code"] for f in errors}, errors
        # ModelOpt's nested block-output ids are read one off by vLLM's V1 runner (issue 22's one rule): that error
        # is the only one, the MLA class name none
        assert [f["code"] for f in errors] == ([] if layout == "vllm" else ["E-CAPTURE-MISMATCH"]), errors


def test_the_family_follows_the_architecture_and_the_tensors(tmp_path: Path):
    """SpecForge's kimi-k2-eagle3.json: LlamaForCausalLMEagle3, q/k/v tensors, model_type kimi_k2."""
    src = edit_config(build_drafter(tmp_path / "s", "sglang", DrafterSpec()),
                      lambda c: c.__setitem__("model_type", "kimi_k2"))
    drafter = read_source(str(src)).drafter
    assert drafter.config.family == "llama"
    assert any("model_type 'kimi_k2'" in note for note in drafter.notes)
    # the MLA tensors of a real MLA drafter keep it MLA, whatever the architecture's spelling
    mla = build_drafter(tmp_path / "m", "modelopt", DrafterSpec(family="deepseek_mla"))
    assert read_source(str(mla)).drafter.config.family == "deepseek_mla"


def test_the_key_tables_cover_what_the_readers_model(tmp_path: Path):
    """One table per layout (converters/config_keys.py), never narrower than what its reader reads, and
    no config our own writers emit has a key outside its layout's table."""
    from importlib import import_module

    from eagle3_convert.convert import plan_conversion
    from eagle3_convert.converters import config_keys
    from eagle3_convert.converters.base import ConvertOptions

    for layout, table in config_keys.LAYOUT_KEYS.items():
        module = import_module(f"eagle3_convert.converters.{layout}")
        modeled = set(module.MODELED) - set(getattr(module, "FOREIGN_FLAGS", ()))
        assert modeled <= table.all, (layout, modeled - table.all)
        nested = table.child("eagle_config")
        if nested is not None and hasattr(module, "NESTED_MODELED"):
            assert set(module.NESTED_MODELED) <= nested.all, layout
    assert config_keys.NEVER_CARRIED >= {"eagle_config", "use_aux_norm", "norm_before_residual", "bias"}
    for n, spec in enumerate((DrafterSpec(), DrafterSpec(family="deepseek_mla"), DrafterSpec(capture_boundaries=None))):
        src = build_drafter(tmp_path / f"src{n}", "vllm", spec)
        for to in config_keys.LAYOUT_KEYS:
            try:
                plan, _ = plan_conversion(read_source(str(src)), to, ConvertOptions())
            except Eagle3Error:
                continue  # the layout cannot hold this drafter
            assert config_keys.key_issues(to, plan.config) == [], (to, spec)
