"""The layouts' own modules, word for word (issue 26: mutation survivors of eagle3_convert/converters/config_keys.py,
speculators.py, sglang.py, vllm.py, modelopt.py, eagle.py). Builder-written checkpoints (tests/builders.py) with one
change each, read by the real validate (its findings: code, where, message, hint) and the real CLI (its one-line
refusal, its notes, the files it writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from builders import (LAYOUTS, DrafterSpec, RawTensor, build_drafter, config_for, expected_refusal, stored_tensors,
                      write_safetensors, write_target)
from conftest import run_cli, tensor_hashes
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


def _pop(*path: str) -> Edit:
    def edit(c: dict[str, Any]) -> None:
        for key in path[:-1]:
            c = c[key]
        c.pop(path[-1])
    return edit


def _no_ids(c: dict[str, Any]) -> None:
    c.pop("eagle_aux_hidden_state_layer_ids", None)
    c["eagle_config"].pop("eagle_aux_hidden_state_layer_ids", None)


def _both(*edits: Edit) -> Edit:
    def edit(c: dict[str, Any]) -> None:
        for e in edits:
            e(c)
    return edit


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
KEY_OF_40 = "x" * 36 + " y"  # its repr 40 characters: not cut
KEY_OF_41 = "x" * 37 + " y"  # its repr 41 characters: cut
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
    "one letter more than a short key": ("sglang", put(biass=False), None, [typo("sglang", "biass", "bias")]),
    "one letter before a short key": ("sglang", put(xbias=False), None, [typo("sglang", "xbias", "bias")]),
    "two edits of a 6-letter key": ("sglang", put(prefxy=1), None, [unknown("sglang", "prefxy")]),
    "two edits of a 7-letter key": ("sglang", put(fc_nxrx=True), None, [typo("sglang", "fc_nxrx", "fc_norm")]),
    "three edits of a 15-letter key": ("sglang", put(rope_parametXYZ={}), None, [
        unknown("sglang", "rope_parametXYZ")]),
    "as near to two keys: the first in order": ("sglang", put(top_x=5), None, [
        ("W-CONFIG-KEY-UNKNOWN", "$.top_x", "top_x is no sglang config key (did you mean 'top_k'?); carried verbatim",
         "rename it to top_k, or remove it")]),
    "a short key missing a letter": ("sglang", put(bia=1), None, [typo("sglang", "bia", "bias")]),
    "a short key's letters in another order": ("sglang", put(siba=1), None, [unknown("sglang", "siba")]),
    "a short key's first two letters swapped": ("sglang", put(ibas=1), None, [typo("sglang", "ibas", "bias")]),
    "a nested rope key's near miss in the nested decoder": ("speculators", nested("transformer_layer_config",
                                                                                  factr=2.0), None, [
        ("E-CONFIG-KEY-TYPO", "$.transformer_layer_config.factr", "transformer_layer_config.factr is no speculators "
         "config key: did you mean 'factor'? The reader would take factor as absent and read another model",
         "rename transformer_layer_config.factr to factor in config.json")]),
    "a near miss in the nested decoder": ("speculators", lambda c: c["transformer_layer_config"].__setitem__(
        "hiden_size", c["transformer_layer_config"].pop("hidden_size")), None, [
        ("E-CONFIG-KEY-TYPO", "$.transformer_layer_config.hiden_size", "transformer_layer_config.hiden_size is no "
         "speculators config key: did you mean 'hidden_size'? The reader would take hidden_size as absent and read "
         "another model", "rename transformer_layer_config.hiden_size to hidden_size in config.json")]),
    "a near miss of a nested object's key, at the top level": ("speculators", put(algoritm="eagle3"), None, [
        typo("speculators", "algoritm", "algorithm")]),
    "a near miss of another layout's key": ("sglang", put(norm_before_residul=False), None, [
        typo("sglang", "norm_before_residul", "norm_before_residual")]),
    "a near miss of a written key": ("sglang", put(initializer_rang=0.02), None, [
        ("W-CONFIG-KEY-UNKNOWN", "$.initializer_rang", "initializer_rang is no sglang config key (did you mean "
         "'initializer_range'?); carried verbatim", "rename it to initializer_range, or remove it")]),
    "keys that are no identifiers": ("sglang", put(**{"my key": 1, LONG_KEY: 2, KEY_OF_40: 3}), None, [
        ("W-CONFIG-KEY-UNKNOWN", "$.'my key'", "'my key' is no key the sglang layout's producers write; carried "
         "verbatim, and no engine reads it", "remove it if it is a leftover"),
        ("W-CONFIG-KEY-UNKNOWN", f"$.{repr(LONG_KEY)[:37]}...", f"{repr(LONG_KEY)[:37]}... is no key the sglang "
         "layout's producers write; carried verbatim, and no engine reads it", "remove it if it is a leftover"),
        ("W-CONFIG-KEY-UNKNOWN", f"$.{KEY_OF_40!r}", f"{KEY_OF_40!r} is no key the sglang layout's producers write; "
         "carried verbatim, and no engine reads it", "remove it if it is a leftover")]),
    "a key whose repr is 41 characters": ("sglang", put(**{KEY_OF_41: 1}), None, [
        ("W-CONFIG-KEY-UNKNOWN", f"$.{repr(KEY_OF_41)[:37]}...", f"{repr(KEY_OF_41)[:37]}... is no key the sglang "
         "layout's producers write; carried verbatim, and no engine reads it", "remove it if it is a leftover")]),
    "a wrong type's value cut at 60 characters": ("sglang", put(norm_output="x" * 70), None, [
        wrong_type("sglang", "$.norm_output", "'" + "x" * 56 + "...", "string", "true or false")]),
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
    "a nested key at the top level, and no nested object": ("sglang", _both(_pop("eagle_config"), put(
        use_aux_hidden_state=True)), None, [
        ("E-CONFIG-KEY-PLACE", "$.use_aux_hidden_state", "use_aux_hidden_state is at the top level, but the sglang "
         "reader reads it as eagle_config.use_aux_hidden_state: it would be taken as absent",
         "move it to eagle_config.use_aux_hidden_state")]),
    "a key one level above its object, below the top": ("speculators", nested("speculators_config",
                                                                              name_or_path="org/x"), None, [
        ("E-CONFIG-KEY-PLACE", "$.speculators_config.name_or_path", "speculators_config.name_or_path is at "
         "speculators_config, but the speculators reader reads it as speculators_config.verifier.name_or_path: the "
         "reader uses speculators_config.verifier.name_or_path = 'org/target-model' instead",
         "move it to speculators_config.verifier.name_or_path")]),
    "decoder key at the speculators top level, same value": ("speculators", put(hidden_size=32), None, [
        copy_of("hidden_size", "transformer_layer_config.hidden_size")]),
    "decoder key at the speculators top level, other value": ("speculators", put(hidden_size=64), None, [
        ("E-CONFIG-KEY-PLACE", "$.hidden_size", "hidden_size is at the top level, but the speculators reader reads "
         "it as transformer_layer_config.hidden_size: the reader uses transformer_layer_config.hidden_size = 32 "
         "instead", "move it to transformer_layer_config.hidden_size")]),
    "the value read instead, cut at 60 characters": ("speculators", _both(
        nested("transformer_layer_config", hidden_act="silu" + "x" * 70), put(hidden_act="silu")), None, [
        ("E-CONFIG-KEY-PLACE", "$.hidden_act", "hidden_act is at the top level, but the speculators reader reads it "
         "as transformer_layer_config.hidden_act: the reader uses transformer_layer_config.hidden_act = 'silu" +
         "x" * 52 + "... instead", "move it to transformer_layer_config.hidden_act")]),
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
    # ModelOpt's nested fields, which vLLM-native producers copy into eagle_config: known there, no finding
    "ModelOpt's nested fields in a vLLM eagle_config": ("vllm", nested(
        "eagle_config", use_last_layernorm=True, parallel_draft_step=1), None, []),
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
    assert tensor_hashes(tmp_path / "out") == {name: t.sha256 for name, t in stored_tensors(b, spec).items()}


# ------------------------------------------------------------------ each reader's and writer's refusals

MLA = DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3")
PEAGLE = DrafterSpec(peagle_mask_token_id=3)
K4 = DrafterSpec(num_aux=4, capture_boundaries=(1, 3, 5, 6))
_MASK_MISSING = ("a P-EAGLE drafter needs the token id its parallel positions were trained with (vLLM reads it as "
                 "pard_token and fails without it) [E-CONFIG-FIELD] — hint: write mask_token_id (SpecForge logs it as "
                 "peagle_mask_token_id; speculators' trainer takes it from --mask-token-id) into a copy of "
                 "config.json, then convert that")
# name -> (source layout, change to its config.json, spec or None, destination, more CLI arguments, the error line)
REFUSALS: dict[str, tuple[str, Edit, DrafterSpec | None, str, tuple[str, ...], str]] = {
    # speculators.py, reading
    "speculators: a speculators type it does not know": (
        "speculators", put(speculators_model_type="medusa"), None, "vllm", (),
        "error: speculators_model_type is 'medusa', not one of 'eagle3', 'peagle', 'dflash', 'dspark', 'dflash2' "
        "[E-CONFIG-ALGORITHM] — hint: this tool converts EAGLE-3, P-EAGLE, DFlash, DSpark, DFlash2 drafters only"),
    "speculators: no transformer_layer_config": (
        "speculators", _pop("transformer_layer_config"), None, "vllm", (),
        "error: speculators config has no transformer_layer_config object [E-CONFIG-FIELD] — hint: a speculators "
        "EAGLE-3 config nests the drafter's decoder config there"),
    "speculators: draft_vocab_size null": (
        "speculators", put(draft_vocab_size=None), None, "vllm", (),
        "error: draft_vocab_size is None [E-CONFIG-FIELD] — hint: set draft_vocab_size to the lm_head rows"),
    "speculators: norm_before_residual absent": (
        "speculators", _pop("norm_before_residual"), None, "vllm", (),
        "error: norm_before_residual is absent: vLLM serves this speculators config as true, the speculators library "
        "reads it as false, so the file names no single drafter [E-CONFIG-DEFAULTS-DIFFER] — hint: write "
        "norm_before_residual (true or false, as the drafter was trained; the speculators trainer writes true) into a "
        "copy of config.json and convert that"),
    "speculators: P-EAGLE without its mask token": (
        "speculators", _pop("mask_token_id"), PEAGLE, "speculators", (),
        f"error: mask_token_id is None: {_MASK_MISSING}"),
    "speculators: P-EAGLE with a negative mask token": (
        "speculators", put(mask_token_id=-1), PEAGLE, "speculators", (),
        f"error: mask_token_id is -1: {_MASK_MISSING}"),
    # speculators.py, writing
    "speculators: an MLA drafter": (
        "sglang", put(), MLA, "speculators", ("--verifier", "org/t"),
        "error: the speculators layout has no deepseek_mla (MLA) drafter class [E-FAMILY-UNSUPPORTED] — hint: serve an "
        "MLA drafter with SGLang or vLLM-native (`--to vllm`)"),
    "speculators: norm_before_fc and fc_norm": (
        "vllm", put(), DrafterSpec(norm_before_fc=True, fc_norm=True), "speculators", ("--verifier", "org/t"),
        "error: norm_before_fc and fc_norm are both true; speculators allows only one of them [E-FLAG-UNSUPPORTED] — "
        "hint: this drafter cannot be expressed in the speculators layout"),
    "speculators: 4 states and no capture ids": (
        "vllm", _no_ids, K4, "speculators", ("--verifier", "org/t"),
        "error: the drafter fuses 4 captured states but names no capture layers; speculators would size fc for 3 "
        "[E-CAPTURE-COUNT] — hint: pass --target so the capture layers can be written out"),
    "speculators: no verifier": (
        "sglang", put(), None, "speculators", (),
        "error: the speculators layout must name its verifier (target model) and this drafter does not say which it "
        "is [E-VERIFIER-MISSING] — hint: pass --verifier ORG/TARGET_MODEL (the model it was trained against)"),
    "speculators: a relative verifier path": (
        "sglang", put(), None, "speculators", ("--verifier", "./here"),
        "error: --verifier ./here: no such directory, and no Hub repo id (ORG/NAME) [E-TARGET-MISSING] — hint: pass "
        "the target's Hub repo id, or the directory that holds its config.json"),
    "speculators: a flat P-EAGLE source without its mask token": (
        "vllm", _pop("pard_token"), PEAGLE, "speculators", ("--verifier", "org/t"),
        f"error: mask_token_id is None: {_MASK_MISSING}"),
    # sglang.py, reading
    "sglang: an architecture of another family": (
        "sglang", put(architectures=["Eagle3DeepseekV2ForCausalLM"]), None, "vllm", (),
        "error: architectures ['Eagle3DeepseekV2ForCausalLM'] make SGLang build its deepseek_mla drafter class, but "
        "the config describes a llama drafter [E-CONFIG-FAMILY] — hint: set architectures to "
        "['LlamaForCausalLMEagle3']"),
    "sglang: no draft_vocab_size": (
        "sglang", _pop("draft_vocab_size"), None, "vllm", (),
        "error: config.json has no draft_vocab_size [E-CONFIG-FIELD] — hint: SGLang fails to construct the drafter "
        "without it: set it to the lm_head rows"),
    "sglang: an fc bias": (
        "sglang", put(bias=True), None, "vllm", (),
        "error: config.json sets bias: true (an fc bias); no other layout can hold it [E-BIAS-UNSUPPORTED] — hint: "
        "serve this drafter with SGLang as it is"),
    "sglang: ids only at the top level": (
        "sglang", lambda c: c.update(eagle_aux_hidden_state_layer_ids=c["eagle_config"].pop(
            "eagle_aux_hidden_state_layer_ids")), None, "vllm", (),
        "error: capture ids [1, 3, 4] are only at the top level; SGLang ignores them there and captures its defaults, "
        "while vLLM reads the same list as boundaries [E-CAPTURE-AMBIGUOUS] — hint: say how the training counted "
        "them: add `--capture-layers 1,3,4 --convention sglang` (SGLang block outputs) or `--convention boundary` "
        "(vLLM boundaries)"),
    "sglang: ids that capture nothing": (
        "sglang", nested("eagle_config", eagle_aux_hidden_state_layer_ids=[-5]), None, "vllm", (),
        "error: SGLang ids [-5] capture nothing on a default target [E-CAPTURE-FIELD] — hint: fix "
        "eagle_config.eagle_aux_hidden_state_layer_ids"),
    # sglang.py, writing
    "sglang: norm_before_residual": (
        "vllm", put(), DrafterSpec(norm_before_residual=True), "sglang", (),
        "error: norm_before_residual is true: the drafter was trained with hidden_norm(h) as the first layer's "
        "residual, and SGLang has no such option (it would serve different maths) [E-FLAG-UNSUPPORTED] — hint: serve "
        "this drafter with vLLM: `--to speculators` or `--to vllm`"),
    "sglang: a Qwen3 drafter": (
        "vllm", put(), DrafterSpec(family="qwen3"), "sglang", (),
        "error: SGLang has no qwen3 EAGLE-3 drafter class (q_norm/k_norm would be dropped silently) "
        "[E-FAMILY-UNSUPPORTED] — hint: serve it with vLLM: `--to speculators` or `--to vllm`"),
    "sglang: bias tensors": (
        "vllm", put(), DrafterSpec(attention_bias=True), "sglang", (),
        "error: the drafter has bias tensors; SGLang's Eagle3 loader drops biases silently [E-BIAS-UNSUPPORTED] — "
        "hint: serve it with vLLM: `--to speculators` or `--to vllm`"),
    "sglang: a 2-layer MLA drafter": (
        "vllm", put(), MLA.with_(num_layers=2), "sglang", (),
        "error: the MLA drafter has 2 decoder layers; SGLang's Eagle3DeepseekV2ForCausalLM builds one "
        "[E-LAYERS-UNSUPPORTED] — hint: serve it with vLLM: `--to vllm`"),
    "sglang: an MLA drafter with norm_before_fc": (
        "modelopt", put(), MLA.with_(norm_before_fc=True), "sglang", (),
        "error: norm_before_fc is true and SGLang's Eagle3DeepseekV2ForCausalLM has no input_norm: the fused states "
        "would be served unnormalised [E-FLAG-UNSUPPORTED] — hint: no engine's MLA drafter class applies "
        "norm_before_fc: keep the source layout"),
    # vllm.py, reading
    "vllm: an architecture vLLM has no class for": (
        "vllm", put(architectures=["FooForCausalLM"]), None, "sglang", (),
        "error: architectures ['FooForCausalLM'] name no vLLM Eagle3 drafter class [E-CONFIG-ARCH] — hint: vLLM-native "
        "drafters use Eagle3DeepseekV2ForCausalLM, Eagle3Qwen3ForCausalLM, LlamaForCausalLMEagle3"),
    "vllm: an architecture of another family": (
        "vllm", put(architectures=["Eagle3Qwen3ForCausalLM"]), None, "sglang", (),
        "error: architectures ['Eagle3Qwen3ForCausalLM'] make vLLM build its qwen3 Eagle3 class, but the config "
        "describes a llama drafter [E-CONFIG-FAMILY] — hint: set architectures to ['LlamaForCausalLMEagle3']"),
    "vllm: the flag false over an fc.weight": (
        "vllm", nested("eagle_config", use_aux_hidden_state=False), None, "sglang", (),
        "error: eagle_config.use_aux_hidden_state is false and the file has an fc.weight: an EAGLE-1 module (fc over "
        "[embedding, hidden]), or an EAGLE-3 head whose flag is wrong [E-CONFIG-ALGORITHM] — hint: if fc.weight fuses "
        "the k captured states the head was trained on ([H, k*Ht]), set the flag true; an EAGLE-1 module is not "
        "converted"),
    "vllm: a negative P-EAGLE mask token": (
        "vllm", put(pard_token=-2), PEAGLE, "speculators", ("--verifier", "org/t"),
        "error: the P-EAGLE mask token is -2 [E-CONFIG-FIELD] — hint: it must be a token id (an integer >= 0)"),
    "vllm: ids only in eagle_config": (
        "vllm", _pop("eagle_aux_hidden_state_layer_ids"), None, "sglang", (),
        "error: capture ids are only in eagle_config: vLLM's V1 runner reads them as boundaries while its V2 runner "
        "ignores them and captures its defaults [E-CAPTURE-AMBIGUOUS] — hint: if they are block-output ids (SGLang, "
        "ModelOpt) convert with --from sglang or --from modelopt; if they are boundaries, copy them to the top-level "
        "eagle_aux_hidden_state_layer_ids"),
    "vllm: a negative id": (
        "vllm", put(eagle_aux_hidden_state_layer_ids=[-1, 2, 3]), None, "sglang", (),
        "error: eagle_aux_hidden_state_layer_ids [-1, 2, 3] has a negative id [E-CAPTURE-FIELD] — hint: vLLM ids are "
        "boundaries >= 0"),
    # vllm.py, writing
    "vllm: an MLA drafter with norm_before_fc": (
        "modelopt", put(), MLA.with_(norm_before_fc=True), "vllm", (),
        "error: norm_before_fc is true and vLLM's Eagle3DeepseekV2ForCausalLM has no input_norm: the weight would be "
        "dropped and the fused states served unnormalised [E-FLAG-UNSUPPORTED] — hint: no engine's MLA drafter class "
        "applies norm_before_fc: keep the source layout"),
    # modelopt.py, reading
    "modelopt: no eagle_config": (
        "modelopt", _pop("eagle_config"), None, "vllm", (),
        "error: config.json has no eagle_config: a ModelOpt export nests its EAGLE settings there [E-CONFIG-FIELD] — "
        "hint: read it with the layout that wrote it (--from sglang or --from vllm)"),
    "modelopt: an EAGLE-1/2 class": (
        "modelopt", put(architectures=["LlamaForCausalLMEagle"]), None, "vllm", (),
        "error: eagle_config.use_aux_hidden_state is not true: an EAGLE-1/2 module, not EAGLE-3 [E-CONFIG-ALGORITHM] — "
        "hint: this tool converts EAGLE-3 drafters only"),
    "modelopt: use_aux_hidden_state false over an fc.weight": (
        "modelopt", nested("eagle_config", use_aux_hidden_state=False), None, "vllm", (),
        "error: eagle_config.use_aux_hidden_state is false and the file has an fc.weight: an EAGLE-1 module (fc over "
        "[embedding, hidden]), or an EAGLE-3 head whose flag is wrong [E-CONFIG-ALGORITHM] — hint: if fc.weight fuses "
        "the k captured states the head was trained on ([H, k*Ht]), set the flag true; an EAGLE-1 module is not "
        "converted"),
    "modelopt: MTP norms": (
        "modelopt", nested("eagle_config", use_mtp_layernorm=True), None, "vllm", (),
        "error: eagle_config.use_mtp_layernorm is true: an MTP-style module with extra norms no EAGLE-3 engine class "
        "builds [E-FLAG-UNSUPPORTED] — hint: serve it with TensorRT-LLM from the ModelOpt export"),
    "modelopt: parallel draft heads": (
        "modelopt", nested("eagle_config", parallel_draft_step=2), None, "vllm", (),
        "error: eagle_config.parallel_draft_step is 2: parallel draft heads have no counterpart in other layouts "
        "[E-FLAG-UNSUPPORTED] — hint: serve it from the ModelOpt export"),
    "modelopt: no last norm": (
        "modelopt", nested("eagle_config", use_last_layernorm=False), None, "vllm", (),
        "error: eagle_config.use_last_layernorm is false: the drafter has no final norm and every engine applies one "
        "[E-FLAG-UNSUPPORTED] — hint: retrain with use_last_layernorm, or serve it from the ModelOpt export"),
    "modelopt: quantized": (
        "modelopt", put(quantization_config={"quant_method": "modelopt"}), None, "vllm", (),
        "error: the quantization config names no quant_algo: vLLM and SGLang refuse it ('Missing quant_algo') "
        "[E-QUANT-UNSUPPORTED] — hint: add the quant_algo ModelOpt exported with (FP8, NVFP4, ...)"),
    "modelopt: ids that capture nothing": (
        "modelopt", nested("eagle_config", eagle_aux_hidden_state_layer_ids=[-3]), None, "vllm", (),
        "error: eagle_config ids [-3] capture nothing [E-CAPTURE-FIELD] — hint: ModelOpt ids are block outputs >= 0"),
    "modelopt: ids only at the top level": (
        "modelopt", lambda c: c.update(eagle_aux_hidden_state_layer_ids=c["eagle_config"].pop(
            "eagle_aux_hidden_state_layer_ids")), None, "vllm", (),
        "error: capture ids [1, 3, 4] are only at the top level, where a ModelOpt export has none; vLLM reads them as "
        "boundaries, TensorRT-LLM and SGLang never read them [E-CAPTURE-AMBIGUOUS] — hint: say how the training "
        "counted them: add `--capture-layers 1,3,4 --convention modelopt` (block outputs) or `--convention boundary`"),
    # modelopt.py, writing
    "modelopt: a Qwen3 drafter": (
        "vllm", put(), DrafterSpec(family="qwen3"), "modelopt", (),
        "error: ModelOpt exports Llama and MLA (kimi_k2) EAGLE-3 modules, not qwen3 (q_norm/k_norm would be dropped) "
        "[E-FAMILY-UNSUPPORTED] — hint: serve it with vLLM: `--to vllm`"),
    "modelopt: norm_before_residual": (
        "vllm", put(), DrafterSpec(norm_before_residual=True), "modelopt", (),
        "error: norm_before_residual is true: TensorRT-LLM has no such option (its first layer keeps the raw fc output "
        "as residual), so a ModelOpt file cannot say it [E-FLAG-UNSUPPORTED] — hint: serve it with vLLM (`--to vllm`)"),
    "modelopt: norm_before_fc and fc_norm": (
        "vllm", put(), DrafterSpec(norm_before_fc=True, fc_norm=True), "modelopt", (),
        "error: norm_before_fc and fc_norm are both true: TensorRT-LLM applies fc_norm and then skips input_norm "
        "(apply_eagle3_fc) [E-FLAG-UNSUPPORTED] — hint: serve it with vLLM (`--to vllm`)"),
    "modelopt: a target width of its own": (
        "vllm", put(), DrafterSpec(target_hidden_size=48), "modelopt", (),
        "error: target_hidden_size 48 differs from hidden_size 32; ModelOpt sizes fc from the drafter's hidden size "
        "[E-HIDDEN-UNSUPPORTED] — hint: serve it with vLLM (`--to vllm`)"),
    # eagle.py, reading (EAGLE's training template: LlamaForCausalLM, which detection calls eagle)
    "eagle: two layers": (
        "eagle", put(architectures=["LlamaForCausalLM"], num_hidden_layers=2), NO_IDS, "vllm", (),
        "error: num_hidden_layers 2 / model_type 'llama': original EAGLE-3 builds exactly one Llama decoder layer "
        "[E-LAYERS-UNSUPPORTED] — hint: read it with the layout that wrote it (--from sglang or --from vllm)"),
    "eagle: no draft_vocab_size": (
        "eagle", _both(put(architectures=["LlamaForCausalLM"]), _pop("draft_vocab_size")), NO_IDS, "vllm", (),
        "error: config.json has no draft_vocab_size [E-CONFIG-FIELD] — hint: EAGLE-3 builds its draft head from it: "
        "set it to the lm_head rows"),
    # eagle.py, writing
    "eagle: a Qwen3 drafter": (
        "vllm", put(), DrafterSpec(family="qwen3"), "eagle", (),
        "error: original EAGLE-3 has no qwen3 drafter (its decoder layer is Llama's) [E-FAMILY-UNSUPPORTED] — hint: "
        "serve it with vLLM: `--to vllm`"),
    "eagle: three layers": (
        "vllm", put(), DrafterSpec(num_layers=3), "eagle", (),
        "error: the drafter has 3 decoder layers; original EAGLE-3 builds one [E-LAYERS-UNSUPPORTED] — hint: serve a "
        "multi-layer drafter with vLLM or SGLang (`--to vllm`)"),
    "eagle: norm flags": (
        "vllm", put(), DrafterSpec(norm_before_fc=True, fc_norm=True), "eagle", (),
        "error: norm_before_fc, fc_norm set: original EAGLE-3 has no such option and would serve different maths "
        "[E-FLAG-UNSUPPORTED] — hint: serve it with vLLM (`--to vllm` or `--to speculators`)"),
    "eagle: bias tensors": (
        "vllm", put(), DrafterSpec(attention_bias=True), "eagle", (),
        "error: the drafter has bias tensors; original EAGLE-3's layers have none [E-BIAS-UNSUPPORTED] — hint: serve "
        "it with vLLM: `--to vllm`"),
    "eagle: 4 captured states": (
        "vllm", put(), K4, "eagle", (),
        "error: the drafter fuses 4 captured states; original EAGLE-3 fuses 3 [E-CAPTURE-COUNT] — hint: serve it with "
        "vLLM: `--to vllm`"),
    "eagle: ids and no target depth": (
        "vllm", put(), None, "eagle", (),
        "error: the drafter captures boundaries [2, 4, 5]; original EAGLE-3 hard-codes {2, L//2, L-3} and the target "
        "depth L is unknown [E-CAPTURE-DEPTH-UNKNOWN] — hint: pass --target (the target's config.json or repo id) so "
        "the two can be compared"),
    "eagle: ids that are not EAGLE's": (
        "vllm", put(), DrafterSpec(capture_boundaries=(1, 3, 6)), "eagle", ("--target", "TARGET"),
        "error: the drafter captures boundaries [1, 3, 6]; original EAGLE-3 hard-codes [2, 4, 5] for a 8-layer target "
        "[E-CAPTURE-UNEXPRESSIBLE] — hint: serve it with an engine that reads capture ids (`--to vllm` or `--to "
        "sglang`)"),
    "eagle: a head_dim of its own": (
        "vllm", put(), DrafterSpec(head_dim=16), "eagle", ("--target", "TARGET"),
        "error: head_dim is 16 with hidden_size 32 and num_attention_heads 4: original EAGLE-3 derives head_dim = "
        "hidden_size // num_attention_heads (cnets.py) and could not load these q/k/v/o weights "
        "[E-HEAD-DIM-UNSUPPORTED] — hint: serve it with `--to sglang` or `--to vllm`, which read head_dim"),
    "eagle: hidden_size not divisible by the heads": (
        "vllm", put(), DrafterSpec(num_attention_heads=3, num_key_value_heads=1, head_dim=10), "eagle",
        ("--target", "TARGET"),
        "error: head_dim is 10 with hidden_size 32 and num_attention_heads 3: original EAGLE-3 derives head_dim = "
        "hidden_size // num_attention_heads (cnets.py) and could not load these q/k/v/o weights "
        "[E-HEAD-DIM-UNSUPPORTED] — hint: serve it with `--to sglang` or `--to vllm`, which read head_dim"),
    "eagle: YaRN": (
        "vllm", put(rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}), None,
        "eagle", ("--target", "TARGET"),
        "error: rope type 'yarn' (rope_scaling / rope_parameters): original EAGLE-3 builds only linear and dynamic "
        "RoPE scaling (cnets.py _init_rope) and would fail to load it [E-ROPE-UNSUPPORTED] — hint: serve it with an "
        "engine that builds this RoPE: `--to sglang` or `--to vllm`"),
    "eagle: partial rotary": (
        "vllm", put(partial_rotary_factor=0.5), None, "eagle", ("--target", "TARGET"),
        "error: partial_rotary_factor is 0.5: original EAGLE-3 rotates the full head_dim and would serve different "
        "maths [E-ROPE-UNSUPPORTED] — hint: serve it with `--to sglang` or `--to vllm`"),
    "eagle: a rope key it cannot hold": (
        "vllm", put(rope_scaling={"rope_type": "linear", "factor": 2.0, "mrope_section": [1, 2]}), None, "eagle",
        ("--target", "TARGET"),
        "error: linear RoPE with mrope_section: original EAGLE-3 takes no rope settings but a type and a factor > 1 "
        "(EConfig) and would build other maths [E-ROPE-UNSUPPORTED] — hint: serve it with `--to sglang` or `--to "
        "vllm`"),
    "eagle: a scaling factor of 1": (
        "vllm", put(rope_scaling={"rope_type": "linear", "factor": 1.0}), None, "eagle", ("--target", "TARGET"),
        "error: linear RoPE with factor 1.0: original EAGLE-3 takes no rope settings but a type and a factor > 1 "
        "(EConfig) and would build other maths [E-ROPE-UNSUPPORTED] — hint: serve it with `--to sglang` or `--to "
        "vllm`"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_refusal_word_for_word(tmp_path: Path, case: str):
    source, edit, spec, dest, args, line = REFUSALS[case]
    src = built(tmp_path, source, edit, spec)
    if "TARGET" in args:  # the builder's target of this drafter
        target = str(write_target(tmp_path / "target", spec or DrafterSpec()))
        args = tuple(target if a == "TARGET" else a for a in args)
    result = run_cli("--from", source, "--to", dest, "--no-record", *args, src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ speculators.py

def convert_to(tmp_path: Path, src: Path, source: str, dest: str, *args: str) -> tuple[dict[str, Any], list[str]]:
    result = run_cli("--from", source, "--to", dest, "--no-record", *args, src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    return json.loads((tmp_path / "out" / "config.json").read_text()), notes(result.stdout)


@pytest.mark.parametrize("source", ["speculators", "vllm"])
def test_a_p_eagle_drafter_is_written_as_speculators_writes_it(tmp_path: Path, source: str):
    """PEagleSpeculatorConfig: its class, type and algorithm, the mask token, and embed_requires_grad true (its
    default: P-EAGLE trains its embedding) unless the source says otherwise (the builder's speculators file says
    false)."""
    config, _ = convert_to(tmp_path, built(tmp_path, source, put(), PEAGLE), source, "speculators",
                           "--verifier", "org/t")
    assert (config["architectures"], config["speculators_model_type"], config["speculators_config"]["algorithm"],
            config["mask_token_id"], config["embed_requires_grad"]) == (
        ["PEagleSpeculator"], "peagle", "peagle", 3, source == "vllm")


def test_a_speculators_source_keeps_its_own_keys_and_drops_the_save_artifacts(tmp_path: Path):
    def edit(c: dict[str, Any]) -> None:
        c.update(my_note=1, auto_map={"AutoConfig": "config.Eagle3SpeculatorConfig"}, torch_dtype="bfloat16")
        c["speculators_config"]["default_proposal_method"] = "tree"
        c["speculators_config"]["verifier"] = {"name_or_path": "org/trained-on", "architectures": ["Qwen3ForCausalLM"]}

    config, said = convert_to(tmp_path, built(tmp_path, "speculators", edit), "speculators", "speculators")
    want = config_for("speculators", DrafterSpec())
    want.update(my_note=1, torch_dtype="bfloat16")
    want["speculators_config"]["default_proposal_method"] = "tree"
    want["speculators_config"]["verifier"] = {"name_or_path": "org/trained-on", "architectures": ["Qwen3ForCausalLM"]}
    assert config == want
    assert said == ["my_note is no key the speculators layout's producers write; carried verbatim, and no engine "
                    "reads it", "ignored speculators save artifacts (auto_map, config.py): engines do not use them"]


def test_a_speculators_config_py_is_noted_as_ignored(tmp_path: Path):
    src = built(tmp_path, "speculators", put())
    (src / "config.py").write_text("# speculators' remote code\n")
    config, said = convert_to(tmp_path, src, "speculators", "speculators")
    assert config == config_for("speculators", DrafterSpec())
    assert said == ["ignored speculators save artifacts (auto_map, config.py): engines do not use them"]


def test_an_absent_draft_vocab_size_is_the_full_vocab(tmp_path: Path):
    spec = DrafterSpec(draft_vocab_size=None)
    config, said = convert_to(tmp_path, built(tmp_path, "speculators", _pop("draft_vocab_size"), spec), "speculators",
                              "speculators")
    assert config == config_for("speculators", spec)  # which writes draft_vocab_size = V
    assert said == []  # (no save artifacts to note)


def test_a_verifier_without_architectures_is_written_with_none(tmp_path: Path):
    config, _ = convert_to(tmp_path, built(tmp_path, "speculators", _pop("speculators_config", "verifier",
                                                                          "architectures")), "speculators",
                           "speculators")
    assert config["speculators_config"]["verifier"] == {"name_or_path": "org/target-model", "architectures": []}


# ------------------------------------------------------------------ sglang.py

def target_of(tmp_path: Path, spec: DrafterSpec) -> tuple[str, ...]:
    """The CLI arguments naming the builder's target of `spec` (its Hub name, and its config.json)."""
    return "--target", str(write_target(tmp_path / "target", spec)), "--verifier", spec.verifier

