"""The layouts' own modules, word for word (issue 26: mutation survivors of eagle3_convert/converters/config_keys.py,
speculators.py, sglang.py, vllm.py, modelopt.py, eagle.py). Builder-written checkpoints (tests/builders.py) with one
change each, read by the real validate (its findings: code, where, message, hint) and the real CLI (its one-line
refusal, its notes, the files it writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from builders import LAYOUTS, DrafterSpec, build_drafter, config_for, expected_refusal, write_target
from conftest import run_cli
from test_layouts_matrix import VARIANTS

from eagle3_convert.validate import validate_checkpoint

Edit = Callable[[dict[str, Any]], None]
Finding = tuple[str, str, str, str]  # code, where, message, hint


def built(tmp_path: Path, layout: str, edit: Edit, spec: DrafterSpec | None = None) -> Path:
    """The builder's `layout` file for `spec`, its config.json changed by `edit`."""
    src = build_drafter(tmp_path / "src", layout, spec or DrafterSpec())
    config = json.loads((src / "config.json").read_text())
    edit(config)
    (src / "config.json").write_text(json.dumps(config, indent=2))
    return src


def last_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    return stderr.splitlines()[-1]


def notes(stdout: str) -> list[str]:
    return [line.removeprefix("note: ") for line in stdout.splitlines() if line.startswith("note: ")]


def put(**keys: Any) -> Edit:
    return lambda c: c.update(keys)


def rename(old: str, new: str) -> Edit:
    return lambda c: c.__setitem__(new, c.pop(old))


def nested(name: str, **keys: Any) -> Edit:
    return lambda c: c[name].update(keys)


# ------------------------------------------------------------------ config_keys.py: the key table's judgement

KEY_CODES = {"E-CONFIG-KEY-TYPO", "E-CONFIG-KEY-PLACE", "W-CONFIG-KEY-UNKNOWN", "W-CONFIG-KEY-FOREIGN",
             "E-CONFIG-FIELD"}


def key_findings(path: Path, layout: str) -> list[Finding]:
    report = validate_checkpoint(path, from_layout=layout)
    return [(f.code, f.where, f.message, f.hint) for f in report.findings if f.code in KEY_CODES]


def wrong_type(layout: str, key: str, shown: str, json_type: str, expected: str) -> Finding:
    name = key.removeprefix("$.")
    return ("E-CONFIG-FIELD", key, f"{name} is {shown} (JSON {json_type}); the {layout} reader expects {expected} "
            "and would coerce it", f"write {name} as {expected} in config.json")


def unknown(layout: str, key: str) -> Finding:
    return ("W-CONFIG-KEY-UNKNOWN", f"$.{key}", f"{key} is no key the {layout} layout's producers write; carried "
            "verbatim, and no engine reads it", "remove it if it is a leftover")


def typo(layout: str, key: str, meant: str) -> Finding:
    return ("E-CONFIG-KEY-TYPO", f"$.{key}", f"{key} is no {layout} config key: did you mean {meant!r}? The reader "
            f"would take {meant} as absent and read another model", f"rename {key} to {meant} in config.json")


def copy_of(key: str, home: str) -> Finding:
    return ("W-CONFIG-KEY-UNKNOWN", f"$.{key}", f"{key} repeats {home} (same value); nothing reads this copy",
            "remove the copy")


def foreign(layout: str, key: str) -> Finding:
    return ("W-CONFIG-KEY-FOREIGN", f"$.{key}", f"{key} is read by other layouts' engines but not by the {layout} "
            "layout's: ignored, and never carried into another layout's config",
            "if the file was written for another layout, convert with --from that layout")


def _move_aux_flag_up(c: dict[str, Any]) -> None:
    c["use_aux_hidden_state"] = c["eagle_config"].pop("use_aux_hidden_state")


def _move_norm_output_in(c: dict[str, Any]) -> None:
    c["eagle_config"]["norm_output"] = c.pop("norm_output")


def _verifier(**keys: Any) -> Edit:
    return lambda c: c["speculators_config"]["verifier"].update(keys)


