"""Shared fixtures: the shipped example drafter, copies of peer samples, and the CLI runner."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle3_convert.cli import main
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
    set before any fixture of a narrower scope converts, and never touch the user's."""
    path = tmp_path_factory.mktemp("registry") / "registry.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EAGLE3_CONVERT_REGISTRY", str(path))
        yield path


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "example-speculators"
    shutil.copytree(EXAMPLE, dest)
    return dest


@pytest.fixture
def sample(tmp_path: Path):
    """A writable copy of a checkpoint from tests/data/<name>/checkpoint."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(DATA / name / "checkpoint", dest)
        return dest

    return copy


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


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server for the session (tests/pg_server.py); skipped, saying why, where there is none."""
    import pg_server as pg

    why = pg.why_unavailable()
    if why:
        pytest.skip(f"PostgreSQL registry tests: {why}")
    server = pg.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A fresh, empty registry on each backend: an SQLite file path, or a postgresql:// URL of a new database."""
    if request.param == "sqlite":
        return tmp_path / "reg" / "registry.db"
    return request.getfixturevalue("pg_server").new_database()


def pytest_terminal_summary(terminalreporter) -> None:
    import pg_server as pg

    if pg.STATE:
        terminalreporter.write_line(f"PostgreSQL registry tests: server {pg.STATE['version']} (started in "
                                    f"{pg.STATE['startup_s']} s), {pg.STATE.get('databases', '0')} databases")
