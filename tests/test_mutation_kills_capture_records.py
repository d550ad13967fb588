"""config.json against what the sidecar and the registry know of the same weights (validate/capture.py check_known,
issue 26's survivors): a config whose capture layers or target disagree with either record must not pass as OK.

Each drafter is builder-written (tests/builders.py), trained on boundaries [1, 3, 6] of an 8-layer target, converted
by the real CLI with that target (which writes the sidecar eagle3-convert.json and records the weights in the test's
own SQLite registry, EAGLE3_CONVERT_REGISTRY in a temporary directory: tests/conftest.py), then changed in one way
and judged by `validate --json`, finding by finding."""

from __future__ import annotations

import json
import re
from pathlib import Path

from builders import DrafterSpec, build_drafter, write_target
from conftest import run_cli

IDS = "eagle_aux_hidden_state_layer_ids"
TRAINED = (1, 3, 6)
SPEC = DrafterSpec(capture_boundaries=TRAINED)  # an 8-layer target, whose default boundaries are [2, 4, 5]
SIDECAR = "eagle3-convert.json"
EDITED = f"{SIDECAR} (written with another config.json)"  # the sidecar's label once config.json changed
RECORDED = re.compile(r"\(recorded \d{4}-\d\d-\d\d \d\d:\d\d UTC\)")


def converted(tmp_path: Path, layout: str = "vllm", spec: DrafterSpec = SPEC) -> Path:
    """The drafter converted to `layout` with its 8-layer target: a sidecar beside it, a record in the registry."""
    source = build_drafter(tmp_path / "built", "vllm", spec)
    dest = tmp_path / "drafter"
    result = run_cli("--to", layout, "--target", write_target(tmp_path / "target-8", spec), source, dest)
    assert result.exit_code == 0, result.stderr
    return dest


def deeper_target(tmp_path: Path, spec: DrafterSpec = SPEC) -> Path:
    """The same target's config with 12 layers instead of 8 (default boundaries [2, 6, 9])."""
    return write_target(tmp_path / "target-12", spec.with_(target_layers=12))


def edit(drafter: Path, change) -> None:
    config = json.loads((drafter / "config.json").read_text())
    change(config)
    (drafter / "config.json").write_text(json.dumps(config, indent=2))


def registry_label(drafter: Path) -> str:
    """How findings name the registry's record of these weights (the time of recording said as WHEN)."""
    drafter_id = json.loads((drafter / SIDECAR).read_text())["drafter_id"]
    return f"the registry's record of drafter {drafter_id[:12]} (recorded WHEN)"


def validated(drafter: Path, *args: str | Path) -> tuple[int, list[tuple]]:
    result = run_cli("validate", drafter, "--json", *args)
    findings = json.loads(result.stdout)["findings"]
    return result.exit_code, [(f["code"], f["severity"], RECORDED.sub("(recorded WHEN)", f["message"]),
                               f["hint"] and RECORDED.sub("(recorded WHEN)", f["hint"]), f["where"], f["engine"])
                              for f in findings]


def test_a_sidecar_and_a_registry_record_naming_other_targets_of_the_same_weights(tmp_path: Path):
    """config.json holds no target to contradict either; the two records of the same weights contradict each other
    (the registry was told another target afterwards): said once, naming both, with what to do about either."""
    drafter = converted(tmp_path)
    assert run_cli("registry", "add", drafter, "--target", deeper_target(tmp_path)).exit_code == 0
    code, findings = validated(drafter)
    assert code == 1
    assert findings == [
        ("E-RECORD-CONFLICT", "error", f"{SIDECAR} says target depth 8, {registry_label(drafter)} says 12",
         f"{shown(registry_label(drafter))}check that {SIDECAR} names the model the drafter was trained on "
         "(org/target-model)", None, None)]


def shown(label: str) -> str:
    """How a way out that keeps the record begins: where to read the record, when it is the registry's (issue 33)."""
    found = re.search(r"record of drafter ([0-9a-f]{12})", label)
    return f"`eagle3-convert registry show {found.group(1)}` shows the record and its history; " if found else ""


