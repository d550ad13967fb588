"""A Hub token given to `publish` is used, and then found nowhere: not in stdout or stderr, not in any
file the command writes (registry rows, sidecar, caches, logs), not in what it uploads.

`publish` runs as a real process against the loopback Hub of tests/hub_server.py, so the only ways
the token could surface are the ones a user would see.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest

import hub_server
from eagle3_convert.cli import main
from hostile import EXAMPLE, isolated_env


def require_publish() -> None:
    assert isinstance(main, click.Group) and "publish" in main.commands, "no command eagle3-convert publish"


def publish_env(work: Path, hub_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(isolated_env(work))
    env.update({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub_url, "HF_HUB_DISABLE_XET": "1",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    return env


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under `root` whose bytes contain `needle` (SQLite stores text rows as plain UTF-8)."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


def registry_dump(db: Path) -> str:
    if not db.is_file():
        return ""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return "\n".join(conn.iterdump())


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "src")
    return tmp_path


@pytest.mark.parametrize("via", ["option", "env"])
def test_token_is_used_and_never_revealed(work: Path, via: str):
    require_publish()
    token = "hf_" + secrets.token_hex(20)
    with hub_server.HubServer(token=token) as hub:
        env = publish_env(work, hub.url)
        argv = [sys.executable, "-m", "eagle3_convert", "publish", str(work / "src"), "test-user/secret-drafter",
                "--endpoint", hub.url]
        if via == "option":
            argv += ["--token", token]
        else:
            env["HF_TOKEN"] = token
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        # The token was really used: the upload needed it (the server refuses any other).
        assert hub.has_repo("test-user/secret-drafter")
        assert any(r.authorization == f"Bearer {token}" for r in hub.requests)
        uploaded = {name: hub.read_file("test-user/secret-drafter", name)
                    for name in hub.list_files("test-user/secret-drafter")}
    assert uploaded, "nothing was published"
    assert token not in proc.stdout + proc.stderr
    assert not files_holding(work, token.encode()), "the token was written to disk"
    assert token not in registry_dump(work / "state" / "registry.db")
    assert not [name for name, data in uploaded.items() if token.encode() in data], "the token was uploaded"
    assert "secret-drafter" in registry_dump(work / "state" / "registry.db"), "publish did not record the location"


def test_rejected_token_is_not_echoed(work: Path):
    """A 401 answer becomes one line with a hint, and that line does not quote the token back."""
    require_publish()
    token = "hf_" + secrets.token_hex(20)
    with hub_server.HubServer(token="hf_the_right_one") as hub:
        proc = subprocess.run(
            [sys.executable, "-m", "eagle3_convert", "publish", str(work / "src"), "test-user/secret-drafter",
             "--endpoint", hub.url, "--token", token],
            cwd=work, env=publish_env(work, hub.url), capture_output=True, text=True, timeout=300)
        assert any(r.authorization == f"Bearer {token}" for r in hub.requests), "the token never reached the Hub"
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert token not in proc.stdout + proc.stderr
    assert not files_holding(work, token.encode())


def test_dry_run_with_a_token_reveals_nothing(work: Path):
    require_publish()
    token = "hf_" + secrets.token_hex(20)
    with hub_server.HubServer(token=token) as hub:
        proc = subprocess.run(
            [sys.executable, "-m", "eagle3_convert", "publish", str(work / "src"), "test-user/secret-drafter",
             "--endpoint", hub.url, "--token", token, "--dry-run"],
            cwd=work, env=publish_env(work, hub.url), capture_output=True, text=True, timeout=300)
        assert hub.requests == [], "a dry run talked to the Hub"
    assert proc.returncode == 0, proc.stderr
    assert token not in proc.stdout + proc.stderr
    assert not files_holding(work, token.encode())
