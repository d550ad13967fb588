"""The provenance corpus (issue 21): for each sample, every way config.json, the sidecar beside it and the registry's
record can disagree, with and without --target, with the registry absent or present, and the sidecar present or
gone: 0 validate outputs that say OK. And convert: it refuses a config that contradicts a record, restores lost ids
from one and says where from, and keeps the record and lineage over an edited config.

Each base is a sample (tests/data) whose export lost its capture ids, converted by the real CLI with the layers it
was trained on stated (`--capture-layers 1,3,6 --convention boundary`, not the 8-layer target's default
[2, 4, 5], so that deleting them is a disagreement too): its sidecar records target, layers, vocabulary and flags.
Real files, real SQLite (and PostgreSQL for one slice), the real CLI. Reordered ids name the same layers (every
engine fuses the captured states in ascending layer order, docs/formats.md §1): that is checked not to be called a
contradiction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import DATA, run_cli

from eagle3_convert.registry.schema import SCHEMA_VERSION
from eagle3_convert.registry.store import open_registry
from registry_backends import registry_as_released, sql

TARGET = DATA / "targets" / "llama-tiny"  # 8 layers, hidden 64, vocab 512
TRAINED = [1, 3, 6]
IDS = "eagle_aux_hidden_state_layer_ids"
# (sample, layout of the recorded copy): every sample, in a boundary layout and a block-output one where it can be
BASES = [("specforge-sglang", "sglang"), ("specforge-sglang", "speculators"), ("speculators-trained", "vllm"),
         ("speculators-fullvocab-qwen3", "speculators"), ("eagle-original", "speculators")]


def other_target(root: Path, **changes: Any) -> Path:
    config = json.loads((TARGET / "config.json").read_text())
    dest = root / "-".join(f"{k}{v}" for k, v in changes.items())
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps({**config, **changes}))
    return dest


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("provenance")
    out = {}
    for name, layout in BASES:
        src = root / f"{name}-export"
        if not src.exists():
            shutil.copytree(DATA / name / "checkpoint", src)
            edit(src, lambda c: set_ids(c, None))  # the export lost them (SpecForge's does)
        dest = root / f"{name}-{layout}"
        result = run_cli("--to", layout, src, dest, "--target", TARGET, "--verifier", "org/llama-tiny",
                         "--capture-layers", ",".join(map(str, TRAINED)), "--convention", "boundary", "--no-registry")
        assert result.exit_code == 0, result.stderr
        out[(name, layout)] = dest
    return out


def edit(path: Path, change: Callable[[dict], None]) -> None:
    config = json.loads((path / "config.json").read_text())
    change(config)
    (path / "config.json").write_text(json.dumps(config, indent=2))


def set_ids(config: dict, shift: int | None, reverse: bool = False) -> None:
    """Every id list of the config shifted by `shift` (None: deleted), or reversed."""
    for holder in (config, config.get("eagle_config") or {}):
        if isinstance(holder.get(IDS), list):
            if shift is None:
                del holder[IDS]
            else:
                ids = [i + shift for i in holder[IDS]]
                holder[IDS] = ids[::-1] if reverse else ids


def flip_flag(config: dict) -> None:
    key = "norm_before_residual" if "speculators_config" in config else "norm_before_fc"
    config[key] = not config.get(key, False)


def other_vocab(config: dict) -> None:
    holder = config.get("transformer_layer_config", config)
    holder["vocab_size"] = 1024


def other_verifier(config: dict) -> None:
    config["speculators_config"]["verifier"]["name_or_path"] = "org/another-model"


CONFIG_EDITS: dict[str, Callable[[dict], None]] = {
    "ids+1": lambda c: set_ids(c, 1), "ids-1": lambda c: set_ids(c, -1), "ids-deleted": lambda c: set_ids(c, None),
    "flag-flipped": flip_flag, "vocab": other_vocab, "verifier": other_verifier,
}
# Disagreements that live outside config.json: --target names another model, or the registry's record says other.
TARGET_EDITS = {"other-depth": {"num_hidden_layers": 12}, "other-width": {"hidden_size": 128}}
RECORD_EDITS = {"record-other-ids": ["--capture-layers", "2,4,5", "--convention", "boundary"],
                "record-other-depth": ["--target", "DEPTH12"]}
RECORDS = ["sidecar", "sidecar+registry", "registry"]


def cells() -> list[Any]:
    out = []
    for base in BASES:
        edits = [e for e in CONFIG_EDITS if e != "verifier" or base[1] == "speculators"]
        for with_target in (False, True):
            for records in RECORDS:
                out += [pytest.param(base, e, with_target, records, id=f"{base[0]}>{base[1]}-{e}-"
                                     f"{'target' if with_target else 'no-target'}-{records}") for e in edits]
                out += [pytest.param(base, e, True, records, id=f"{base[0]}>{base[1]}-{e}-{records}")
                        for e in TARGET_EDITS if with_target]
                # the record's target depth is contradicted by the sidecar or --target; alone, nothing contradicts it
                out += [pytest.param(base, e, with_target, records, id=f"{base[0]}>{base[1]}-{e}-"
                                     f"{'target' if with_target else 'no-target'}-{records}")
                        for e in RECORD_EDITS if "registry" in records and
                        (e != "record-other-depth" or with_target or records != "registry")]
    return out


def recorded_copy(bases: dict, base: tuple[str, str], tmp_path: Path, registry: Path | str | None) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(bases[base], copy)
    if registry is not None:  # the registry knows this copy, as after the conversion that wrote it
        assert run_cli("registry", "add", copy, "--registry", registry).exit_code == 0
    return copy


@pytest.mark.parametrize("base, change, with_target, records", cells())
def test_no_disagreement_is_called_ok(bases: dict, tmp_path: Path, base: tuple[str, str], change: str,
                                      with_target: bool, records: str):
    registry = tmp_path / "registry.db"
    copy = recorded_copy(bases, base, tmp_path, registry if "registry" in records else None)
    target = TARGET
    if change in CONFIG_EDITS:
        edit(copy, CONFIG_EDITS[change])
    elif change in TARGET_EDITS:
        target = other_target(tmp_path, **TARGET_EDITS[change])
    else:
        flags = [str(other_target(tmp_path, num_hidden_layers=12)) if f == "DEPTH12" else f
                 for f in RECORD_EDITS[change]]
        assert run_cli("registry", "add", copy, "--registry", registry, *flags).exit_code == 0
    if records == "registry":
        (copy / "eagle3-convert.json").unlink()
    result = run_cli("validate", copy, *(["--target", target] if with_target else []), "--registry", registry,
                     "--json")
    report = json.loads(result.stdout)
    codes = {f["code"] for f in report["findings"]}
    if change == "verifier":  # another name, no fact to tell it from the record's: a warning (issue 33), never OK
        assert result.exit_code == 0 and {c for c in codes if c[0] != "I"} == {"W-TARGET-UNTOLD"}, report["findings"]
        untold = next(f for f in report["findings"] if f["code"] == "W-TARGET-UNTOLD")  # one per record
        assert "registry add" in untold["hint"] and "--verifier org/another-model" in untold["hint"]
        assert registry.exists() == ("registry" in records)
        return
    assert result.exit_code == 1 and report["counts"]["error"], (change, report["findings"])
    if change.startswith("ids") or change == "record-other-ids":
        assert codes & {"E-CAPTURE-RECORD", "E-CAPTURE-EMBEDDING"}, report["findings"]
    # (a vocabulary or flag the tensors cannot hold is refused by the tensor checks before any record is asked)
    if change in ("record-other-depth", "other-depth", "other-width") or (
            change == "flag-flipped" and base[1] == "speculators"):
        assert "E-RECORD-CONFLICT" in codes, report["findings"]
    assert registry.exists() == ("registry" in records)  # validate created no registry


@pytest.mark.parametrize("records", ["sidecar", "registry"])
@pytest.mark.parametrize("base", BASES, ids=[f"{n}>{layout}" for n, layout in BASES])
def test_reordered_ids_name_the_same_layers(bases: dict, tmp_path: Path, base: tuple[str, str], records: str):
    registry = tmp_path / "registry.db"
    copy = recorded_copy(bases, base, tmp_path, registry if records == "registry" else None)
    edit(copy, lambda c: set_ids(c, 0, reverse=True))
    if records == "registry":
        (copy / "eagle3-convert.json").unlink()
    report = json.loads(run_cli("validate", copy, "--registry", registry, "--json").stdout)
    assert not {"E-CAPTURE-RECORD", "E-RECORD-CONFLICT"} & {f["code"] for f in report["findings"]}


@pytest.mark.parametrize("base", BASES, ids=[f"{n}>{layout}" for n, layout in BASES])
def test_convert_refuses_a_config_that_contradicts_its_sidecar_and_keeps_the_record(bases: dict, tmp_path: Path,
                                                                                    base: tuple[str, str]):
    """The seed failure: ids one off in a copy handed on without the registry. `--to sglang` wrote the mistake and a
    sidecar claiming it, dropping the lineage; now any conversion is refused, and the hint's way out (the record's
    layers with --capture-layers) writes them, keeping the record and its lineage."""
    copy = recorded_copy(bases, base, tmp_path, None)
    lineage = json.loads((copy / "eagle3-convert.json").read_text())["lineage"]
    edit(copy, lambda c: set_ids(c, -1))
    to = {"sglang": "speculators", "speculators": "vllm", "vllm": "speculators"}[base[1]]  # one that serves it
    refused = run_cli("--to", to, copy, tmp_path / "out", "--no-registry")
    assert refused.exit_code == 1 and "[E-CAPTURE-RECORD]" in refused.stderr and not (tmp_path / "out").exists()
    assert "eagle3-convert.json" in refused.stderr and str(TRAINED) in refused.stderr
    fixed = run_cli("--to", to, copy, tmp_path / "out", "--no-registry", "--capture-layers",
                    ",".join(map(str, TRAINED)), "--convention", "boundary")
    assert fixed.exit_code == 0, fixed.stderr
    side = json.loads((tmp_path / "out" / "eagle3-convert.json").read_text())
    assert side["capture_boundaries"] == TRAINED and side["lineage"][:len(lineage)] == lineage
    assert run_cli("validate", tmp_path / "out", "--registry", tmp_path / "none.db").exit_code == 0


@pytest.mark.parametrize("base", BASES, ids=[f"{n}>{layout}" for n, layout in BASES])
def test_deleted_ids_are_restored_from_the_sidecar_and_said_so(bases: dict, tmp_path: Path, base: tuple[str, str]):
    copy = recorded_copy(bases, base, tmp_path, None)
    edit(copy, lambda c: set_ids(c, None))
    result = run_cli("--to", "vllm", copy, tmp_path / "out", "--no-registry")
    assert result.exit_code == 0, result.stderr
    assert f"capture layers {TRAINED} taken from eagle3-convert.json" in result.stdout
    assert "the trained ones" not in result.stdout
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config[IDS] == TRAINED


def test_validate_and_validate_with_target_agree_on_a_stated_record(sample, tmp_path: Path):
    """`registry add DIR --capture-layers 0,2,5 --convention specforge` (boundaries [1, 3, 6]) for the SpecForge
    export, whose config says [1, 3, 4] (boundaries [2, 4, 5]): validate fails alike with and without --target."""
    src = sample("specforge-sglang")
    registry = tmp_path / "registry.db"
    added = run_cli("registry", "add", src, "--capture-layers", "0,2,5", "--convention", "specforge",
                    "--registry", registry)
    assert added.exit_code == 0, added.stderr
    found = []
    for extra in ([], ["--target", TARGET]):
        result = run_cli("validate", src, *extra, "--registry", registry, "--json")
        assert result.exit_code == 1
        found.append(sorted((f["code"], f["message"]) for f in json.loads(result.stdout)["findings"]
                            if f["code"] == "E-CAPTURE-RECORD"))
    assert found[0] == found[1] and found[0], found


@pytest.mark.parametrize("base", BASES, ids=[f"{n}>{layout}" for n, layout in BASES])
def test_the_record_alone_catches_it_on_both_backends(bases: dict, tmp_path: Path, registry_url: Path | str,
                                                      base: tuple[str, str]):
    """The copy's sidecar is gone and its ids are one off: the registry's record (SQLite or PostgreSQL) names the
    same weights whatever config.json says, so validate finds it and fails, and convert refuses."""
    copy = recorded_copy(bases, base, tmp_path, registry_url)
    (copy / "eagle3-convert.json").unlink()
    edit(copy, lambda c: set_ids(c, 1))
    result = run_cli("validate", copy, "--registry", registry_url, "--json")
    assert result.exit_code == 1
    [found] = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "E-CAPTURE-RECORD"]
    assert "registry's record" in found["message"] and str(TRAINED) in found["message"]
    refused = run_cli("--to", "vllm", copy, tmp_path / "out", "--registry", registry_url)
    assert refused.exit_code == 1 and "[E-CAPTURE-RECORD]" in refused.stderr and not (tmp_path / "out").exists()


# ------------------------------------------------------------------ the registry's migration to weights ids

def test_a_version_3_record_resolves_by_its_old_id(registry_url: Path | str, example_dir: Path, tmp_path: Path):
    """Before v4 the drafter id digested the config too. Migrating marks such a record `config-and-weights`; the
    next time its copy is read (here `registry add`) it is merged into the weights id, its training facts kept
    and its old id an alias that `registry show OLD` resolves."""
    from eagle3_convert.convert import read_source
    from eagle3_convert.fingerprint import config_and_weights_id, drafter_id, tensor_digests

    drafter = read_source(str(example_dir)).drafter
    digests = tensor_digests(drafter)
    old, new = config_and_weights_id(drafter, digests), drafter_id(drafter, digests)
    assert old != new
    registry_as_released(registry_url, 3)
    sql(registry_url, "INSERT INTO drafters (drafter_id, target_name_or_path, capture_boundaries, flags, trained_with,"
                      " created_at, updated_at) VALUES (?, 'org/t', '[1,3,6]', '{}', 'run 7',"
                      " '2025-01-01T00:00:00.000000+00:00', '2025-01-01T00:00:00.000000+00:00')", params=(old,))
    with open_registry(registry_url) as store:  # opening migrates
        [record] = store.list()
        assert record.id_kind == "config-and-weights" and record.drafter_id == old
    assert sql(registry_url, "SELECT kind, derived_from FROM lineage") == []  # the new columns exist
    added = run_cli("registry", "add", example_dir, "--registry", registry_url, "--json")
    assert added.exit_code == 0, added.stderr
    [record] = json.loads(run_cli("registry", "list", "--registry", registry_url, "--json").stdout)["records"]
    assert record["drafter_id"] == new and record["id_kind"] == "content"
    assert record["capture_boundaries"] == [1, 3, 6] and record["trained_with"] == "run 7"  # the old record's truth
    shown = run_cli("registry", "show", old[:16], "--registry", registry_url, "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["record"]["drafter_id"] == new
    assert SCHEMA_VERSION == 9  # v6 (the acceptance verify measured), v7 (weight keys, target names, history), v8 (the
    # quantization scheme) and v9 (a measurement's scan ranking) leave them as they are
