"""The registry through the CLI and the Python API, on real checkpoints and both backends (a real
SQLite file, a real PostgreSQL database: the `registry_url` fixture): conversions recorded with
their lineage, sidecar facts imported, training truth stated by hand, and every failure a
one-line error. SQLite's file paths are tested here; a server's failures in test_registry_postgres.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli, tree_digest, without_nested_ids
from registry_backends import backend, sql
from eagle3_convert.capture_ids import training_boundaries
from eagle3_convert.registry.store import open_registry
from eagle3_convert.provenance import from_record
from eagle3_convert.records import add_checkpoint, known_record, lineage, list_records, remove, show
from eagle3_convert.target_identity import config_digest
from eagle3_convert.safetensors_io import read_header

PROVENANCE = "speculators 0.9.0, ultrachat 200k, run 7"


def sidecar(path: Path) -> dict:
    return json.loads((path / "eagle3-convert.json").read_text())


def cli_json(*args: object) -> object:
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def one_line_error(result, code: str) -> str:
    assert result.exit_code != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"[{code}]" in lines[0] and "hint:" in lines[0]
    return lines[0]


def write_target(path: Path, layers: int) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": layers,
        "hidden_size": 64, "vocab_size": 512}))
    return path


def contents(registry) -> list:
    """Every row of the registry, to prove it unchanged."""
    return [sql(registry, f"SELECT * FROM {table} ORDER BY 1, 2, 3") for table in ("drafters", "locations", "lineage")]


@pytest.fixture
def chain(example_dir: Path, tmp_path: Path, registry_url) -> dict:
    """speculators -> sglang -> vllm, each step recorded in one registry."""
    registry = registry_url
    sg, vl = tmp_path / "sg", tmp_path / "vl"
    first = run_cli("--to", "sglang", example_dir, sg, "--registry", registry, "--trained-with", PROVENANCE)
    second = run_cli("--to", "vllm", sg, vl, "--registry", registry)
    assert first.exit_code == 0 and second.exit_code == 0, first.stderr + second.stderr
    assert "recorded drafter" in first.stdout and str(registry) in second.stdout
    return {"registry": registry, "src": example_dir.resolve(), "sg": sg.resolve(), "vl": vl.resolve()}


def test_chain_records_one_drafter_three_locations_two_edges(chain: dict) -> None:
    registry = chain["registry"]
    records = cli_json("registry", "list", "--registry", registry)["records"]
    assert len(records) == 1
    record = records[0]
    # The id the registry holds is the one each output's sidecar carries.
    assert {sidecar(chain["sg"])["drafter_id"], sidecar(chain["vl"])["drafter_id"]} == {record["drafter_id"]}
    assert [(loc["layout"], loc["uri"]) for loc in record["locations"]] == [
        ("speculators", str(chain["src"])), ("sglang", str(chain["sg"])), ("vllm", str(chain["vl"]))]
    assert [(e["source"]["uri"], e["dest"]["uri"]) for e in record["lineage"]] == [
        (str(chain["src"]), str(chain["sg"])), (str(chain["sg"]), str(chain["vl"]))]
    assert {e["tool"] for e in record["lineage"]} == {"eagle3-convert 0.1.0"}
    assert record["capture_boundaries"] == [2, 4, 5]
    assert record["ids_as_written"] == {"speculators": [2, 4, 5], "sglang": [1, 3, 4], "vllm": [2, 4, 5]}
    assert (record["draft_vocab_size"], record["vocab_size"], record["hidden_size"]) == (128, 512, 64)
    assert record["trained_with"] == PROVENANCE  # handed on by sg's sidecar to the second step
    assert record["target"]["name_or_path"] == "example-org/tiny-llama-target"
    assert record["target"]["architectures"] == ["LlamaForCausalLM"]

    prefix = record["drafter_id"][:8]
    assert cli_json("registry", "show", prefix, "--registry", registry)["record"] == record
    edges = cli_json("registry", "lineage", prefix, "--registry", registry)["lineage"]
    assert [(e["source"]["layout"], e["dest"]["layout"]) for e in edges] == [("speculators", "sglang"),
                                                                             ("sglang", "vllm")]


def test_human_list_show_and_lineage(chain: dict) -> None:
    registry = chain["registry"]
    drafter_id = sidecar(chain["vl"])["drafter_id"]

    listed = run_cli("registry", "list", "--registry", registry)
    assert listed.exit_code == 0
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "TARGET", "CAPTURE", "LAYOUTS"]
    assert row.startswith(drafter_id[:12]) and "example-org/tiny-llama-target" in row
    assert row.endswith("sglang, speculators, vllm") and "[2, 4, 5]" in row

    shown = run_cli("registry", "show", drafter_id[:6], "--registry", registry).stdout
    assert f"drafter    {drafter_id}" in shown
    assert "capture    boundaries [2, 4, 5]" in shown and "  sglang       [1, 3, 4]" in shown
    assert "draft Vd=128, target V=512; hidden H=64" in shown
    assert f"trained    {PROVENANCE}" in shown
    assert "locations  3" in shown and f"  vllm         {chain['vl']}" in shown
    assert "lineage    2 edge(s)" in shown

    lines = run_cli("registry", "lineage", drafter_id, "--registry", registry).stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{chain['src']} (speculators) -> {chain['sg']} (sglang)  by eagle3-convert 0.1.0")
    assert lines[1].startswith(f"{chain['sg']} (sglang) -> {chain['vl']} (vllm)")


def test_list_by_target_and_remove(chain: dict) -> None:
    registry = chain["registry"]
    drafter_id = sidecar(chain["sg"])["drafter_id"]
    assert len(cli_json("registry", "list", "--target", "example-org/tiny-llama-target", "--registry", registry)["records"]) == 1
    assert cli_json("registry", "list", "--target", "other/model", "--registry", registry)["records"] == []
    assert run_cli("registry", "list", "--target", "other/model", "--registry", registry).stdout == \
        "no drafters recorded for target other/model\n"

    removed = run_cli("registry", "remove", drafter_id[:10], "--registry", registry)
    assert removed.exit_code == 0 and removed.stdout == f"removed {drafter_id}\n"
    assert cli_json("registry", "list", "--registry", registry)["records"] == []
    # The checkpoints are not the registry's to delete.
    assert (chain["sg"] / "config.json").is_file() and (chain["vl"] / "model.safetensors").is_file()

    again = run_cli("registry", "remove", drafter_id, "--registry", registry)
    assert "no drafter" in one_line_error(again, "E-REGISTRY") and again.exit_code == 1
    unknown = run_cli("registry", "lineage", drafter_id, "--registry", registry)
    assert "no drafter" in one_line_error(unknown, "E-REGISTRY")


def test_convert_records_in_the_registry_the_environment_names(example_dir: Path, tmp_path: Path, registry_url,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    registry = registry_url
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(registry))
    result = run_cli("--to", "sglang", example_dir, tmp_path / "sg", "--json")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary["recorded_in"] == str(registry)
    [record] = list_records(registry=registry)
    assert record.drafter_id == summary["drafter_id"] == sidecar(tmp_path / "sg")["drafter_id"]


def test_no_record_leaves_the_registry_untouched(chain: dict, example_dir: Path, tmp_path: Path) -> None:
    registry = chain["registry"]
    before = tree_digest(registry.parent) if backend(registry) == "sqlite" else None
    rows = contents(registry)
    result = run_cli("--to", "vllm", example_dir, tmp_path / "unrecorded", "--registry", registry, "--no-record")
    assert result.exit_code == 0 and "recorded drafter" not in result.stdout
    assert contents(registry) == rows
    if before is not None:  # not a byte of the file, nor a WAL, either
        assert tree_digest(registry.parent) == before
    assert str(tmp_path / "unrecorded") not in {loc.uri for loc in show(sidecar(chain["sg"])["drafter_id"],
                                                                       registry).locations}

    fresh = tmp_path / "never" / "registry.db"
    assert run_cli("--to", "vllm", example_dir, tmp_path / "unrecorded2", "--registry", fresh,
                   "--no-record").exit_code == 0
    assert not fresh.parent.exists()


def test_unusable_registry_is_a_one_line_error_and_nothing_is_written(example_dir: Path, tmp_path: Path) -> None:
    under_a_file = example_dir / "config.json" / "registry.db"
    line = one_line_error(run_cli("registry", "add", example_dir, "--registry", under_a_file), "E-REGISTRY")
    assert "cannot create the registry's folder" in line

    line = one_line_error(run_cli("registry", "list", "--registry", tmp_path), "E-REGISTRY")
    assert "is a folder, not a file" in line

    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("these are not the tables you are looking for\n" * 100)
    line = one_line_error(run_cli("registry", "show", "abcd", "--registry", not_a_db), "E-REGISTRY")
    assert "not a usable registry database" in line

    before = tree_digest(example_dir)
    result = run_cli("--to", "sglang", example_dir, tmp_path / "out", "--registry", not_a_db)
    line = one_line_error(result, "E-REGISTRY")
    assert result.exit_code == 1 and "--no-registry" in line
    assert not (tmp_path / "out").exists() and tree_digest(example_dir) == before
    # the hint is a way out: the registry left out, the conversion runs and the file is untouched
    assert run_cli("--to", "sglang", example_dir, tmp_path / "out", "--registry", not_a_db,
                   "--no-registry").exit_code == 0
    assert not_a_db.read_text().startswith("these are not the tables")


REFUSE_WRITES = {  # a registry that opens but refuses writes
    "sqlite": ["CREATE TRIGGER refuse BEFORE INSERT ON drafters BEGIN SELECT RAISE(ABORT, 'quota'); END"],
    "postgresql": ["CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE 'quota'; END $$",
                   "CREATE TRIGGER refuse BEFORE INSERT ON drafters FOR EACH ROW EXECUTE FUNCTION refuse()"],
}


def test_recording_failure_after_a_conversion_warns_and_keeps_the_output(example_dir: Path, tmp_path: Path,
                                                                         registry_url) -> None:
    registry = registry_url
    open_registry(registry).close()
    sql(registry, *REFUSE_WRITES[backend(registry)])
    dest = tmp_path / "sg"
    result = run_cli("--to", "sglang", example_dir, dest, "--registry", registry)
    assert result.exit_code == 0
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert "not recorded in the registry" in warning and "quota" in warning
    assert f"eagle3-convert registry add {dest}" in warning
    assert (dest / "model.safetensors").is_file() and list_records(registry=registry) == []

    # The sidecar kept the facts: recording later restores the lineage the conversion made.
    sql(registry, "DROP TRIGGER refuse" + (" ON drafters" if backend(registry) == "postgresql" else ""))
    assert run_cli("registry", "add", dest, "--registry", registry).exit_code == 0
    [record] = list_records(registry=registry)
    assert [(e.source.uri, e.dest.uri) for e in record.lineage] == [(str(example_dir.resolve()), str(dest.resolve()))]


def test_registry_add_imports_the_sidecar_facts(example_dir: Path, tmp_path: Path, registry_url) -> None:
    sg = tmp_path / "sg"
    assert run_cli("--to", "sglang", example_dir, sg, "--no-record", "--trained-with", PROVENANCE).exit_code == 0
    registry = registry_url
    added = cli_json("registry", "add", sg, "--registry", registry)
    record = added["record"]
    assert added["drafter_id"] == sidecar(sg)["drafter_id"]
    assert record["trained_with"] == PROVENANCE
    assert record["ids_as_written"] == {"speculators": [2, 4, 5], "sglang": [1, 3, 4]}
    assert [(loc["layout"], loc["uri"]) for loc in record["locations"]] == [("sglang", str(sg.resolve()))]
    assert [(e["source"]["layout"], e["dest"]["uri"]) for e in record["lineage"]] == [("speculators",
                                                                                       str(sg.resolve()))]
    assert any("imported eagle3-convert.json" in note for note in added["notes"])

    # Adding it again changes nothing; a second copy elsewhere is one more location of the same drafter.
    assert cli_json("registry", "add", sg, "--registry", registry)["record"]["lineage"] == record["lineage"]
    human = run_cli("registry", "add", example_dir, "--registry", registry)
    assert human.exit_code == 0 and human.stdout.startswith(f"recorded {example_dir.resolve()} (speculators)\n")
    assert "locations  2" in human.stdout


def test_a_sidecar_of_other_weights_is_not_imported(example_dir: Path, tmp_path: Path, registry_url) -> None:
    sg = tmp_path / "sg"
    assert run_cli("--to", "sglang", example_dir, sg, "--no-record", "--trained-with", PROVENANCE).exit_code == 0
    # Retrained in place: same config.json (the sidecar still matches it), other weights.
    weights = sg / "model.safetensors"
    lm_head = next(ref for name, ref in read_header(weights).tensors.items() if name.endswith("lm_head.weight"))
    blob = bytearray(weights.read_bytes())
    blob[lm_head.start] ^= 0x01
    weights.write_bytes(bytes(blob))

    added = add_checkpoint(str(sg), registry=registry_url)
    assert added.record.drafter_id != sidecar(sg)["drafter_id"]
    assert added.record.trained_with is None and added.record.lineage == []
    assert any("describes another drafter" in note for note in added.notes)


def test_malformed_sidecar_history_is_skipped_and_said(example_dir: Path, tmp_path: Path, registry_url) -> None:
    sg = tmp_path / "sg"
    assert run_cli("--to", "sglang", example_dir, sg, "--no-record").exit_code == 0
    facts = sidecar(sg)
    facts["lineage"].append({"source": "somewhere", "tool": ""})
    facts["ids_as_written"]["vllm"] = "2,4,5"
    (sg / "eagle3-convert.json").write_text(json.dumps(facts))  # still trusted: config.json is unchanged

    added = add_checkpoint(str(sg), registry=registry_url)
    assert len(added.record.lineage) == 1 and "vllm" not in added.record.ids_as_written
    assert any(note.startswith("lineage entry 1 of eagle3-convert.json was not recorded") for note in added.notes)

    # A target the registry cannot hold is refused in one line, not half-recorded.
    facts["target"]["num_hidden_layers"] = 0
    (sg / "eagle3-convert.json").write_text(json.dumps(facts))
    before = list_records(registry=registry_url)
    result = run_cli("registry", "add", sg, "--registry", registry_url)
    assert "target.num_hidden_layers" in one_line_error(result, "E-REGISTRY")
    assert list_records(registry=registry_url) == before


def test_add_states_the_training_capture_layers(example_dir: Path, tmp_path: Path, registry_url) -> None:
    registry = registry_url
    added = cli_json("registry", "add", example_dir, "--capture-layers", "1,3,4", "--convention", "sglang",
                     "--registry", registry)
    assert added["record"]["capture_boundaries"] == [2, 4, 5] and added["notes"] == []

    # A claim that differs from the config is recorded, said, and survives later conversions.
    target = write_target(tmp_path / "target", layers=6)
    added = cli_json("registry", "add", example_dir, "--capture-layers", "1,2,3", "--convention", "boundary",
                     "--target", target, "--trained-with", "specforge 0.2", "--registry", registry)
    drafter_id = added["drafter_id"]
    assert added["record"]["capture_boundaries"] == [1, 2, 3]
    assert any("the config names boundaries [2, 4, 5]; recorded the training's [1, 2, 3]" in note
               for note in added["notes"])
    assert added["record"]["target"] == {"name_or_path": "example-org/tiny-llama-target", "revision": None,
                                         "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 6,
                                         "hidden_size": 64, "vocab_size": 512, "aliases": [str(target.resolve())],
                                         "config_sha256": config_digest(json.loads((target / "config.json").read_text()))}
    # A conversion that would write the config's ids against the training record is refused.
    refused = run_cli("--to", "sglang", example_dir, tmp_path / "sg", "--registry", registry)
    assert refused.exit_code == 1 and "E-CAPTURE-RECORD" in refused.stderr and not (tmp_path / "sg").exists()
    record = show(drafter_id, registry)
    assert record.capture_boundaries == [1, 2, 3] and record.trained_with == "specforge 0.2"
    assert record.target.num_hidden_layers == 6 and len(record.locations) == 1


@pytest.mark.parametrize("args, code, says", [
    (["--capture-layers", "1,3,4"], "E-USAGE", "need their convention"),
    (["--convention", "sglang"], "E-USAGE", "need their convention"),
    (["--capture-layers", "1,x", "--convention", "sglang"], "E-USAGE", "not a comma-separated list"),
    (["--capture-layers", "1,3", "--convention", "sglang"], "E-USAGE", "fc fuses 3 hidden states"),
    (["--capture-layers", "-2,3,4", "--convention", "sglang"], "E-USAGE", "capture no hidden state"),
])
def test_add_refuses_capture_layers_that_make_no_sense(example_dir: Path, tmp_path: Path, args: list[str],
                                                       code: str, says: str) -> None:
    registry = tmp_path / "registry.db"
    result = run_cli("registry", "add", example_dir, *args, "--registry", registry)
    assert result.exit_code == 2 and says in one_line_error(result, code)
    assert not registry.exists()  # refused before the registry is opened


def test_add_refuses_layers_beyond_the_target(example_dir: Path, tmp_path: Path) -> None:
    target = write_target(tmp_path / "target", layers=4)
    result = run_cli("registry", "add", example_dir, "--target", target, "--capture-layers", "2,4,5",
                     "--convention", "speculators", "--registry", tmp_path / "registry.db")
    assert "beyond the target's 4 layers" in one_line_error(result, "E-USAGE")


def test_python_api_with_an_open_store(example_dir: Path, registry_url) -> None:
    with open_registry(registry_url) as store:
        added = add_checkpoint(str(example_dir), trained_with=PROVENANCE, registry=store)
        drafter_id = added.record.drafter_id
        assert [r.drafter_id for r in list_records(registry=store)] == [drafter_id]
        assert show(drafter_id[:5], store).trained_with == PROVENANCE
        assert lineage(drafter_id, store) == []
        assert remove(drafter_id[:5], store) == drafter_id
        assert list_records(registry=store) == []  # the store stayed open throughout


def test_training_boundaries_per_convention() -> None:
    assert training_boundaries([1, 3, 4], "sglang") == [2, 4, 5]
    assert training_boundaries([1, 15, 28], "specforge", num_layers=32, num_aux=3) == [2, 16, 29]
    assert training_boundaries([2, 16, 29], "vllm") == [2, 16, 29]
    assert training_boundaries([-1, 3], "sglang") == [0, 4]  # -1: SGLang's embedding output
    # DeepSeek-family SGLang shifts only when the list starts at 1.
    assert training_boundaries([1, 30, 58], "sglang", family="deepseek", num_layers=61) == [2, 31, 59]
    assert training_boundaries([2, 30, 58], "sglang", family="deepseek", num_layers=61) == [2, 30, 58]


def edit_ids(vllm_copy: Path, ids: list[int]) -> None:
    config_path = vllm_copy / "config.json"
    config = json.loads(config_path.read_text())
    config["eagle_aux_hidden_state_layer_ids"] = config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    config_path.write_text(json.dumps(config))


def test_validate_reports_a_config_that_contradicts_the_training_record(chain: dict) -> None:
    registry = chain["registry"]
    assert run_cli("validate", chain["vl"], "--registry", registry).exit_code == 0
    edit_ids(chain["vl"], [1, 3, 4])  # SGLang's ids written where vLLM reads boundaries
    result = run_cli("validate", chain["vl"], "--registry", registry, "--json")
    assert result.exit_code == 1
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "E-CAPTURE-RECORD"]
    # the registry's record and the sidecar beside the edited config (written with the config before) both say so
    [finding] = [f for f in found if "registry" in f["message"]]
    assert finding["severity"] == "error" and "[1, 3, 4]" in finding["message"] and "[2, 4, 5]" in finding["message"]
    assert sidecar(chain["sg"])["drafter_id"][:12] in finding["message"]
    assert [f for f in found if f["message"].count("eagle3-convert.json") == 1 and "[2, 4, 5]" in f["message"]]


def recorded_capture(path: Path, registry, *, target_depth: int | None = None):
    """The capture boundaries the registry's record of the drafter in `path` says it was trained on, and the
    record's label, as validate and convert read them; None when it knows no record, or cannot say."""
    record = known_record(path, registry)
    if record is None:
        return None
    known = from_record(record)
    boundaries = known.boundaries(target_depth)
    return None if boundaries is None else (boundaries, known.label.split(" (recorded")[0])


