"""`registry site` (issue 37) from every kind of registry it reads: a PostgreSQL registry filled by the real CLI
(tests/pg_server.py's server), and the index `registry sync` builds from the loopback Hub (tests/hub_server.py),
written without `--hub` (the Hub copies listed, not judged) and with it (judged from config.json and the
safetensors headers read by HTTP Range, the weights never downloaded, the token never written).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import browser
from browser import chromium  # noqa: F401 (the module's browser, a fixture)
import pytest
from builders import DrafterSpec, build_drafter, write_target
from conftest import copy_sample, run_cli
from hub_server import HubServer, isolate_hf_client
from test_registry_site import FLEET, measured

from eagle3_convert.records import record_acceptance

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_site_secret_token_0123456789"
ORG = "site-org"
TARGET = "org/target-model"  # DrafterSpec's verifier; 8 layers, so the engines' defaults are [2, 4, 5]
CARD = f"---\nbase_model: {TARGET}\nlibrary_name: sglang\ntags:\n- eagle3\n---\n\n# a SpecForge export\n"
SPECFORGE, SPECULATORS = f"{ORG}/specforge-136", f"{ORG}/speculators-245"


def _site(out: Path, *args: str | Path) -> dict:
    result = run_cli("registry", "site", out, *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _page(out: Path, records: list[dict], uri_part: str) -> str:
    [record] = [r for r in records if any(uri_part in loc["uri"] for loc in r["locations"])]
    return (out / "drafters" / f"{record['drafter_id']}.html").read_text()


def _matrix(page: str) -> dict[str, list[str]]:
    """runner -> the verdicts of its rows in a drafter page's matrix (every copy, every run of releases)."""
    out: dict[str, list[str]] = {}
    runner = None
    for row in re.findall(r'<tr id="copy-\d+-[^"]+">.*?</tr>|<tr id="copy-\d+-[^"]+" class="first">.*?</tr>', page):
        head = re.search(r'<th rowspan="\d+">([^<]+)</th>', row)
        runner = head.group(1) if head else runner
        out.setdefault(runner, []).append(re.search(r'<td class="v v-[a-z]+">([^<]+)</td>', row).group(1))
    return out