def test_a_target_given_that_contradicts_both_records(tmp_path: Path):
    """--target names a 12-layer model; the sidecar and the registry's record of these weights say 8 layers."""
    drafter = converted(tmp_path)
    code, findings = validated(drafter, "--target", deeper_target(tmp_path))
    assert code == 1
    assert findings == [
        ("E-RECORD-CONFLICT", "error", f"--target's depth is 12, {label} says 8",
         f"{shown(label)}check that --target names the model the drafter was trained on (org/target-model)", None, None)
        for label in (registry_label(drafter), SIDECAR)]


def test_deleted_ids_against_the_records_at_the_depth_of_the_target_given(tmp_path: Path):
    """With no ids, the engines capture their default on the target they serve: with --target a 12-layer model,
    [2, 6, 9], not the [2, 4, 5] of the 8-layer target the records name. The conversion that would restore the
    record's layers reads the file with that target too, which convert refuses while the records name another: the
    hint says so (the target is what to settle first)."""
    drafter = converted(tmp_path)
    edit(drafter, lambda c: (c.pop(IDS), c["eagle_config"].pop(IDS)))
    code, findings = validated(drafter, "--target", deeper_target(tmp_path))
    assert code == 1
    restore = ("no conversion fixes this: writing the vllm layout is refused (--target's depth is 12, "
               f"{registry_label(drafter)} says 8 [E-RECORD-CONFLICT])")
    capture, target = [], []
    for label in (registry_label(drafter), EDITED):
        capture.append(("E-CAPTURE-RECORD", "error", "config.json names no capture ids, so its engines capture "
                        f"their default boundaries [2, 6, 9], {label} says the drafter was trained on [1, 3, 6]",
                        restore, f"$.{IDS}", None))
        target.append(("E-RECORD-CONFLICT", "error", f"--target's depth is 12, {label} says 8",
                       f"{shown(label)}check that --target names the model the drafter was trained on "
                       "(org/target-model)", None, None))
    assert findings == [capture[0], target[0], capture[1], target[1],
                        ("I-CAPTURE-DEFAULT", "info", "config.json names no capture ids: vLLM captures its default "
                         "boundaries [2, 6, 9]", None, None, "vllm")]


def test_a_record_of_the_engine_default_means_the_default_of_the_target_it_records(tmp_path: Path):
    """The bug: a drafter trained on the engine default of its 8-layer target ([2, 4, 5]; the records hold no ids,
    and that target), its config then naming those ids, judged against a 12-layer --target: both records were said
    to say the drafter was trained on [2, 6, 9] (the default spelled on the target given, not on the one trained on),
    and convert told to write [2, 6, 9] as "the recorded layers". Now only the target's depth is contradicted."""
    drafter = converted(tmp_path, spec=SPEC.with_(capture_boundaries=None))
    assert json.loads((drafter / SIDECAR).read_text())["capture_boundaries"] is None
    edit(drafter, lambda c: c.__setitem__(IDS, [2, 4, 5]))
    deeper = deeper_target(tmp_path)
    code, findings = validated(drafter, "--target", deeper)
    assert code == 1
    assert findings == [
        ("E-RECORD-CONFLICT", "error", f"--target's depth is 12, {label} says 8",
         f"{shown(label)}check that --target names the model the drafter was trained on (org/target-model)", None, None)
        for label in (registry_label(drafter), EDITED)]
    refused = run_cli("--to", "speculators", "--verifier", "org/target-model", "--target", deeper, drafter,
                      tmp_path / "out")
    assert refused.exit_code == 1 and "[E-RECORD-CONFLICT]" in refused.stderr and "[2, 6, 9]" not in refused.stderr


