"""The CLI contract (issue 12, Deliver 6): typos are typos, and `--json` always answers with one document.

Every command under --json prints exactly one JSON document on stdout, success or failure, with
`schema_version`; each document is checked against the JSON Schema that ships for its command
(eagle3_convert/schemas/output/, documented in docs/json.md). `inspect` shows a broken file as stored.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click
import pytest

from conftest import REPO, run_cli
from eagle3_convert.cli import main
from eagle3_convert.schemas import load_output_schema, output_schema_name, output_schema_names, output_violations

ERROR_LINE = re.compile(r"^error: .+ \[([EW]-[A-Z0-9-]+)\] — hint: .+$")


def one_document(result, command: str | None) -> dict:
    """stdout is exactly one JSON document, valid against its command's schema, and agrees with the exit code."""
    doc = json.loads(result.stdout)  # raises on nothing, on two documents, or on text around one
    assert isinstance(doc, dict) and doc["schema_version"] == 1
    assert doc["command"] == command
    assert output_violations(doc) == [], output_violations(doc)
    schema = load_output_schema(output_schema_name(command) if output_schema_name(command) in output_schema_names()
                                else "usage")
    undocumented = set(doc) - set(schema["properties"])
    assert not undocumented, f"fields missing from the schema (and docs/json.md): {sorted(undocumented)}"
    assert doc["ok"] is (result.exit_code == 0), (doc, result.stderr)
    if not doc["ok"]:
        [line] = result.stderr.splitlines()  # and stderr still has the one error line
        assert ERROR_LINE.match(line) and f"[{doc['error']['code']}]" in line
    return doc


def all_commands(group: click.Group = main, prefix: str = "") -> dict[str, click.Command]:
    out = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out.update(all_commands(command, f"{prefix}{name} "))
        else:
            out[f"{prefix}{name}"] = command
    return out


def test_every_command_takes_json_and_has_a_documented_schema():
    docs = (REPO / "docs" / "json.md").read_text()
    for name, command in all_commands().items():
        assert any("--json" in p.opts for p in command.params if isinstance(p, click.Option)), name
        schema = output_schema_name(name)
        assert schema in output_schema_names(), f"no schemas/output/{schema}.json for `{name}`"
        assert f"`{name}`" in docs and f"schemas/output/{schema}.json" in docs, f"docs/json.md lacks {name}"
    assert set(output_schema_names()) == {output_schema_name(n) for n in all_commands()} | {"usage"}
    for name in output_schema_names():
        schema = load_output_schema(name)
        assert schema["$schema"].endswith("2020-12/schema")
        missing = [key for key in schema["properties"] if f"`{key}`" not in docs]
        assert not missing, f"docs/json.md does not describe {name}'s {missing}"


# ------------------------------------------------------------------ typos and usage errors

@pytest.mark.parametrize("argv, says", [
    (["inspec", "x"], "No such command 'inspec'. Did you mean 'inspect'?"),
    (["validat", "x", "--engine", "vllm"], "No such command 'validat'. Did you mean 'validate'?"),
    (["registry", "lst"], "No such command 'lst'. Did you mean 'list'?"),
])
def test_a_misspelled_command_is_no_such_command(argv: list[str], says: str):
    result = run_cli(*argv)
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert says in line and "[E-USAGE]" in line and "Missing option '--to'" not in line
    doc = one_document(run_cli(*argv, "--json"), None if argv[0] != "registry" else "registry")
    assert doc["error"]["code"] == "E-USAGE" and says in doc["error"]["message"]


def test_convert_stays_the_implied_command(example_dir: Path, tmp_path: Path):
    result = run_cli("--to", "sglang", example_dir, tmp_path / "out", "--no-record")
    assert result.exit_code == 0, result.stderr
    # A SRC that happens to look like a command name is still a SRC when it exists.
    (tmp_path / "inspec").symlink_to(example_dir)
    moved = run_cli("--to", "vllm", tmp_path / "inspec", tmp_path / "out2", "--no-record")
    assert moved.exit_code == 0, moved.stderr
    missing_to = run_cli(example_dir, tmp_path / "out3")
    assert missing_to.exit_code == 2 and "Missing option '--to'" in missing_to.stderr