def test_sglang_norm_output_is_read_with_specforges_warning(tmp_path: Path):
    spec = DrafterSpec(norm_output=True)
    config, said = convert_to(tmp_path, built(tmp_path, "sglang", put(), spec), "sglang", "speculators",
                              *target_of(tmp_path, spec))
    assert config == written_config("norm_output", spec, "sglang", "speculators")
    assert said[0] == (
        "WARNING: norm_output is true: if SpecForge trained this drafter, it normalised only the state lm_head sees, "
        "while SGLang and vLLM also feed the normalised state to the next draft step; every engine serves steps after "
        "the first with that difference")


def test_sglang_reads_use_aux_norm_as_fc_norm_and_null_draft_vocab_size_as_the_full_vocab(tmp_path: Path):
    spec = DrafterSpec(fc_norm=True, draft_vocab_size=None)
    edit = _both(_pop("fc_norm"), put(use_aux_norm=True, draft_vocab_size=None))
    config, _ = convert_to(tmp_path, built(tmp_path, "sglang", edit, spec), "sglang", "speculators",
                           *target_of(tmp_path, spec))
    assert config == written_config("fc_norm", spec, "sglang", "speculators")


def test_sglang_top_level_ids_are_settled_by_capture_layers(tmp_path: Path):
    spec = DrafterSpec(capture_boundaries=(1, 3, 6))
    edit = lambda c: c.update(eagle_aux_hidden_state_layer_ids=c["eagle_config"].pop(  # noqa: E731
        "eagle_aux_hidden_state_layer_ids"))
    config, said = convert_to(tmp_path, built(tmp_path, "sglang", edit, spec), "sglang", "speculators",
                              *target_of(tmp_path, spec), "--capture-layers", "0,2,5", "--convention", "sglang")
    assert config == config_for("speculators", spec)
    assert said == ["capture layers [1, 3, 6] taken from --capture-layers (sglang ids [0, 2, 5]): config.json names "
                    "none"]


