"""Source resolution (issue 12, Deliver 7): a local-looking SRC or --target never reaches the Hub; a missing
repo-id-shaped one says both readings; an unreachable Hub fails fast, in one line, without retry noise.

Against the real huggingface_hub client and the in-process test Hub (tests/hub_server.py); an unreachable
Hub is a closed port on 127.0.0.1. Nothing here reaches the network.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXAMPLE, run_cli
from hub_server import HubServer, isolate_hf_client, isolated_hub

TIME_BOUND_S = 10  # the tool aims at < 3 s; the assert is generous so a loaded CI machine does not flake
REPO = "org/drafter"
TARGET_REPO = "org/target"
TARGET_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 6,
                 "hidden_size": 64, "vocab_size": 512}


def closed_port_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with isolated_hub(monkeypatch, tmp_path / "hf-home") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)  # a command naming no --endpoint asks this Hub
        yield server


def seed(hub: HubServer) -> None:
    hub.create_repo(REPO)
    hub.commit(REPO, {name: (EXAMPLE / name).read_bytes() for name in ("config.json", "model.safetensors")})
    hub.create_repo(TARGET_REPO)
    hub.commit(TARGET_REPO, {"config.json": json.dumps(TARGET_CONFIG).encode()})


def one_line(result) -> str:
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("spec", ["./scratch/nope", "scratch/nope/", "scratch/deeper/nope", "/nonexistent/drafter",
                                  "~/eagle3-convert-no-such-drafter", "nope", "../nope/drafter"])
def test_a_local_looking_src_is_never_sent_to_the_hub(spec: str, hub: HubServer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    for argv in (["inspect", spec], ["validate", spec], ["--to", "sglang", spec, "out", "--no-record"],
                 ["registry", "add", spec, "--registry", tmp_path / "reg.db"]):
        result = run_cli(*argv)
        line = one_line(result)
        assert result.exit_code == 1 and line.startswith(f"error: {spec}: no such directory"), line
        assert "[E-SRC-MISSING]" in line and "as a Hub repo id" not in line, line  # (beside an existing folder, its name)
    target = run_cli("validate", EXAMPLE, "--target", spec)
    assert target.exit_code == 1 and f"target {spec}: no such config file or directory" in one_line(target)
    assert "[E-TARGET-MISSING]" in target.stderr
    assert hub.requests == []  # not one request, not even a probe


def test_an_existing_directory_shaped_like_a_repo_id_is_read_locally(hub: HubServer, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    seed(hub)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLE, tmp_path / "org" / "drafter")
    (tmp_path / "org" / "target").mkdir()
    (tmp_path / "org" / "target" / "config.json").write_text(json.dumps({**TARGET_CONFIG, "num_hidden_layers": 8}))
    result = run_cli("inspect", REPO, "--target", TARGET_REPO, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["source"] == str((tmp_path / "org" / "drafter").resolve())
    assert doc["drafter"]["capture"]["target_layers"] == 8  # the local target, not the Hub's 6-layer one
    assert hub.requests == []


def test_a_missing_repo_shaped_src_says_both_readings(hub: HubServer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("inspect", "scratch/nope")
    line = one_line(result)
    assert result.exit_code == 1
    assert line.startswith("error: scratch/nope: no such directory; as a Hub repo id: repository not found"), line
    assert hub.find_requests("/api/models/scratch/nope")  # the Hub really was asked
    doc = json.loads(run_cli("inspect", "scratch/nope", "--json").stdout)
    assert doc["ok"] is False and doc["error"]["message"].startswith("scratch/nope: no such directory; as a Hub")

    target = run_cli("validate", EXAMPLE, "--target", "scratch/nope")
    assert one_line(target).startswith(
        "error: target scratch/nope: no such config file or directory; as a Hub repo id: "), target.stderr


def test_a_repo_id_still_downloads(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    seed(hub)
    monkeypatch.chdir(tmp_path)
    result = run_cli("inspect", REPO, "--target", TARGET_REPO, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["source"].startswith(f"hf://{REPO}@") and doc["drafter"]["capture"]["target_layers"] == 6


def _unreachable_commands(dead: str, out: Path) -> list[list[str]]:
    return [
        ["inspect", str(EXAMPLE), "--target", TARGET_REPO, "--endpoint", dead],
        ["validate", str(EXAMPLE), "--target", TARGET_REPO, "--endpoint", dead],
        ["inspect", REPO, "--endpoint", dead],
        ["--to", "sglang", REPO, str(out), "--endpoint", dead, "--no-record"],
        ["--to", "sglang", str(EXAMPLE), str(out), "--target", TARGET_REPO, "--endpoint", dead, "--no-record"],
    ]


def test_an_unreachable_hub_fails_fast_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    isolate_hf_client(monkeypatch, tmp_path / "hf-home")
    dead = closed_port_endpoint()
    for argv in _unreachable_commands(dead, tmp_path / "out"):
        start = time.monotonic()
        result = run_cli(*argv)
        elapsed = time.monotonic() - start
        line = one_line(result)
        assert result.exit_code == 1 and "[E-HUB-OFFLINE]" in line, line
        assert f"the Hub at {dead} is unreachable" in line and "HF_HUB_OFFLINE" not in line
        assert "--endpoint" in line.split(" — hint: ")[1]
        assert elapsed < TIME_BOUND_S, f"{argv}: {elapsed:.1f} s"
    assert not (tmp_path / "out").exists()


def test_an_unreachable_hub_in_a_real_process_prints_no_retry_noise(tmp_path: Path):
    """huggingface_hub logs its retries to the process's stderr: only a real process shows them."""
    dead = closed_port_endpoint()
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_CACHE": str(tmp_path / "hf-home" / "hub"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    for name in ("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        env.pop(name, None)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "eagle3_convert", "inspect", str(EXAMPLE), "--target", TARGET_REPO,
                           "--endpoint", dead], env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert "[E-HUB-OFFLINE]" in line and "Retry" not in proc.stderr
    assert elapsed < TIME_BOUND_S + 5  # a process also pays the interpreter's start-up