@pytest.mark.parametrize("argv, command", [
    (["--to", "nope", "a", "b"], "convert"),
    (["convert", "--to", "sglang", "a"], "convert"),
    (["inspect"], "inspect"),
    (["validate", "x", "--engine", "nope"], "validate"),
    (["registry", "show"], "registry show"),
    (["publish", "x", "not a repo id"], "publish"),
])
def test_usage_errors_answer_one_document(argv: list[str], command: str):
    doc = one_document(run_cli(*argv, "--json"), command)
    assert doc["error"]["code"] == "E-USAGE" and doc["error"]["exit_code"] == 2
    assert doc["error"]["hint"]


# ------------------------------------------------------------------ every command, success and failure

def test_convert_json(example_dir: Path, tmp_path: Path):
    doc = one_document(run_cli("--to", "sglang", example_dir, tmp_path / "out", "--json", "--no-record"), "convert")
    assert doc["to"] == "sglang" and doc["dest"] == str(tmp_path / "out")
    refused = one_document(run_cli("--to", "sglang", example_dir, tmp_path / "out", "--json", "--no-record"),
                           "convert")  # DST exists now
    assert refused["error"]["code"].startswith("E-DEST")
    missing = one_document(run_cli("--to", "vllm", tmp_path / "nope", tmp_path / "o", "--json"), "convert")
    assert missing["error"]["code"] == "E-SRC-MISSING"


def test_validate_json(example_dir: Path, sample):
    one_document(run_cli("validate", example_dir, "--json"), "validate")
    failed = one_document(run_cli("validate", sample("h4-missing-lm_head"), "--json"), "validate")
    assert failed["counts"]["error"] >= 1 and failed["findings"]  # the report, in the same one document
    assert failed["error"]["code"] == next(f["code"] for f in failed["findings"] if f["severity"] == "error")


def test_registry_json(example_dir: Path, tmp_path: Path):
    registry = tmp_path / "reg.db"
    added = one_document(run_cli("registry", "add", example_dir, "--registry", registry, "--json"), "registry add")
    drafter_id = added["drafter_id"]
    listed = one_document(run_cli("registry", "list", "--registry", registry, "--json"), "registry list")
    assert [r["drafter_id"] for r in listed["records"]] == [drafter_id]
    shown = one_document(run_cli("registry", "show", drafter_id[:8], "--registry", registry, "--json"),
                         "registry show")
    assert shown["record"] == listed["records"][0]
    one_document(run_cli("registry", "lineage", drafter_id, "--registry", registry, "--json"), "registry lineage")
    removed = one_document(run_cli("registry", "remove", drafter_id, "--registry", registry, "--json"),
                           "registry remove")
    assert removed["removed"] == drafter_id
    for argv, command in ((["registry", "show", drafter_id], "registry show"),
                          (["registry", "lineage", drafter_id], "registry lineage"),
                          (["registry", "remove", drafter_id], "registry remove"),
                          (["registry", "add", tmp_path / "nope"], "registry add")):
        gone = one_document(run_cli(*argv, "--registry", registry, "--json"), command)
        assert gone["error"]["code"].startswith("E-")
    not_a_db = tmp_path / "bad.db"
    not_a_db.write_text("not SQLite")
    one_document(run_cli("registry", "list", "--registry", not_a_db, "--json"), "registry list")


def test_publish_json(example_dir: Path, sample, tmp_path: Path):
    planned = one_document(run_cli("publish", example_dir, "org/drafter", "--dry-run", "--json"), "publish")
    assert planned["dry_run"] is True and planned["card"]
    refused = one_document(run_cli("publish", sample("h4-missing-lm_head"), "org/drafter", "--dry-run", "--json"),
                           "publish")
    assert refused["validation"]["counts"]["error"] >= 1  # the findings travel in the one document
    assert refused["error"]["code"] == refused["validation"]["findings"][0]["code"]


# ------------------------------------------------------------------ inspect shows what is on disk