def test_sglang_keeps_its_own_nested_keys(tmp_path: Path):
    config, said = convert_to(tmp_path, built(tmp_path, "sglang", nested("eagle_config", my_flag=1)), "sglang",
                              "sglang")
    want = written_config("llama", DrafterSpec(), "sglang", "sglang")
    want["eagle_config"]["my_flag"] = 1
    assert config == want
    assert said == ["eagle_config.my_flag is no key the sglang layout's producers write; carried verbatim, and no "
                    "engine reads it"]


def _rope_parameters(rope_type: str) -> Edit:
    def edit(c: dict[str, Any]) -> None:
        del c["rope_theta"]
        c["rope_parameters"] = {"rope_type": rope_type, "rope_theta": 500000.0,
                                **({"factor": 2.0} if rope_type != "default" else {})}
    return edit


@pytest.mark.parametrize("rope_type", ["default", "linear"])
def test_sglang_writes_rope_theta_and_a_scaling_in_the_transformers_4_spelling(tmp_path: Path, rope_type: str):
    """SpecForge writes both spellings: rope_theta beside rope_parameters, and rope_scaling for releases before
    SGLang 0.5.23 (which read only that) when the rope is scaled."""
    config, _ = convert_to(tmp_path, built(tmp_path, "vllm", _rope_parameters(rope_type)), "vllm", "sglang")
    parameters = {"rope_type": rope_type, "rope_theta": 500000.0, **({"factor": 2.0} if rope_type != "default" else {})}
    scaling = {"rope_type": "linear", "factor": 2.0} if rope_type != "default" else None
    assert (config["rope_theta"], config.get("rope_scaling"), config["rope_parameters"]) == (500000.0, scaling,
                                                                                            parameters)