def test_a_record_of_the_engine_default_without_a_target_is_spelled_on_the_target_given(tmp_path: Path):
    """Converted without --target, the records hold neither ids nor a depth: the engines' default is spelled on the
    target validate is given, an 8-layer one ([2, 4, 5]), against the config's [1, 3, 6]."""
    source = build_drafter(tmp_path / "built", "vllm", SPEC.with_(capture_boundaries=None))
    assert run_cli("--to", "vllm", source, tmp_path / "drafter").exit_code == 0
    drafter = tmp_path / "drafter"
    edit(drafter, lambda c: c.__setitem__(IDS, [1, 3, 6]))
    assert validated(drafter)[0] == 0  # (no depth known: the default names no layers to compare)
    code, findings = validated(drafter, "--target", write_target(tmp_path / "target-8", SPEC))
    assert code == 1
    assert [f[:3] + f[4:] for f in findings] == [
        ("E-CAPTURE-RECORD", "error", f"the config captures boundaries [1, 3, 6], {label} says the drafter was trained "
         "on [2, 4, 5]", f"$.{IDS}", None) for label in (registry_label(drafter), EDITED)]


def test_each_record_is_compared_when_the_layout_reader_refuses_the_file(tmp_path: Path):
    """Two ids left of three: the vLLM reader refuses the file (its two lists disagree), so no fact but the capture
    layers can be read from it; both records' layers are still held against the config, each said."""
    drafter = converted(tmp_path)
    edit(drafter, lambda c: c.__setitem__(IDS, [1, 3]))
    code, findings = validated(drafter)
    assert code == 1
    assert [f[:3] for f in findings if f[0].startswith("E-")] == [
        ("E-CAPTURE-COUNT", "error", f"{IDS} lists 2 capture ids [1, 3] but fc.weight fuses 3 states"),
        *(("E-CAPTURE-RECORD", "error", f"the config captures boundaries [1, 3], {label} says the drafter was trained "
           "on [1, 3, 6]") for label in (registry_label(drafter), EDITED))]


def test_a_misplaced_list_one_off_from_the_records_is_an_error(tmp_path: Path):
    """The bug: a vLLM-layout config whose only ids, [2, 4, 5], sit in eagle_config (vLLM's place is the top level):
    vLLM's V2 runner captures its default [2, 4, 5] there, its V1 runner reads the list as [2, 4, 5], and both
    records say the drafter was trained on [1, 3, 6]. validate said OK (warnings only: the list is misplaced, and
    the layout's reading equals the default); the records were never asked. Now each contradiction is an error at
    the list, with a way out that works where the layout's reader refuses the list (no conversion reads it there)."""
    drafter = converted(tmp_path)
    edit(drafter, lambda c: (c.pop(IDS), c["eagle_config"].__setitem__(IDS, [2, 4, 5])))
    code, findings = validated(drafter)
    assert code == 1
    assert [f for f in findings if f[0] == "E-CAPTURE-RECORD"] == [
        ("E-CAPTURE-RECORD", "error", f"the config captures boundaries [2, 4, 5], {label} says the drafter was trained "
         "on [1, 3, 6]", f"keep one list, at {IDS} where the vllm layout reads it: the recorded boundaries [1, 3, 6] "
         "in its convention, or config.json's [2, 4, 5] if those are the trained ones", f"$.eagle_config.{IDS}", None)
        for label in (registry_label(drafter), EDITED)]
    assert [f[0] for f in findings if f[1] == "error"] == ["E-CAPTURE-RECORD", "E-CAPTURE-RECORD"]


def test_a_top_level_list_in_an_sglang_file_one_off_from_the_records_is_an_error(tmp_path: Path):
    """The same bug the other way round: an SGLang file (judged --from sglang) whose only list, [1, 3, 4], sits at the
    top level, where SGLang does not read it: SGLang captures its default [2, 4, 5] (which the layout's reading of
    the list equals), the records say [1, 3, 6]. It passed with two warnings; now it is an error at the list."""
    drafter = converted(tmp_path, "sglang")
    edit(drafter, lambda c: (c["eagle_config"].pop(IDS), c.__setitem__(IDS, [1, 3, 4])))
    code, findings = validated(drafter, "--from", "sglang")
    assert code == 1
    assert [f for f in findings if f[1] == "error"] == [
        ("E-CAPTURE-RECORD", "error", f"the config captures boundaries [2, 4, 5], {label} says the drafter was trained "
         f"on [1, 3, 6]", f"keep one list, at eagle_config.{IDS} where the sglang layout reads it: the recorded "
         "boundaries [1, 3, 6] in its convention, or config.json's [2, 4, 5] if those are the trained ones", f"$.{IDS}",
         None) for label in (registry_label(drafter), EDITED)]