def test_inspect_shows_stored_names_and_config_as_stored(sample):
    src = sample("specforge-sglang")
    doc = one_document(run_cli("inspect", src, "--json"), "inspect")
    stored = json.loads((src / "config.json").read_text())
    assert doc["config"] == stored
    assert any(t["name"].startswith("midlayer.") for t in doc["tensors"])  # SpecForge's names, as in the file
    assert not any(name.startswith("midlayer.") for name in doc["drafter"]["tensors"])  # canonical ones
    assert doc["drafter"]["layout"] == doc["layout"] == "sglang"


def _truncated(src: Path) -> None:
    weights = src / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])


def _bad_json(src: Path) -> None:
    (src / "config.json").write_text('{"architectures": ["Eagle3Speculator"],')


def _unknown_layout(src: Path) -> None:
    (src / "config.json").write_text(json.dumps({"architectures": ["SomethingElse"], "hidden_size": 64}))


@pytest.mark.parametrize("breaks, code", [(_truncated, "E-FILE-TRUNCATED"), (_bad_json, "E-CONFIG-JSON"),
                                          (_unknown_layout, "E-LAYOUT-UNKNOWN")])
def test_inspect_shows_a_broken_checkpoint(breaks, code: str, example_dir: Path):
    names = {t["name"] for t in json.loads(run_cli("inspect", example_dir, "--json").stdout)["tensors"]}
    breaks(example_dir)
    result = run_cli("inspect", example_dir, "--json")
    doc = one_document(result, "inspect")
    assert result.exit_code == 1 and doc["ok"] is False and doc["error"]["code"] == code
    assert code in {f["code"] for f in doc["findings"] if f["severity"] == "error"}
    assert {t["name"] for t in doc["tensors"]} == names  # every stored tensor, even from a cut file
    if breaks is _truncated:
        assert [t["name"] for t in doc["tensors"] if not t["complete"]]
        assert doc["config"]["architectures"] == ["Eagle3Speculator"]
    if breaks is _bad_json:
        assert doc["config"] is None
    if breaks is _unknown_layout:
        assert doc["config"] == {"architectures": ["SomethingElse"], "hidden_size": 64} and doc["layout"] is None
    human = run_cli("inspect", example_dir)
    assert human.exit_code == 1 and f"[{code}]" in human.stderr and len(human.stderr.splitlines()) == 1
    assert "fc.weight" in human.stdout and code in human.stdout  # the tensors and the findings, printed


def test_paths_in_messages_are_as_given(example_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    nested = Path("some") / "where" / "drafter"
    shutil.copytree(example_dir, nested)
    _bad_json(nested)
    result = run_cli("inspect", nested)
    assert f"{nested}/config.json" in result.stderr
    (nested / "config.json").unlink()
    result = run_cli("validate", nested, "--json")
    assert any(f"{nested}: no config.json" in f["message"] for f in json.loads(result.stdout)["findings"])


def test_an_interrupt_under_json_still_answers_one_document(tmp_path: Path):
    """Ctrl-C in the middle of a conversion (a real process, a ~175 MB drafter): one document, ok false."""
    import subprocess
    import time

    from hostile import subprocess_env
    from test_faults import PROCESS_LIMIT_S, big_drafter, cli, interrupt, sigint_delivered, write_speculators
    from test_writes import ATTEMPTS

    src = write_speculators(tmp_path / "src", big_drafter(7, "org/target"))
    out = tmp_path / "out"
    out.mkdir()

    def running(proc: subprocess.Popen) -> None:  # the writer's temp dir: well past argument parsing
        deadline = time.monotonic() + PROCESS_LIMIT_S
        while proc.poll() is None and not list(out.glob(".dst.tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.005)

    # A run the interrupt reached too late (the conversion had finished) proves nothing: it is run again.
    for attempt in range(ATTEMPTS):
        shutil.rmtree(out / "dst", ignore_errors=True)
        proc = subprocess.Popen(cli("--to", "sglang", str(src), str(out / "dst"), "--json", "--no-record"),
                                cwd=tmp_path, env=subprocess_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=sigint_delivered)
        stdout, stderr = interrupt(proc, running)
        if proc.returncode != 0:
            break
    assert proc.returncode == 130, f"exit {proc.returncode} in run {attempt + 1} (0: never interrupted): {stderr}"
    doc = json.loads(stdout)  # one document
    assert doc["ok"] is False and doc["error"]["code"] == "E-INTERRUPTED" and output_violations(doc) == []
