"""Model cards (issue 12, Deliver 9): `base_model` names a Hub repo id or nothing, never a local
path; the card (and the published sidecar) use the registry's facts about the drafter when the
checkpoint itself does not state them. Against the loopback Hub of tests/hub_server.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, snapshot_download

from conftest import DATA, run_cli
from hub_server import HubServer

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_card_test_token"
REPO = "test-user/card-drafter"
TARGET_REPO = "org/llama-target"


def _dry_run_card(hub: HubServer, src: Path, registry: Path, *extra: str) -> tuple[ModelCard, dict]:
    result = run_cli("publish", src, REPO, "--endpoint", hub.url, "--token", TOKEN, "--registry", registry,
                     "--dry-run", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    return ModelCard(summary["card"]), summary


def _front_matter(card: ModelCard) -> str:
    return str(card).split("\n---\n", 1)[0]


@pytest.mark.parametrize("spelling", ["targets/llama-tiny", "./targets/llama-tiny", "{abs}"])
def test_a_local_target_path_is_never_base_model(hub: HubServer, sample, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, spelling: str):
    src = sample("specforge-sglang")  # names no target of its own
    work = tmp_path / "work"
    shutil.copytree(DATA / "targets" / "llama-tiny", work / "targets" / "llama-tiny")
    monkeypatch.chdir(work)
    target = spelling.format(abs=work / "targets" / "llama-tiny")
    card, _ = _dry_run_card(hub, src, tmp_path / "registry.db", "--target", target)
    assert card.data.base_model is None
    assert "base_model" not in _front_matter(card)
    assert "targets/llama-tiny" not in card.text and str(work) not in card.text  # no local path, no Hub link to one
    assert "| layers | `8` |" in card.text  # what the local config said is still shown


def test_a_local_target_recorded_in_the_sidecar_is_never_base_model(hub: HubServer, sample, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    """Converted with a local --target; published later from elsewhere, where that path means nothing."""
    src = sample("specforge-sglang")
    work = tmp_path / "work"
    shutil.copytree(DATA / "targets" / "llama-tiny", work / "models" / "llama-tiny")
    monkeypatch.chdir(work)
    assert run_cli("--to", "vllm", "--target", "models/llama-tiny", "--no-registry", src,
                   tmp_path / "vllm").exit_code == 0
    monkeypatch.chdir(tmp_path)  # models/llama-tiny does not exist here: it still is no repo id
    card, _ = _dry_run_card(hub, tmp_path / "vllm", tmp_path / "registry.db")
    assert card.data.base_model is None and "models/llama-tiny" not in card.text


def test_the_card_uses_the_registry_s_facts(hub: HubServer, sample, tmp_path: Path):
    target = json.loads((DATA / "targets" / "llama-tiny" / "config.json").read_text())
    hub.create_repo(TARGET_REPO)
    hub.commit(TARGET_REPO, {"config.json": json.dumps(target).encode()})
    src = sample("specforge-sglang")  # SpecForge's export names no target: the registry knows it
    registry = tmp_path / "registry.db"
    added = run_cli("registry", "add", src, "--target", TARGET_REPO, "--endpoint", hub.url,
                    "--trained-with", "SpecForge 0.2, sharegpt", "--registry", registry, "--json")
    assert added.exit_code == 0, added.stderr
    record_id = json.loads(added.stdout)["drafter_id"]

    card, summary = _dry_run_card(hub, src, registry)
    assert card.data.base_model == TARGET_REPO
    assert "Not recorded" not in card.text and f"| model | `{TARGET_REPO}` |" in card.text
    assert "| layers | `8` |" in card.text and "SpecForge 0.2, sharegpt" in card.text
    assert f"registry record of drafter {record_id[:12]}" in card.text  # says where the facts come from
    assert f"--model-path {TARGET_REPO}" in card.text  # the serve command names the target, no placeholder

    # The real upload: the published sidecar states the same target as the card.
    published = run_cli("publish", src, REPO, "--endpoint", hub.url, "--token", TOKEN, "--registry", registry)
    assert published.exit_code == 0, published.stderr
    snapshot = Path(snapshot_download(REPO, endpoint=hub.url, token=TOKEN, cache_dir=tmp_path / "dl"))
    facts = json.loads((snapshot / "eagle3-convert.json").read_text())
    assert facts["target"]["name_or_path"] == TARGET_REPO and facts["from_registry"]["drafter_id"] == record_id

    # --no-registry: the card says only what the checkpoint says
    plain, _ = _dry_run_card(hub, src, registry, "--no-registry")
    assert plain.data.base_model is None and "registry record" not in plain.text


def test_the_card_says_which_layers_the_training_captured_when_the_config_lost_them(hub: HubServer, sample,
                                                                                    tmp_path: Path):
    src = sample("specforge-sglang")
    cfg = json.loads((src / "config.json").read_text())
    cfg["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")  # as SpecForge's export drops them
    (src / "config.json").write_text(json.dumps(cfg))
    registry = tmp_path / "registry.db"
    assert run_cli("registry", "add", src, "--capture-layers", "1,3,4", "--convention", "specforge",
                   "--registry", registry).exit_code == 0
    card, summary = _dry_run_card(hub, src, registry)
    assert "**The training captured boundaries `[2, 4, 5]`**" in card.text and "SGLang `[1, 3, 4]`" in card.text
    assert any("the capture layers the training used" in note for note in summary["notes"])
    plain, _ = _dry_run_card(hub, src, registry, "--no-registry")
    assert "training captured" not in plain.text
