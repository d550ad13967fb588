"""Reading our own Hub publication records its lineage (issue 21): a published sidecar names the uploader's
local copies as `local:NAME` (their paths stay private) and the repo as `hf://ORG/NAME`; reading it back
(registry add, convert from the Hub) once printed "lineage entry 0 ... was not recorded: a local location must
be an absolute path". Against the loopback Hub of tests/hub_server.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from hub_server import HubServer

from eagle3_convert.registry.store import open_registry

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_lineage_test_token"
REPO = "test-user/tiny-drafter"


@pytest.fixture
def published(hub: HubServer, example_dir: Path, tmp_path: Path) -> str:
    """A converted copy (lineage: example -> as-sglang) published from the uploader's registry; its commit."""
    local = tmp_path / "as-sglang"
    uploader = tmp_path / "uploader.db"
    assert run_cli("--to", "sglang", example_dir, local, "--registry", uploader).exit_code == 0
    result = run_cli("publish", local, REPO, "--endpoint", hub.url, "--token", TOKEN, "--registry", uploader, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["commit"]


def lineage_of(registry: Path) -> list[tuple[str, str]]:
    with open_registry(registry) as store:
        (record,) = store.list()
        return sorted((e.source.uri, e.dest.uri) for e in record.lineage)


@pytest.mark.parametrize("how", ["registry add", "convert"])
def test_reading_our_publication_records_its_lineage(hub: HubServer, published: str, tmp_path: Path, how: str):
    reader = tmp_path / "reader.db"  # a colleague's registry: it never saw the uploader's copies
    if how == "registry add":
        result = run_cli("registry", "add", REPO, "--endpoint", hub.url, "--token", TOKEN, "--registry", reader)
    else:
        result = run_cli("--to", "vllm", REPO, tmp_path / "mine", "--endpoint", hub.url, "--token", TOKEN,
                         "--registry", reader)
    assert result.exit_code == 0, result.stderr
    assert "was not recorded" not in result.stdout + result.stderr
    edges = lineage_of(reader)
    # The uploader's conversion: its source named as published (no path of theirs), its output the Hub copy.
    assert ("local:example-speculators", f"hf://{REPO}") in edges
    if how == "convert":
        assert (f"hf://{REPO}@{published}", str((tmp_path / "mine").resolve())) in edges
    with open_registry(reader) as store:
        (record,) = store.list()
        assert f"hf://{REPO}@{published}" in {loc.uri for loc in record.locations}
        assert all(loc.kind != "elsewhere" for loc in record.locations)  # another machine's copy is no location


def test_another_machines_copy_is_a_lineage_end_never_a_location():
    from eagle3_convert.registry.models import LineageEdge, Location

    edge = LineageEdge(source={"layout": "speculators", "uri": "local:example-speculators"},
                       dest={"layout": "sglang", "uri": f"hf://{REPO}"}, tool="eagle3-convert")
    assert edge.source.kind == "elsewhere" and edge.dest.kind == "hub"
    with pytest.raises(ValueError, match="names a copy on the machine that published it"):
        Location(layout="sglang", uri="local:as-sglang")
    with pytest.raises(ValueError, match="not local:NAME"):
        LineageEdge(source={"layout": "sglang", "uri": "local:a/b"}, dest={"layout": "sglang", "uri": "/x"},
                    tool="eagle3-convert")