# ------------------------------------------------------------------ vllm.py

_IDS_IGNORED = ("eagle_config ids [2, 4, 5] ignored: vLLM reads the top-level list [2, 4, 5]; SGLang would have read "
                "the nested list as boundaries [3, 5, 6] (the output spells it right)")


@pytest.mark.parametrize("key, value", [("pard_token", 3), ("ptd_token_id", 0), ("mask_token_id", 7)])
def test_vllm_reads_the_p_eagle_mask_token_under_each_name(tmp_path: Path, key: str, value: int):
    edit = _both(_pop("pard_token"), put(**{key: value}))
    config, said = convert_to(tmp_path, built(tmp_path, "vllm", edit, PEAGLE), "vllm", "speculators",
                              "--verifier", "org/t")
    assert config["mask_token_id"] == value
    assert said == [_IDS_IGNORED]


def test_vllm_a_p_eagle_config_without_a_mask_token_is_noted(tmp_path: Path):
    result = run_cli("--from", "vllm", "--to", "vllm", "--no-record", built(tmp_path, "vllm", _pop("pard_token"),
                                                                             PEAGLE), tmp_path / "out")
    assert result.exit_code == 1  # the vllm layout holds EAGLE-3 drafters only
    assert last_line(result.stderr) == (
        "error: the drafter is a peagle drafter (architectures ['PEagleDraftModel']), and the vllm layout holds eagle3 "
        "drafters only [E-KIND-UNSUPPORTED] — hint: convert it to the speculators layout (`--to speculators`, served "
        "by vLLM)")
    inspected = run_cli("inspect", "--from", "vllm", built(tmp_path / "v", "vllm", _pop("pard_token"), PEAGLE))
    assert notes(inspected.stdout) == [
        "a P-EAGLE drafter (architectures ['PEagleDraftModel']) whose config names no mask token (pard_token, "
        "ptd_token_id, mask_token_id): vLLM and the speculators layout need it", _IDS_IGNORED]