def test_recorded_capture_lookups(chain: dict, example_dir: Path, tmp_path: Path) -> None:
    registry = chain["registry"]
    drafter_id = sidecar(chain["sg"])["drafter_id"]
    label = f"the registry's record of drafter {drafter_id[:12]}"
    assert recorded_capture(chain["sg"], registry) == ([2, 4, 5], label)  # by its sidecar's id
    edit_ids(chain["vl"], [1, 3, 4])
    assert recorded_capture(chain["vl"], registry) == ([2, 4, 5], label)  # by its sidecar's id: the same weights

    # Elsewhere and without a sidecar, only its bytes say which drafter it is: found by them, always (issue 33).
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("config.json", "model.safetensors"):
        (copy / name).write_bytes((chain["sg"] / name).read_bytes())
    assert recorded_capture(copy, registry) == ([2, 4, 5], label)
    (chain["vl"] / "eagle3-convert.json").unlink()
    assert recorded_capture(chain["vl"], registry) == ([2, 4, 5], label)  # by where it was recorded

    if backend(registry) == "sqlite":
        missing = tmp_path / "nowhere" / "registry.db"
        assert recorded_capture(chain["sg"], missing) is None and not missing.parent.exists()


def test_recorded_engine_default_resolves_through_the_target_depth(example_dir: Path, tmp_path: Path,
                                                                  registry_url) -> None:
    config = json.loads((example_dir / "config.json").read_text())
    del config["eagle_aux_hidden_state_layer_ids"]  # the engine default, as SpecForge exports drop them
    (example_dir / "config.json").write_text(json.dumps(config))
    registry = registry_url
    assert add_checkpoint(str(example_dir), registry=registry).record.capture_boundaries is None
    assert recorded_capture(example_dir, registry) is None  # which layers depends on a depth nobody knows
    assert recorded_capture(example_dir, registry, target_depth=32)[0] == [2, 16, 29]
    add_checkpoint(str(example_dir), target=str(write_target(tmp_path / "target", layers=12)), registry=registry)
    assert recorded_capture(example_dir, registry)[0] == [2, 6, 9]


