"""Hub copies tied to their records (issue 21, item 3): `registry sync`, `search --hub` and `validate REPO_ID`
against the loopback Hub of tests/hub_server.py, through the real CLI, with drafters published by our own
`publish`.

A copy carrying our sidecar joins its record by the sidecar's drafter id, even once its config.json is edited; a
copy without it (the same weight files uploaded elsewhere) joins the record those bytes belong to; what a copy's
config says against the record is reported by all three commands, and search judges every copy against the
record's capture layers, never an engine default the record contradicts. GGUF repos are read by Range and judged
by llama.cpp's loader rules, as convert judges the file it wrote.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter, write_target
from conftest import EXAMPLE, registry_records, run_cli
from gguf_target import write_target_gguf
from hub_server import HubServer

from eagle3_convert.registry.store import open_registry
from eagle3_convert.schemas import output_violations

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_copies_secret_token"
TARGET = "org/target-model"  # DrafterSpec's verifier: 8 layers, so the engines' defaults are [2, 4, 5]
TRAINED = [1, 3, 6]


def cli(*args: object) -> tuple[int, dict]:
    result = run_cli(*map(str, args), "--json")
    assert "Traceback" not in result.stderr and TOKEN not in result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert output_violations(doc) == [], output_violations(doc)  # as schemas/output/ and docs/json.md say
    return result.exit_code, doc


def copy_repo(hub: HubServer, source: str, dest: str, *, drop: tuple[str, ...] = (), change: dict | None = None) -> str:
    """Upload `source`'s files to `dest` (as a user would with another tool): minus `drop`, with `change`."""
    files = {n: hub.read_file(source, n) for n in hub.list_files(source) if n != ".gitattributes" and n not in drop}
    hub.create_repo(dest)
    return hub.commit(dest, {**files, **(change or {})})


