"""One identity for a drafter and one for its target (issue 33), told as a user lives it, through the real CLI,
the loopback Hub (tests/hub_server.py) and both registry backends.

The drafter is verify-tiny's second (tests/data/verify-tiny/drafter-1-3-6: trained on capture boundaries
[1, 3, 6] of its 8-layer target, not the engines' default [2, 4, 5]; the target ships with its weights, so
`verify` runs). Its target is named every way a user names one: its
Hub repo id, its absolute path, a relative path from another working directory, a symlink, and its snapshot in
the Hugging Face cache. The story: convert with `--verifier ORG/NAME --target DIR`, convert the output to every
layout, convert the source again, publish, download, validate the repo, verify it, show the record. No command
may say a word against the record, and the registry ends with one record holding every copy. Then the same
story with one fact of the file changed: the first command that reads the changed file names the record.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from itertools import cycle
from pathlib import Path

import pytest
from conftest import DATA, edit_config, run_cli
from hub_server import HubServer

from eagle3_convert.registry.store import open_registry

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_identity_story_token"
TARGET_REPO = "eagle3-convert-tests/verify-tiny-target"  # the name the drafter's config gives its verifier
DRAFTER_REPO = "test-user/verify-tiny-drafter"
TRAINED = [1, 3, 6]  # verify-tiny/README.md
LAYOUTS = ("sglang", "vllm", "modelopt", "speculators")  # the original EAGLE layout holds only the default layers
# What a command may never say about a file whose facts are the record's.
ALARMS = ("E-RECORD-CONFLICT", "E-CAPTURE-RECORD", "W-TARGET-UNTOLD", "E-RECORD-OTHER-WEIGHTS", "taken from")


def said(result) -> str:
    return result.stdout + result.stderr


def quiet_about_the_record(result) -> None:
    assert result.exit_code == 0, said(result)
    assert not [alarm for alarm in ALARMS if alarm in said(result)], said(result)


@pytest.fixture
def story(hub: HubServer, tmp_path: Path, registry_url, monkeypatch: pytest.MonkeyPatch):
    """The drafter (no sidecar), its target under five names, and the registry every command records in."""
    src = tmp_path / "drafter"
    shutil.copytree(DATA / "verify-tiny" / "drafter-1-3-6", src)
    target = tmp_path / "models" / "verify-tiny-target"
    shutil.copytree(DATA / "verify-tiny" / "target", target)
    link = tmp_path / "link-to-target"
    link.symlink_to(target, target_is_directory=True)
    hub.create_repo(TARGET_REPO)
    hub.commit(TARGET_REPO, {p.name: p.read_bytes() for p in sorted(target.iterdir())})
    from huggingface_hub import snapshot_download

    snapshot = snapshot_download(TARGET_REPO, endpoint=hub.url, token=TOKEN)
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    names = {"hub": TARGET_REPO, "absolute": str(target), "relative": os.path.relpath(target, elsewhere),
             "symlink": str(link), "snapshot": snapshot}
    assert Path(snapshot).is_dir() and "models--eagle3-convert-tests--verify-tiny-target" in snapshot

    def cli(*args, cwd: Path | None = None, hub_too: bool = False):
        extra = ["--endpoint", hub.url, "--token", TOKEN] if hub_too else []
        if cwd is not None:
            monkeypatch.chdir(cwd)
        try:
            return run_cli(*args, *extra, "--registry", registry_url)
        finally:
            monkeypatch.chdir(tmp_path)

    monkeypatch.chdir(tmp_path)
    return src, names, elsewhere, cli, registry_url


def test_every_name_of_the_target_is_one_target_and_the_record_follows_the_weights(story, tmp_path: Path):
    src, names, elsewhere, cli, registry = story
    spec = tmp_path / "as-speculators"
    first = cli("--to", "speculators", "--verifier", TARGET_REPO, "--target", names["absolute"], src, spec)
    quiet_about_the_record(first)
    # every layout, each conversion naming the target another way (the relative path from another directory)
    outputs = {"speculators": spec}
    for layout, how in zip(LAYOUTS, cycle(names)):
        out = tmp_path / f"as-{layout}-{how}"
        where = elsewhere if how == "relative" else None
        result = cli("--to", layout, "--target", names[how], spec.resolve() if where else spec, out.resolve(),
                     cwd=where, hub_too=how == "hub")
        quiet_about_the_record(result)
        outputs[layout] = out
    quiet_about_the_record(cli("--to", "vllm", "--target", names["relative"], src.resolve(),
                               (tmp_path / "again").resolve(), cwd=elsewhere))
    published = cli("publish", outputs["sglang"], DRAFTER_REPO, "--verifier", TARGET_REPO, hub_too=True)
    quiet_about_the_record(published)
    for how, name in names.items():  # downloaded and validated against each name of its target
        checked = cli("validate", DRAFTER_REPO, "--target", name, hub_too=True,
                      cwd=elsewhere if how == "relative" else None)
        quiet_about_the_record(checked)
        assert "OK: 0 errors, 0 warnings" in checked.stdout, (how, checked.stdout)
    measured = cli("verify", DRAFTER_REPO, "--target-model", names["absolute"], "--prompts",
                   DATA / "verify-tiny" / "prompts.txt", "-k", "2", "--max-new-tokens", "4", "--threads", "1",
                   "--json", hub_too=True)
    quiet_about_the_record(measured)

    with open_registry(registry) as store:
        (record,) = store.list()  # one drafter: every copy, every name of its target
        assert record.capture_boundaries == TRAINED
        assert record.target.known_as(TARGET_REPO) and record.target.known_as(str(names["absolute"]))
        assert store.acceptance(record.drafter_id)
    copies = {location.uri for location in record.locations}
    assert {str(p.resolve()) for p in outputs.values()} | {str(src.resolve())} <= copies
    assert any(uri.startswith(f"hf://{DRAFTER_REPO}@") for uri in copies)
    for how, name in names.items():  # every name finds it
        listed = cli("registry", "list", "--target", name, "--json", cwd=elsewhere if how == "relative" else None)
        assert [r["drafter_id"] for r in json.loads(listed.stdout)["records"]] == [record.drafter_id], how
    shown = cli("registry", "show", record.drafter_id[:12])
    assert TARGET_REPO in shown.stdout and str(names["absolute"]) in shown.stdout


def _ids_plus_one(config: dict) -> None:
    config["eagle_aux_hidden_state_layer_ids"] = [i + 1 for i in config["eagle_aux_hidden_state_layer_ids"]]


def _ids_minus_one(config: dict) -> None:
    config["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in config["eagle_aux_hidden_state_layer_ids"]]


def _ids_deleted(config: dict) -> None:  # the engines' default on 8 layers is [2, 4, 5]: not the trained ones
    del config["eagle_aux_hidden_state_layer_ids"]


def _other_norm_flag(config: dict) -> None:  # every engine reads it, and no tensor shape tells
    config["norm_before_residual"] = not config.get("norm_before_residual", False)


@pytest.mark.parametrize("change, code", [(_ids_plus_one, "E-CAPTURE-RECORD"), (_ids_minus_one, "E-CAPTURE-RECORD"),
                                          (_ids_deleted, "E-CAPTURE-RECORD"), (_other_norm_flag, "E-RECORD-CONFLICT")])
def test_a_changed_copy_fails_at_the_first_command_that_reads_it(story, tmp_path: Path, change, code):
    """An ordinary copy (no sidecar, another path) with one fact changed: found by its weights, it names the record."""
    src, names, _, cli, _ = story
    spec = tmp_path / "as-speculators"
    quiet_about_the_record(cli("--to", "speculators", "--verifier", TARGET_REPO, "--target", names["absolute"],
                               src, spec))
    edited = tmp_path / "downloaded-elsewhere"
    shutil.copytree(spec, edited)
    (edited / "eagle3-convert.json").unlink()
    edit_config(edited, change)
    for command in (("validate", edited), ("inspect", edited)):
        result = cli(*command)
        assert code in said(result) and "the registry's record of drafter" in said(result), (command, said(result))
    converted = cli("--to", "sglang", edited, tmp_path / "out")
    if change is _ids_deleted:  # a config that lost its ids (as SpecForge's export does): the record restores them
        assert converted.exit_code == 0 and "capture layers [1, 3, 6] taken from the registry's record" in said(
            converted), said(converted)
    else:
        assert converted.exit_code == 1 and code in converted.stderr and "the registry's record" in converted.stderr
        assert not (tmp_path / "out").exists()


def test_another_target_of_other_facts_is_named_against_the_record(story, tmp_path: Path):
    src, names, _, cli, _ = story
    quiet_about_the_record(cli("--to", "speculators", "--verifier", TARGET_REPO, "--target", names["absolute"],
                               src, tmp_path / "spec"))
    other = tmp_path / "other-target"
    shutil.copytree(DATA / "verify-tiny" / "target", other)
    edit_config(other, lambda c: c.update(num_hidden_layers=c["num_hidden_layers"] + 2))
    result = cli("validate", src, "--target", other)
    assert result.exit_code == 1 and "E-RECORD-CONFLICT" in said(result) and "depth" in said(result)
    refused = cli("--to", "vllm", "--target", other, src, tmp_path / "out")
    assert refused.exit_code == 1 and "E-RECORD-CONFLICT" in refused.stderr and not (tmp_path / "out").exists()


def test_the_issue_s_own_commands_give_no_error(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Issue 33's report, command for command: `--to vllm --target DIR` (the drafter's config names its target
    `targets/llama-tiny`), `publish OUT me/tiny --verifier bars-org/llama-tiny`, `validate me/tiny --target DIR`
    failed with E-RECORD-CONFLICT on the tool's own publication. Names that no fact ties (the publish names a repo the
    record never saw) are a warning with the command that ties them; once run, nothing is said."""
    monkeypatch.chdir(tmp_path)
    registry = tmp_path / "registry.db"
    src, target = tmp_path / "src", tmp_path / "models" / "llama-tiny"
    shutil.copytree(DATA / "speculators-trained" / "checkpoint", src)
    shutil.copytree(DATA / "targets" / "llama-tiny", target)
    hub_args = ["--endpoint", hub.url, "--token", TOKEN, "--registry", registry]
    assert run_cli("--to", "vllm", "--target", target, src, tmp_path / "out", "--registry", registry).exit_code == 0
    published = run_cli("publish", tmp_path / "out", "me/tiny", "--verifier", "bars-org/llama-tiny", *hub_args)
    assert published.exit_code == 0, said(published)
    checked = run_cli("validate", "me/tiny", "--target", target, *hub_args)
    assert checked.exit_code == 0 and not re.search(r"\bE-[A-Z]", said(checked)), said(checked)
    if "W-TARGET-UNTOLD" in said(checked):  # the warning's own way out ties the names; then nothing is said
        hint = next(line for line in said(checked).splitlines() if "registry add" in line)
        command = hint[hint.index("`eagle3-convert ") + len("`eagle3-convert "):hint.rindex("`")]
        assert run_cli(*shlex.split(command), *hub_args).exit_code == 0, command
        again = run_cli("validate", "me/tiny", "--target", target, *hub_args)
        assert again.exit_code == 0 and "W-TARGET-UNTOLD" not in said(again), said(again)
