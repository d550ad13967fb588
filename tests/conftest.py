"""Shared fixtures: the shipped example drafter, copies of peer samples, and the CLI runner."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import browser
import peer_venv
import pytest
from click.testing import CliRunner

from eagle3_convert.cli import main
from eagle3_convert.registry.store import open_registry
from eagle3_convert.safetensors_io import read_tensor_table, tensor_sha256

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
EXAMPLE = REPO / "examples" / "tiny-llama-speculators"


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """Run the real CLI in-process; a traceback would surface as an uncaught exception here."""
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


@pytest.fixture(autouse=True, scope="session")
def private_registry(tmp_path_factory: pytest.TempPathFactory):
    """`convert` records by default: the tests (and the CLIs they start) share a registry of their own,
    set before any fixture of a narrower scope converts, and never touch the user's (nor `registry site`'s verdict
    cache)."""
    path = tmp_path_factory.mktemp("registry") / "registry.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EAGLE3_CONVERT_REGISTRY", str(path))
        patch.setenv("EAGLE3_SITE_CACHE", str(path.parent / "site-verdicts.db"))
        yield path


@pytest.fixture(autouse=True)
def registry_of_this_test(private_registry, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test records into a registry of its own (fixtures of a wider scope use the session's): a drafter is its
    weights (issue 21), so two tests that build the same sample weights with other capture layers would otherwise
    leave the next one a record that contradicts its config, and its result would depend on the order."""
    path = tmp_path_factory.mktemp("test-registry") / "registry.db"
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(path))
    return path


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "example-speculators"
    shutil.copytree(EXAMPLE, dest)
    return dest


def copy_sample(tmp: Path, name: str) -> Path:
    """A writable copy of the checkpoint of tests/data/<name>, under `tmp`."""
    dest = tmp / name
    shutil.copytree(DATA / name / "checkpoint", dest)
    return dest


@pytest.fixture
def sample(tmp_path: Path):
    """copy_sample into this test's tmp_path."""
    return lambda name: copy_sample(tmp_path, name)


def edit_config(path: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    """`path`/config.json rewritten with `change` applied to it."""
    config = json.loads((path / "config.json").read_text())
    change(config)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def without_nested_ids(src: Path) -> Path:
    """A SpecForge export as `specforge export` writes it when the ids were set only in the run config."""
    return edit_config(src, lambda config: config["eagle_config"].pop("eagle_aux_hidden_state_layer_ids"))


def nothing_written(parent: Path, name: str) -> bool:
    """Neither DST nor a temp dir of its writer beside it."""
    return not (parent / name).exists() and not list(parent.glob(f".{name}.*"))


def serve_line(stdout: str, label: str) -> str:
    """The one line of `stdout` that starts with `label`."""
    lines = [line for line in stdout.splitlines() if line.strip().startswith(label)]
    assert len(lines) == 1, stdout
    return lines[0]


def registry_records(registry: Path | str) -> list[dict]:
    """Every record of a registry, as JSON."""
    with open_registry(registry) as store:
        return [r.model_dump(mode="json") for r in store.list()]


def tensor_hashes(path: Path) -> dict[str, str]:
    """sha256 of each tensor's raw bytes, by stored name."""
    tensors, _ = read_tensor_table(path)
    return {name: tensor_sha256(ref) for name, ref in tensors.items()}


def tree_digest(path: Path) -> dict[str, str]:
    """Every file under `path` with its sha256, to prove a source was not touched."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def without_root_powers() -> list[str]:
    """A command prefix under which permission bits apply, even to root (CI runs as root)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    pytest.skip("running as root without setpriv: permission bits cannot be enforced")


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A loopback Hub (tests/hub_server.py) that the huggingface_hub client in this process, and only it, talks to."""
    from hub_server import isolated_hub

    with isolated_hub(monkeypatch, tmp_path / "hf-home") as server:
        yield server


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server for the session (tests/pg_server.py); skipped, saying why, where there is none."""
    import pg_server as pg

    why = pg.why_unavailable()
    if why:
        pytest.skip(f"{POSTGRESQL_TIER}: {why}")  # a failure all the same (pytest_runtest_makereport)
    pg.ensure_server_binaries()
    server = pg.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A fresh, empty registry on each backend: an SQLite file path, or a postgresql:// URL of a new database."""
    if request.param == "sqlite":
        return tmp_path / "reg" / "registry.db"
    return request.getfixturevalue("pg_server").new_database()


# The tiers that run real peer code or servers. Each builds what it needs on first run (cached after); a tier may skip
# only when the package index cannot be reached (peer_venv.unavailable). Any other skip of a tier test is a failure
# here: a green summary must mean the tier ran.
TIER_MARKERS = ("interop", "engines", "llamacpp")
POSTGRESQL_TIER = "PostgreSQL registry tests"  # how the pg_server fixture's skips begin (it is reached dynamically)
BROWSER_TIER = browser.TIER  # how browser.ensure()'s skips begin: Chromium, installed on first use like PostgreSQL
TIER_SKIPPED = "tier skipped (package index unreachable)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped:
        return
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    tier = next((name for name in TIER_MARKERS if item.get_closest_marker(name)), None)
    tier = tier or ("postgresql" if POSTGRESQL_TIER in reason else "browser" if BROWSER_TIER in reason else None)
    if tier is None:
        return
    if peer_venv.INDEX_UNREACHABLE in reason:
        report.tier_skipped = True
    else:
        report.outcome = "failed"
        report.longrepr = (f"the {tier} tier must run on every machine, and may skip only when the package index is "
                           f"unreachable; it skipped because: {reason}")


def pytest_report_teststatus(report, config):
    """Tier skips are counted apart in pytest's closing line, so a reader of the summary sees them."""
    if getattr(report, "tier_skipped", False):
        return TIER_SKIPPED, "s", "SKIPPED (package index unreachable)"
    return None


def pytest_terminal_summary(terminalreporter) -> None:
    for report in terminalreporter.stats.get(TIER_SKIPPED, []):
        reason = report.longrepr[2].removeprefix("Skipped: ")
        terminalreporter.write_line(f"TIER SKIPPED {report.nodeid}: {reason}")
    import pg_server as pg

    if pg.STATE:
        terminalreporter.write_line(f"PostgreSQL registry tests: server {pg.STATE['version']} (started in "
                                    f"{pg.STATE['startup_s']} s), {pg.STATE.get('databases', '0')} databases")