def test_force_over_another_drafter_forgets_its_copy_there(example_dir: Path, tmp_path: Path, registry_url):
    from builders import build_drafter

    registry = registry_url
    other = build_drafter(tmp_path / "other", "speculators")
    dest = tmp_path / "out"
    assert run_cli("--to", "sglang", "--verifier", "org/t", other, dest, "--registry", registry).exit_code == 0
    assert run_cli("--to", "sglang", "--force", example_dir, dest, "--registry", registry).exit_code == 0
    with open_registry(registry) as store:
        holders = [r.drafter_id for r in store.list() if str(dest.resolve()) in {loc.uri for loc in r.locations}]
        assert len(store.list()) == 2 and len(holders) == 1
    assert holders[0] == json.loads((dest / "eagle3-convert.json").read_text())["drafter_id"]


def test_convert_restores_capture_layers_from_the_training_record(sample, tmp_path: Path, registry_url):
    registry = registry_url
    src = without_nested_ids(sample("specforge-sglang"))
    assert run_cli("registry", "add", src, "--capture-layers", "1,3,4", "--convention", "specforge",
                   "--registry", registry).exit_code == 0
    result = run_cli("--to", "speculators", "--verifier", "org/t", src, tmp_path / "spec", "--registry", registry)
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "spec" / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert "taken from the registry's record of drafter" in result.stdout


def test_convert_takes_capture_layers_given_on_the_command_line(sample, tmp_path: Path):
    with_ids = sample("specforge-sglang")
    src = without_nested_ids(Path(shutil.copytree(with_ids, tmp_path / "without-ids")))
    result = run_cli("--to", "vllm", "--capture-layers", "1,3,4", "--convention", "sglang", "--no-record",
                     src, tmp_path / "vllm")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "vllm" / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    # ids the config already names are never overridden: a disagreement is refused
    clash = run_cli("--to", "vllm", "--capture-layers", "2,3,4", "--convention", "sglang", "--no-record",
                    with_ids, tmp_path / "clash")
    assert clash.exit_code == 1 and "E-CAPTURE-RECORD" in clash.stderr and not (tmp_path / "clash").exists()
    half = run_cli("--to", "vllm", "--capture-layers", "1,3,4", "--no-record", src, tmp_path / "half")
    assert half.exit_code == 2 and "--convention" in half.stderr
