"""records.py's survivors of issue 33 item 6's mutation run, killed: what verify records of a private Hub drafter at a
revision (record_acceptance hands revision, endpoint and token on), what a cast records of its source where a record
from before schema v5 or a --correct-record is about (record_conversion's parent and its former ids), a conversion
adopting that old record, and the lineage a publication pins at its commit (record_publication). Real files, the real
registry on SQLite, the loopback Hub; records.py's functions called as the CLI calls them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EXAMPLE
from eagle3_convert import fingerprint, records
from eagle3_convert.convert import ConvertResult, convert, make_options, read_source, state_capture
from eagle3_convert.registry.models import Location
from eagle3_convert.registry.store import open_registry

SIDECAR = "eagle3-convert.json"
MEASURED = {"target_name_or_path": "example-org/tiny-llama-target", "target_revision": "r1",
            "prompts_sha256": "ab" * 32, "prompts": 2, "max_new_tokens": 12, "k": 3, "capture_boundaries": [2, 4, 5],
            "mean_accepted_length": 1.5, "per_position": [0.5, 0.25, 0.0], "rounds": 8, "tokens_per_second": 10.0,
            "device": "cpu"}


def test_record_acceptance_of_a_private_hub_drafter_at_an_older_revision(monkeypatch, tmp_path: Path):
    from hub_server import isolated_hub
    token = "hf_verify_token"
    with isolated_hub(monkeypatch, tmp_path / "hf-home", token=token) as hub:  # (no HF_ENDPOINT: only the argument)
        hub.create_repo("me/priv", private=True)
        first = hub.commit("me/priv", {p.name: p.read_bytes() for p in EXAMPLE.iterdir()})
        hub.commit("me/priv", {"README.md": b"later"}, message="later")
        got = records.record_acceptance("me/priv", MEASURED, revision=first, endpoint=hub.url, token=token,
                                        registry=tmp_path / "r.db")
    assert got.location.uri == f"hf://me/priv@{first}"
    assert [loc.uri for loc in records.record_of(got.record.drafter_id, tmp_path / "r.db").locations] == [
        f"hf://me/priv@{first}"]
    (acc,) = records.acceptance_of(got.record.drafter_id, tmp_path / "r.db")
    assert acc.mean_accepted_length == 1.5


def _cast_source(tmp_path: Path) -> tuple[Path, Path]:
    """A speculators drafter (boundaries [2, 4, 5], bf16) and a llama.cpp target GGUF to cast it against."""
    from builders import DrafterSpec, build_drafter
    from gguf_target import write_target_gguf
    target = write_target_gguf(tmp_path / "t.gguf", layers=8, hidden=32, vocab=96, heads=4, kv_heads=2)
    built = build_drafter(tmp_path / "a", "speculators", DrafterSpec())
    config = json.loads((built / "config.json").read_text())
    (built / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat16"}))
    return built, target


def _cast(src: Path, target: Path, dest: Path, capture: tuple[list[int], str] | None = None) -> ConvertResult:
    options = make_options()
    if capture:
        state_capture(options, *capture)
        options.correct_record = True
    options.target_gguf, options.outtype = str(target), "f16"
    return convert(str(src), dest, "gguf", options=options)


def _former_record(path: Path, src: Path, boundaries: list[int] | None, old: Path) -> str:
    """A record made before schema v5 (its id: the config and the weights) of the drafter at `src`."""
    drafter = read_source(str(src)).drafter
    former = fingerprint.config_and_weights_id(drafter, fingerprint.tensor_digests(drafter))
    with open_registry(path) as s:
        s.upsert_drafter(former, id_kind="config-and-weights", capture_boundaries=boundaries,
                         locations=[Location.local(old, "speculators")])
    return former


def _content_id(src: Path) -> str:
    drafter = read_source(str(src)).drafter
    return fingerprint.drafter_id(drafter, fingerprint.tensor_digests(drafter))


def test_a_cast_reports_a_contradicting_record_from_before_schema_v5_once(tmp_path: Path):
    src, target = _cast_source(tmp_path)
    reg = tmp_path / "r.db"
    former = _former_record(reg, src, [1, 2, 3], tmp_path / "old")
    with open_registry(reg) as s:  # the source's record, which the old one contradicts
        s.upsert_drafter(_content_id(src), capture_boundaries=[2, 4, 5])
    result = _cast(src, target, tmp_path / "g")
    got = records.record_conversion(result, reg)
    assert got.record.drafter_id == result.drafter_id != result.source_id
    assert (got.location.layout, got.location.uri) == ("gguf", str((tmp_path / "g").resolve()))
    # the source's record (which the former id is of) reports it, as a conflict its caller warns of; the cast,
    # other weights, never looks at the source's former id
    assert [(c["drafter_id"], c["code"], c["uri"]) for c in got.conflicts] == [
        (former, "E-RECORD-CONFLICT", str(tmp_path / "old"))]
    assert [n for n in got.notes if n.startswith("NOT merged")] == [
        f"NOT merged: {got.conflicts[0]['message']}; both records kept [E-RECORD-CONFLICT]"]
    assert records.record_of(former, reg).drafter_id == former


def test_a_cast_hands_an_agreeing_former_record_to_its_source(tmp_path: Path):
    src, target = _cast_source(tmp_path)
    reg = tmp_path / "r.db"
    former = _former_record(reg, src, [2, 4, 5], tmp_path / "old")
    result = _cast(src, target, tmp_path / "g")
    records.record_conversion(result, reg)
    source = records.record_of(former, reg)  # an alias of the source's record now
    assert source is not None and source.drafter_id == result.source_id
    assert str(tmp_path / "old") in [loc.uri for loc in source.locations]
    assert str(tmp_path / "old") not in [loc.uri for loc in records.record_of(result.drafter_id, reg).locations]


def test_a_conversion_adopts_its_former_record(tmp_path: Path):
    src = tmp_path / "src"
    import shutil
    shutil.copytree(EXAMPLE, src)
    reg = tmp_path / "r.db"
    former = _former_record(reg, src, [2, 4, 5], tmp_path / "old")
    result = convert(str(src), tmp_path / "out", "sglang")
    got = records.record_conversion(result, reg)
    assert records.record_of(former, reg).drafter_id == got.record.drafter_id == result.drafter_id
    assert str(tmp_path / "old") in [loc.uri for loc in got.record.locations]


def test_a_cast_with_correct_record_corrects_its_source_record(tmp_path: Path):
    built, target = _cast_source(tmp_path)
    src = tmp_path / "src"  # its sidecar says [2, 4, 5]: the record --correct-record corrects is known beside it
    convert(str(built), src, "speculators")
    reg = tmp_path / "r.db"
    source_id = _content_id(src)
    with open_registry(reg) as s:
        s.upsert_drafter(source_id, capture_boundaries=[2, 4, 5])
    result = _cast(src, target, tmp_path / "g", ([0, 2, 3], "sglang"))
    assert result.source_id == source_id and result.facts["capture_restated"]["corrects_record"] is True
    got = records.record_conversion(result, reg)
    reason = f"convert {result.facts['capture_restated']['by']} --correct-record"
    source = records.record_of(source_id, reg)
    assert source.capture_boundaries == result.facts["capture_boundaries"] != [2, 4, 5]
    assert [(c.field, c.reason, c.old, c.new) for c in source.changes] == [
        ("capture_boundaries", reason, [2, 4, 5], result.facts["capture_boundaries"])]
    assert got.record.capture_boundaries == result.facts["capture_boundaries"]


def test_record_publication_pins_every_edge_to_the_bare_repo_and_keeps_the_rest(tmp_path: Path):
    from eagle3_convert.publish import Published, prepared_publish
    out = tmp_path / "out"
    convert(str(EXAMPLE), out, "sglang")
    commit, tiny, first = "c" * 40, "hf://me/tiny@" + "d" * 40, "hf://me/a@" + "e" * 40
    with prepared_publish(str(out), "me/t3") as plan:
        # the published sidecar's lineage names its private copies `local:NAME` (not recorded twice) and the repo
        # without a commit; a sidecar that came from the Hub also holds edges between Hub copies, one of them to
        # this repo (an earlier upload there by another copy)
        (upload,) = plan.facts["lineage"]
        assert upload["source"]["uri"] == "local:tiny-llama-speculators" and upload["dest"]["uri"] == "hf://me/t3"
        plan.facts["lineage"] += [{**upload, "source": {"layout": "speculators", "uri": first},
                                   "dest": {"layout": "speculators", "uri": tiny}},
                                  {**upload, "source": {"layout": "speculators", "uri": tiny}}]
        got = records.record_publication(plan, Published("me/t3", commit, "http://hub/me/t3/commit/c"),
                                         tmp_path / "r.db")
    assert sorted((e.source.uri, e.dest.uri) for e in got.record.lineage) == sorted([
        (first, tiny), (tiny, f"hf://me/t3@{commit}"), (str(out.resolve()), f"hf://me/t3@{commit}")])


# registry add (add_checkpoint): the capture layers stated, read for the target the files or --target name

def _sglang_drafter(tmp_path: Path, ids: list[int] | None = None, **spec) -> Path:
    from builders import DrafterSpec, build_drafter
    built = build_drafter(tmp_path / "d", "sglang", DrafterSpec(**spec))
    config = json.loads((built / "config.json").read_text())
    if ids is not None:
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    (built / "config.json").write_text(json.dumps(config))
    return built


@pytest.mark.parametrize("spec, config_model_type", [({}, "deepseek_v3"), ({"family": "deepseek_mla"}, None)])
def test_registry_add_reads_stated_ids_for_the_target_family_the_drafter_names(tmp_path: Path, spec: dict,
                                                                                config_model_type: str | None):
    # SGLang ids [0, 2, 3] on a DeepSeek/Kimi target are the boundaries as written (capture_ids.engine_boundaries: only
    # a list starting at 1 is shifted there); on any other target each id is one below its boundary. A Llama-style
    # drafter names its DeepSeek target by its config's model_type; an MLA drafter with no target serves one
    built = _sglang_drafter(tmp_path, **spec)
    if config_model_type:
        config = json.loads((built / "config.json").read_text())
        (built / "config.json").write_text(json.dumps({**config, "model_type": config_model_type}))
    got = records.add_checkpoint(str(built), capture_layers=[0, 2, 3], convention="sglang", registry=tmp_path / "r.db")
    assert got.record.capture_boundaries == [0, 2, 3]
    assert "the config names boundaries [2, 4, 5]; recorded the training's [0, 2, 3] (`eagle3-convert validate` " \
           "compares configs with it)" in got.notes


def test_registry_add_reads_the_files_ids_for_the_target_passed(tmp_path: Path):
    from conftest import DATA
    # the config's SGLang ids [0, 2, 3], read for --target's DeepSeek family: boundaries [0, 2, 3] (a Llama target's
    # reading would be [1, 3, 4])
    built = _sglang_drafter(tmp_path, [0, 2, 3], hidden_size=64, head_dim=16)
    got = records.add_checkpoint(str(built), target=str(DATA / "targets" / "deepseek-tiny"), registry=tmp_path / "r.db")
    assert got.record.capture_boundaries == [0, 2, 3]
    assert records.add_checkpoint(str(built), registry=tmp_path / "r2.db").record.capture_boundaries == [1, 3, 4]


def test_registry_add_records_the_ids_its_layout_wrote(tmp_path: Path):
    built = _sglang_drafter(tmp_path)  # no sidecar to hand spellings on: only the file's own layout
    assert not (built / SIDECAR).exists()
    got = records.add_checkpoint(str(built), registry=tmp_path / "r.db")
    assert got.record.ids_as_written == {"sglang": [1, 3, 4]}


def _with_sidecar(tmp_path: Path, facts: dict) -> Path:
    from eagle3_convert import sidecar
    built = _sglang_drafter(tmp_path)
    (built / SIDECAR).write_bytes(sidecar.build(layout="sglang", config_bytes=(built / "config.json").read_bytes(),
                                                facts=facts))
    return built


EDGE = {"source": {"layout": "speculators", "uri": "hf://org/first@" + "a" * 40},
        "dest": {"layout": "sglang", "uri": "/somewhere/else"}, "tool": "eagle3-convert 0.1.0",
        "created_at": "2026-01-01T00:00:00+00:00", "kind": "convert", "derived_from": None}


def test_registry_add_hands_on_a_sidecar_written_under_the_former_id(tmp_path: Path):
    built = _sglang_drafter(tmp_path)
    drafter = read_source(str(built)).drafter
    former = fingerprint.config_and_weights_id(drafter, fingerprint.tensor_digests(drafter))
    built = _with_sidecar(tmp_path, {"drafter_id": former, "capture_boundaries": [2, 4, 5], "lineage": [EDGE]})
    got = records.add_checkpoint(str(built), registry=tmp_path / "r.db")
    assert [(e.source.uri, e.dest.uri) for e in got.record.lineage] == [(EDGE["source"]["uri"], "/somewhere/else")]
    assert not any("describes another drafter" in n for n in got.notes), got.notes


def test_registry_add_reads_no_history_of_a_sidecar_with_no_facts_it_can_use(tmp_path: Path):
    # a sidecar naming no drafter id (provenance.from_sidecar: nothing known) hands on nothing, and says nothing of
    # another drafter
    built = _with_sidecar(tmp_path, {"capture_boundaries": [2, 4, 5], "lineage": [EDGE]})
    got = records.add_checkpoint(str(built), registry=tmp_path / "r.db")
    assert got.record.lineage == []
    assert got.notes == ["imported eagle3-convert.json: target, provenance and 0 lineage edge(s)"], got.notes


# registry add's target: --verifier alone joins the target the sidecar knows; with --target it does not

def _converted(tmp_path: Path, target: str | None = None) -> Path:
    out = tmp_path / "out"
    convert(str(EXAMPLE), out, "speculators", options=make_options(target=target) if target else None)
    return out


def test_registry_add_with_a_verifier_alone_takes_the_sidecars_target_as_that_one(tmp_path: Path):
    from conftest import DATA
    tiny = str(DATA / "targets" / "llama-tiny")
    got = records.add_checkpoint(str(_converted(tmp_path, tiny)), verifier="org/served-as", registry=tmp_path / "r.db")
    t = got.record.target
    assert (t.name_or_path, t.aliases, t.num_hidden_layers, t.hidden_size) == (
        "org/served-as", [tiny, "example-org/tiny-llama-target"], 8, 64)


def test_registry_add_with_a_verifier_and_a_target_joins_only_those_two(tmp_path: Path):
    from conftest import DATA
    tiny = str(DATA / "targets" / "llama-tiny")
    got = records.add_checkpoint(str(_converted(tmp_path)), verifier="org/served-as", target=tiny,
                                 registry=tmp_path / "r.db")
    t = got.record.target
    assert (t.name_or_path, t.aliases, t.num_hidden_layers) == ("org/served-as", [tiny], 8)


def test_registry_add_with_a_target_of_other_facts_corrects_the_record(tmp_path: Path):
    from conftest import DATA
    copy = tmp_path / "copy"
    import shutil
    shutil.copytree(EXAMPLE, copy)
    reg = tmp_path / "r.db"
    records.add_checkpoint(str(copy), target=str(DATA / "targets" / "llama-tiny"), registry=reg)
    other = tmp_path / "other-target"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                   "num_hidden_layers": 12, "hidden_size": 64, "vocab_size": 512}))
    got = records.add_checkpoint(str(copy), target=str(other), registry=reg)
    assert got.record.target.num_hidden_layers == 12
    assert [(c.field, c.reason, c.old["num_hidden_layers"], c.new["num_hidden_layers"]) for c in got.record.changes] \
        == [("target", "registry add --target", 8, 12)]


def test_registry_add_reads_stated_ids_for_the_target_passed(tmp_path: Path):
    # gpt-oss's SGLang ids name the boundaries as they are where the last id is the target's depth
    # (capture_ids.engine_boundaries): --target's family and depth, not the file's, translate them
    gpt_oss = tmp_path / "gpt-oss"
    gpt_oss.mkdir()
    (gpt_oss / "config.json").write_text(json.dumps({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
                                                     "num_hidden_layers": 8, "hidden_size": 32, "vocab_size": 96}))
    built = _sglang_drafter(tmp_path)
    got = records.add_checkpoint(str(built), target=str(gpt_oss), capture_layers=[1, 3, 8], convention="sglang",
                                 registry=tmp_path / "r.db")
    assert got.record.capture_boundaries == [1, 3, 8]


def test_registry_add_refuses_stated_ids_the_fc_does_not_fuse(tmp_path: Path):
    from eagle3_convert.errors import UsageError
    with pytest.raises(UsageError) as caught:
        records.add_checkpoint(str(EXAMPLE), capture_layers=[2, 4], convention="boundary", registry=tmp_path / "r.db")
    assert str(caught.value) == "2 capture layers given, but the drafter's fc fuses 3 hidden states"
    assert not (tmp_path / "r.db").exists()


def test_a_conversion_reports_a_contradicting_record_from_before_schema_v5(tmp_path: Path):
    import shutil
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE, src)
    reg = tmp_path / "r.db"
    former = _former_record(reg, src, [1, 2, 3], tmp_path / "old")
    with open_registry(reg) as s:
        s.upsert_drafter(_content_id(src), capture_boundaries=[2, 4, 5])
    got = records.record_conversion(convert(str(src), tmp_path / "out", "sglang"), reg)
    assert [(c["drafter_id"], c["code"], c["uri"]) for c in got.conflicts] == [
        (former, "E-RECORD-CONFLICT", str(tmp_path / "old"))]


def test_record_publication_returns_the_twin_it_disagrees_with(example_dir: Path, tmp_path: Path):
    from eagle3_convert.publish import Published, prepared_publish
    reg = tmp_path / "r.db"
    commit = "c" * 40
    with open_registry(reg) as s:  # what `registry sync` made of that commit: other capture layers
        s.upsert_drafter("34" * 32, id_kind="hub-fingerprint", capture_boundaries=[1, 2, 3],
                         locations=[Location.hub("me/t3", "speculators", commit)])
    with prepared_publish(str(example_dir), "me/t3") as plan:
        got = records.record_publication(plan, Published("me/t3", commit, "http://hub/me/t3/commit/c"), reg)
    assert [(c["drafter_id"], c["code"]) for c in got.conflicts] == [("34" * 32, "E-SYNC-CONFLICT")]


def test_registry_add_says_what_it_imported_and_why_the_record_changed(tmp_path: Path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(EXAMPLE, copy)  # no sidecar: nothing imported, nothing said of it
    reg = tmp_path / "r.db"
    assert records.add_checkpoint(str(copy), registry=reg).notes == []
    got = records.add_checkpoint(str(copy), verifier="org/served-as", registry=reg)
    assert [(c.field, c.reason, c.new["aliases"]) for c in got.record.changes] == [
        ("target", "registry add --verifier", ["org/served-as"])]