LONG_KEY = "x" * 30 + " y" * 10  # no identifier, and its repr longer than 40 characters
NO_IDS = DrafterSpec(capture_boundaries=None)  # the eagle layout holds no ids
# name -> (layout, the change, spec or None, every key finding validate gives, in order)
KEY_CASES: dict[str, tuple[str, Edit, DrafterSpec | None, list[Finding]]] = {
    # each JSON type a semantic key can be checked for, and each JSON type named in the message
    "boolean as a string": ("sglang", put(norm_output="false"), None, [
        wrong_type("sglang", "$.norm_output", "'false'", "string", "true or false")]),
    "boolean as an object": ("sglang", put(norm_output={"a": 1}), None, [
        wrong_type("sglang", "$.norm_output", "{'a': 1}", "object", "true or false")]),
    "boolean as a list": ("sglang", put(norm_output=[1]), None, [
        wrong_type("sglang", "$.norm_output", "[1]", "array", "true or false")]),
    "boolean as a float": ("sglang", put(norm_output=1.0), None, [
        wrong_type("sglang", "$.norm_output", "1.0", "number", "true or false")]),
    "positive integer 0": ("sglang", put(draft_vocab_size=0), None, [
        wrong_type("sglang", "$.draft_vocab_size", "0", "number", "a positive integer")]),
    "integer as a float": ("speculators", put(mask_token_id=1.5), None, [
        wrong_type("speculators", "$.mask_token_id", "1.5", "number", "an integer")]),
    "integer as null (not nullable)": ("speculators", put(mask_token_id=None), None, [
        wrong_type("speculators", "$.mask_token_id", "None", "null", "an integer")]),
    "integer as a boolean": ("speculators", put(mask_token_id=True), None, [
        wrong_type("speculators", "$.mask_token_id", "True", "boolean", "an integer")]),
    "string in the nested decoder": ("speculators", nested("transformer_layer_config", model_type=3), None, [
        wrong_type("speculators", "$.transformer_layer_config.model_type", "3", "number", "a string")]),
    "object as a list": ("speculators", put(speculators_config=[]), None, [
        wrong_type("speculators", "$.speculators_config", "[]", "array", "an object")]),
    "list of numbers": ("sglang", put(rope_scaling={"rope_type": "longrope", "short_factor": [1, "a"],
                                                    "long_factor": [1.0]}), None, [
        wrong_type("sglang", "$.rope_scaling.short_factor", "[1, 'a']", "array", "a list of numbers")]),
    "number as a string": ("sglang", put(rope_scaling={"rope_type": "linear", "factor": "2"}), None, [
        wrong_type("sglang", "$.rope_scaling.factor", "'2'", "string", "a number")]),
    "a nullable number as null": ("sglang", put(rope_scaling={"rope_type": "linear", "factor": None}), None, []),
    "list of strings as a string": ("sglang", put(architectures="LlamaForCausalLMEagle3"), None, [
        wrong_type("sglang", "$.architectures", "'LlamaForCausalLMEagle3'", "string", "a list of strings")]),
    "list of strings with a number": ("sglang", put(architectures=["LlamaForCausalLMEagle3", 3]), None, [
        wrong_type("sglang", "$.architectures", "['LlamaForCausalLMEagle3', 3]", "array", "a list of strings")]),
    # the speculators reader takes a null verifier name as absent (validate's schema check names it)
    "verifier name null": ("speculators", _verifier(name_or_path=None), None, []),
    # near misses: a semantic key (an error), a merely written one (a warning), none close enough
    "typo of a semantic key": ("sglang", rename("eagle_config", "eagle_confg"), None, [
        typo("sglang", "eagle_confg", "eagle_config")]),
    "same letters, other case and separators": ("sglang", rename("draft_vocab_size", "DraftVocabSize"), None, [
        typo("sglang", "DraftVocabSize", "draft_vocab_size")]),
    "two neighbours swapped": ("sglang", rename("hidden_size", "hidden_szie"), None, [
        typo("sglang", "hidden_szie", "hidden_size")]),
    "short key, one swap": ("sglang", put(bais=False), None, [typo("sglang", "bais", "bias")]),
    "short key, two edits": ("sglang", put(bxaz=False), None, [unknown("sglang", "bxaz")]),
    "long key, three edits": ("sglang", rename("draft_vocab_size", "draft_vocab_sizXYZ"), None, [
        typo("sglang", "draft_vocab_sizXYZ", "draft_vocab_size")]),
    "long key, four edits": ("sglang", rename("draft_vocab_size", "draft_vocab_sWXYZ"), None, [
        unknown("sglang", "draft_vocab_sWXYZ")]),
    "64 characters: still looked at": ("sglang", rename("draft_vocab_size", "d" + "_" * 48 + "raft_vocab_size"),
                                       None, [typo("sglang", "d" + "_" * 48 + "raft_vocab_size", "draft_vocab_size")]),
    "65 characters: never looked at": ("sglang", rename("draft_vocab_size", "d" + "_" * 49 + "raft_vocab_size"),
                                       None, [unknown("sglang", "d" + "_" * 49 + "raft_vocab_size")]),
    "a near miss of a written key": ("sglang", put(initializer_rang=0.02), None, [
        ("W-CONFIG-KEY-UNKNOWN", "$.initializer_rang", "initializer_rang is no sglang config key (did you mean "
         "'initializer_range'?); carried verbatim", "rename it to initializer_range, or remove it")]),
    "keys that are no identifiers": ("sglang", put(**{"my key": 1, LONG_KEY: 2}), None, [
        ("W-CONFIG-KEY-UNKNOWN", "$.'my key'", "'my key' is no key the sglang layout's producers write; carried "
         "verbatim, and no engine reads it", "remove it if it is a leftover"),
        ("W-CONFIG-KEY-UNKNOWN", f"$.{repr(LONG_KEY)[:37]}...", f"{repr(LONG_KEY)[:37]}... is no key the sglang "
         "layout's producers write; carried verbatim, and no engine reads it", "remove it if it is a leftover")]),
    # one level off: up, down, two levels down; a copy of the value read is harmless
    "top-level copy of a nested key": ("sglang", put(use_aux_hidden_state=True), None, [
        copy_of("use_aux_hidden_state", "eagle_config.use_aux_hidden_state")]),
    "top-level key that differs from the nested one": ("sglang", put(use_aux_hidden_state=False), None, [
        ("E-CONFIG-KEY-PLACE", "$.use_aux_hidden_state", "use_aux_hidden_state is at the top level, but the sglang "
         "reader reads it as eagle_config.use_aux_hidden_state: the reader uses eagle_config.use_aux_hidden_state = "
         "True instead", "move it to eagle_config.use_aux_hidden_state")]),
    "nested key moved up": ("sglang", _move_aux_flag_up, None, [
        ("E-CONFIG-KEY-PLACE", "$.use_aux_hidden_state", "use_aux_hidden_state is at the top level, but the sglang "
         "reader reads it as eagle_config.use_aux_hidden_state: it would be taken as absent",
         "move it to eagle_config.use_aux_hidden_state")]),
    "decoder key at the speculators top level, same value": ("speculators", put(hidden_size=32), None, [
        copy_of("hidden_size", "transformer_layer_config.hidden_size")]),
    "decoder key at the speculators top level, other value": ("speculators", put(hidden_size=64), None, [
        ("E-CONFIG-KEY-PLACE", "$.hidden_size", "hidden_size is at the top level, but the speculators reader reads "
         "it as transformer_layer_config.hidden_size: the reader uses transformer_layer_config.hidden_size = 32 "
         "instead", "move it to transformer_layer_config.hidden_size")]),
    "top-level key nested, other value": ("sglang", nested("eagle_config", draft_vocab_size=16), None, [
        ("E-CONFIG-KEY-PLACE", "$.eagle_config.draft_vocab_size", "eagle_config.draft_vocab_size is nested, but the "
         "sglang reader reads draft_vocab_size at the top level: the reader uses draft_vocab_size = 32 instead",
         "move it to draft_vocab_size")]),
    "top-level key nested, same value": ("sglang", nested("eagle_config", draft_vocab_size=32), None, [
        copy_of("eagle_config.draft_vocab_size", "draft_vocab_size")]),
    "top-level key moved in": ("vllm", _move_norm_output_in, None, [
        ("E-CONFIG-KEY-PLACE", "$.eagle_config.norm_output", "eagle_config.norm_output is nested, but the vllm "
         "reader reads norm_output at the top level: it would be taken as absent", "move it to norm_output")]),
    "a key two levels down, same value": ("speculators", _verifier(algorithm="eagle3"), None, [
        copy_of("speculators_config.verifier.algorithm", "speculators_config.algorithm")]),
    "a key two levels down, other value": ("speculators", _verifier(algorithm="peagle"), None, [
        ("E-CONFIG-KEY-PLACE", "$.speculators_config.verifier.algorithm", "speculators_config.verifier.algorithm is "
         "nested, but the speculators reader reads speculators_config.algorithm: the reader uses "
         "speculators_config.algorithm = 'eagle3' instead", "move it to speculators_config.algorithm")]),
    # a rope key at the top level is no misplaced rope setting: rope objects are read whole
    "rope key at the top level": ("sglang", put(factor=2.0), None, [unknown("sglang", "factor")]),
    # another layout's keys, where that layout reads them
    "foreign top-level key": ("speculators", put(use_aux_norm=False), None, [foreign("speculators", "use_aux_norm")]),
    "foreign nested key": ("sglang", nested("eagle_config", return_hidden_post_norm=False), None, [
        foreign("sglang", "eagle_config.return_hidden_post_norm")]),
    "a foreign eagle_config is looked into": ("eagle", put(eagle_config={
        "use_aux_hidden_state": True, "hidden_size": 32, "my_x": 1, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}),
        NO_IDS, [foreign("eagle", "eagle_config"), copy_of("eagle_config.hidden_size", "hidden_size"),
                 unknown("eagle", "eagle_config.my_x")]),
    "a foreign eagle_config that is no object": ("eagle", put(eagle_config=[1]), NO_IDS, [
        foreign("eagle", "eagle_config")]),
    # every finding, in the order of the keys
    "three findings": ("sglang", put(norm_output="no", bais=1, my_note=1), None, [
        wrong_type("sglang", "$.norm_output", "'no'", "string", "true or false"), typo("sglang", "bais", "bias"),
        unknown("sglang", "my_note")]),
}