def with_ids(config: bytes, ids: list[int]) -> bytes:
    """An SGLang config.json naming `ids` (block outputs, nested, as SGLang reads them)."""
    data = json.loads(config)
    data["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids, "use_aux_hidden_state": True}
    return json.dumps(data).encode()


@pytest.fixture
def published(hub: HubServer, registry_url: Path | str, tmp_path: Path) -> dict:
    """An SGLang drafter trained on [1, 3, 6], as its config and the registry's record say (SQLite and
    PostgreSQL: tests/conftest.py), published by us to me/drafter, and the target's config on the Hub. (A config
    naming no ids is not published: the record's ids contradict it, as validate says.)"""
    target = write_target(tmp_path / "target", DrafterSpec())
    hub.create_repo(TARGET)
    hub.commit(TARGET, {p.name: p.read_bytes() for p in target.iterdir()})
    src = build_drafter(tmp_path / "specforge", "sglang", DrafterSpec(capture_boundaries=(1, 3, 6), seed=7))
    registry = registry_url
    code, added = cli("registry", "add", src, "--target", target, "--capture-layers", "1,3,6", "--convention",
                      "boundary", "--registry", registry)
    assert code == 0, added
    code, done = cli("publish", src, "me/drafter", "--verifier", TARGET, "--endpoint", hub.url, "--token", TOKEN,
                     "--registry", registry)
    assert code == 0, done
    return {"registry": registry, "drafter_id": added["drafter_id"], "commit": done["commit"]}


def test_a_copy_without_our_sidecar_joins_the_record_of_its_weights(hub: HubServer, published: dict):
    registry, the_id = published["registry"], published["drafter_id"]
    copy_repo(hub, "me/drafter", "other/copy", drop=("eagle3-convert.json",))  # the same files but our sidecar
    code, doc = cli("registry", "sync", "other/copy", "--endpoint", hub.url, "--registry", registry)
    assert code == 0, doc
    [entry] = doc["repos"]
    # one drafter, one record: the copy is a location of the record of these weights, not a new fingerprint
    # record of "engine default"
    assert entry["status"] == "new-location" and entry["drafter_id"] == the_id, entry
    assert entry["capture_boundaries"] == TRAINED
    with open_registry(registry) as store:
        [record] = store.list()
    assert record.drafter_id == the_id and record.capture_boundaries == TRAINED
    assert any(loc.uri.startswith("hf://other/copy@") for loc in record.locations)

    code, found = cli("search", "--target", TARGET, "--hub", "--endpoint", hub.url, "--registry", registry)
    assert code == 0, found
    [item] = found["drafters"]  # the published repo and the copy: both under the one record
    assert item["drafter_id"] == the_id and item["capture_boundaries"] == TRAINED
    copies = {c["uri"].split("@")[0]: c for c in item["copies"] if c["uri"].startswith("hf://")}
    assert set(copies) == {"hf://me/drafter", "hf://other/copy"}
    for copy in copies.values():
        # vLLM's V2 runner reads no nested ids: it captures its defaults [2, 4, 5], not the trained [1, 3, 6]
        v2 = copy["serves"]["vllm-v2"]
        assert v2["verdict"] == "wrong" and v2["captures"] == [2, 4, 5], v2
        assert "as in training" not in json.dumps(copy["serves"])
        assert copy["conflicts"] == []


def test_a_copy_whose_config_contradicts_the_record_is_reported_by_sync_search_and_validate(
        hub: HubServer, published: dict, tmp_path: Path):
    registry, the_id = published["registry"], published["drafter_id"]
    config = hub.read_file("me/drafter", "config.json")
    # The same weights with other ids: one without our sidecar, one with it (its config.json edited after upload).
    copy_repo(hub, "me/drafter", "other/edited", drop=("eagle3-convert.json",),
              change={"config.json": with_ids(config, [1, 3, 4])})  # block outputs: boundaries [2, 4, 5]
    copy_repo(hub, "me/drafter", "other/edited-with-sidecar", change={"config.json": with_ids(config, [1, 3, 4])})
    before = registry_records(registry)

    code, doc = cli("registry", "sync", "other/edited", "other/edited-with-sidecar", "--endpoint", hub.url,
                    "--registry", registry)
    assert code == 1 and doc["error"]["code"] == "E-SYNC-CONFLICT", doc
    for entry in doc["repos"]:
        assert entry["status"] == "conflict" and entry["drafter_id"] == the_id, entry
        assert entry["conflicts"] == [{"field": "capture_boundaries", "hub": [2, 4, 5], "registry": TRAINED}]
    assert registry_records(registry) == before  # a recorded fact is never overwritten
    human = run_cli("registry", "sync", "other/edited-with-sidecar", "--endpoint", hub.url, "--registry", registry)
    assert human.exit_code == 1 and "capture_boundaries [2, 4, 5]" in human.stdout
    assert f"(the record of drafter {the_id[:12]}) [E-SYNC-CONFLICT]" in human.stdout
    [why] = by_repo(doc)["other/edited-with-sidecar"]["notes"]  # why it is this drafter
    assert "config.json was changed after eagle3-convert.json was written" in why and the_id[:12] in why
    assert f"note: {why}" in human.stdout

    code, found = cli("search", "--target", TARGET, "--hub", "--endpoint", hub.url, "--registry", registry)
    assert code == 0, found
    [item] = found["drafters"]
    copies = {c["uri"].split("@")[0]: c for c in item["copies"] if c["uri"].startswith("hf://")}
    for repo in ("hf://other/edited", "hf://other/edited-with-sidecar"):
        assert copies[repo]["conflicts"] == [{"field": "capture_boundaries", "hub": [2, 4, 5], "registry": TRAINED}]
        # judged against the training truth: SGLang captures the edited [2, 4, 5], not the trained [1, 3, 6]
        sglang = copies[repo]["serves"]["sglang"]
        assert sglang["verdict"] == "wrong" and sglang["captures"] == [2, 4, 5], sglang
    text = run_cli("search", "--target", TARGET, "--hub", "--endpoint", hub.url, "--registry", registry).stdout
    assert text.count("disagrees with the record: the Hub says capture_boundaries [2, 4, 5], the registry "
                      "[1, 3, 6] [E-SYNC-CONFLICT]") == 2, text

    for repo in ("other/edited", "other/edited-with-sidecar"):
        code, report = cli("validate", repo, "--endpoint", hub.url, "--registry", registry)
        assert code == 1, report
        assert "E-CAPTURE-RECORD" in {f["code"] for f in report["findings"]}, report
    # the published copy itself agrees with its record
    code, report = cli("validate", "me/drafter", "--endpoint", hub.url, "--registry", registry)
    assert code == 0, report


def test_a_third_party_copy_is_a_fingerprint_record_until_its_weights_are_known(hub: HubServer, tmp_path: Path):
    """Weights the registry has never seen: a record under the Hub fingerprint; `registry add` of the repo reads
    its bytes, and the two become one record under the content id."""
    hub.create_repo(TARGET)
    hub.commit(TARGET, {p.name: p.read_bytes() for p in write_target(tmp_path / "target", DrafterSpec()).iterdir()})
    src = build_drafter(tmp_path / "theirs", "sglang", DrafterSpec(capture_boundaries=(1, 3, 6), seed=11))
    hub.create_repo("them/drafter")
    card = f"---\nbase_model: {TARGET}\n---\n".encode()
    hub.commit("them/drafter", {**{p.name: p.read_bytes() for p in src.iterdir()}, "README.md": card})
    registry = tmp_path / "reader.db"
    code, doc = cli("registry", "sync", "them/drafter", "--endpoint", hub.url, "--registry", registry)
    assert code == 0 and doc["repos"][0]["identity"] == "hub-fingerprint", doc
    fingerprint = doc["repos"][0]["drafter_id"]
    code, added = cli("registry", "add", "them/drafter", "--endpoint", hub.url, "--registry", registry)
    assert code == 0, added
    with open_registry(registry) as store:
        [record] = store.list()
        assert record.drafter_id == added["drafter_id"] != fingerprint and record.capture_boundaries == TRAINED
        assert store.aliased(fingerprint) == record.drafter_id
    code, again = cli("registry", "sync", "them/drafter", "--endpoint", hub.url, "--registry", registry)
    assert code == 0 and again["repos"][0]["drafter_id"] == record.drafter_id, again


def by_repo(doc: dict) -> dict[str, dict]:
    return {entry["repo_id"]: entry for entry in doc["repos"]}


# ----------------------------------------------------------------------------------------------------- GGUF

gguf = pytest.importorskip("gguf")


def test_a_published_gguf_is_judged_alike_by_convert_sync_and_search(hub: HubServer, tmp_path: Path):
    """convert says how llama.cpp serves the GGUF it wrote; sync and search read the published file's header by
    Range (never its weights) and say the same, for our copy and for a third party's upload of the same file."""
    example = tmp_path / "example"
    shutil.copytree(EXAMPLE, example)
    target = json.loads((example / "config.json").read_text())["speculators_config"]["verifier"]["name_or_path"]
    target_gguf = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=64, vocab=512)
    registry = tmp_path / "registry.db"
    code, converted = cli("--to", "gguf", "--target-gguf", target_gguf, example, tmp_path / "g", "--registry", registry)
    assert code == 0, converted
    said = converted["serves"]["llamacpp"]
    assert said == {"verdict": "as-trained", "captures": [2, 4, 5], "why": "captures [2, 4, 5], trained maths",
                    "release": "b11434"}  # the one llama.cpp release we know (engines/releases.py)
    code, done = cli("publish", tmp_path / "g", "me/drafter-gguf", "--endpoint", hub.url, "--token", TOKEN,
                     "--registry", registry)
    assert code == 0, done
    [name] = [n for n in hub.list_files("me/drafter-gguf") if n.endswith(".gguf")]
    # llama.cpp's Hub convention: the drafter beside the target's GGUF, which `-hf` picks it for
    copy_repo(hub, "me/drafter-gguf", "other/drafter-gguf", drop=("eagle3-convert.json",),
              change={"tiny-target-F32.gguf": target_gguf.read_bytes()})

    start = len(hub.requests)
    code, doc = cli("registry", "sync", "me/drafter-gguf", "other/drafter-gguf", "--endpoint", hub.url,
                    "--registry", registry)
    assert code == 0, doc
    ours, theirs = doc["repos"]
    assert ours["status"] == "unchanged" and ours["layout"] == "gguf" and ours["identity"] == "sidecar", ours
    assert theirs["status"] == "new-location" and theirs["drafter_id"] == ours["drafter_id"], theirs
    assert ours["capture_boundaries"] == theirs["capture_boundaries"] == [2, 4, 5]
    size = len(hub.read_file("me/drafter-gguf", name))
    reads = [r for r in hub.requests[start:] if r.path.endswith(".gguf")]
    assert reads and all(r.status == 206 and "range" in r.headers for r in reads)
    assert not [r for r in reads if "tiny-target" in r.path]  # the target's GGUF is not the drafter: never read
    for repo in ("me/drafter-gguf", "other/drafter-gguf"):  # its header and small tensors, not its weights
        served = sum(len(r.response_body or b"") for r in reads if r.path.startswith(f"/{repo}/"))
        assert 0 < served < size // 2, (repo, served, size)

    # A colleague's registry reads our publication: its lineage (example -> GGUF, named local:example) is kept.
    code, fresh = cli("registry", "sync", "me/drafter-gguf", "--endpoint", hub.url, "--registry", tmp_path / "b.db")
    assert code == 0 and fresh["repos"][0]["status"] == "added" and "was not recorded" not in json.dumps(fresh)
    with open_registry(tmp_path / "b.db") as store:
        [record] = store.list()
        assert [(e.source.uri, e.dest.uri.split("@")[0]) for e in record.lineage] == [
            ("local:example", "hf://me/drafter-gguf")]

    code, found = cli("search", "--target", target, "--engine", "llamacpp", "--hub", "--endpoint", hub.url,
                      "--registry", registry)
    assert code == 0, found
    [item] = [i for i in found["drafters"] if i["drafter_id"] == ours["drafter_id"]]
    ggufs = [c for c in item["copies"] if c["layout"] == "gguf"]
    assert {c["uri"].split("@")[0] for c in ggufs} == {str((tmp_path / "g").resolve()), "hf://me/drafter-gguf",
                                                       "hf://other/drafter-gguf"}
    for copy in ggufs:
        assert copy["serves"] == {"llamacpp": said}, copy  # what convert said of the file it wrote

    for repo in ("me/drafter-gguf", "other/drafter-gguf"):  # validate downloads the drafter GGUF: the same reading
        code, report = cli("validate", repo, "--endpoint", hub.url, "--registry", registry)
        assert code == 0 and report["engines"] == ["llamacpp"], report
        assert [f["message"] for f in report["findings"] if f["code"] == "I-CAPTURE-GGUF"] == [
            "llama.cpp captures boundaries [2, 4, 5] (eagle3.target_layers, the input of each block)"], report

    # Reading it back from the Hub: convert downloads the GGUF and records the same drafter.
    code, back = cli("--to", "speculators", "me/drafter-gguf", tmp_path / "back", "--endpoint", hub.url,
                     "--registry", registry)
    assert code == 0, back
    assert "was not recorded" not in json.dumps(back)
    with open_registry(registry) as store:
        assert len(store.list()) == 1


