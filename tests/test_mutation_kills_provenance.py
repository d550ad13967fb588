"""Kill tests of the provenance path (issue 33 item 6): provenance.py, registry/recording.py, target_identity.py,
records.py, sidecar.py, cli/common.py's registry lookup, sources.py and fingerprint.py, each run by
tools/mutation.py. Real files (tests/data, builder-written checkpoints), the real CLI through run_cli, the real
registry on SQLite, or direct calls of the module's functions with real data: no mock of our code."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from eagle3_convert.target_identity import CONFIG_NOISE, Sameness, TargetIdentity, compare, config_digest, local_names

# ---------------------------------------------------------------------------------------------------------------
# target_identity.py: who a target is

LLAMA = dict(architectures=["LlamaForCausalLM"], model_type="llama", num_hidden_layers=8, hidden_size=64,
             vocab_size=512)


def T(name=None, **kw) -> TargetIdentity:
    return TargetIdentity(name_or_path=name, **kw)


def test_names_serving_name_first_each_once_and_no_empty_name():
    assert T("org/a", aliases=["/x/a", "org/a", "", "/x/a", "b"]).names == ["org/a", "/x/a", "b"]
    assert T(None, aliases=["/x/a", "b"]).names == ["/x/a", "b"]
    assert T("").names == [] and T().names == []


def test_a_hub_id_is_known_ignoring_case_a_path_only_as_written():
    t = T("Org/Model", aliases=["/models/Tiny"])
    assert t.known_as("org/model") and t.known_as("ORG/MODEL") and t.known_as("Org/Model")
    assert t.known_as("/models/Tiny")
    assert not t.known_as("/models/tiny") and not t.known_as("models/tiny") and not t.known_as("org/other")
    assert not T("/Models/Tiny").known_as("/models/tiny")
    assert not T().known_as("org/model")


def test_shares_identity_by_a_name_or_the_same_digest():
    assert T("org/a").shares_identity(T("ORG/A"))
    assert T("org/a", aliases=["/p"]).shares_identity(T("/q", aliases=["/p"]))
    assert T("/p").shares_identity(T("x", aliases=["/p"])) and T("x", aliases=["/p"]).shares_identity(T("/p"))
    assert not T("org/a").shares_identity(T("org/b"))
    assert T("org/a", config_sha256="d1").shares_identity(T("org/b", config_sha256="d1"))
    assert not T("org/a", config_sha256="d1").shares_identity(T("org/b", config_sha256="d2"))
    assert not T("org/a").shares_identity(T("org/b"))  # both digests None: no identity shared
    assert not T("org/a", config_sha256="d1").shares_identity(T("org/b"))
    assert not T(config_sha256="").shares_identity(T(config_sha256=""))


def test_serving_keeps_the_context_out_of_the_identity():
    t = T("org/a")
    assert t.context_length is None
    assert t.serving(4096) is t and t.context_length == 4096
    assert "context_length" not in t.model_dump() and "_context_length" not in t.model_dump()


def test_merged_fills_facts_and_learns_names_only_of_one_target():
    assert TargetIdentity.merged(None, None) is None
    one = T("org/a", **LLAMA)
    assert TargetIdentity.merged(one, None) is one and TargetIdentity.merged(None, one) is one
    # facts copied, names learned: the same digest makes them one
    got = TargetIdentity.merged(T("org/a", architectures=[], config_sha256="d", aliases=["x"]),
                                T("/p/a", aliases=["org/a-2"], config_sha256="d", revision="r1", **LLAMA))
    assert got.model_dump() == {**T("org/a", revision="r1", **LLAMA).model_dump(), "aliases": ["x", "/p/a", "org/a-2"],
                                "config_sha256": "d"}
    # the recorded values win over the other's
    got = TargetIdentity.merged(T("org/a", num_hidden_layers=8, architectures=["A"]),
                                T("org/a", num_hidden_layers=8, architectures=["B"], hidden_size=64))
    assert got.architectures == ["A"] and got.hidden_size == 64
    # names differ and nothing tells: facts filled, no name learned, no digest taken
    got = TargetIdentity.merged(T("org/a"), T("org/b", config_sha256="d", hidden_size=64))
    assert got.model_dump() == T("org/a", hidden_size=64).model_dump()
    # one target without a serving name: the other's is taken, and not kept again as an alias
    got = TargetIdentity.merged(T(None, config_sha256="d"), T("org/b", aliases=["ORG/B", "/p"], config_sha256="d2"))
    assert got.name_or_path == "org/b" and got.aliases == ["/p"] and got.config_sha256 == "d"
    got = TargetIdentity.merged(T(None), T("org/b", config_sha256="d2"))
    assert got.config_sha256 == "d2" and got.name_or_path == "org/b" and got.aliases == []
    # the serving name spelled otherwise by the other is not an alias of itself
    got = TargetIdentity.merged(T("Org/A"), T("org/a", aliases=["/p"]))
    assert got.name_or_path == "Org/A" and got.aliases == ["/p"]


def test_joined_is_the_verifier_name_with_the_target_config_facts_and_names():
    given = T("/models/tiny", config_sha256="d", **LLAMA)
    assert T("org/tiny").joined(None).model_dump() == T("org/tiny").model_dump()
    got = T("org/tiny", aliases=["tiny-alias"]).joined(given)
    assert got.name_or_path == "org/tiny" and got.aliases == ["/models/tiny", "tiny-alias"]
    assert got.config_sha256 == "d" and got.num_hidden_layers == 8 and got.architectures == ["LlamaForCausalLM"]
    got = T(None).joined(given)
    assert got.name_or_path == "/models/tiny" and got.aliases == [] and got.hidden_size == 64


def test_named_also_learns_each_new_name_once():
    t = T("org/a", aliases=["/p"])
    assert t.named_also() is t and t.named_also(None, "", "ORG/A", "/p") is t
    got = t.named_also("/q", None, "/q", "org/b", "Org/A")
    assert got.aliases == ["/p", "/q", "org/b"] and t.aliases == ["/p"]


def test_config_digest_leaves_out_what_a_save_rewrites():
    config = {"b": 1, "a": [1, 2], "model_type": "llama"}
    want = hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config_digest(config) == want
    assert config_digest({"a": [1, 2], "model_type": "llama", "b": 1}) == want
    noisy = {**config, **{k: "anything" for k in CONFIG_NOISE}}
    assert config_digest(noisy) == want
    assert CONFIG_NOISE == {"_name_or_path", "transformers_version", "_commit_hash", "torch_dtype", "dtype",
                            "use_cache", "_attn_implementation", "attn_implementation", "_attn_implementation_autoset"}
    assert config_digest({**config, "b": 2}) != want


def test_local_names_are_the_resolved_path_and_a_snapshot_repo_id(tmp_path: Path, monkeypatch):
    real = tmp_path / "models" / "tiny"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.chdir(tmp_path)
    assert local_names("models/tiny") == ([str(real.resolve())], None)
    assert local_names(str(link)) == ([str(real.resolve())], None)
    snap = tmp_path / "hub" / "models--Org--Tiny-Model" / "snapshots" / "abc123"
    (snap / "sub").mkdir(parents=True)
    assert local_names(str(snap)) == ([str(snap.resolve()), "Org/Tiny-Model"], "abc123")
    assert local_names(str(snap / "sub")) == ([str((snap / "sub").resolve()), "Org/Tiny-Model"], "abc123")
    # a symlink named like a snapshot is found by the name given; one to a snapshot by where it points
    fake = tmp_path / "x" / "models--a--b" / "snapshots" / "r1"
    fake.parent.mkdir(parents=True)
    fake.symlink_to(real)
    assert local_names(str(fake)) == ([str(real.resolve()), "a/b"], "r1")
    to_snap = tmp_path / "to-snap"
    to_snap.symlink_to(snap)
    assert local_names(str(to_snap)) == ([str(snap.resolve()), "Org/Tiny-Model"], "abc123")
    # both say a snapshot: the name given wins, once
    both = tmp_path / "y" / "models--c--d" / "snapshots" / "r2"
    both.parent.mkdir(parents=True)
    both.symlink_to(snap)
    assert local_names(str(both)) == ([str(snap.resolve()), "c/d"], "r2")
    # not a snapshot: no repo id, whatever looks like one
    for path in ("models--a--b/snapshot/r", "xmodels--a--b/snapshots/r", "models--ab/snapshots/r"):
        (tmp_path / path).mkdir(parents=True)
        assert local_names(str(tmp_path / path)) == ([str((tmp_path / path).resolve())], None)
    rel = Path("models--e--f") / "snapshots" / "r3"
    (tmp_path / rel).mkdir(parents=True)
    assert local_names(str(rel)) == ([str((tmp_path / rel).resolve()), "e/f"], "r3")


def test_compare_the_facts_then_the_names():
    assert compare(None, None) == Sameness("same") and compare(T("a"), None).same and compare(None, T("b")).same
    a = T("org/a", **LLAMA)
    assert compare(a, T("org/b", **{**LLAMA, "architectures": ["LlamaForCausalLM", "LlamaForCausalLM"]})).verdict \
        == "untold"
    two = compare(a, T("org/a", **{**LLAMA, "num_hidden_layers": 9, "vocab_size": 1000, "model_type": "qwen3",
                                  "hidden_size": 32, "architectures": ["Qwen3ForCausalLM", "X"]}))
    assert two == Sameness("differ", (("architectures", ["LlamaForCausalLM"], ["Qwen3ForCausalLM", "X"]),
                                      ("model_type", "llama", "qwen3"), ("depth", 8, 9), ("hidden size", 64, 32),
                                      ("vocabulary", 512, 1000)))
    assert not two.same
    assert two.said() == ("architectures ['LlamaForCausalLM'] vs ['Qwen3ForCausalLM', 'X'], model_type llama vs "
                          "qwen3, depth 8 vs 9, hidden size 64 vs 32, vocabulary 512 vs 1000")
    assert compare(T("org/a", architectures=["B", "A"]), T("org/a", architectures=["A", "B", "A"])).same
    # a fact one side does not know tells nothing
    assert compare(T("org/a", architectures=[], num_hidden_layers=None), T("org/a", architectures=["A"],
                                                                         num_hidden_layers=3)).same
    assert compare(T("org/a", num_hidden_layers=3), T("org/a")).verdict == "same"
    # no facts differ: a shared name or digest is one target, a side with no name is one, else untold
    assert compare(T("org/a"), T("ORG/A")).verdict == "same"
    assert compare(T("org/a", config_sha256="d"), T("org/b", config_sha256="d")).verdict == "same"
    assert compare(T(None, **LLAMA), T("org/b")).verdict == "same"
    assert compare(T("org/a"), T(None, hidden_size=3)).verdict == "same"
    untold = compare(T("org/a"), T("org/b"))
    assert untold == Sameness("untold") and not untold.same and untold.said() == ""
    assert compare(T("org/a", config_sha256="d"), T("org/b", config_sha256="e")).verdict == "untold"


# ---------------------------------------------------------------------------------------------------------------
# provenance.py: what a sidecar and a record say, and where config.json contradicts them

from datetime import datetime, timedelta, timezone  # noqa: E402

from eagle3_convert import provenance as prov  # noqa: E402
from eagle3_convert.drafter import MATH_FLAGS, DrafterConfig  # noqa: E402
from eagle3_convert.registry.models import DrafterRecord  # noqa: E402

DID = "ab" * 32
SIDECAR = "eagle3-convert.json"


def cfg(**kw) -> DrafterConfig:
    return DrafterConfig(**{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "vocab_size": 512, "draft_vocab_size": 256, **kw})


def K(label="rec", boundaries=None, target=None, **kw) -> prov.Known:
    return prov.Known(label, boundaries, target, **kw)


def test_known_boundaries_spell_the_default_on_the_recorded_target():
    assert K().depth is None and K(target=T("x")).depth is None and K(target=T("x", num_hidden_layers=8)).depth == 8
    recorded = [1, 3, 6]
    k = K(boundaries=recorded)
    assert k.boundaries(8) == [1, 3, 6] and k.boundaries(8) is not recorded and k.boundaries(None) == [1, 3, 6]
    assert K().boundaries(None) is None and K().boundaries(0) is None
    assert K().boundaries(8) == [2, 4, 5] and K().boundaries(32) == [2, 16, 29]
    assert K(target=T("x", num_hidden_layers=32)).boundaries(8) == [2, 16, 29]  # the recorded target's depth wins


def sidecar_data(**kw):
    return {"drafter_id": DID, "capture_boundaries": [1, 3, 6], "target": {"name_or_path": "org/t", **LLAMA},
            "vocab_size": 512, "draft_vocab_size": 256, "hidden_size": 64,
            "flags": {"norm_before_fc": True, "fc_norm": "yes", "norm_output": False}, **kw}


def test_from_sidecar_reads_every_fact_it_can_use():
    got = prov.from_sidecar(sidecar_data(), True)
    assert got == prov.Known(SIDECAR, [1, 3, 6], T("org/t", **LLAMA), 512, 256, 64,
                             {"norm_before_fc": True, "norm_output": False}, DID)
    assert got.in_registry is False and got.of_the_weights is True
    assert prov.from_sidecar(sidecar_data(), False).label == "eagle3-convert.json (written with another config.json)"
    # what it cannot use is left out; a sidecar without a drafter id or with unreadable layers holds nothing
    got = prov.from_sidecar(sidecar_data(capture_boundaries=None, target={"name_or_path": 3}, vocab_size=0,
                                         draft_vocab_size=True, hidden_size="64", flags=["x"]), True)
    assert got == prov.Known(SIDECAR, None, None, None, None, None, {}, DID)
    assert prov.from_sidecar(sidecar_data(target="org/t", vocab_size=1.0, hidden_size=-1), True).target is None
    assert prov.from_sidecar(sidecar_data(vocab_size=1), True).vocab_size == 1
    for bad in ([], [1, -1], [1, True], [1.0], "1,3,6", {"a": 1}):
        assert prov.from_sidecar(sidecar_data(capture_boundaries=bad), True) is None, bad
    assert prov.from_sidecar(sidecar_data(capture_boundaries=[0]), True).capture_boundaries == [0]
    assert prov.from_sidecar(sidecar_data(drafter_id=None), True) is None
    assert prov.from_sidecar({k: v for k, v in sidecar_data().items() if k != "drafter_id"}, True) is None
    assert prov.from_sidecar(None, True) is None and prov.from_sidecar([sidecar_data()], True) is None


def test_sidecar_known_reads_the_file_unless_given_it(tmp_path: Path):
    from eagle3_convert import sidecar
    assert prov.sidecar_known(tmp_path, None) is None
    (tmp_path / "config.json").write_bytes(b'{"a": 1}')
    (tmp_path / SIDECAR).write_bytes(sidecar.build(layout="speculators", config_bytes=b'{"a": 1}',
                                                   facts=sidecar_data()))
    assert prov.sidecar_known(tmp_path, None).label == SIDECAR
    (tmp_path / "config.json").write_bytes(b'{"a": 2}')
    assert prov.sidecar_known(tmp_path, None).label == f"{SIDECAR} (written with another config.json)"
    assert prov.sidecar_known(tmp_path, sidecar_data(capture_boundaries=[7])) == prov.from_sidecar(
        sidecar_data(capture_boundaries=[7]), True)


def record(**kw) -> DrafterRecord:
    when = datetime(2026, 3, 4, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    return DrafterRecord(**{"drafter_id": DID, "capture_boundaries": [1, 3, 6], "vocab_size": 512,
                            "draft_vocab_size": 256, "hidden_size": 64, "flags": {"fc_norm": True},
                            "target": T("org/t", **LLAMA), "created_at": when, "updated_at": when, **kw})


def test_from_record_names_the_record_and_its_time_in_utc():
    got = prov.from_record(record())
    assert got == prov.Known("the registry's record of drafter abababababab (recorded 2026-03-05 01:30 UTC)",
                             [1, 3, 6], T("org/t", **LLAMA), 512, 256, 64, {"fc_norm": True}, DID, True, True)
    assert prov.from_record(record(target=None)).target is None
    assert prov.from_record(record(id_kind="hub-fingerprint")).of_the_weights is False
    assert prov.from_record(record(id_kind="config-and-weights")).of_the_weights is True


def test_with_names_learned_only_between_one_target():
    a = K("a", target=T("org/t", config_sha256="d", **LLAMA))
    b = K("b", target=T("/models/t", config_sha256="d"))
    c = K("c", target=T("org/other"))
    d = K("d")
    got = prov.with_names_learned([a, b, c, d])
    assert [k.label for k in got] == ["a", "b", "c", "d"]
    assert got[0].target.names == ["org/t", "/models/t"]
    assert got[1].target.names == ["/models/t", "org/t"]
    assert got[2].target.names == ["org/other"] and got[3].target is None
    assert prov.with_names_learned([a]) == [a]


def test_verifier_named_by_a_speculators_config():
    spec = lambda v: {"speculators_config": {"verifier": v}}  # noqa: E731
    assert prov.verifier_named(spec({"name_or_path": "org/t", "architectures": ["A", 3, "B"]})) == T(
        "org/t", architectures=["A", "B"])
    assert prov.verifier_named(spec({"name_or_path": "org/t", "architectures": "A"})) == T("org/t")
    assert prov.verifier_named(spec({"name_or_path": "org/t"})) == T("org/t")
    for nothing in (None, {}, {"speculators_config": None}, {"speculators_config": []}, spec(None), spec([]),
                    spec({"name_or_path": ""}), spec({"name_or_path": 3}), spec({})):
        assert prov.verifier_named(nothing) is None, nothing


def test_contradiction_messages():
    rec = K("the record")
    assert prov.Contradiction("x", 1, 2, rec).message == "config.json's x is 1, the record says 2"
    assert prov.Contradiction("x", 1, 2, rec, given="--target").message == "--target's x is 1, the record says 2"
    assert prov.Contradiction("x", 1, 2, rec, other=K("the sidecar")).message == \
        "the sidecar says x 1, the record says 2"
    assert prov.Contradiction("target", "'a'", "'b'", rec, severity="warning").message == \
        "config.json's target is 'a', the record says 'b': no fact of either tells whether they are one model"
    c = prov.Contradiction("x", 1, 2, rec)
    assert (c.where, c.other, c.severity, c.given, c.of_target) == (None, None, "error", "config.json", False)


def test_capture_contradiction_compares_layers_as_sets():
    rec = K(boundaries=[1, 3, 6])
    assert prov.capture_contradiction([6, 3, 1, 1], rec, 8) is None
    assert prov.capture_contradiction([1, 3, 5], rec, 8) == ([1, 3, 5], [1, 3, 6])
    assert prov.capture_contradiction(None, rec, 8) == ([2, 4, 5], [1, 3, 6])
    assert prov.capture_contradiction(None, rec, None) is None  # the default of an unknown depth
    assert prov.capture_contradiction(None, K(boundaries=[1, 3, 6], target=T(num_hidden_layers=8)), None) == (
        [2, 4, 5], [1, 3, 6])
    assert prov.capture_contradiction(None, K(), 8) is None and prov.capture_contradiction([2, 4, 5], K(), 8) is None
    assert prov.capture_contradiction([2, 4, 6], K(), 8) == ([2, 4, 6], [2, 4, 5])
    assert prov.capture_contradiction([2, 4, 6], K(), None) is None
    mine = [1, 3, 5]
    got = prov.capture_contradiction(mine, rec, 8)
    assert got[0] is not mine


def test_fact_contradictions_each_fact_named():
    known = K("rec", [1, 3, 6], T("org/t", **LLAMA), vocab_size=512, draft_vocab_size=256, hidden_size=64,
              flags={"norm_before_fc": True, "fc_norm": False})
    assert prov.fact_contradictions(cfg(norm_before_fc=True), T("org/t"), None, known) == []
    got = prov.fact_contradictions(cfg(vocab_size=1000, draft_vocab_size=128, hidden_size=32), None, None, known)
    assert [(c.what, c.config, c.recorded, c.severity, c.of_target) for c in got] == [
        ("vocab_size", 1000, 512, "error", False), ("draft_vocab_size", 128, 256, "error", False),
        ("hidden_size", 32, 64, "error", False), ("norm_before_fc", False, True, "error", False)]
    assert all(c.known is known and c.given == "config.json" and c.where is None for c in got)
    got = prov.fact_contradictions(cfg(norm_before_fc=True, fc_norm=True), None, None, known)
    assert [(c.what, c.config, c.recorded) for c in got] == [("fc_norm", True, False)]
    # a record that knows nothing of a fact contradicts nothing
    assert prov.fact_contradictions(cfg(fc_norm=True, vocab_size=3), T("org/x"), T("/p"), K("rec")) == []
    # not of the weights: nothing but the capture layers is held against config.json
    assert prov.fact_contradictions(cfg(vocab_size=3), T("org/x"), None,
                                    K("rec", target=T("org/t"), vocab_size=512, of_the_weights=False)) == []
    # the target config.json names, and the one --target passes
    got = prov.fact_contradictions(cfg(norm_before_fc=True), T("org/t", num_hidden_layers=9), T("/p", num_hidden_layers=7), known)
    assert [(c.what, c.config, c.recorded, c.given, c.where, c.of_target) for c in got] == [
        ("target depth", 9, 8, "config.json", "$.speculators_config.verifier.name_or_path", True),
        ("depth", 7, 8, "--target", None, True)]
    got = prov.fact_contradictions(cfg(norm_before_fc=True), T("org/u", num_hidden_layers=9), None, known, named_by="--verifier")
    assert [(c.what, c.given, c.where) for c in got] == [("target depth", "--verifier", None)]
    got = prov.fact_contradictions(cfg(norm_before_fc=True), T("org/u"), T("/p"), known)
    assert [(c.what, c.config, c.recorded, c.severity, c.given, c.of_target) for c in got] == [
        ("target", "'org/u'", "'org/t'", "warning", "config.json", True),
        ("target", "'/p'", "'org/t'", "warning", "--target", True)]
    # --verifier with the --target of the same model: the target is checked once, by its name
    got = prov.fact_contradictions(cfg(norm_before_fc=True), T("org/u", aliases=["/p"]), T("/p", num_hidden_layers=7), known)
    assert [(c.what, c.given) for c in got] == [("target", "config.json")]
    got = prov.fact_contradictions(cfg(norm_before_fc=True), None, T("/p", num_hidden_layers=7), known)
    assert [(c.what, c.given) for c in got] == [("depth", "--target")]
    assert prov.fact_contradictions(cfg(norm_before_fc=True), T("org/u"), T("/p"), K("rec", vocab_size=512)) == []


def test_record_contradictions_of_sidecar_and_record():
    sc = K("the sidecar", target=T("org/t", num_hidden_layers=8))
    rec = K("the record", target=T("org/t", num_hidden_layers=9))
    got = prov.record_contradictions(sc, rec)
    assert [(c.message, c.other, c.given, c.of_target) for c in got] == [
        ("the sidecar says target depth 8, the record says 9", sc, "the sidecar", True)]
    assert prov.record_contradictions(K("s"), rec) == [] and prov.record_contradictions(sc, K("r")) == []
    assert prov.record_contradictions(sc, K("r", target=T("org/t", num_hidden_layers=9), of_the_weights=False)) == []
    assert prov.record_contradictions(sc, K("r", target=T("org/t", num_hidden_layers=8))) == []


def test_way_out_keeps_the_record():
    rec = K("the record", target=T("org/t"), drafter_id=DID, in_registry=True)
    shown = "`eagle3-convert registry show abababababab` shows the record and its history; "
    warn = prov.Contradiction("target", "'org/u'", "'org/t'", rec, severity="warning")
    assert prov.way_out(warn, "'my dir'") == (shown + "if org/u names the model the drafter was trained on, "
                                            "`eagle3-convert registry add 'my dir' --verifier org/u` records it as "
                                            "a name of that target")
    warn = prov.Contradiction("target", "'/p q'", "'org/t'", rec, severity="warning", given="--target")
    assert prov.way_out(warn, "src") == (shown + "if /p q is org/t, `eagle3-convert registry add src --verifier "
                                         "org/t --target '/p q'` records them as one target")
    fact = prov.Contradiction("target depth", 9, 8, rec, of_target=True)
    assert prov.way_out(fact, "src") == shown + "check that config.json names the model the drafter was trained on " \
                                                "(org/t)"
    fact = prov.Contradiction("target depth", 9, 8, rec, other=K("the sidecar"), of_target=True)
    assert prov.way_out(fact, "src") == shown + "check that the sidecar names the model the drafter was trained on " \
                                                "(org/t)"
    untargeted = K("the sidecar", drafter_id=DID)
    fact = prov.Contradiction("depth", 9, 8, untargeted, given="--target", of_target=True)
    assert prov.way_out(fact, "src") == "check that --target names the model the drafter was trained on"
    fact = prov.Contradiction("depth", 9, 8, K("s", target=T(None)), given="--target", of_target=True)
    assert prov.way_out(fact, "src") == "check that --target names the model the drafter was trained on"
    plain = prov.Contradiction("vocab_size", 1000, 512, rec)
    assert prov.way_out(plain, "src") == shown + "fix config.json's vocab_size to 512, as the record says"
    assert prov.way_out(prov.Contradiction("vocab_size", 1000, 512, K("the sidecar", drafter_id=DID)), "src") == \
        "fix config.json's vocab_size to 512, as the sidecar says"
    assert prov.way_out(prov.Contradiction("vocab_size", 1000, 512, K("r", in_registry=True)), "src") == \
        "fix config.json's vocab_size to 512, as r says"


# ---------------------------------------------------------------------------------------------------------------
# sidecar.py: the file beside config.json

from eagle3_convert import __version__, sidecar  # noqa: E402


def test_sidecar_build_writes_its_header_then_the_facts():
    text = sidecar.build(layout="sglang", config_bytes=b'{"x": 1}', facts={"drafter_id": DID, "b": [1, 2]})
    digest = hashlib.sha256(b'{"x": 1}').hexdigest()
    assert sidecar.config_digest(b'{"x": 1}') == digest
    assert text == (json.dumps({"sidecar_version": 1, "tool": f"eagle3-convert {__version__}", "layout": "sglang",
                                "config_sha256": digest, "drafter_id": DID, "b": [1, 2]}, indent=2) + "\n").encode()
    assert sidecar.tool_name() == f"eagle3-convert {__version__}"
    assert sidecar.SIDECAR_VERSION == 1 and sidecar.MAX_SIDECAR_BYTES == 4 * 1024 * 1024


def test_sidecar_read_trusts_it_only_with_its_own_config(tmp_path: Path):
    config = b'{"x": 1}'
    path = tmp_path / SIDECAR
    assert sidecar.read(tmp_path) == (None, False)
    path.write_bytes(sidecar.build(layout="sglang", config_bytes=config, facts={"drafter_id": DID}))
    data = json.loads(path.read_text())
    assert sidecar.read(tmp_path) == (data, False)  # no config.json beside it
    (tmp_path / "config.json").mkdir()
    assert sidecar.read(tmp_path) == (data, False)  # a directory named config.json
    (tmp_path / "config.json").rmdir()
    (tmp_path / "config.json").write_bytes(config)
    assert sidecar.read(tmp_path) == (data, True)
    assert sidecar.read(tmp_path, config) == (data, True) and sidecar.read(tmp_path, b'{"x": 2}') == (data, False)
    other = tmp_path / "other.json"
    other.write_bytes(b'{"x": 2}')
    assert sidecar.read(tmp_path, other) == (data, False)
    other.write_bytes(config)
    assert sidecar.read(tmp_path, other) == (data, True)
    assert sidecar.read(tmp_path, tmp_path / "missing.json") == (data, False)
    (tmp_path / "config.json").write_bytes(b'{"x": 2}')
    assert sidecar.read(tmp_path) == (data, False)
    (tmp_path / "config.json").chmod(0)
    if os.geteuid() != 0:
        assert sidecar.read(tmp_path) == (data, False)  # unreadable config
    (tmp_path / "config.json").chmod(0o644)
    # what is not a sidecar of ours is none
    for text in (b"[1]", b"{}", b'{"sidecar_version": 2}', b'{"sidecar_version": "1"}', b"{", b"\xff\xfe",
                 b"[" * 100000 + b"]" * 100000):
        path.write_bytes(text)
        assert sidecar.read(tmp_path) == (None, False), text[:20]
    path.write_bytes(b'{"sidecar_version": 1}')
    assert sidecar.read(tmp_path, b"") == ({"sidecar_version": 1}, False)
    path.unlink()
    path.mkdir()
    assert sidecar.read(tmp_path) == (None, False)
    path.rmdir()
    # the size limit: exactly the limit is read, one byte more is not
    body = b'{"sidecar_version": 1, "pad": "'
    for size, read in ((sidecar.MAX_SIDECAR_BYTES, True), (sidecar.MAX_SIDECAR_BYTES + 1, False)):
        path.write_bytes(body + b"x" * (size - len(body) - 2) + b'"}')
        assert path.stat().st_size == size
        assert (sidecar.read(tmp_path)[0] is not None) is read


# ---------------------------------------------------------------------------------------------------------------
# registry/recording.py: from a checkpoint's facts to the record (direct calls on a real SQLite registry)

from eagle3_convert.registry import recording  # noqa: E402
from eagle3_convert.registry.models import LineageEdge, Location  # noqa: E402
from eagle3_convert.registry.store import open_registry  # noqa: E402

ID2 = "cd" * 32
ID3 = "ef" * 32


@pytest.fixture
def store(tmp_path: Path):
    s = open_registry(tmp_path / "registry.db")
    yield s
    s.close()


def test_record_fields_keep_what_the_facts_know():
    assert recording.record_fields({}) == {"capture_boundaries": None, "ids_as_written": {}, "flags": {}}
    facts = {"capture_boundaries": [1, 3, 6], "ids_as_written": {"sglang": [1, 3, 5]}, "flags": {"fc_norm": True},
             "hidden_size": 64, "draft_vocab_size": 256, "vocab_size": 512, "trained_with": "specforge",
             "id_kind": "content", "drafter_kind": "eagle3", "model_type": "x", "drafter_id": DID,
             "target": {"name_or_path": "org/t", "model_type": "llama", "num_hidden_layers": 8, "aliases": []}}
    assert recording.record_fields(facts) == {
        "capture_boundaries": [1, 3, 6], "ids_as_written": {"sglang": [1, 3, 5]}, "flags": {"fc_norm": True},
        "hidden_size": 64, "draft_vocab_size": 256, "vocab_size": 512, "trained_with": "specforge",
        "id_kind": "content", "drafter_kind": "eagle3",
        "target": {"name_or_path": "org/t", "num_hidden_layers": 8, "aliases": []}}
    assert recording.record_fields({"hidden_size": None, "ids_as_written": None, "flags": None,
                                    "target": {"name_or_path": None, "aliases": []}}) == {
        "capture_boundaries": None, "ids_as_written": {}, "flags": {}}
    assert "target" not in recording.record_fields({"target": "org/t"})
    assert recording.record_fields({"target": {"aliases": ["x"]}})["target"] == {"aliases": ["x"]}


def test_lineage_edges_note_each_entry_they_leave_out():
    good = LineageEdge(source=Location.local("/a", "sglang"), dest=Location.local("/b", "vllm"),
                       tool="t").model_dump(mode="json")
    edges, notes = recording.lineage_edges([good, {"source": 3}, good, "x"])
    assert [e.model_dump(mode="json") for e in edges] == [good, good]
    assert len(notes) == 2
    assert notes[0].startswith("lineage entry 1 of eagle3-convert.json was not recorded: ")
    assert notes[1].startswith("lineage entry 3 of eagle3-convert.json was not recorded: ")
    assert recording.lineage_edges({"a": good}) == ([], []) and recording.lineage_edges(None) == ([], [])


def test_disagreements_and_their_message():
    known = record(capture_boundaries=[1, 3, 6], target=T("org/t", aliases=["/models/t"]))
    assert recording.disagreements(known, None, None) == []
    assert recording.disagreements(known, [1, 3, 6], "ORG/T") == []
    assert recording.disagreements(known, [1, 3, 6], "/models/t") == []
    found = recording.disagreements(known, [2, 4, 5], "org/u")
    assert found == [{"field": "capture_boundaries", "hub": [2, 4, 5], "registry": [1, 3, 6]},
                     {"field": "target", "hub": "org/u", "registry": "org/t"}]
    assert recording.conflict_message(found) == ("the Hub says capture_boundaries [2, 4, 5], the registry [1, 3, 6]; "
                                                 "the Hub says target org/u, the registry org/t")
    assert recording.disagreements(record(capture_boundaries=None, target=None), [2, 4, 5], "org/u") == [
        {"field": "capture_boundaries", "hub": [2, 4, 5], "registry": None}]
    assert recording.disagreements(record(target=T(None, num_hidden_layers=8)), None, "org/u") == []
    assert recording.disagreements(known, None, "") == []


def test_hub_uri_is_the_first_hub_copy():
    assert recording.hub_uri(record()) == "the Hub"
    assert recording.hub_uri(record(locations=[Location.local("/a", "sglang"), Location.hub("o/r", "sglang", "c1"),
                                               Location.hub("o/s", "sglang", "c2")])) == "hf://o/r@c1"


def fingerprint_twin(store, twin_id=ID2, repo="org/d", commit="c1", **kw):
    return store.upsert_drafter(twin_id, id_kind="hub-fingerprint", locations=[Location.hub(repo, "speculators",
                                                                                          commit)], **kw)


def test_merge_twins_fills_the_gaps_and_absorbs(store):
    rec = store.upsert_drafter(DID, capture_boundaries=[1, 3, 6], hidden_size=64, flags={"fc_norm": True},
                               ids_as_written={"sglang": [1, 3, 5]}, target=T("org/t", num_hidden_layers=8))
    fingerprint_twin(store, capture_boundaries=[1, 3, 6], hidden_size=32, vocab_size=512, draft_vocab_size=256,
                     trained_with="specforge", flags={"fc_norm": False, "norm_output": True},
                     ids_as_written={"sglang": [9], "speculators": [1, 3, 6]},
                     target=T("org/t", hidden_size=64, aliases=["/x"]),
                     lineage=[LineageEdge(source=Location.local("/a", "sglang"), dest=Location.hub("org/d", "x", "c1"),
                                          tool="t")])
    got, notes = recording.merge_twins(store, rec, ["/local", "hf://org/d@c1", "hf://org/d"])
    assert notes == [f"merged the record registry sync made of hf://org/d@c1 (hub fingerprint {ID2[:12]}) into this "
                     "one: 1 location(s), 1 lineage edge(s), filled draft_vocab_size, flags, ids_as_written, target, "
                     "trained_with, vocab_size"]
    assert got.drafter_id == DID and got.hidden_size == 64 and got.vocab_size == 512 and got.draft_vocab_size == 256
    assert got.trained_with == "specforge" and got.flags == {"fc_norm": True, "norm_output": True}
    assert got.ids_as_written == {"sglang": [1, 3, 5], "speculators": [1, 3, 6]}
    assert got.target.num_hidden_layers == 8 and got.target.hidden_size == 64 and got.target.name_or_path == "org/t"
    assert [loc.uri for loc in got.locations] == ["hf://org/d@c1"] and len(got.lineage) == 1
    assert store.get(ID2).drafter_id == DID  # the twin's id is an alias now
    # nothing to fill: merged without "filled"
    fingerprint_twin(store, ID3, commit="c2", capture_boundaries=[1, 3, 6])
    got, notes = recording.merge_twins(store, got, ["hf://org/d@c2"])
    assert notes == [f"merged the record registry sync made of hf://org/d@c2 (hub fingerprint {ID3[:12]}) into this "
                     "one: 1 location(s), 0 lineage edge(s)"]
    assert len(got.locations) == 2


def test_merge_twins_keeps_a_contradicting_twin_apart(store):
    rec = store.upsert_drafter(DID, capture_boundaries=[1, 3, 6], target=T("org/t"))
    fingerprint_twin(store, capture_boundaries=[2, 4, 5], target=T("org/u"))
    conflicts: list = []
    got, notes = recording.merge_twins(store, rec, ["hf://org/d@c1"], conflicts=conflicts)
    message = "the Hub says capture_boundaries [2, 4, 5], the registry [1, 3, 6]; the Hub says target org/u, the " \
              "registry org/t"
    assert conflicts == [{"drafter_id": ID2, "uri": "hf://org/d@c1", "code": "E-SYNC-CONFLICT", "message": message,
                          "conflicts": recording.disagreements(rec, [2, 4, 5], "org/u")}]
    assert notes == [f"NOT merged: the record registry sync made of hf://org/d@c1 (hub fingerprint {ID2[:12]}) is this "
                     f"drafter, but {message}; both records kept [E-SYNC-CONFLICT]"]
    assert got == rec and store.get(ID2).drafter_id == ID2
    assert recording.merge_twins(store, rec, ["hf://org/d@c1"]) == (rec, notes)  # conflicts not asked for


def test_merge_twins_only_fingerprint_records_of_those_commits(store):
    rec = store.upsert_drafter(DID, capture_boundaries=[1, 3, 6])
    store.upsert_drafter(ID2, capture_boundaries=[1, 3, 6], locations=[Location.hub("org/d", "x", "c1")])  # content
    fingerprint_twin(store, ID3, repo="org/e", commit="c9", capture_boundaries=[1, 3, 6])
    store.add_location(DID, Location.hub("org/own", "x", "c0"))
    rec = store.get(DID)
    assert recording.merge_twins(store, rec, ["hf://org/d@c1", "hf://org/e", "/org/e@c9", "hf://org/own@c0"])[1] == []
    assert recording.merge_twins(store, rec, [], twins=[DID, "00" * 32])[1] == []
    got, notes = recording.merge_twins(store, rec, ["hf://org/e@c9", "hf://org/e@c9"], twins=[ID3])
    assert len(notes) == 1 and store.get(ID3).drafter_id == DID
    # an id that is an alias now (merged already) is not merged again
    assert recording.merge_twins(store, got, [], twins=[ID3])[1] == []


def test_gaps_fill_only_what_the_record_does_not_know():
    rec = record(hidden_size=None, vocab_size=None, target=None, flags={"a": True}, ids_as_written={"x": [1]})
    twin = record(hidden_size=32, vocab_size=None, draft_vocab_size=100, trained_with="t",
                  target=T("org/t", hidden_size=32), flags={"a": False, "b": True}, ids_as_written={"x": [2], "y": [3]})
    assert recording._gaps(rec, twin) == {"hidden_size": 32, "trained_with": "t", "target": T("org/t", hidden_size=32).model_dump(),
                                          "flags": {"b": True}, "ids_as_written": {"y": [3]}}
    same = record(trained_with="t")
    assert recording._gaps(same, record(trained_with="u")) == {}
    assert recording._gaps(record(target=T("org/t", hidden_size=8)), record(target=T("org/u", num_hidden_layers=4))) \
        == {"target": T("org/t", hidden_size=8, num_hidden_layers=4).model_dump()}
    assert recording._gaps(record(target=T("org/t")), record(target=None)) == {}


def test_adopt_former_ids(store):
    old = "12" * 32
    store.upsert_drafter(old, id_kind="config-and-weights", capture_boundaries=[1, 3, 6], hidden_size=64,
                         ids_as_written={"sglang": [1, 3, 5]}, vocab_size=512, draft_vocab_size=256,
                         flags={"fc_norm": True}, trained_with="specforge", target=T("org/t"),
                         locations=[Location.local("/old", "sglang")])
    notes = recording.adopt_former_ids(store, DID, [old, old, DID, "34" * 32])
    assert notes == [f"merged the record {old[:12]} (its id from before drafter ids were the weights alone) into "
                     f"{DID[:12]}; the old id still finds it"]
    got = store.get(old)
    assert got.drafter_id == DID and got.id_kind == "content" and got.capture_boundaries == [1, 3, 6]
    assert (got.hidden_size, got.vocab_size, got.draft_vocab_size, got.trained_with) == (64, 512, 256, "specforge")
    assert got.flags == {"fc_norm": True} and got.ids_as_written == {"sglang": [1, 3, 5]}
    assert got.target.name_or_path == "org/t" and [loc.uri for loc in got.locations] == ["/old"]
    assert recording.adopt_former_ids(store, DID, [old]) == []  # an alias now
    # into a known record: gaps filled; a content record is no former one
    older = "56" * 32
    store.upsert_drafter(older, id_kind="config-and-weights", capture_boundaries=[1, 3, 6], hidden_size=32,
                         drafter_kind="peagle", flags={"norm_output": False}, target=T("org/t", num_hidden_layers=8))
    store.upsert_drafter(ID3, capture_boundaries=[1, 3, 6])
    assert len(recording.adopt_former_ids(store, DID, [older, ID3])) == 1
    got = store.get(DID)
    assert got.hidden_size == 64 and got.flags == {"fc_norm": True, "norm_output": False}
    assert got.target.num_hidden_layers == 8 and store.get(ID3).drafter_id == ID3


def test_adopt_former_ids_keeps_a_contradicting_one_apart(store):
    old = "12" * 32
    store.upsert_drafter(DID, capture_boundaries=[1, 3, 6], target=T("org/t"))
    store.upsert_drafter(old, id_kind="config-and-weights", capture_boundaries=[2, 4, 5], target=T("org/u"),
                         locations=[Location.local("/old", "sglang"), Location.local("/old2", "vllm")])
    conflicts: list = []
    notes = recording.adopt_former_ids(store, DID, [old], conflicts)
    message = (f"the record {old[:12]} (before schema v5) says capture_boundaries [2, 4, 5], the record {DID[:12]} "
               f"[1, 3, 6]; the record {old[:12]} (before schema v5) says target org/u, the record {DID[:12]} org/t")
    assert notes == [f"NOT merged: {message}; both records kept [E-RECORD-CONFLICT]"]
    assert conflicts == [{"drafter_id": old, "uri": "/old", "code": "E-RECORD-CONFLICT", "message": message,
                          "conflicts": [{"field": "capture_boundaries", "hub": [2, 4, 5], "registry": [1, 3, 6]},
                                        {"field": "target", "hub": "org/u", "registry": "org/t"}]}]
    assert store.get(old).drafter_id == old
    store.upsert_drafter("78" * 32, id_kind="config-and-weights", capture_boundaries=[2, 4, 5])
    conflicts = []
    assert len(recording.adopt_former_ids(store, DID, ["78" * 32], conflicts)) == 1 and conflicts[0]["uri"] == ""
    assert recording.adopt_former_ids(store, DID, [old])[0].startswith("NOT merged")  # conflicts not asked for


def test_target_learned():
    known = T("org/t", num_hidden_layers=8, config_sha256="d")
    # one target (the digest): names learned, gaps filled
    got, learned = recording._target_learned(known, {"name_or_path": "/m/t", "config_sha256": "d", "hidden_size": 64},
                                             False)
    assert learned == ["/m/t"] and got == T("org/t", num_hidden_layers=8, hidden_size=64, config_sha256="d",
                                            aliases=["/m/t"]).model_dump()
    # untold: gaps filled, no name, unless the user claims it
    got, learned = recording._target_learned(known, {"name_or_path": "org/u", "hidden_size": 64}, False)
    assert learned == [] and got == T("org/t", num_hidden_layers=8, hidden_size=64, config_sha256="d").model_dump()
    got, learned = recording._target_learned(known, {"name_or_path": "org/u", "aliases": ["/u"]}, True)
    assert learned == ["org/u", "/u"] and got["aliases"] == ["org/u", "/u"] and got["name_or_path"] == "org/t"
    # facts differ: the claim replaces it; without a claim the recorded target stands
    new = {"name_or_path": "org/u", "num_hidden_layers": 9}
    assert recording._target_learned(known, new, True) == (T("org/u", num_hidden_layers=9).model_dump(), [])
    assert recording._target_learned(known, new, False) == (known.model_dump(), [])
    assert recording._target_learned(known, {"name_or_path": 3}, True) == (known.model_dump(), [])


def test_record_facts_fills_claims_and_keeps_history(store):
    facts = {"drafter_id": DID, "capture_boundaries": [1, 3, 6], "trained_with": "specforge", "hidden_size": 64,
             "target": {"name_or_path": "org/t", "num_hidden_layers": 8, "config_sha256": "d"}}
    rec, notes = recording.record_facts(store, facts, locations=[Location.local("/a", "sglang")],
                                        weights_keys=["k1", "k2"])
    assert notes == [] and rec.changes == [] and rec.capture_boundaries == [1, 3, 6]
    assert store.keyed("k1") == [DID] and store.keyed("k2") == [DID]
    # a later reading: the recorded training truth stands; a new name of the same target is learned, once
    again = {**facts, "capture_boundaries": [2, 4, 5], "trained_with": "other", "vocab_size": 512,
             "target": {"name_or_path": "/m/t", "config_sha256": "d"}}
    rec, notes = recording.record_facts(store, again)
    assert rec.capture_boundaries == [1, 3, 6] and rec.trained_with == "specforge" and rec.vocab_size == 512
    assert notes == [f"the record of drafter {DID[:12]} learned /m/t as a name of its target org/t"]
    assert [(c.field, c.old, c.new, c.reason) for c in rec.changes] == [
        ("target", {"name_or_path": "org/t", "revision": None, "architectures": [], "num_hidden_layers": 8,
                    "hidden_size": None, "vocab_size": None, "aliases": [], "config_sha256": "d"},
         {"name_or_path": "org/t", "revision": None, "architectures": [], "num_hidden_layers": 8, "hidden_size": None,
          "vocab_size": None, "aliases": ["/m/t"], "config_sha256": "d"}, "recorded")]
    assert recording.record_facts(store, again)[1] == []
    # the user's word replaces, and the history says why
    claim = {**facts, "capture_boundaries": [2, 4, 5], "trained_with": "other",
             "target": {"name_or_path": "org/u", "aliases": ["/u"]}}
    rec, notes = recording.record_facts(store, claim, claimed=["capture_boundaries", "trained_with", "target"],
                                        reason="registry add --target")
    assert notes == [f"the record of drafter {DID[:12]} learned org/u, /u as names of its target org/t"]
    assert rec.capture_boundaries == [2, 4, 5] and rec.trained_with == "other"
    assert [(c.field, c.old, c.new, c.reason, c.tool) for c in rec.changes[1:3]] == [
        ("capture_boundaries", [1, 3, 6], [2, 4, 5], "registry add --target", sidecar.tool_name()),
        ("trained_with", "specforge", "other", "registry add --target", sidecar.tool_name())]
    assert rec.changes[3].field == "target" and len(rec.changes) == 4
    # a claim of what is already recorded changes nothing
    rec, notes = recording.record_facts(store, claim, claimed=["capture_boundaries", "trained_with", "target"])
    assert notes == [] and len(rec.changes) == 4


def test_record_facts_on_an_unnamed_target_and_a_new_trained_with(store):
    store.upsert_drafter(DID, target=T(None, num_hidden_layers=8, config_sha256="d"))
    rec, notes = recording.record_facts(store, {"drafter_id": DID, "trained_with": "t",
                                                "target": {"name_or_path": "/m/t", "config_sha256": "d"}})
    assert notes == [f"the record of drafter {DID[:12]} learned /m/t as a name of its target (unnamed)"]
    assert rec.trained_with == "t" and rec.target.name_or_path == "/m/t"


def test_record_facts_merges_former_ids_and_twins(store):
    old = "12" * 32
    store.upsert_drafter(old, id_kind="config-and-weights", capture_boundaries=[1, 3, 6])
    fingerprint_twin(store, capture_boundaries=[2, 4, 5])
    conflicts: list = []
    rec, notes = recording.record_facts(store, {"drafter_id": DID, "capture_boundaries": [1, 3, 6]},
                                        locations=[Location.hub("org/d", "sglang", "c1")], former_ids=[old],
                                        conflicts=conflicts)
    assert notes[0].startswith(f"merged the record {old[:12]}") and notes[1].startswith("NOT merged: the record "
                                                                                          "registry sync made")
    assert conflicts[0]["code"] == "E-SYNC-CONFLICT" and store.get(old).drafter_id == DID
    # a Hub-fingerprint record merges no twins of its own
    rec, notes = recording.record_facts(store, {"drafter_id": ID3, "id_kind": "hub-fingerprint",
                                                "capture_boundaries": [2, 4, 5]},
                                        locations=[Location.hub("org/d", "sglang", "c1")])
    assert notes == [] and store.get(ID2).drafter_id == ID2


# ---------------------------------------------------------------------------------------------------------------
# records.py: recording and asking the registry about a checkpoint

from conftest import EXAMPLE, run_cli  # noqa: E402

from eagle3_convert import records  # noqa: E402
from eagle3_convert.errors import UsageError  # noqa: E402
from eagle3_convert.registry.errors import NoRegistry, RegistryError  # noqa: E402


def test_registry_fact_of_a_record_in_utc_seconds():
    fact = records.RegistryFact.of(record(capture_boundaries=None))
    assert fact == records.RegistryFact([], DID, "2026-03-05T01:30:00")
    assert records.RegistryFact.of(record()).as_dict() == {"capture_boundaries": [1, 3, 6], "drafter_id": DID,
                                                           "recorded_at": "2026-03-05T01:30:00"}


def test_publication_edges_helpers():
    assert records._names_a_private_copy({"source": {"uri": "local:me/x"}, "dest": {"uri": "hf://o/r"}})
    assert records._names_a_private_copy({"source": {"uri": "/a"}, "dest": {"uri": "local:x"}})
    assert not records._names_a_private_copy({"source": {"uri": "/a"}, "dest": {"uri": "hf://o/r"}})
    assert not records._names_a_private_copy({"source": "local:x", "dest": None})
    assert not records._names_a_private_copy({})
    edge = {"source": {"uri": "/a"}, "dest": {"uri": "hf://o/r", "layout": "sglang"}, "tool": "t"}
    assert records._at_commit(edge, "hf://o/r", "hf://o/r@c1") == {**edge, "dest": {"uri": "hf://o/r@c1",
                                                                                     "layout": "sglang"}}
    assert records._at_commit(edge, "hf://o/s", "hf://o/s@c1") is edge
    assert records._at_commit({"dest": "hf://o/r"}, "hf://o/r", "x") == {"dest": "hf://o/r"}


def test_file_hashes_of_weight_files_and_cache_blobs(tmp_path: Path):
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "x.bin").mkdir()
    blob_name = hashlib.sha256(b"other").hexdigest()
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / blob_name).write_bytes(b"whatever: the blob's name is trusted")
    (tmp_path / "b.bin").symlink_to(blobs / blob_name)
    (blobs / "notahash").write_bytes(b"linked")
    (tmp_path / "c.gguf").symlink_to(blobs / "notahash")
    (tmp_path / "d.safetensors").symlink_to(blobs / (blob_name.upper()))  # dangling, no sha256 name
    assert records._file_hashes(tmp_path) == {"b.bin": blob_name, "c.gguf": hashlib.sha256(b"linked").hexdigest(),
                                              "model.safetensors": hashlib.sha256(b"abc").hexdigest()}
    big = tmp_path / "big" / "model.safetensors"
    big.parent.mkdir()
    data = os.urandom((1 << 24) + 5)
    big.write_bytes(data)
    assert records._file_hashes(big.parent) == {"model.safetensors": hashlib.sha256(data).hexdigest()}


def test_lookups_never_create_a_registry(tmp_path: Path):
    missing = tmp_path / "none.db"
    assert records.record_of(DID, missing) is None and records.acceptance_of(DID, missing) == []
    assert records.known_record(EXAMPLE, missing) is None and not missing.exists()
    assert records.record_of(None, missing) is None and records.record_of("", missing) is None
    for ask in (records.show, records.lineage, records.remove):
        with pytest.raises(NoRegistry):
            ask(DID, missing)
    with pytest.raises(NoRegistry):
        records.list_records(None, missing)
    assert not missing.exists()


def test_show_lineage_remove_name_what_is_unknown(tmp_path: Path):
    path = tmp_path / "r.db"
    with open_registry(path) as s:
        s.upsert_drafter(DID, capture_boundaries=[1, 3, 6], lineage=[LineageEdge(
            source=Location.local("/a", "sglang"), dest=Location.local("/b", "vllm"), tool="t")])
    assert records.show(DID[:8], path).drafter_id == DID and len(records.lineage(DID, path)) == 1
    assert records.record_of(DID, path).drafter_id == DID and records.acceptance_of(DID, path) == []
    for ask in (records.show, records.lineage, records.remove):
        with pytest.raises(RegistryError) as err:
            ask(ID2, path)
        assert str(err.value) == f"no drafter {ID2} in the registry {path}"
        assert err.value.hint == "check the id against `eagle3-convert registry list`, or --registry"
    assert records.remove(DID[:10], path) == DID and records.record_of(DID, path) is None
    with open_registry(path) as s:  # an open store is used, and left open
        assert records.record_of(DID, s) is None and records.list_records(None, s) == []
        s.upsert_drafter(ID2)
    assert [r.drafter_id for r in records.list_records(None, path)] == [ID2]


def test_add_checkpoint_needs_layers_and_convention_together():
    for layers, convention in (([1, 3, 6], None), (None, "boundary")):
        with pytest.raises(UsageError) as err:
            records.add_checkpoint(str(EXAMPLE), capture_layers=layers, convention=convention)
        assert str(err.value) == "capture layers need their convention, and a convention needs capture layers"
        assert err.value.hint == ("pass --capture-layers and --convention together, e.g. --capture-layers 1,3,4 "
                                  "--convention sglang")


# ---------------------------------------------------------------------------------------------------------------
# fingerprint.py: the weights key (a sample of each tensor's bytes)

from eagle3_convert import fingerprint  # noqa: E402
from eagle3_convert.convert import read_source  # noqa: E402
from eagle3_convert.converters.gguf_tensors import StreamedTensor  # noqa: E402
from eagle3_convert.errors import FormatError  # noqa: E402
from eagle3_convert.safetensors_io import InMemoryTensor, TensorRef, read_tensor_bytes  # noqa: E402


def test_sample_spans_first_and_last_byte_evenly():
    assert (fingerprint.KEY_WINDOWS, fingerprint.KEY_WIDTH) == (8, 64)
    assert fingerprint.sample_spans(512, 8, 64) == [(0, 512)] and fingerprint.sample_spans(0, 8, 64) == [(0, 0)]
    assert fingerprint.sample_spans(1000, 8, 64) == [(0, 64), (134, 198), (267, 331), (401, 465), (535, 599),
                                                     (669, 733), (802, 866), (936, 1000)]
    assert fingerprint.sample_spans(513, 8, 64) == [(0, 64), (64, 128), (128, 192), (192, 256), (257, 321),
                                                    (321, 385), (385, 449), (449, 513)]
    assert fingerprint.sample_spans(10, 2, 3) == [(0, 3), (7, 10)]


def expected_sample(data: bytes, windows=8, width=64) -> bytes:
    return b"".join(data[a:b] for a, b in fingerprint.sample_spans(len(data), windows, width))


@pytest.mark.parametrize("size", [100, 5000, 9 * 1024 * 1024 + 8])
def test_tensor_sample_is_the_same_bytes_however_the_tensor_is_held(tmp_path: Path, size: int):
    data = os.urandom(size)
    path = tmp_path / "t.bin"
    path.write_bytes(b"H" * 13 + data + b"T" * 5)
    ref = TensorRef(path, "w", "F32", (size // 4,), 13, 13 + size)
    want = expected_sample(data)
    assert fingerprint.tensor_sample(ref, 8, 64) == want
    assert fingerprint.tensor_sample(InMemoryTensor("F32", (size // 4,), data), 8, 64) == want
    assert fingerprint.tensor_sample(StreamedTensor(ref, "F32", (size // 4,)), 8, 64) == want


def test_tensor_sample_streamed_across_chunks(tmp_path: Path):
    rows, row = 1024, 9 * 1024  # 9 MiB: three 4-MiB chunks cut inside the sampled windows' spread
    data = os.urandom(rows * row)
    path = tmp_path / "t.bin"
    path.write_bytes(data)
    ref = TensorRef(path, "w", "F32", (rows, row // 4), 0, len(data))
    streamed = StreamedTensor(ref, "F32", (rows, row // 4))
    assert len(list(streamed.chunks())) > 1
    for windows, width in ((8, 64), (64, 4096), (3, 5 * 1024 * 1024)):
        assert fingerprint.tensor_sample(streamed, windows, width) == expected_sample(data, windows, width)


def test_tensor_sample_of_a_short_or_unreadable_file(tmp_path: Path):
    path = tmp_path / "t.bin"
    path.write_bytes(b"x" * 1000)
    with pytest.raises(FormatError) as err:
        fingerprint.tensor_sample(TensorRef(path, "w", "F32", (500,), 0, 2000), 8, 64)
    assert (str(err.value), err.value.hint, err.value.code) == (
        f"{path}: tensor 'w' is cut short", "the file is damaged or not safetensors: download or copy it again",
        "E-FILE-TRUNCATED")
    with pytest.raises(FormatError) as err:
        fingerprint.tensor_sample(TensorRef(tmp_path, "w", "F32", (500,), 0, 2000), 8, 64)
    assert (str(err.value), err.value.hint, err.value.code) == (
        f"{tmp_path}: cannot read tensor 'w' (Is a directory)", "check the file and its permissions", "E-FILE-READ")
    with pytest.raises(FormatError) as err:
        fingerprint.tensor_sample(TensorRef(tmp_path / "gone", "w", "F32", (500,), 0, 2000), 8, 64)
    assert str(err.value) == f"{tmp_path / 'gone'}: cannot read tensor 'w' (No such file or directory)"


def test_weights_key_digests_headers_samples_and_vocabulary():
    drafter = read_source(str(EXAMPLE)).drafter
    sample = {name: [src.dtype, list(src.shape),
                     hashlib.sha256(expected_sample(read_tensor_bytes(src))).hexdigest()]
              for name, src in sorted(drafter.tensors.items())}
    payload = {"key": 1, "tensors": sample, "draft_vocab": list(drafter.vocab.target_ids)}
    assert fingerprint.weights_key(drafter) == hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# sources.py: what is a repo id, which files a drafter needs, how a Hub failure reads

from eagle3_convert import sources  # noqa: E402


def test_repo_id_shapes(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ok = ["org/name", "O/n", "a1/B-2.c_d", "a" + "b" * 95 + "/x", "x/" + "y" * 96]
    bad = ["org", "org/name/x", "/org/name", "./org/name", "~org/x", ".org/name", "org/.name", "org/na..me",
           "a" + "b" * 96 + "/x", "org/", "/name", "org\\name", "org/na me", "-org/name", "org/-name", ""]
    for spec in ok:
        assert sources.has_repo_id_shape(spec) and sources.is_repo_id(spec) and not sources.looks_local(spec), spec
        assert sources.check_repo_id(spec) == spec
    for spec in bad:
        assert not sources.has_repo_id_shape(spec) and sources.looks_local(spec) and not sources.is_repo_id(spec), spec
        with pytest.raises(UsageError) as err:
            sources.check_repo_id(spec)
        assert (str(err.value), err.value.hint) == (f"{spec!r} is not a Hub repo id", "give the destination as "
                                                    "ORG/NAME, e.g. my-org/Llama-3.1-8B-eagle3")
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").symlink_to(tmp_path / "nowhere")  # a dangling link is a local path too
    assert sources.looks_local("org/name") and not sources.is_repo_id("org/name")


def test_chosen_files_of_a_drafter_repo():
    assert sources.chosen_gguf(["eagle3-x-F32.gguf", "eagle3-x-F16.gguf", "eagle3-x-BF16.gguf", "eagle3-a-BF16.gguf",
                                "README.md"]) == "eagle3-a-BF16.gguf"
    assert sources.chosen_gguf(["eagle3-x-F32.gguf", "eagle3-x-F16.gguf"]) == "eagle3-x-F16.gguf"
    assert sources.chosen_gguf(["eagle3-x-F32.gguf", "other.gguf"]) == "eagle3-x-F32.gguf"
    assert sources.chosen_gguf(["only.gguf", "sub/eagle3-x-BF16.gguf"]) == "only.gguf"
    assert sources.chosen_gguf(["a.gguf", "b.gguf"]) is None and sources.chosen_gguf([]) is None
    assert sources.chosen_gguf(["eagle3-x-BF16.gguf", "config.json"]) is None
    assert sources.chosen_gguf(["eagle3-x-BF16.gguf", "model.safetensors"]) is None
    assert sources.chosen_gguf(["eagle3-x-BF16.gguf", "sub/config.json", "sub/m.safetensors"]) == "eagle3-x-BF16.gguf"
    assert sources._choose_files(["eagle3-x-BF16.gguf", "README.md", "eagle3-convert.json", "x.txt"]) == [
        "eagle3-x-BF16.gguf", "README.md", "eagle3-convert.json"]
    siblings = ["config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
                "eagle3-convert.json", "generation_config.json", "hf_quant_config.json", "README.md",
                "pytorch_model.bin", "optimizer.pt", "sub/model.safetensors", "training_args.bin"]
    assert sources._choose_files(siblings) == siblings[:7]
    bins = ["config.json", "pytorch_model.bin", "pytorch_model-00001-of-00002.bin", "pytorch_model.bin.index.json",
            "optimizer.bin", "sub/pytorch_model.bin"]
    assert sources._choose_files(bins) == bins[:4]


def test_hub_settings_from_the_environment(monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert sources.endpoint_from_env("http://a") == "http://a" and sources.endpoint_from_env(None) is None
    monkeypatch.setenv("HF_ENDPOINT", "http://env/")
    assert sources.endpoint_from_env(None) == "http://env/" and sources.endpoint_from_env("http://a") == "http://a"
    assert sources.hub_url(None) == "http://env" and sources.hub_url("http://b//") == "http://b"
    monkeypatch.setenv("HF_ENDPOINT", "")
    assert sources.endpoint_from_env("") is None
    for value, offline in (("1", True), ("TRUE", True), ("yes", True), ("On", True), ("0", False), ("", False),
                           ("no", False)):
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
        assert sources.hub_offline() is offline, value
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert sources.hub_offline() is False


def test_no_such_directory_names_the_nearest(tmp_path: Path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "file").write_text("")
    assert sources.no_such_directory(str(tmp_path / "checkpoint")) == (
        f"no such directory (did you mean {tmp_path / 'checkpoints'}?)", True)
    assert sources.no_such_directory(str(tmp_path / "checkpoint") + "/") == (
        f"no such directory (did you mean {tmp_path / 'checkpoints'}?)", True)
    assert sources.no_such_directory(str(tmp_path / "zzzzzz")) == (f"no such directory in {tmp_path}", True)
    assert sources.no_such_directory(str(tmp_path / "fil")) == (f"no such directory in {tmp_path}", True)
    assert sources.no_such_directory(str(tmp_path / "nope" / "x")) == ("no such directory", False)
    assert sources.no_such_directory("org/name") == ("no such directory", False)
    assert sources.no_such_directory("name") == ("no such directory", False)
    assert sources.no_such_directory(str(tmp_path / "file" / "x")) == ("no such directory", False)


def test_both_readings_and_the_error_line():
    first = sources._hub_error("downloading", "org/x", "file or repo not found (HTTP 404)", "check it", "E-HUB-NOTFOUND")
    assert (str(first), first.hint, first.code, first.reading) == (
        "downloading org/x: file or repo not found (HTTP 404)", "check it", "E-HUB-NOTFOUND",
        "file or repo not found (HTTP 404)")
    both = sources.both_readings("scratch/x", "no such directory", first)
    assert (str(both), both.hint, both.code, both.reading) == (
        "scratch/x: no such directory; as a Hub repo id: file or repo not found (HTTP 404)",
        "check it; if you meant a local path, check it", "E-HUB-NOTFOUND", "file or repo not found (HTTP 404)")
    plain = sources.HubError("m")
    assert plain.reading == "m" and plain.code == "E-HUB" and sources.HubError("m", code="E-X").code == "E-X"
    gone = sources.unreachable_error("downloading", "org/x", "http://h/", "ConnectError")
    assert (str(gone), gone.hint, gone.code) == (
        "downloading org/x: the Hub at http://h is unreachable (ConnectError)",
        "check the network, and --endpoint or HF_ENDPOINT", "E-HUB-OFFLINE")


def test_remember_ref_names_a_commit_download(tmp_path: Path):
    sha = "a" * 40
    snap = tmp_path / "models--o--r" / "snapshots" / sha
    snap.mkdir(parents=True)
    sources._remember_ref(snap, "main", sha)
    assert (tmp_path / "models--o--r" / "refs" / "main").read_text() == sha
    (tmp_path / "models--o--r" / "refs" / "main").write_text("b" * 40 + "\n")
    sources._remember_ref(snap, "main", sha)
    assert (tmp_path / "models--o--r" / "refs" / "main").read_text() == sha
    for args in ((snap, "v1", None), (snap, sha, sha), (snap, "v2", "c" * 40), (tmp_path / sha, "v3", sha)):
        sources._remember_ref(*args)
    assert sorted(p.name for p in (tmp_path / "models--o--r" / "refs").iterdir()) == ["main"]
    other = tmp_path / "models--o--s" / "other" / sha
    other.mkdir(parents=True)
    sources._remember_ref(other, "v4", sha)
    assert not (tmp_path / "models--o--s" / "refs").exists()
    blocked = tmp_path / "models--o--t" / "snapshots" / sha
    blocked.mkdir(parents=True)
    (tmp_path / "models--o--t" / "refs").write_text("a file where refs/ should be")
    sources._remember_ref(blocked, "main", sha)  # a cache it cannot write costs nothing


def test_way_out_keeps_each_name_whole():
    rec = K("the record", target=T("XORG/T-X"), drafter_id=DID)
    warn = prov.Contradiction("target", "'Xorg/u-X'", "'XORG/T-X'", rec, severity="warning")
    assert prov.way_out(warn, "src") == ("if Xorg/u-X names the model the drafter was trained on, `eagle3-convert "
                                         "registry add src --verifier Xorg/u-X` records it as a name of that target")
    warn = prov.Contradiction("target", "'/X'", "'XORG/T-X'", rec, severity="warning", given="--target")
    assert prov.way_out(warn, "src") == ("if /X is XORG/T-X, `eagle3-convert registry add src --verifier XORG/T-X "
                                         "--target /X` records them as one target")


def test_an_untold_target_names_where_and_whose():
    known = K("the record", target=T("org/t"))
    got = prov.fact_contradictions(cfg(), T("org/u"), None, known)
    assert [(c.severity, c.where, c.other) for c in got] == [
        ("warning", "$.speculators_config.verifier.name_or_path", None)]
    sc = K("the sidecar", target=T("org/u"))
    got = prov.record_contradictions(sc, known)
    assert [(c.severity, c.other, c.given, c.message) for c in got] == [
        ("warning", sc, "the sidecar", "the sidecar says target 'org/u', the record says 'org/t': no fact of either "
                                       "tells whether they are one model")]


@pytest.fixture
def far_from_utc(monkeypatch):
    """The process's local time zone set to one far from UTC (records say UTC whatever the host's zone)."""
    import time
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_record_time_is_said_in_utc_on_any_host(far_from_utc):
    assert prov.from_record(record()).label == \
        "the registry's record of drafter abababababab (recorded 2026-03-05 01:30 UTC)"
    assert records.RegistryFact.of(record()).recorded_at == "2026-03-05T01:30:00"


def _copy_of_example(tmp_path: Path, name: str = "copy") -> Path:
    import shutil
    dest = tmp_path / name
    shutil.copytree(EXAMPLE, dest)
    return dest


def test_known_record_by_the_weights_key_and_the_full_id_on_a_collision(tmp_path: Path):
    copy = _copy_of_example(tmp_path)
    drafter = read_source(str(copy)).drafter
    key = fingerprint.weights_key(drafter)
    real = fingerprint.drafter_id(drafter, fingerprint.tensor_digests(drafter))
    path = tmp_path / "r.db"
    with open_registry(path) as s:
        s.upsert_drafter(ID2, capture_boundaries=[9])
        s.add_weights_key(key, ID2)  # another drafter's weights sampled alike: a collision
    assert records.known_record(copy, path).drafter_id == ID2  # one id under the key: its record
    with open_registry(path) as s:
        s.upsert_drafter(real, capture_boundaries=[1, 3, 6])
        s.add_weights_key(key, real)
    assert records.known_record(copy, path).drafter_id == real  # two: the full id decides
    assert records.known_record(copy, path, drafter=drafter).drafter_id == real
    with open_registry(path) as s:
        s.remove(real)
        s.upsert_drafter(ID3)
        s.add_weights_key(key, ID3)
    assert records.known_record(copy, path) is None  # the full id names no record: none of theirs


def test_known_record_of_an_old_record_by_sidecar_hub_hashes_or_place(tmp_path: Path):
    from eagle3_convert import sidecar as sc
    copy = _copy_of_example(tmp_path)
    path = tmp_path / "r.db"
    # a record made before keys were kept (none recorded), named by the sidecar beside the copy
    data = json.loads((copy / SIDECAR).read_text()) if (copy / SIDECAR).exists() else None
    config = (copy / "config.json").read_bytes()
    (copy / SIDECAR).write_bytes(sc.build(layout="speculators", config_bytes=config,
                                          facts={**(data or {}), "drafter_id": ID2}))
    with open_registry(path) as s:
        s.upsert_drafter(ID2, capture_boundaries=[1, 3, 6])
    assert records.known_record(copy, path).drafter_id == ID2
    with open_registry(path) as s:  # its keys name other weights: not the record of these
        s.add_weights_key("other-key", ID2)
    assert records.known_record(copy, path) is None
    (copy / SIDECAR).unlink()
    # downloaded: found by the Hub's hashes of its weight files, only for an hf:// copy
    alias = records.weights_alias(records._file_hashes(copy))
    with open_registry(path) as s:
        s.upsert_drafter(ID3, capture_boundaries=[2])
        s.add_alias(alias, ID3)
    assert records.known_record(copy, path, uri="hf://org/x@" + "a" * 40).drafter_id == ID3
    assert records.known_record(copy, path, uri="/elsewhere") is None and records.known_record(copy, path) is None
    # recorded at this place: the latest record there, unless its keys name other weights
    older, newer = "12" * 32, "34" * 32
    with open_registry(path) as s:
        s.upsert_drafter(older, locations=[Location.local(copy, "speculators")])
        s.upsert_drafter(newer, locations=[Location.local(copy, "speculators")])
        s.upsert_drafter(DID, locations=[Location.hub("org/y", "speculators", "c1")])
    assert records.known_record(copy, path).drafter_id == newer
    assert records.known_record(str(copy) + "/", path).drafter_id == newer
    (tmp_path / "elsewhere").mkdir()
    assert records.known_record(tmp_path / "elsewhere", path, uri="hf://org/y@c1").drafter_id == DID
    with open_registry(path) as s:
        s.upsert_drafter(older, capture_boundaries=[5])  # touched last
    assert records.known_record(copy, path).drafter_id == older
    with open_registry(path) as s:
        s.add_weights_key("other-key-2", older)
    assert records.known_record(copy, path).drafter_id == newer


def test_list_records_by_a_local_copy_of_the_target(tmp_path: Path, monkeypatch):
    from conftest import DATA
    from eagle3_convert.targets import load_target
    target = DATA / "targets" / "llama-tiny"
    identity = load_target(str(target))
    path = tmp_path / "r.db"
    with open_registry(path) as s:
        s.upsert_drafter(DID, target=T("org/llama-tiny", config_sha256=identity.config_sha256))  # by its digest
        s.upsert_drafter(ID2, target=T("org/other", aliases=[str(target.resolve())]))  # by its path
        s.upsert_drafter(ID3, target=T("org/llama-tiny"))  # a name only: not this directory's
        s.upsert_drafter("12" * 32)  # no target
    assert [r.drafter_id for r in records.list_records(str(target), path)] == [DID, ID2]
    assert [r.drafter_id for r in records.list_records(str(target / "config.json"), path)] == [DID, ID2]
    monkeypatch.chdir(target.parent)
    assert [r.drafter_id for r in records.list_records("llama-tiny", path)] == [DID, ID2]
    assert [r.drafter_id for r in records.list_records("org/llama-tiny", path)] == [DID, ID3]
    assert [r.drafter_id for r in records.list_records(None, path)] == [DID, ID2, ID3, "12" * 32]


def test_reading_differences_of_two_readings():
    from dataclasses import replace
    a = read_source(str(EXAMPLE)).drafter
    b = read_source(str(EXAMPLE)).drafter
    assert fingerprint.reading_differences(a, b) == []
    other_cfg = replace(b, config=b.config.model_copy(update={"norm_output": True, "hidden_act": "gelu"}))
    assert fingerprint.reading_differences(a, other_cfg, ("x", "y")) == [
        "hidden_act 'silu' as x, 'gelu' as y", "norm_output False as x, True as y"]
    names = sorted(a.tensors)
    fewer = replace(b, tensors={n: b.tensors[n] for n in names[1:]})
    assert fingerprint.reading_differences(a, fewer) == [f"tensors {names[0]} in one reading only"]
    extra = replace(b, tensors={**b.tensors, **{f"z{i}": b.tensors[names[0]] for i in range(3)}})
    assert fingerprint.reading_differences(a, extra) == ["tensors z0, z1, z2 in one reading only"]
    extra = replace(b, tensors={**b.tensors, **{f"z{i}": b.tensors[names[0]] for i in range(4)}})
    assert fingerprint.reading_differences(a, extra) == ["tensors z0, z1, z2 ... in one reading only"]
    swapped = replace(b, tensors={**b.tensors, names[-1]: b.tensors[names[0]], names[-2]: b.tensors[names[1]]})
    assert fingerprint.reading_differences(a, swapped) == [f"tensor {names[-2]} read from other bytes"]
    mem = InMemoryTensor("F32", (2,), b"\x00" * 8)
    same_mem = replace(a, tensors={**a.tensors, names[0]: mem})
    assert fingerprint.reading_differences(same_mem, replace(a, tensors={**a.tensors, names[0]: InMemoryTensor(
        "F32", (2,), b"\x00" * 8)})) == []
    assert fingerprint.reading_differences(same_mem, replace(a, tensors={**a.tensors, names[0]: InMemoryTensor(
        "F32", (2,), b"\x00" * 7 + b"\x01")})) == [f"tensor {names[0]} read from other bytes"]
    assert fingerprint.reading_differences(same_mem, replace(a, tensors={**a.tensors, names[0]: InMemoryTensor(
        "F16", (4,), b"\x00" * 8)})) == [f"tensor {names[0]} read from other bytes"]
    ref = a.tensors[names[0]]
    moved = TensorRef(ref.file, ref.name, ref.dtype, ref.shape, ref.start, ref.end + 0)
    assert fingerprint.reading_differences(a, replace(a, tensors={**a.tensors, names[0]: moved})) == []
    for changed in (TensorRef(ref.file, ref.name, ref.dtype, ref.shape, ref.start + 2, ref.end + 2),
                    TensorRef(ref.file, ref.name, ref.dtype, ref.shape, ref.start, ref.end + 2),
                    TensorRef(ref.file, ref.name, "F32", ref.shape, ref.start, ref.end),
                    TensorRef(ref.file, ref.name, ref.dtype, (1, *ref.shape), ref.start, ref.end),
                    TensorRef(EXAMPLE / "other", ref.name, ref.dtype, ref.shape, ref.start, ref.end)):
        assert fingerprint.reading_differences(a, replace(a, tensors={**a.tensors, names[0]: changed})) == [
            f"tensor {names[0]} read from other bytes"]
    assert fingerprint.reading_differences(a, replace(a, vocab=None)) == ["the draft vocabulary"]
    assert fingerprint.reading_differences(replace(a, vocab=None), replace(b, vocab=None)) == []


def test_tensor_digests_the_same_with_workers():
    drafter = read_source(str(EXAMPLE)).drafter
    one = fingerprint.tensor_digests(drafter)
    assert list(one) == sorted(drafter.tensors)
    assert one == {n: hashlib.sha256(read_tensor_bytes(s)).hexdigest() for n, s in drafter.tensors.items()}
    for workers in (2, 3):
        many = fingerprint.tensor_digests(drafter, workers)
        assert many == one and list(many) == list(one)


def test_record_facts_reports_a_contradicting_former_record(store):
    old = "12" * 32
    store.upsert_drafter(DID, capture_boundaries=[1, 3, 6])
    store.upsert_drafter(old, id_kind="config-and-weights", capture_boundaries=[2, 4, 5])
    conflicts: list = []
    rec, notes = recording.record_facts(store, {"drafter_id": DID}, former_ids=[old], conflicts=conflicts)
    assert [(c["drafter_id"], c["code"]) for c in conflicts] == [(old, "E-RECORD-CONFLICT")]
    assert notes[0].startswith("NOT merged: ") and store.get(old).drafter_id == old


def test_add_checkpoint_joins_the_config_verifier_with_the_target_passed(tmp_path: Path):
    from conftest import DATA
    target = DATA / "targets" / "llama-tiny"
    copy = _copy_of_example(tmp_path)
    path = tmp_path / "r.db"
    got = records.add_checkpoint(str(copy), target=str(target), registry=path)
    t = got.record.target
    assert t.name_or_path == "example-org/tiny-llama-target" and t.aliases == [str(target.resolve())]
    assert (t.num_hidden_layers, t.hidden_size, t.vocab_size, t.architectures) == (8, 64, 512, ["LlamaForCausalLM"])
    assert t.config_sha256 is not None and got.location.uri == str(copy.resolve())
    # the user's claims, kept in the history with the flags that said so
    got = records.add_checkpoint(str(copy), target=str(target), capture_layers=[1, 3, 6], convention="boundary",
                                 trained_with="specforge", registry=path)
    assert got.record.capture_boundaries == [1, 3, 6] and got.record.trained_with == "specforge"
    assert "the config names boundaries [2, 4, 5]; recorded the training's [1, 3, 6] (`eagle3-convert validate` " \
           "compares configs with it)" in got.notes
    assert {(c.field, c.reason) for c in got.record.changes} == {
        ("capture_boundaries", "registry add --target --capture-layers --trained-with"),
        ("trained_with", "registry add --target --capture-layers --trained-with")}
    # a --target of other facts than the config's verifier is not joined to it: it is the target (the user's word),
    # with its own name, architectures and digest, not the config's name and architectures with its depth (a bug
    # this test found: `validate SRC --target DIR` then failed against the record `registry add SRC --target DIR` made)
    other = tmp_path / "qwen"
    other.mkdir()
    config = json.loads((target / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "architectures": ["Qwen3ForCausalLM"],
                                                   "model_type": "qwen3", "num_hidden_layers": 12}))
    got = records.add_checkpoint(str(copy), target=str(other), registry=tmp_path / "r2.db")
    assert got.record.target.name_or_path == str(other.resolve()) and got.record.target.num_hidden_layers == 12
    assert got.record.target.architectures == ["Qwen3ForCausalLM"] and got.record.target.config_sha256 is not None


def test_add_checkpoint_with_a_config_of_no_layers_says_so(tmp_path: Path):
    copy = _copy_of_example(tmp_path)
    config = json.loads((copy / "config.json").read_text())
    del config["eagle_aux_hidden_state_layer_ids"]
    (copy / "config.json").write_text(json.dumps(config))
    got = records.add_checkpoint(str(copy), capture_layers=[1, 3, 6], convention="boundary", registry=tmp_path / "r")
    assert "the config names no capture ids; recorded the training's [1, 3, 6] (`eagle3-convert validate` compares " \
           "configs with it)" in got.notes
    got = records.add_checkpoint(str(copy), capture_layers=[2, 4, 5], convention="boundary", registry=tmp_path / "r2")
    assert not any(n.startswith("the config names") for n in got.notes) or got.record.capture_boundaries == [2, 4, 5]


def test_adopt_former_ids_skips_what_it_cannot_merge_and_goes_on(store):
    old = "12" * 32
    store.upsert_drafter(old, id_kind="config-and-weights", capture_boundaries=[1, 3, 6])
    store.upsert_drafter(ID2, capture_boundaries=[1, 3, 6])  # a content record: no former one
    notes = recording.adopt_former_ids(store, DID, ["00" * 32, ID2, old])
    assert len(notes) == 1 and store.get(old).drafter_id == DID
    # a record is never merged into itself, whatever its kind
    store.upsert_drafter(ID3, id_kind="config-and-weights", capture_boundaries=[2])
    assert recording.adopt_former_ids(store, ID3, [ID3]) == [] and store.get(ID3).drafter_id == ID3


# ---------------------------------------------------------------------------------------------------------------
# cli/common.py: the registry lookup validate, inspect and verify make

def test_registry_known_looks_up_the_registry_named_and_creates_none(tmp_path: Path):
    from eagle3_convert.cli.common import registry_known
    copy = _copy_of_example(tmp_path)
    path = tmp_path / "r.db"
    assert registry_known(copy, str(path)) == [] and not path.exists()
    with open_registry(path) as s:
        s.upsert_drafter(ID2, locations=[Location.hub("org/x", "speculators", "c1")])  # no keys: found by its place
    assert registry_known(copy, str(path)) == []
    assert registry_known(copy, str(path), uri="hf://org/x@c1") == [prov.from_record(records.record_of(ID2, path))]
    records.add_checkpoint(str(copy), registry=path)
    (known,) = registry_known(copy, str(path))
    assert known.in_registry and known.drafter_id != ID2 and known.capture_boundaries == [2, 4, 5]
    assert registry_known(copy, None) == []  # the default registry (this test's own, empty) is another one


def test_merge_twins_only_at_a_hub_commit(store):
    rec = store.upsert_drafter(DID, capture_boundaries=[1, 3, 6])
    store.upsert_drafter(ID2, id_kind="hub-fingerprint", capture_boundaries=[1, 3, 6],
                         locations=[Location.hub("org/e", "speculators")])  # no commit
    store.upsert_drafter(ID3, id_kind="hub-fingerprint", capture_boundaries=[1, 3, 6],
                         locations=[Location.local("/data/x@v1", "speculators")])
    assert recording.merge_twins(store, rec, ["hf://org/e", "/data/x@v1"]) == (rec, [])
    assert store.get(ID2).drafter_id == ID2 and store.get(ID3).drafter_id == ID3


def test_adopt_former_ids_goes_on_past_a_contradicting_one(store):
    bad, good = "12" * 32, "34" * 32
    store.upsert_drafter(DID, capture_boundaries=[1, 3, 6])
    store.upsert_drafter(bad, id_kind="config-and-weights", capture_boundaries=[2, 4, 5])
    store.upsert_drafter(good, id_kind="config-and-weights", capture_boundaries=[1, 3, 6])
    notes = recording.adopt_former_ids(store, DID, [bad, good])
    assert [n.split(":")[0].split(" (")[0] for n in notes] == ["NOT merged", f"merged the record {good[:12]}"]
    assert store.get(good).drafter_id == DID and store.get(bad).drafter_id == bad


def test_merge_twins_without_a_merge_returns_the_record_given(store):
    unstored = record(drafter_id=DID)
    assert recording.merge_twins(store, unstored, []) == (unstored, [])
    rec = store.upsert_drafter(DID, capture_boundaries=[1, 3, 6])
    store.upsert_drafter(DID, hidden_size=5)
    got, notes = recording.merge_twins(store, rec, ["hf://org/none@c1"])
    assert got is rec and got.hidden_size is None and notes == []
    # a record is never its own twin, whatever its kind
    own = fingerprint_twin(store, ID2, capture_boundaries=[1, 3, 6])
    assert recording.merge_twins(store, own, ["hf://org/d@c1"], twins=[ID2]) == (own, [])
    assert store.get(ID2).drafter_id == ID2


def test_merge_twins_goes_on_past_a_contradicting_twin(store):
    rec = store.upsert_drafter(DID, capture_boundaries=[1, 3, 6])
    fingerprint_twin(store, ID2, commit="c1", capture_boundaries=[2, 4, 5])
    fingerprint_twin(store, ID3, commit="c2", capture_boundaries=[1, 3, 6])
    got, notes = recording.merge_twins(store, rec, ["hf://org/d@c1", "hf://org/d@c2"])
    assert [n.split(" ")[0] for n in notes] == ["NOT", "merged"] and store.get(ID3).drafter_id == DID
    assert [loc.uri for loc in got.locations] == ["hf://org/d@c2"]


def test_joined_takes_the_verifier_facts_and_its_other_names():
    got = T("org/tiny", architectures=["LlamaForCausalLM"], revision="r1").joined(T("/models/tiny", hidden_size=64))
    assert got.architectures == ["LlamaForCausalLM"] and got.revision == "r1" and got.hidden_size == 64
    # a verifier known only by aliases: they are names of the target the user says --target is
    got = T(None, aliases=["org/x"]).joined(T("/p", config_sha256="d"))
    assert got.name_or_path == "/p" and got.aliases == ["org/x"] and got.config_sha256 == "d"


def test_convert_records_a_correction_and_replaces_the_copy_it_forces_over(tmp_path: Path):
    src = _copy_of_example(tmp_path, "src")
    config = json.loads((src / "config.json").read_text())
    del config["eagle_aux_hidden_state_layer_ids"]
    (src / "config.json").write_text(json.dumps(config))
    reg = tmp_path / "r.db"
    assert run_cli("registry", "add", src, "--registry", reg, "--capture-layers", "1,3,6", "--convention",
                   "boundary").exit_code == 0
    out = tmp_path / "out"
    done = run_cli("--to", "sglang", src, out, "--registry", reg, "--capture-layers", "2,4,6", "--convention",
                   "boundary", "--correct-record")
    assert done.exit_code == 0, done.stderr
    (rec,) = records.list_records(None, reg)
    assert rec.capture_boundaries == [2, 4, 6]
    assert [(c.field, c.old, c.new, c.reason) for c in rec.changes] == [
        ("capture_boundaries", [1, 3, 6], [2, 4, 6], "convert --capture-layers (boundary ids [2, 4, 6]) --correct-record")]
    assert [(loc.layout, loc.uri) for loc in rec.locations] == [("speculators", str(src)), ("sglang", str(out))]
    assert records.known_record(out, reg).drafter_id == rec.drafter_id
    # --force into the same place in another layout: that place's copy is the new one, the old one forgotten
    assert run_cli("--to", "vllm", src, out, "--registry", reg, "--force").exit_code == 0
    (rec,) = records.list_records(None, reg)
    assert [(loc.layout, loc.uri) for loc in rec.locations] == [("speculators", str(src)), ("vllm", str(out))]
    assert len(rec.changes) == 1 and rec.capture_boundaries == [2, 4, 6]


def test_merged_takes_no_name_of_another_target():
    assert TargetIdentity.merged(T(None, num_hidden_layers=8), T("org/b", num_hidden_layers=9)).name_or_path is None
    got = TargetIdentity.merged(T(None, aliases=["org/a"]), T("org/b", hidden_size=3))
    assert got.name_or_path is None and got.aliases == ["org/a"] and got.hidden_size == 3


def test_merged_without_a_serving_name_keeps_every_alias():
    got = TargetIdentity.merged(T(None, aliases=["xxxx"]), T(None, aliases=["XXXX", "org/y"]))
    assert got.name_or_path is None and got.aliases == ["xxxx", "XXXX", "org/y"]


def test_a_hub_id_of_any_spelling_is_known_ignoring_case():
    assert T("XX/XX-model").known_as("xx/xx-model") and T("xx/xx-model").known_as("XX/XX-model")


@pytest.fixture
def ascii_locale():
    """The process's C locale (ASCII text): a sidecar is UTF-8 whatever the host's locale."""
    import locale
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    yield
    locale.setlocale(locale.LC_CTYPE, old)


def test_a_sidecar_is_read_as_utf8_in_any_locale(tmp_path: Path, ascii_locale):
    config = b'{"x": 1}'
    (tmp_path / "config.json").write_bytes(config)
    data = json.loads(sidecar.build(layout="sglang", config_bytes=config,
                                    facts={"drafter_id": DID, "target": {"name_or_path": "org/Müller"}}))
    (tmp_path / SIDECAR).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")  # as a hand edit saves it
    assert "ü".encode() in (tmp_path / SIDECAR).read_bytes()
    data, trusted = sidecar.read(tmp_path)
    assert trusted and data["target"] == {"name_or_path": "org/Müller"}


def test_a_config_that_cannot_be_read_trusts_no_sidecar(tmp_path: Path):
    (tmp_path / SIDECAR).write_bytes(sidecar.build(layout="sglang", config_bytes=b"", facts={"drafter_id": DID}))
    data = json.loads((tmp_path / SIDECAR).read_text())
    unreadable = Path("/proc/self/mem")  # a regular file whose read fails (EIO), even for root
    assert unreadable.is_file()
    assert sidecar.read(tmp_path, unreadable) == (data, False)


def test_record_acceptance_records_the_drafter_and_what_verify_measured(tmp_path: Path):
    copy = _copy_of_example(tmp_path)
    path = tmp_path / "r.db"
    measured = {"target_name_or_path": "example-org/tiny-llama-target", "target_revision": "r1",
                "prompts_sha256": "ab" * 32, "prompts": 2, "max_new_tokens": 12, "k": 3, "capture_boundaries": [2, 4, 5],
                "mean_accepted_length": 1.5, "per_position": [0.5, 0.25, 0.0], "rounds": 8, "tokens_per_second": 10.0,
                "device": "cpu"}
    got = records.record_acceptance(str(copy), measured, registry=path)
    assert got.location.uri == str(copy.resolve()) and got.record.capture_boundaries == [2, 4, 5]
    (acc,) = records.acceptance_of(got.record.drafter_id, path)
    assert acc.model_dump(exclude={"measured_at"}) == {**measured, "tool": sidecar.tool_name(), "scan": None}
    assert records.record_of(got.record.drafter_id, path).locations[0].uri == str(copy.resolve())
    with open_registry(path) as s:  # an open store is used as it is, and left open
        again = records.record_acceptance(str(copy), {**measured, "rounds": 9}, registry=s)
        assert again.record.drafter_id == got.record.drafter_id and len(s.acceptance(got.record.drafter_id)) == 2


@pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")  # huggingface_hub's
def test_a_hub_to_hub_publication_records_one_edge_at_the_commit_its_keys_and_its_bytes(hub, example_dir: Path,
                                                                                        tmp_path: Path):
    from huggingface_hub import snapshot_download
    from eagle3_convert.hub_read import weights_alias
    first = run_cli("publish", example_dir, "me/tiny", "--endpoint", hub.url, "--token", "hf_x", "--registry",
                    tmp_path / "other.db", "--json")
    assert first.exit_code == 0, first.stderr
    reg = tmp_path / "r.db"
    done = run_cli("publish", "me/tiny", "me/tiny2", "--endpoint", hub.url, "--token", "hf_x", "--registry", reg,
                   "--layout", "sglang", "--json")
    assert done.exit_code == 0, done.stderr
    source, commit = json.loads(first.stdout)["commit"], json.loads(done.stdout)["commit"]
    (rec,) = records.list_records(None, reg)
    # the published sidecar's edge (to the bare repo) pinned at the commit: the same edge as the upload's, kept once
    assert [(e.source.uri, e.dest.uri, e.kind) for e in rec.lineage] == [
        (f"hf://me/tiny@{source}", f"hf://me/tiny2@{commit}", "convert")]
    assert sorted((loc.layout, loc.uri) for loc in rec.locations) == [
        ("sglang", f"hf://me/tiny2@{commit}"), ("speculators", f"hf://me/tiny@{source}")]
    with open_registry(reg) as s:
        assert s.keys_of(rec.drafter_id) == [fingerprint.weights_key(read_source(str(example_dir)).drafter)]
        snapshot = Path(snapshot_download("me/tiny2", revision=commit, endpoint=hub.url, token="hf_x",
                                          cache_dir=tmp_path / "dl"))
        alias = weights_alias(records._file_hashes(snapshot))
        assert alias is not None and s.aliased(alias) == rec.drafter_id  # a copy of these bytes joins the record


def test_record_publication_returns_the_record_its_hub_copy_and_notes(example_dir: Path, tmp_path: Path):
    from eagle3_convert.publish import Published, prepared_publish
    reg = tmp_path / "r.db"
    commit = "c" * 40
    with open_registry(reg) as s:  # what `registry sync` made of that commit before: one drafter, one record
        fingerprint_twin(s, ID2, repo="me/t3", commit=commit, capture_boundaries=[2, 4, 5])
    with prepared_publish(str(example_dir), "me/t3") as plan:
        got = records.record_publication(plan, Published("me/t3", commit, "http://hub/me/t3/commit/c"), reg)
    assert got.record.drafter_id == plan.drafter_id and got.record.capture_boundaries == [2, 4, 5]
    assert (got.location.layout, got.location.uri) == ("speculators", f"hf://me/t3@{commit}")
    assert got.notes == [f"merged the record registry sync made of hf://me/t3@{commit} (hub fingerprint "
                         f"{ID2[:12]}) into this one: 1 location(s), 0 lineage edge(s)"] and got.conflicts == []


def test_a_cast_records_two_drafters_each_with_its_own_copy_keys_and_edges(tmp_path: Path):
    from builders import DrafterSpec, build_drafter
    from gguf_target import write_target_gguf
    target = write_target_gguf(tmp_path / "t.gguf", layers=8, hidden=32, vocab=96, heads=4, kv_heads=2)
    built = build_drafter(tmp_path / "a", "speculators", DrafterSpec())
    config = json.loads((built / "config.json").read_text())
    (built / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat16"}))
    src = tmp_path / "src"  # a conversion recorded nowhere but in its sidecar's lineage
    assert run_cli("--to", "speculators", built, src, "--no-record").exit_code == 0
    reg = tmp_path / "reg.db"
    dest = tmp_path / "g"
    cast = run_cli("--to", "gguf", "--target-gguf", target, "--outtype", "f16", src, dest, "--registry", reg, "--json")
    assert cast.exit_code == 0, cast.stderr
    cast_id = json.loads(cast.stdout)["drafter_id"]
    source_id = json.loads((dest / SIDECAR).read_text())["derived_from"]
    by_id = {r.drafter_id: r for r in records.list_records(None, reg)}
    assert set(by_id) == {source_id, cast_id}
    assert [loc.uri for loc in by_id[source_id].locations] == [str(src.resolve())]
    assert [loc.uri for loc in by_id[cast_id].locations] == [str(dest.resolve())]
    assert [(e.source.uri, e.kind) for e in by_id[source_id].lineage] == [(str(built.resolve()), "convert")]
    assert [(e.kind, e.derived_from) for e in by_id[cast_id].lineage] == [("convert", None), ("cast", source_id)]
    with open_registry(reg) as s:
        assert s.keys_of(source_id) == [fingerprint.weights_key(read_source(str(src)).drafter)]
        assert s.keys_of(cast_id) == [fingerprint.weights_key(read_source(str(dest)).drafter)] != s.keys_of(source_id)
    assert records.known_record(dest, reg).drafter_id == cast_id
    assert records.known_record(src, reg).drafter_id == source_id


def test_a_conversion_again_into_its_place_keeps_the_copy_and_a_learned_name_says_recorded(tmp_path: Path):
    from conftest import DATA
    src = _copy_of_example(tmp_path, "src")
    reg = tmp_path / "r.db"
    out = tmp_path / "out"
    assert run_cli("--to", "sglang", src, out, "--registry", reg).exit_code == 0
    (rec,) = records.list_records(None, reg)
    added = {loc.uri: loc.added_at for loc in rec.locations}
    assert run_cli("--to", "sglang", src, out, "--registry", reg, "--force").exit_code == 0
    (rec,) = records.list_records(None, reg)
    assert {loc.uri: loc.added_at for loc in rec.locations} == added  # the same copy, not a new one
    # a conversion naming the target's directory beside the file's verifier: the record learns the facts it lacked
    # (depth, widths; a name a config states is not joined to --target's), and its history says the conversion
    # recorded them (no one's correction)
    done = run_cli("--to", "vllm", src, tmp_path / "out2", "--registry", reg, "--target", DATA / "targets" / "llama-tiny")
    assert done.exit_code == 0, done.stderr
    (rec,) = records.list_records(None, reg)
    assert [(c.field, c.reason, c.old["num_hidden_layers"], c.new["num_hidden_layers"]) for c in rec.changes] == [
        ("target", "recorded", None, 8)]


def test_add_checkpoint_of_a_private_hub_repo_at_a_revision_with_a_hub_target(monkeypatch, tmp_path: Path):
    from conftest import DATA
    from hub_server import isolated_hub
    token = "hf_add_test_token"
    with isolated_hub(monkeypatch, tmp_path / "hf-home", token=token) as hub:
        files = {p.name: p.read_bytes() for p in EXAMPLE.iterdir()}
        hub.create_repo("me/priv", private=True)
        first = hub.commit("me/priv", files)
        hub.commit("me/priv", {"README.md": b"later"}, message="later")
        hub.create_repo("org/llama-target", private=True)
        hub.commit("org/llama-target", {"config.json": (DATA / "targets" / "llama-tiny" / "config.json").read_bytes()})
        got = records.add_checkpoint("me/priv", revision=first, target="org/llama-target", verifier="org/served-as",
                                     endpoint=hub.url, token=token, registry=tmp_path / "r.db")
    assert got.location.uri == f"hf://me/priv@{first}"
    t = got.record.target
    assert t.name_or_path == "org/served-as" and "org/llama-target" in t.aliases and t.num_hidden_layers == 8


def test_add_checkpoint_with_a_verifier_alone_names_the_target_by_it(tmp_path: Path):
    copy = _copy_of_example(tmp_path)
    got = records.add_checkpoint(str(copy), verifier="org/served-as", registry=tmp_path / "r.db")
    assert got.record.target.name_or_path == "org/served-as"
    assert [(c.field, c.reason) for c in got.record.changes] == []
    got = records.add_checkpoint(str(copy), registry=tmp_path / "r2.db")
    assert got.record.target.name_or_path == "example-org/tiny-llama-target"


def test_the_drafter_id_and_the_former_id_pinned_to_their_payloads():
    from dataclasses import replace
    drafter = read_source(str(EXAMPLE)).drafter
    digests = fingerprint.tensor_digests(drafter)
    weights = {"tensors": {n: [drafter.tensors[n].dtype, list(drafter.tensors[n].shape), d]
                           for n, d in sorted(digests.items())},
               "draft_vocab": list(drafter.vocab.target_ids)}

    def digest(payload):
        return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    assert fingerprint.drafter_id(drafter, digests) == digest(weights)
    assert fingerprint.config_and_weights_id(drafter, digests) == digest(
        {"config": drafter.config.semantic_dict(), **weights})
    bare = replace(drafter, vocab=None)
    assert fingerprint.drafter_id(bare, digests) == digest({**weights, "draft_vocab": None})
    sample = {n: [s.dtype, list(s.shape), hashlib.sha256(expected_sample(read_tensor_bytes(s))).hexdigest()]
              for n, s in sorted(drafter.tensors.items())}
    assert fingerprint.weights_key(bare) == digest({"key": 1, "tensors": sample, "draft_vocab": None})


def test_reading_differences_of_streamed_tensors_and_a_key_on_one_side(tmp_path: Path):
    from dataclasses import replace
    a = read_source(str(EXAMPLE)).drafter
    name = sorted(a.tensors)[0]
    ref = a.tensors[name]
    one, two = StreamedTensor(ref, ref.dtype, ref.shape), StreamedTensor(ref, ref.dtype, ref.shape)
    assert fingerprint.reading_differences(replace(a, tensors={**a.tensors, name: one}),
                                           replace(a, tensors={**a.tensors, name: one})) == []
    assert fingerprint.reading_differences(replace(a, tensors={**a.tensors, name: one}),
                                           replace(a, tensors={**a.tensors, name: two})) == [
        f"tensor {name} read from other bytes"]
    extra = a.config.model_copy(update={"mla": {"q_lora_rank": 8}})
    assert fingerprint.reading_differences(a, replace(a, config=extra), ("x", "y")) == [
        "mla None as x, {'q_lora_rank': 8} as y"]


def test_tensor_digests_with_workers_of_a_tensor_larger_than_a_worker_buffer(tmp_path: Path):
    from dataclasses import replace
    drafter = read_source(str(EXAMPLE)).drafter
    data = os.urandom(6 * 1024 * 1024 + 3)
    (tmp_path / "big.bin").write_bytes(data)
    big = replace(drafter, tensors={**drafter.tensors, "big": TensorRef(tmp_path / "big.bin", "big", "U8",
                                                                          (len(data),), 0, len(data))})
    for workers in (1, 2, 8):
        assert fingerprint.tensor_digests(big, workers)["big"] == hashlib.sha256(data).hexdigest()


def test_reading_differences_of_another_kind_names_the_keys_only_it_has():
    from dataclasses import replace
    a = read_source(str(EXAMPLE)).drafter
    peagle = replace(a, config=a.config.model_copy(update={"kind": "peagle", "mask_token_id": 5}))
    assert fingerprint.reading_differences(a, peagle) == ["kind None as one, 'peagle' as the other",
                                                          "mask_token_id None as one, 5 as the other"]


def test_add_checkpoint_reports_a_contradicting_record_from_before_schema_v5(tmp_path: Path):
    copy = _copy_of_example(tmp_path)
    drafter = read_source(str(copy)).drafter
    former = fingerprint.config_and_weights_id(drafter, fingerprint.tensor_digests(drafter))
    path = tmp_path / "r.db"
    with open_registry(path) as s:
        s.upsert_drafter(former, id_kind="config-and-weights", capture_boundaries=[1, 2, 3],
                         locations=[Location.local(tmp_path / "old", "speculators")])
        s.upsert_drafter(fingerprint.drafter_id(drafter, fingerprint.tensor_digests(drafter)),
                         capture_boundaries=[2, 4, 5])
    got = records.add_checkpoint(str(copy), registry=path)
    assert [(c["drafter_id"], c["code"], c["uri"]) for c in got.conflicts] == [
        (former, "E-RECORD-CONFLICT", str(tmp_path / "old"))]
    assert any(n.startswith(f"NOT merged: the record {former[:12]} (before schema v5)") for n in got.notes)
    assert got.record.capture_boundaries == [2, 4, 5] and records.record_of(former, path).drafter_id == former


def test_add_checkpoint_keeps_the_weights_key_it_is_found_by(tmp_path: Path):
    copy = _copy_of_example(tmp_path)
    got = records.add_checkpoint(str(copy), registry=tmp_path / "r.db")
    with open_registry(tmp_path / "r.db") as s:
        assert s.keys_of(got.record.drafter_id) == [fingerprint.weights_key(read_source(str(copy)).drafter)]