@pytest.mark.parametrize("arch, note", [
    ("LlamaForCausalLMEAGLE3", "architectures ['LlamaForCausalLMEAGLE3']: LlamaForCausalLMEAGLE3 is "
     "LlamaForCausalLMEagle3 in another case; engines match class names exactly and refuse it: read as that class and "
     "written with the destination's own name"),
    ("EAGLE3LlamaForCausalLM", "architectures ['EAGLE3LlamaForCausalLM']: EAGLE3LlamaForCausalLM is TensorRT-LLM's "
     "registered name, which vLLM and SGLang refuse; read as its llama drafter and written with the destination's own "
     "name"),
])
def test_vllm_reads_a_name_vllm_refuses_as_its_class_and_writes_its_own(tmp_path: Path, arch: str, note: str):
    config, said = convert_to(tmp_path, built(tmp_path, "vllm", put(architectures=[arch])), "vllm", "vllm")
    assert config == written_config("llama", DrafterSpec(), "vllm", "vllm")
    assert said == [note, _IDS_IGNORED]


def test_vllm_keeps_another_spelling_of_its_class_and_its_own_nested_keys(tmp_path: Path):
    edit = _both(put(architectures=["LlamaForCausalLM"]), nested("eagle_config", my_flag=2))
    config, said = convert_to(tmp_path, built(tmp_path, "vllm", edit), "vllm", "vllm")
    want = written_config("llama", DrafterSpec(), "vllm", "vllm")
    want["architectures"] = ["LlamaForCausalLM"]
    want["eagle_config"]["my_flag"] = 2
    assert config == want
    assert said == ["eagle_config.my_flag is no key the vllm layout's producers write; carried verbatim, and no engine "
                    "reads it", _IDS_IGNORED]