def test_a_gguf_header_longer_than_the_first_range_is_read_in_growing_ranges(hub: HubServer, tmp_path: Path):
    """A real tokenizer (a 128k vocabulary is ~8 MB of header) does not fit the first Range: the reader asks for
    the bytes that follow, in growing steps, each once, until the header ends inside what it holds."""
    spec = DrafterSpec(vocab_size=20000, capture_boundaries=(1, 3, 6), seed=21)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target_gguf(tmp_path / "big-vocab.gguf", layers=spec.target_layers, hidden=spec.ht,
                               vocab=spec.vocab_size)
    code, done = cli("--to", "gguf", "--target-gguf", target, src, tmp_path / "g", "--no-registry")
    assert code == 0, done
    [gfile] = (tmp_path / "g").glob("*.gguf")
    hub.create_repo("them/big-vocab")
    hub.commit("them/big-vocab", {gfile.name: gfile.read_bytes()})  # no sidecar, no card: read from its keys alone
    start = len(hub.requests)
    code, doc = cli("registry", "sync", "them/big-vocab", "--endpoint", hub.url, "--registry", tmp_path / "r.db")
    assert code == 0, doc
    [entry] = doc["repos"]
    assert entry["status"] == "added" and entry["layout"] == "gguf" and entry["capture_boundaries"] == [1, 3, 6]
    spans = [tuple(map(int, r.headers["range"].removeprefix("bytes=").split("-")))
             for r in hub.requests[start:] if r.path.endswith(".gguf")]
    header = spans[:1]  # the file's first bytes, then each time the bytes that follow them
    for span in spans[1:]:
        if span[0] != header[-1][1] + 1:
            break  # then the small tensors, at their offsets
        header.append(span)
    assert header[0][0] == 0 and len(header) >= 3, spans
    assert all(b[1] - b[0] > a[1] - a[0] for a, b in zip(header, header[1:])), spans  # growing