def test_a_site_from_a_postgresql_registry(pg_server, tmp_path):
    """With a role that must give its password: the site names the registry by its URL, never the password."""
    import pg_server as pg

    registry = pg_server.new_database(owner=pg.PASSWORD_USER).replace("postgres@", f"{pg.PASSWORD_USER}:{pg.PASSWORD}@")
    spec, sg = copy_sample(tmp_path, "speculators-trained"), copy_sample(tmp_path, "specforge-sglang")
    assert run_cli("registry", "add", spec, "--trained-with", "on PostgreSQL", "--registry", registry).exit_code == 0
    assert run_cli("--to", "speculators", sg, tmp_path / "sg-speculators", "--verifier",
                   "meta-llama/Llama-3.1-8B-Instruct", "--registry", registry).exit_code == 0
    record_acceptance(str(spec), measured(0, 2.2, [0.7, 0.5, 0.3], [2, 4, 5]), registry=registry)
    out = tmp_path / "out"
    doc = _site(out, "--registry", registry, "--engine", FLEET)
    records = json.loads(run_cli("registry", "list", "--registry", registry, "--json").stdout)["records"]
    assert doc["drafters"] == len(records) == 2 and doc["copies_judged"] == 3
    index = (out / "index.html").read_text()
    assert all(f'data-value="{r["drafter_id"]}"' in index for r in records)
    page = _page(out, records, str(spec))
    assert "on PostgreSQL" in page and 'data-chart="per-position"' in page
    matrix = _matrix(page)  # newest releases first: vLLM serves the speculators config, SGLang refuses it
    assert matrix["vllm-v1"][0] == "as-trained" and matrix["sglang"][0] == "refuses", matrix
    assert f"postgresql://{pg.PASSWORD_USER}" in index
    for path in out.rglob("*"):
        assert path.is_dir() or pg.PASSWORD.encode() not in path.read_bytes(), path
    assert 'data-chart="lineage"' in _page(out, records, "sg-speculators")  # the conversion, as a graph


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The loopback Hub with a target and two drafters: a SpecForge export trained on layers (1, 3, 6), not the
    engines' defaults (its config.json says so in SGLang's ids), and a speculators one on the defaults."""
    isolate_hf_client(monkeypatch, tmp_path / "hf-home")
    with HubServer() as server:
        target = write_target(tmp_path / "target", DrafterSpec())
        server.create_repo(TARGET)
        server.commit(TARGET, {"config.json": (target / "config.json").read_bytes()})
        for repo, layout, bounds in ((SPECFORGE, "sglang", (1, 3, 6)), (SPECULATORS, "speculators", (2, 4, 5))):
            src = build_drafter(tmp_path / repo, layout, DrafterSpec(capture_boundaries=bounds, seed=len(repo)))
            server.create_repo(repo)
            server.commit(repo, {**{p.name: p.read_bytes() for p in src.iterdir() if p.is_file()},
                                 "README.md": CARD.encode()})
        yield server


def test_a_site_from_the_index_registry_sync_built(hub: HubServer, tmp_path: Path):
    registry = str(tmp_path / "registry.db")
    synced = run_cli("registry", "sync", ORG, "--endpoint", hub.url, "--token", TOKEN, "--registry", registry, "--json")
    assert synced.exit_code == 0, synced.stderr
    records = json.loads(run_cli("registry", "list", "--registry", registry, "--json").stdout)["records"]
    assert len(records) == 2 and all(loc["uri"].startswith("hf://") for r in records for loc in r["locations"])

    listed = _site(tmp_path / "listed", "--registry", registry, "--engine", FLEET)
    assert listed["drafters"] == 2 and listed["copies_judged"] == 2 and listed["copies_unchanged"] == 0
    page = _page(tmp_path / "listed", records, SPECFORGE)
    assert "`registry site --hub` reads it" in page and _matrix(page) == {}
    index = (tmp_path / "listed" / "index.html").read_text()
    assert index.count("not judged") >= 2 * len(listed["columns"])

    # --hub: judged from what the Hub holds, read as sync reads it (config.json, headers by Range)
    begun = len(hub.requests)
    judged = _site(tmp_path / "judged", "--hub", "--endpoint", hub.url, "--token", TOKEN, "--registry", registry,
                   "--engine", FLEET)
    assert judged["copies_judged"] == 2 and judged["copies_unchanged"] == 0  # Hub copies are never cached
    weights = [r for r in hub.requests[begun:] if r.path.endswith(".safetensors") and r.method == "GET"]
    assert weights and all("range" in r.headers for r in weights), [(r.path, r.headers) for r in weights]
    assert all(r.authorization == f"Bearer {TOKEN}" for r in hub.requests[begun:] if r.authorization)
    specforge = _matrix(_page(tmp_path / "judged", records, SPECFORGE))
    # SGLang reads SpecForge's ids as trained; vLLM's V1 runner reads the flat config's ids as its own boundaries
    # and captures one layer early (engines/vllm.py: the same rule `validate` and `search` apply)
    assert set(specforge["sglang"]) == {"as-trained"} and "wrong" in specforge["vllm-v1"], specforge
    speculators = _matrix(_page(tmp_path / "judged", records, SPECULATORS))
    assert set(speculators["vllm-v1"]) == {"as-trained"} and "refuses" in speculators["sglang"], speculators
    for path in (tmp_path / "judged").rglob("*"):
        assert path.is_dir() or TOKEN.encode() not in path.read_bytes(), path


def test_a_hub_the_site_cannot_reach_leaves_its_copies_unjudged_saying_why(hub: HubServer, tmp_path: Path):
    registry = str(tmp_path / "registry.db")
    assert run_cli("registry", "sync", SPECFORGE, "--endpoint", hub.url, "--registry", registry).exit_code == 0
    hub.fail_next(r".*", 503, times=None)  # the Hub down while the site is built: still written, each copy says why
    doc = _site(tmp_path / "out", "--hub", "--endpoint", hub.url, "--registry", registry)
    assert doc["drafters"] == 1
    page = next((tmp_path / "out" / "drafters").glob("*.html")).read_text()
    assert "Not judged:" in page and re.search(r"\[E-HUB-[A-Z-]+\]", page), page


def test_the_synced_index_filters_in_a_browser(hub: HubServer, tmp_path: Path, chromium):
    registry = str(tmp_path / "registry.db")
    assert run_cli("registry", "sync", ORG, "--endpoint", hub.url, "--registry", registry).exit_code == 0
    out = tmp_path / "out"
    _site(out, "--hub", "--endpoint", hub.url, "--registry", registry, "--engine", FLEET)
    chromium.open((out / "index.html").as_uri() + "?engine=sglang%3D%3D0.5.11&verdict=refused")
    assert chromium.visible("#drafters tbody tr") == 1  # the speculators drafter: SGLang refuses its config
    chromium.open((out / "index.html").as_uri() + "?engine=sglang%3D%3D0.5.11&verdict=served")
    assert chromium.visible("#drafters tbody tr") == 1