def test_vllm_nested_ids_that_disagree_are_noted_and_ignored(tmp_path: Path):
    edit = nested("eagle_config", eagle_aux_hidden_state_layer_ids=[0, 1, 2])
    config, said = convert_to(tmp_path, built(tmp_path, "vllm", edit), "vllm", "vllm")
    assert config == written_config("llama", DrafterSpec(), "vllm", "vllm")
    assert said == ["eagle_config ids [0, 1, 2] ignored: vLLM reads the top-level list [2, 4, 5]; SGLang would have "
                    "read the nested list as boundaries [1, 2, 3] (the output spells it right)"]


def test_vllm_shields_a_drafter_sglang_would_serve_wrong_with_a_note(tmp_path: Path):
    spec = DrafterSpec(norm_before_residual=True)
    config, said = convert_to(tmp_path, built(tmp_path, "speculators", put(), spec), "speculators", "vllm")
    assert config["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert said == ["architectures set to ['Eagle3LlamaForCausalLM'], a name vLLM resolves and SGLang refuses: SGLang "
                    "would load this file and serve it wrong (norm_before_residual True in training, False in SGLang)"]


# ------------------------------------------------------------------ modelopt.py

def test_modelopt_notes_the_yarn_its_exporter_injects(tmp_path: Path):
    yarn = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048, "beta_fast": 32.0,
            "beta_slow": 1.0}
    _, said = convert_to(tmp_path, built(tmp_path, "modelopt", put(rope_scaling=yarn)), "modelopt", "vllm")
    assert said[0] == (
        "the config's rope scaling is YaRN (factor 32.0, original_max_position_embeddings 2048), which ModelOpt's "
        "exporter injects (eagle_export_rope_scaling) into drafters trained without rope scaling: unless the training "
        "set YaRN itself, it did not use it; the engines apply it as written")


def test_modelopt_reads_return_hidden_post_norm_as_norm_output(tmp_path: Path):
    spec = DrafterSpec(norm_output=True)
    config, _ = convert_to(tmp_path, built(tmp_path, "modelopt", _both(_pop("norm_output"), nested(
        "eagle_config", return_hidden_post_norm=True)), spec), "modelopt", "speculators", *target_of(tmp_path, spec))
    assert config == written_config("norm_output", spec, "modelopt", "speculators")