@pytest.mark.parametrize("case", sorted(KEY_CASES))
def test_config_key_findings_word_for_word(tmp_path: Path, case: str):
    layout, edit, spec, expected = KEY_CASES[case]
    assert key_findings(built(tmp_path, layout, edit, spec), layout) == expected


# What convert says of the same files: the first error refuses (nothing written), the warnings are notes.
CONVERT_CASES = ["boolean as a string", "integer as a float", "object as a list", "typo of a semantic key",
                 "top-level key that differs from the nested one", "three findings"]


@pytest.mark.parametrize("case", CONVERT_CASES)
def test_convert_refuses_the_first_key_error(tmp_path: Path, case: str):
    layout, edit, spec, expected = KEY_CASES[case]
    src = built(tmp_path, layout, edit, spec)
    result = run_cli("--from", layout, "--to", "vllm" if layout != "vllm" else "speculators", "--no-record", src,
                     tmp_path / "out")
    code, _, message, hint = next(f for f in expected if f[0].startswith("E-"))
    assert result.exit_code == 1
    assert last_line(result.stderr) == f"error: {message} [{code}] — hint: {hint}"
    assert not (tmp_path / "out").exists()


def test_convert_notes_each_key_warning(tmp_path: Path):
    src = built(tmp_path, "sglang", put(initializer_rang=0.02, my_note=1, use_aux_hidden_state=True))
    result = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert notes(result.stdout)[:3] == [
        "initializer_rang is no sglang config key (did you mean 'initializer_range'?); carried verbatim",
        "my_note is no key the sglang layout's producers write; carried verbatim, and no engine reads it",
        "use_aux_hidden_state repeats eagle_config.use_aux_hidden_state (same value); nothing reads this copy"]