def test_an_unreachable_hub_still_serves_what_is_cached(hub: HubServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    seed(hub)
    monkeypatch.chdir(tmp_path)
    online = run_cli("inspect", REPO, "--target", TARGET_REPO, "--json")
    assert online.exit_code == 0, online.stderr
    dead = closed_port_endpoint()
    offline = run_cli("inspect", REPO, "--target", TARGET_REPO, "--endpoint", dead, "--json")
    assert offline.exit_code == 0, offline.stderr
    assert json.loads(offline.stdout)["source"] == json.loads(online.stdout)["source"]  # the same cached commit


def test_hf_hub_offline_is_named_only_when_it_is_set(hub: HubServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_cli("inspect", REPO)
    line = one_line(result)
    assert "[E-HUB-OFFLINE]" in line and "HF_HUB_OFFLINE is set" in line and "unset HF_HUB_OFFLINE" in line
    assert hub.requests == []


def test_source_resolution_does_not_import_the_pipeline():
    """sources.py (resolution) sits below convert.py, publish.py above it: no import cycle between them."""
    code = ("import sys, eagle3_convert.sources as s; assert 'eagle3_convert.convert' not in sys.modules; "
            "import eagle3_convert.publish")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_download_nesting_the_checkpoint_one_level_down_is_named_in_the_hint(tmp_path: Path):
    """A folder without config.json whose subfolder has one (an unpacked archive, a `checkpoint/` folder): every
    command names that subfolder, and the hint's folder is one the command then accepts."""
    shutil.copytree(EXAMPLE, tmp_path / "download" / "checkpoint")
    (tmp_path / "download" / "README.md").write_text("a drafter\n")
    nested = tmp_path / "download" / "checkpoint"
    for argv in (["inspect", tmp_path / "download"], ["validate", tmp_path / "download"],
                 ["--to", "sglang", tmp_path / "download", tmp_path / "out", "--no-record"]):
        result = run_cli(*argv)
        line = result.stderr.splitlines()[-1]
        assert result.exit_code == 1 and "[E-SRC-MISSING]" in line, result.stderr
        assert line.endswith(f"hint: {nested} holds a config.json: pass that folder"), line
        assert not (tmp_path / "out").exists()
    assert run_cli("--to", "sglang", nested, tmp_path / "out", "--no-record").exit_code == 0
    (tmp_path / "download" / "other").mkdir()
    shutil.copy(EXAMPLE / "config.json", tmp_path / "download" / "other" / "config.json")
    two = run_cli("inspect", tmp_path / "download").stderr.splitlines()[-1]
    assert two.endswith("hint: these subfolders hold a config.json: checkpoint, other; pass the drafter's folder"), two