def test_modelopt_notes_the_embedding_it_keeps(tmp_path: Path):
    spec = DrafterSpec(embed_tokens=True)
    _, said = convert_to(tmp_path, built(tmp_path, "speculators", put(), spec), "speculators", "modelopt")
    assert said == ["embed_tokens.weight kept: ModelOpt's exporter leaves it out, vLLM loads it if present"]


def modelopt_file(tmp_path: Path, spec: DrafterSpec, tensors: dict[str, RawTensor], edit: Edit = put()) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    config = config_for("modelopt", spec)
    edit(config)
    (src / "config.json").write_text(json.dumps(config))
    write_safetensors(src / "model.safetensors", tensors)
    return src


def megatron(tensors: dict[str, RawTensor]) -> dict[str, RawTensor]:
    """ModelOpt's Megatron exporter's names: midlayer.* for the one layer."""
    return {n.replace("layers.0.", "midlayer.", 1): t for n, t in tensors.items()}


FIRST_LAYER_NORM_ON = nested("eagle_config", use_input_layernorm_in_first_layer=True)


def test_modelopt_a_megatron_export_reads_with_a_note(tmp_path: Path):
    src = modelopt_file(tmp_path, DrafterSpec(), megatron(stored_tensors("modelopt", DrafterSpec())),
                        _pop("eagle_config", "use_input_layernorm_in_first_layer"))
    config, said = convert_to(tmp_path, src, "modelopt", "speculators", *target_of(tmp_path, DrafterSpec()))
    assert config == config_for("speculators", DrafterSpec())
    assert said == ["ModelOpt Megatron export (midlayer.*): its first-layer norm is the engines' hidden_norm"]


