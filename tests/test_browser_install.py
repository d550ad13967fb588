"""The browser tier's first use (tests/browser.py): on a machine without Chromium, `browser.ensure()` installs
Debian's package with apt-get as PostgreSQL's tier does (peer_venv.debian_package), and skips only when the package
index is unreachable, saying so; any other apt failure fails the tier. Run against a PATH that holds no Chromium
and a stand-in apt-get (a shell script that logs its arguments and answers as apt does), so the machine's own
packages are never touched. That a browser skip for any other reason fails the tier: tests/test_tier_policy.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import browser
import peer_venv
import pytest

APT_OFFLINE = ("Err:1 http://deb.debian.org/debian bookworm InRelease\n"
               "  Temporary failure in name resolution 'deb.debian.org'")


def fake_apt(bin_dir: Path, update: str, install: str) -> Path:
    """An apt-get on PATH that logs each call and runs `update` or `install` (sh) for them."""
    log = bin_dir / "apt.log"
    script = bin_dir / "apt-get"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\ncase "$1" in\n  update) {update} ;;\n  install) {install} ;;\n'
                      'esac\n')
    script.chmod(0o755)
    return log


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is one empty folder: no chromium, no chromium-browser; and the tests run as root would (apt-get is the
    stand-in, so running as anyone is safe)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert browser.find() is None
    return bin_dir


def test_an_unreachable_index_skips_with_the_reason(bare_path: Path):
    log = fake_apt(bare_path, f"echo \"{APT_OFFLINE}\" >&2; exit 100", "exit 1")
    with pytest.raises(pytest.skip.Exception) as skipped:
        browser.ensure()
    reason = str(skipped.value)
    assert reason.startswith(f"{browser.TIER}: {peer_venv.INDEX_UNREACHABLE}") and "apt-get update" in reason
    assert "Temporary failure in name resolution" in reason
    assert log.read_text().splitlines() == ["update"]  # the install was attempted, from the index first


def test_any_other_apt_failure_fails_the_tier(bare_path: Path):
    log = fake_apt(bare_path, "exit 0", 'echo "E: Unable to locate package chromium" >&2; exit 100')
    with pytest.raises(pytest.fail.Exception) as failed:
        browser.ensure()
    assert "failed although the package index answered" in str(failed.value)
    assert "Unable to locate package chromium" in str(failed.value)
    assert log.read_text().splitlines() == ["update", "install -y --no-install-recommends chromium"]


def test_a_successful_install_is_found_and_used(bare_path: Path):
    chromium = bare_path / "chromium"
    log = fake_apt(bare_path, "exit 0", f"printf '#!/bin/sh\\n' > {chromium}; /bin/chmod 755 {chromium}")
    browser.ensure()
    assert browser.find() == str(chromium)
    assert log.read_text().splitlines() == ["update", "install -y --no-install-recommends chromium"]
    log.unlink()
    browser.ensure()  # installed: apt is not asked again
    assert not log.exists()



def test_without_root_it_fails_saying_what_to_install(bare_path: Path, monkeypatch: pytest.MonkeyPatch):
    log = fake_apt(bare_path, "exit 0", "exit 0")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.fail.Exception) as failed:
        browser.ensure()
    assert f"{browser.TIER}: Debian's `chromium` is not installed and there is no root apt-get" in str(failed.value)
    assert not log.exists()