def test_a_misplaced_list_the_records_agree_with_is_judged_by_the_engines_alone(tmp_path: Path):
    """The same place, holding the trained layers [1, 3, 6]: no record contradicts it; what vLLM makes of it (its
    V2 runner's default layers) is engine_capture's finding."""
    drafter = converted(tmp_path)
    edit(drafter, lambda c: (c.pop(IDS), c["eagle_config"].__setitem__(IDS, [1, 3, 6])))
    code, findings = validated(drafter)
    assert code == 1
    assert [f[:3] for f in findings if f[1] == "error"] == [
        ("E-CAPTURE-MISMATCH", "error", "vLLM captures its default boundaries [2, 4, 5], but the drafter was trained on "
         "boundaries [1, 3, 6]")]


def test_ids_that_name_no_layer_are_not_compared_with_the_records(tmp_path: Path):
    """A boundary of -1 names no layer: the config's layers are unknown, so neither the engines' default nor anything
    else is claimed to be what it captures; the range error says what is wrong."""
    drafter = converted(tmp_path)
    edit(drafter, lambda c: c.__setitem__(IDS, [-1, 3, 6]))
    code, findings = validated(drafter)
    assert code == 1
    assert not [f for f in findings if f[0] == "E-CAPTURE-RECORD"], findings
    assert ("E-CAPTURE-RANGE", "error", f"{IDS} [-1, 3, 6]: an id below 0 names no layer in the vllm convention",
            "fix the capture ids", f"$.{IDS}", None) in findings


def test_the_target_given_decides_how_the_reader_reads_the_ids(tmp_path: Path):
    """An SGLang file whose ids capture the embedding with -1 and whose config names a DeepSeek model_type (as
    SpecForge's kimi-k2 config does), on which SGLang's -1 names no layer: given a 12-layer Llama target, the file
    reads (-1 is the embedding there), so the facts read from it are held against the records with that target."""
    spec = SPEC.with_(capture_boundaries=(0, 3, 6))
    drafter = converted(tmp_path, "sglang", spec)
    edit(drafter, lambda c: c.update(model_type="deepseek_v3"))
    code, findings = validated(drafter, "--target", deeper_target(tmp_path, spec))
    assert code == 1
    assert findings == [
        ("E-RECORD-CONFLICT", "error", f"--target's depth is 12, {label} says 8",
         f"{shown(label)}check that --target names the model the drafter was trained on (org/target-model)", None, None)
        for label in (registry_label(drafter), EDITED)]


def test_a_list_of_64_ids_is_read_and_65_are_not(tmp_path: Path):
    """MAX_CAPTURE_IDS: up to 64 ids are a capture list (and then too many for fc's 3 states); 65 are not one."""
    drafter = build_drafter(tmp_path / "built", "vllm", SPEC)
    edit(drafter, lambda c: c.__setitem__(IDS, list(range(64))))
    _, findings = validated(drafter)
    assert [f for f in findings if f[0].startswith("E-CAPTURE-")][:1] == [
        ("E-CAPTURE-COUNT", "error", f"{IDS} lists 64 capture ids {list(range(64))} but fc.weight fuses 3 states",
         "the capture id list and the fc width must agree", f"$.{IDS}", None)]
    edit(drafter, lambda c: c.__setitem__(IDS, list(range(65))))
    _, findings = validated(drafter)
    assert [f for f in findings if f[0].startswith("E-CAPTURE-")][:1] == [
        ("E-CAPTURE-FIELD", "error", f"{IDS} is {repr(list(range(65)))[:77]}...: not a short list of integers",
         "write the capture ids as a list of integers", f"$.{IDS}", None)]