@pytest.mark.parametrize("case", ["no first-layer norm", "Vd < V and no d2t", "the base model's head"])
def test_modelopt_refuses_an_export_that_lost_part_of_the_drafter(tmp_path: Path, case: str):
    spec, tensors = DrafterSpec(), stored_tensors("modelopt", DrafterSpec())
    if case == "no first-layer norm":
        src = modelopt_file(tmp_path, spec, megatron(tensors))  # the builder writes it false (not HF-trained)
        line = ("error: a Megatron export with use_input_layernorm_in_first_layer false: its first layer has no "
                "hidden_norm, and every engine applies one [E-FLAG-UNSUPPORTED] — hint: serve it from the ModelOpt "
                "export")
    elif case == "Vd < V and no d2t":
        src = modelopt_file(tmp_path, spec, megatron({n: t for n, t in tensors.items() if n != "d2t"}),
                            FIRST_LAYER_NORM_ON)
        line = ("error: a ModelOpt Megatron export with Vd < V and no d2t: that exporter never writes d2t (a typo in "
                "its code), so the draft->target map is lost [E-VOCAB-MISSING] — hint: take d2t from the training run "
                "(ModelOpt's HF export writes it) and add it")
    else:
        tensors["lm_head.weight"] = stored_tensors("modelopt", DrafterSpec(draft_vocab_size=None))["lm_head.weight"]
        src = modelopt_file(tmp_path, spec, tensors)
        line = ("error: lm_head.weight is [96, H]: the base model's head, which ModelOpt copies in when the draft has "
                "none, but the drafter's vocab is Vd = 32: its own [32, H] head is missing [E-MODELOPT-BASE-HEAD] — "
                "hint: re-export the drafter together with its trained draft head")
    result = run_cli("--from", "modelopt", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == line


def test_modelopt_a_full_vocab_head_without_d2t_is_noted(tmp_path: Path):
    spec = DrafterSpec(draft_vocab_size=None)
    config, said = convert_to(tmp_path, modelopt_file(tmp_path, spec, stored_tensors("modelopt", spec)), "modelopt",
                              "speculators", *target_of(tmp_path, spec))
    assert config == config_for("speculators", spec)
    assert said == ["lm_head.weight covers the full vocab and there is no d2t: ModelOpt copies the base model's head "
                    "in when the draft trains none; engines use it as the draft head either way"]


def test_modelopt_without_draft_vocab_size_takes_vd_from_d2t(tmp_path: Path):
    src = modelopt_file(tmp_path, DrafterSpec(), stored_tensors("modelopt", DrafterSpec()), _pop("draft_vocab_size"))
    config, _ = convert_to(tmp_path, src, "modelopt", "speculators", *target_of(tmp_path, DrafterSpec()))
    assert config == config_for("speculators", DrafterSpec())


# ------------------------------------------------------------------ eagle.py

TEMPLATE = put(architectures=["LlamaForCausalLM"])  # EAGLE's training template: detected as the eagle layout


@pytest.mark.parametrize("case", ["a tensor of a second layer", "fc over 4 states"])
def test_eagle_refuses_tensors_its_code_cannot_load(tmp_path: Path, case: str):
    src = built(tmp_path, "eagle", TEMPLATE, NO_IDS)
    if case == "a tensor of a second layer":
        tensors = stored_tensors("eagle", NO_IDS)
        tensors["layers.1.input_layernorm.weight"] = tensors["norm.weight"]
        line = ("error: tensor 'layers.1.input_layernorm.weight': original EAGLE loads midlayer.* only and would leave "
                "this layer randomly initialised [E-KEY-UNKNOWN] — hint: read it with the layout that wrote it (--from "
                "sglang or --from vllm)")
    else:
        tensors = stored_tensors("eagle", K4)
        line = ("error: fc.weight fuses 4 captured states; original EAGLE-3 always fuses 3 [E-CAPTURE-COUNT] — hint: "
                "read it with the layout that wrote it (--from sglang or --from vllm)")
    write_safetensors(src / "model.safetensors", tensors)
    result = run_cli("--from", "eagle", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == line


_SAFETENSORS_NOTE = "written as model.safetensors (EAGLE's loader falls back to it when pytorch_model.bin is absent)"


def test_eagle_keeps_its_architectures_and_notes_the_other_layouts_keys_it_ignores(tmp_path: Path):
    src = built(tmp_path, "eagle", _both(TEMPLATE, put(norm_output=False, fc_norm=True)), NO_IDS)
    result = run_cli("--from", "eagle", "--to", "eagle", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    want = config_for("eagle", NO_IDS)
    want["architectures"] = ["LlamaForCausalLM"]
    assert json.loads((tmp_path / "out" / "config.json").read_text()) == want
    assert notes(result.stdout) == [
        "norm_output is read by other layouts' engines but not by the eagle layout's: ignored, and never carried into "
        "another layout's config",
        "fc_norm is read by other layouts' engines but not by the eagle layout's: ignored, and never carried into "
        "another layout's config",
        "ignored fc_norm: original EAGLE's code reads none of them", _SAFETENSORS_NOTE]


@pytest.mark.parametrize("rope, written", [
    ({"rope_scaling": {"type": "dynamic", "factor": 2}}, {"rope_scaling": {"type": "dynamic", "factor": 2.0},
                                                          "rope_theta": 10000.0}),
    ({"rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0}},
     {"rope_scaling": {"type": "linear", "factor": 4.0}, "rope_theta": 500000.0}),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}, {"rope_theta": 500000.0}),
], ids=["dynamic", "linear from rope_parameters", "default from rope_parameters"])
def test_eagle_writes_rope_in_the_one_spelling_econfig_reads(tmp_path: Path, rope: dict, written: dict):
    edit = _both(_pop("rope_theta"), put(**rope)) if "rope_parameters" in rope else put(**rope)
    config, said = convert_to(tmp_path, built(tmp_path, "vllm", edit), "vllm", "eagle", *target_of(tmp_path,
                                                                                                 DrafterSpec()))
    assert {k: config[k] for k in ("rope_scaling", "rope_theta") if k in config} == written
    assert said == [_IDS_IGNORED, _SAFETENSORS_NOTE]


def test_eagle_notes_the_embedding_it_keeps(tmp_path: Path):
    spec = DrafterSpec(embed_tokens=True)
    _, said = convert_to(tmp_path, built(tmp_path, "speculators", put(), spec), "speculators", "eagle",
                         *target_of(tmp_path, spec))
    assert said == [_SAFETENSORS_NOTE, "embed_tokens.weight kept: EAGLE's exporter leaves it out, its loader takes it "
                    "if present"]


# ------------------------------------------------------------------ every writer

@pytest.mark.parametrize("dest", ["speculators", "sglang", "vllm", "eagle"])
def test_each_writer_warns_of_modelopts_first_layer_by_its_own_name(tmp_path: Path, dest: str):
    spec = DrafterSpec(modelopt_hf_trained=True)
    result = run_cli("--from", "modelopt", "--to", dest, "--no-record", *target_of(tmp_path, spec),
                     built(tmp_path, "modelopt", put(), spec), tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert (f"WARNING: ModelOpt trained this drafter with hidden_norm(input_layernorm(h)) in its first layer; the "
            f"{dest} layout's engines compute hidden_norm(h), the same approximation they apply to the ModelOpt export "
            "itself (kept in eagle3-convert.json and restored by --to modelopt)") in notes(result.stdout)
    assert result.stdout.splitlines()[0].startswith(f"wrote {tmp_path / 'out'} ({dest}): ")


# ------------------------------------------------------------------ speculators.py, reading the nested decoder

def test_speculators_names_the_nested_decoder_in_a_decoder_refusal(tmp_path: Path):
    src = built(tmp_path, "speculators", _pop("transformer_layer_config", "hidden_size"))
    result = run_cli("--from", "speculators", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == ("error: transformer_layer_config: hidden_size is None; expected a positive "
                                         "integer [E-CONFIG-FIELD] — hint: fix hidden_size in config.json")


def test_speculators_carries_a_decoder_key_it_does_not_model_and_reads_absent_flags_as_false(tmp_path: Path):
    def edit(c: dict[str, Any]) -> None:
        c["transformer_layer_config"]["initializer_range"] = 0.02
        for flag in ("norm_before_fc", "fc_norm", "norm_output"):
            del c[flag]

    config, _ = convert_to(tmp_path, built(tmp_path, "speculators", edit), "speculators", "speculators")
    want = config_for("speculators", DrafterSpec())
    want["transformer_layer_config"]["initializer_range"] = 0.02
    assert config == want  # the flags written false


def test_speculators_a_draft_vocab_of_one_token_converts(tmp_path: Path):
    spec = DrafterSpec(draft_vocab_size=1)
    config, _ = convert_to(tmp_path, built(tmp_path, "speculators", put(), spec), "speculators", "speculators")
    assert config == config_for("speculators", spec)


@pytest.mark.parametrize("case", ["fc over 4 states, 3 ids", "a tensor of no layout", "a second layer's tensor"])
def test_speculators_refuses_tensors_its_config_does_not_describe(tmp_path: Path, case: str):
    src = built(tmp_path, "speculators", put())
    tensors = stored_tensors("speculators", K4 if case.startswith("fc") else DrafterSpec())
    if case == "a tensor of no layout":
        tensors["foo.weight"] = tensors["norm.weight"]
    elif case == "a second layer's tensor":
        tensors["layers.1.input_layernorm.weight"] = tensors["norm.weight"]
    write_safetensors(src / "model.safetensors", tensors)
    result = run_cli("--from", "speculators", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == {
        "fc over 4 states, 3 ids": "error: fc.weight fuses 4 captured states but the config lists 3 capture ids "
        "[2, 4, 5] [E-CAPTURE-COUNT] — hint: the capture id list and the fc width must agree",
        "a tensor of no layout": "error: tensor 'foo.weight' is not part of an EAGLE-3 drafter in the speculators "
        "layout [E-KEY-UNKNOWN] — hint: no engine loads it (SGLang skips it without a word, vLLM's loader fails on "
        "it); rename it to the layout's key or remove it (`eagle3-convert inspect SRC` lists the expected names)",
        "a second layer's tensor": "error: tensor 'layers.1.input_layernorm.weight' is not used by this drafter's "
        "config (a flag is off or the layer count is wrong) [E-KEY-UNUSED] — hint: engines drop such tensors "
        "silently; fix the config flag or remove the tensor"}[case]


def test_speculators_keeps_another_spelling_of_the_mla_model_type(tmp_path: Path):
    """A speculators file cannot be written for an MLA drafter, but one can be read (and served by vLLM-native)."""
    src = tmp_path / "src"
    src.mkdir()
    config = config_for("speculators", MLA)
    config["transformer_layer_config"]["model_type"] = "deepseek_v2"
    (src / "config.json").write_text(json.dumps(config))
    write_safetensors(src / "model.safetensors", stored_tensors("speculators", MLA))
    written, _ = convert_to(tmp_path, src, "speculators", "vllm")
    assert written["model_type"] == "deepseek_v2"


_WEAK = "config.json has speculators_config/transformer_layer_config"


@pytest.mark.parametrize("drop, detected_by", [
    ((), "config.json has speculators_model_type 'eagle3'"), (("speculators_model_type",), _WEAK),
    (("speculators_model_type", "transformer_layer_config"), _WEAK),
    (("speculators_model_type", "speculators_config"), _WEAK),
    # ModelOpt's fields too: two confident readings
    ((), "speculators: config.json has speculators_model_type 'eagle3'; modelopt: eagle_config has NVIDIA ModelOpt "
         "fields (use_last_layernorm)"),
])
def test_speculators_detection_says_why(tmp_path: Path, drop: tuple[str, ...], detected_by: str):
    edits = [_pop(key) for key in drop]
    if detected_by.startswith("speculators: "):
        edits.append(put(eagle_config={"use_aux_hidden_state": True, "use_last_layernorm": True}))
    result = run_cli("inspect", "--json", built(tmp_path, "speculators", _both(*edits)))
    assert json.loads(result.stdout)["detected_by"] == detected_by


def test_speculators_a_verifier_without_a_name_is_no_target(tmp_path: Path):
    config, _ = convert_to(tmp_path, built(tmp_path, "speculators", _pop("speculators_config", "verifier",
                                                                          "name_or_path")), "speculators", "vllm")
    assert config == written_config("llama", DrafterSpec(), "speculators", "vllm")


def test_speculators_an_unknown_speculators_type_is_detected_by_the_objects_only(tmp_path: Path):
    result = run_cli("inspect", "--json", built(tmp_path, "speculators", put(speculators_model_type="medusa")))
    assert json.loads(result.stdout)["detected_by"] == _WEAK


def test_more_than_200_stray_keys_in_a_nested_object_are_named_by_it(tmp_path: Path):
    src = built(tmp_path, "sglang", lambda c: c["eagle_config"].update({f"zz{i:03d}": i for i in range(201)}))
    result = run_cli("--from", "sglang", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert last_line(result.stderr) == ("error: eagle_config has more than 200 keys outside the sglang layout's: not a "
                                         "drafter config [E-CONFIG-FIELD] — hint: point at the drafter's own "
                                         "config.json")
