"""Every command that takes --engine accepts the same spellings (eagle3_convert/names.py): an engine (`vllm`)
or one of its runners (`vllm-v1`, `vllm-v2`). Until issue 20, `search --engine vllm` and `validate --engine
vllm-v1` were refused. Run with the real CLI on the shipped example and a registry holding a copy of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE, run_cli

SPELLINGS = ("speculators", "vllm", "vllm-v1", "vllm-v2", "sglang", "trtllm", "llamacpp", "mlx-vlm", "lmdeploy")
TARGET = "example-org/tiny-llama-target"  # the example's verifier
RUNNER_LABELS = {"vllm-v1": "vLLM (V1 runner)", "vllm-v2": "vLLM (V2 runner)"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example and a registry that records it, converted to vllm."""
    root = tmp_path_factory.mktemp("spellings")
    src = root / "example"
    shutil.copytree(EXAMPLE, src)
    registry = root / "registry.db"
    done = run_cli("--to", "vllm", "-q", "--registry", registry, src, root / "out")
    assert done.exit_code == 0, done.stderr
    return src, registry


def test_the_commands_offer_the_same_spellings() -> None:
    for command in (["validate"], ["search"]):
        shown = run_cli(*command, "--help").stdout
        assert "[" + "|".join(SPELLINGS) + "]" in shown, (command, shown)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_validate_accepts_every_spelling(spelling: str, recorded: tuple[Path, Path]) -> None:
    src, registry = recorded
    done = run_cli("validate", "--json", "--engine", spelling, "--registry", registry, src)
    assert done.exit_code in (0, 1), done.stderr  # 1: a finding; 2 would be a refused option
    engine = "vllm" if spelling.startswith("vllm") else spelling
    assert json.loads(done.stdout)["engines"] == [engine]


def test_validate_reads_a_runner_as_its_engine(recorded: tuple[Path, Path]) -> None:
    src, registry = recorded
    reports = {s: run_cli("validate", "--engine", s, "--registry", registry, src) for s in ("vllm", "vllm-v1", "vllm-v2")}
    assert len({(r.exit_code, r.stdout, r.stderr) for r in reports.values()}) == 1


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_search_accepts_every_spelling(spelling: str, recorded: tuple[Path, Path]) -> None:
    _, registry = recorded
    done = run_cli("search", "--json", "--target", TARGET, "--engine", spelling, "--registry", registry)
    assert done.exit_code == 0, done.stderr
    found = json.loads(done.stdout)
    runners = ["vllm-v1", "vllm-v2"] if spelling == "vllm" else [spelling]
    assert found["engines"] == runners
    [drafter] = found["drafters"]
    assert all(list(copy["serves"]) == runners for copy in drafter["copies"]), drafter["copies"]
    text = run_cli("search", "--target", TARGET, "--engine", spelling, "--registry", registry).stdout
    verbose = run_cli("search", "--verbose", "--target", TARGET, "--engine", spelling, "--registry", registry).stdout
    for runner, label in RUNNER_LABELS.items():  # one line per copy names the runners; --verbose, their labels
        assert (f" {runner}" in text) == (runner in runners), (runner, text)
        assert (label in verbose) == (runner in runners), (runner, verbose)