def test_a_wrong_capture_id_type_is_refused_as_a_capture_field(tmp_path: Path):
    src = built(tmp_path, "vllm", put(eagle_aux_hidden_state_layer_ids=[2, "4", 5]))
    result = run_cli("--from", "vllm", "--to", "sglang", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == (
        "error: eagle_aux_hidden_state_layer_ids is [2, '4', 5] (JSON array); the vllm reader expects a list of "
        "integers and would coerce it [E-CAPTURE-FIELD] — hint: write eagle_aux_hidden_state_layer_ids as a list "
        "of integers in config.json")


def many_keys(n: int) -> Edit:
    return put(**{f"zz{i:03d}": i for i in range(n)})


@pytest.mark.parametrize("n", [20, 21, 200])
def test_unknown_keys_past_twenty_are_counted_not_named(tmp_path: Path, n: int):
    findings = key_findings(built(tmp_path, "sglang", many_keys(n)), "sglang")
    named = [unknown("sglang", f"zz{i:03d}") for i in range(min(n, 20))]
    counted = [("W-CONFIG-KEY-UNKNOWN", "$", f"and {n - 20} more keys no sglang producer writes",
                "remove the leftovers")] if n > 20 else []
    assert findings == named + counted


def test_more_than_200_stray_keys_is_no_drafter_config(tmp_path: Path):
    src = built(tmp_path, "sglang", many_keys(201))
    refusal = ("E-CONFIG-FIELD", "$", "config.json has more than 200 keys outside the sglang layout's: not a drafter "
               "config", "point at the drafter's own config.json")
    # (validate lists errors first)
    assert key_findings(src, "sglang") == [refusal] + [unknown("sglang", f"zz{i:03d}") for i in range(20)] + [
        ("W-CONFIG-KEY-UNKNOWN", "$", "and 180 more keys no sglang producer writes", "remove the leftovers")]
    result = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == f"error: {refusal[2]} [E-CONFIG-FIELD] — hint: {refusal[3]}"


# ------------------------------------------------------------------ every writer's config.json

# The tool's own spellings beside what the builder writes for each layout (each documented in its writer):
SHIELDED = {"norm_before_residual", "attention bias", "MLA, 2 layers"}  # SGLang would serve these wrong
VLLM_ONLY_NAME = {"llama": "Eagle3LlamaForCausalLM", "deepseek_mla": "Eagle3DeepseekV3ForCausalLM"}


def written_config(variant: str, spec: DrafterSpec, source: str, dest: str) -> dict[str, Any]:
    """The config.json converting the builder's `source` file of `spec` to `dest` must write: the builder's `dest`
    config, with the tool's documented spellings."""
    want = config_for(dest, spec)
    ids = None if source == "eagle" else spec.capture_boundaries  # the eagle layout names no ids (engine default)
    eagle = want.get("eagle_config", {})
    eagle.pop("eagle_aux_hidden_state_layer_ids", None)
    want.pop("eagle_aux_hidden_state_layer_ids", None)
    if dest == "speculators":
        want["eagle_aux_hidden_state_layer_ids"] = list(ids) if ids is not None else None
    elif dest in ("sglang", "vllm", "modelopt") and ids is not None:
        want["eagle_aux_hidden_state_layer_ids"] = list(ids)  # vLLM reads the top-level boundaries
        eagle["eagle_aux_hidden_state_layer_ids"] = [b - 1 for b in ids]  # SGLang and TensorRT-LLM block outputs
    if dest in ("sglang", "vllm") and spec.norm_before_fc:
        eagle["norm_before_fc"] = True  # where SGLang, vLLM and TensorRT-LLM read it first
    if dest == "modelopt" and source != "modelopt":
        eagle["use_input_layernorm_in_first_layer"] = False  # only a ModelOpt file can say its trainer's first layer
    if spec.family == "deepseek_mla":
        want["model_type"] = "kimi_k2"  # deepseek_v3 would make vLLM build DeepSeek MTP
    if dest in ("vllm", "modelopt") and variant in SHIELDED:
        want["architectures"] = [VLLM_ONLY_NAME[spec.family]]
    return want


CONFIG_PAIRS = [pytest.param(variant, a, b, id=f"{variant}: {a} -> {b}")
                for variant, changes in VARIANTS.items() for a in LAYOUTS for b in LAYOUTS
                if not expected_refusal(a, DrafterSpec(**changes)) and not expected_refusal(b, DrafterSpec(**changes))]


@pytest.mark.parametrize("variant, a, b", CONFIG_PAIRS)
def test_each_writer_writes_the_builders_config(tmp_path: Path, variant: str, a: str, b: str):
    spec = DrafterSpec(**VARIANTS[variant])
    src = build_drafter(tmp_path / "src", a, spec)
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--to", b, "--target", target, "--verifier", spec.verifier, "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == written_config(variant, spec, a, b)
