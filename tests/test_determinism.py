"""Deterministic outputs (issue 12, Deliver 3).

- The drafter id does not depend on `--from`: every layout's reader either refuses a file or reads
  the same drafter from it as detection's choice does, so every `--from` that is accepted gives
  the id `--from auto` gives. Checked over every layout pair (file written in A, read with --from
  B), and through conversions A -> B.
- What convert writes depends only on SRC and the flags, plus registry facts that are printed and
  recorded in the sidecar; `--no-registry` leaves them out. An unrelated earlier conversion that
  recorded the target's depth does not turn "engine default" into explicit ids.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import LAYOUTS, DrafterSpec, build_drafter, expected_refusal, write_target
from conftest import run_cli, without_nested_ids

from eagle3_convert.convert import convert, make_options, read_source
from eagle3_convert.errors import Eagle3Error
from eagle3_convert.fingerprint import drafter_id, tensor_digests

SIDECAR = "eagle3-convert.json"

SPECS = {
    "llama": DrafterSpec(),
    "no-ids": DrafterSpec(capture_boundaries=None),
    "qwen3": DrafterSpec(family="qwen3"),
    "two-layers": DrafterSpec(num_layers=2),
    "full-vocab": DrafterSpec(draft_vocab_size=None),
    "norm-before-residual": DrafterSpec(norm_before_residual=True),
    "mla": DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"),
}
CASES = [(name, layout) for name, spec in SPECS.items() for layout in LAYOUTS if not expected_refusal(layout, spec)]


def _id(path: Path, from_layout: str) -> str:
    drafter = read_source(str(path), from_layout).drafter
    return drafter_id(drafter, tensor_digests(drafter))


@pytest.mark.parametrize("name, layout", CASES, ids=[f"{n}-{lay}" for n, lay in CASES])
def test_the_drafter_id_does_not_depend_on_from(tmp_path: Path, name: str, layout: str):
    src = build_drafter(tmp_path / "src", layout, SPECS[name])
    expected = _id(src, "auto")
    assert _id(src, layout) == expected
    for other in LAYOUTS:
        try:
            got = _id(src, other)
        except Eagle3Error:
            continue  # refused: fine, the id cannot depend on a reading that is refused
        assert got == expected, f"a {layout} file read with --from {other} has another drafter id"


PAIRS = [(name, a, b) for name, a in CASES for b in LAYOUTS if b != a and not expected_refusal(b, SPECS[name])]


@pytest.mark.parametrize("name, a, b", PAIRS, ids=[f"{n}-{a}-to-{b}" for n, a, b in PAIRS])
def test_the_drafter_id_is_the_same_after_conversion(tmp_path: Path, name: str, a: str, b: str):
    """Every pair converts: b can hold the drafter (expected_refusal), and the target named as `--target` gives
    what a layout without capture ids of its own needs (eagle's hard-coded {2, L//2, L-3} needs the depth L)."""
    spec = SPECS[name]
    src = build_drafter(tmp_path / "src", a, spec)
    expected = _id(src, "auto")
    result = convert(str(src), tmp_path / "out", b, options=make_options(
        verifier=spec.verifier, target=str(write_target(tmp_path / "t", spec))))
    assert result.drafter_id == expected
    assert json.loads((tmp_path / "out" / SIDECAR).read_text())["drafter_id"] == expected
    assert _id(tmp_path / "out", "auto") == expected == _id(tmp_path / "out", b)


def test_cli_from_auto_and_from_sglang_record_one_id(sample, tmp_path: Path):
    src = sample("specforge-sglang")
    ids = set()
    for how in ("auto", "sglang"):
        result = run_cli("--from", how, "--to", "vllm", "--no-record", "--json", src, tmp_path / how)
        assert result.exit_code == 0, result.stderr
        ids.add(json.loads(result.stdout)["drafter_id"])
        ids.add(json.loads((tmp_path / how / SIDECAR).read_text())["drafter_id"])
    assert len(ids) == 1


def test_a_reader_that_reads_another_drafter_is_refused_naming_the_detected_layout(tmp_path: Path):
    """An SGLang file names its capture layers in eagle_config; the original-EAGLE reader reads none."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    result = run_cli("--from", "eagle", "--to", "vllm", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1 and "sglang" in result.stderr and not (tmp_path / "out").exists()
    assert result.stderr.count("\n") == 1 and "[E-" in result.stderr


# ------------------------------------------------------------------ the registry's facts

def _config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def test_an_unrelated_conversion_does_not_change_what_convert_writes(sample, tmp_path: Path):
    """The same command on the same input writes the same config, whatever an earlier conversion recorded."""
    src = without_nested_ids(sample("specforge-sglang"))
    registry = tmp_path / "registry.db"
    first = run_cli("--to", "vllm", src, tmp_path / "first", "--registry", registry)
    assert first.exit_code == 0, first.stderr
    # An unrelated conversion of the same drafter, which names its target (and so records its depth).
    target = write_target(tmp_path / "target", DrafterSpec(target_layers=8))
    assert run_cli("--to", "sglang", "--target", target, src, tmp_path / "other", "--registry",
                   registry).exit_code == 0
    again = run_cli("--to", "vllm", src, tmp_path / "again", "--registry", registry)
    assert again.exit_code == 0, again.stderr
    assert _config(tmp_path / "again") == _config(tmp_path / "first")


def test_registry_facts_are_printed_recorded_in_the_sidecar_and_left_out_on_request(sample, tmp_path: Path):
    src = without_nested_ids(sample("specforge-sglang"))
    registry = tmp_path / "registry.db"
    added = run_cli("registry", "add", src, "--capture-layers", "1,3,4", "--convention", "specforge",
                    "--registry", registry, "--json")
    assert added.exit_code == 0, added.stderr
    record_id = json.loads(added.stdout)["drafter_id"]

    taken = run_cli("--to", "vllm", src, tmp_path / "taken", "--registry", registry)
    assert taken.exit_code == 0, taken.stderr
    said = taken.stdout + taken.stderr
    assert f"capture layers [2, 4, 5] taken from the registry's record of drafter {record_id[:12]} (recorded " in said
    assert _config(tmp_path / "taken")["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    facts = json.loads((tmp_path / "taken" / SIDECAR).read_text())["from_registry"]
    assert facts["capture_boundaries"] == [2, 4, 5] and facts["drafter_id"] == record_id and facts["recorded_at"]

    # --quiet still says it: it changes what is written
    quiet = run_cli("--to", "vllm", "--quiet", src, tmp_path / "quiet", "--registry", registry)
    assert "taken from the registry's record" in quiet.stdout + quiet.stderr

    plain = run_cli("--to", "vllm", "--no-registry", src, tmp_path / "plain", "--registry", registry)
    assert plain.exit_code == 0, plain.stderr
    assert "taken from the registry" not in plain.stdout + plain.stderr
    assert "eagle_aux_hidden_state_layer_ids" not in _config(tmp_path / "plain")
    assert "from_registry" not in json.loads((tmp_path / "plain" / SIDECAR).read_text())
    # --no-record still takes (and says) them; it only leaves the conversion unrecorded
    unrecorded = run_cli("--to", "vllm", "--no-record", src, tmp_path / "unrecorded", "--registry", registry)
    assert "taken from the registry's record" in unrecorded.stdout
    assert _config(tmp_path / "unrecorded") == _config(tmp_path / "taken")
    # ... and --no-registry is exactly what an empty registry gives
    fresh = run_cli("--to", "vllm", src, tmp_path / "fresh", "--registry", tmp_path / "empty.db")
    assert fresh.exit_code == 0 and _config(tmp_path / "fresh") == _config(tmp_path / "plain")


def test_no_registry_neither_reads_nor_creates_the_registry(sample, tmp_path: Path):
    src = sample("specforge-sglang")
    registry = tmp_path / "nowhere" / "registry.db"
    result = run_cli("--to", "vllm", "--no-registry", src, tmp_path / "out", "--registry", registry)
    assert result.exit_code == 0, result.stderr
    assert not registry.exists()


def test_the_registry_json_summary_names_its_facts(sample, tmp_path: Path):
    src = without_nested_ids(sample("specforge-sglang"))
    registry = tmp_path / "registry.db"
    assert run_cli("registry", "add", src, "--capture-layers", "1,3,4", "--convention", "specforge",
                   "--registry", registry).exit_code == 0
    result = run_cli("--to", "vllm", "--json", src, tmp_path / "out", "--registry", registry)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["from_registry"]["capture_boundaries"] == [2, 4, 5]
    shutil.rmtree(tmp_path / "out")
