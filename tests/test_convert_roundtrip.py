"""speculators <-> sglang: lossless round trips, capture ids translated, refusals, atomic output.

Sources are written by tests/builders.py (each layout spelled independently of our writers) or are peer samples
from tests/data; the shipped example (written by our own writer) only feeds tests of the command's behaviour."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import DrafterSpec, build_drafter, config_for, stored_tensors
from conftest import run_cli, tensor_hashes, tree_digest
from eagle3_convert.convert import make_options, read_source
from eagle3_convert.safetensors_io import FLOAT_DTYPES, observe_reads, read_tensor_table
from eagle3_convert.vocab_map import decode_ints, decode_mask


def write_target_config(path: Path, layers: int, model_type: str = "llama") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": model_type, "num_hidden_layers": layers,
        "hidden_size": 16, "vocab_size": 64}))
    return path


def build(dest: Path, layout: str, boundaries: list[int] | None, *, vocab_ids: list[int] | None = None,
          vocab_size: int = 64, k: int | None = None, target_layers: int = 8, **fields) -> Path:
    """A tiny drafter (hidden 16) in `layout`, written by tests/builders.py (independently of our writers)."""
    return build_drafter(dest, layout, tiny_spec(boundaries, vocab_ids=vocab_ids, vocab_size=vocab_size, k=k,
                                                 target_layers=target_layers, **fields))


def tiny_spec(boundaries: list[int] | None, *, vocab_ids: list[int] | None = None, vocab_size: int = 64,
              k: int | None = None, target_layers: int = 8, **fields) -> DrafterSpec:
    # A drafter is its weights (issue 21): one trained on other layers has other weights, or the test's
    # registry (one per test, shared by its hypothesis examples) would hold one drafter said to be trained on several
    # lists of layers: a conflict, rightly.
    fields.setdefault("seed", sum(b * 131 ** i for i, b in enumerate(boundaries or ())) + target_layers)
    return DrafterSpec(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                       vocab_size=vocab_size, draft_vocab_size=len(vocab_ids) if vocab_ids is not None else None,
                       vocab_ids=tuple(vocab_ids) if vocab_ids is not None else None,
                       num_aux=k or (len(boundaries) if boundaries else 3),
                       capture_boundaries=tuple(boundaries) if boundaries is not None else None,
                       target_layers=target_layers, verifier="org/target", **fields)


# ------------------------------------------------------------- round trips

def test_speculators_to_sglang_and_back_is_lossless(tmp_path: Path):
    """Ground truth: each layout's own spelling of one drafter (tests/builders.py), not a file of our writer."""
    spec = tiny_spec([2, 4, 5], vocab_ids=list(range(0, 64, 2)))
    src = build_drafter(tmp_path / "spec", "speculators", spec)
    before = tree_digest(src)
    assert run_cli("--to", "sglang", src, tmp_path / "sg").exit_code == 0
    assert run_cli("--to", "speculators", tmp_path / "sg", tmp_path / "back").exit_code == 0

    assert tensor_hashes(tmp_path / "sg") == {name: t.sha256 for name, t in stored_tensors("sglang", spec).items()}
    written = json.loads((tmp_path / "sg" / "config.json").read_text())
    # The one addition to SGLang's spelling: the boundaries at the top level, where vLLM's runners read them.
    assert written.pop("eagle_aux_hidden_state_layer_ids") == [2, 4, 5]
    assert written == config_for("sglang", spec)
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
    assert json.loads((tmp_path / "back" / "config.json").read_text()) == config_for("speculators", spec)
    assert tree_digest(src) == before


def test_sglang_to_speculators_and_back_is_lossless(sample, tmp_path: Path):
    src = sample("specforge-sglang")
    verifier = write_target_config(tmp_path / "llama-tiny", 8)
    result = run_cli("--to", "speculators", "--verifier", "org/llama-tiny", "--target", verifier, src,
                     tmp_path / "spec")
    assert result.exit_code == 0, result.stderr
    assert run_cli("--to", "sglang", tmp_path / "spec", tmp_path / "back").exit_code == 0

    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
    back = json.loads((tmp_path / "back" / "config.json").read_text())
    # The one addition: the same layers as boundaries at the top level, where vLLM's runners read them.
    assert back.pop("eagle_aux_hidden_state_layer_ids") == [2, 4, 5]
    assert back == json.loads((src / "config.json").read_text())
    spec = json.loads((tmp_path / "spec" / "config.json").read_text())
    assert spec["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]  # SGLang [1,3,4] are block outputs
    assert spec["speculators_config"]["verifier"]["architectures"] == ["LlamaForCausalLM"]
    assert "model_type" not in spec and spec["norm_before_residual"] is False


def test_sglang_output_nests_block_output_ids(example_dir: Path, tmp_path: Path):
    assert run_cli("--to", "sglang", example_dir, tmp_path / "sg").exit_code == 0
    cfg = json.loads((tmp_path / "sg" / "config.json").read_text())
    assert cfg["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [1, 3, 4], "use_aux_hidden_state": True}
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]  # boundaries, for vLLM's V1 and V2 runners
    assert cfg["draft_vocab_size"] == 128 and "target_hidden_size" not in cfg
    names = set(read_tensor_table(tmp_path / "sg")[0])
    assert "midlayer.self_attn.q_proj.weight" in names and not any(n.startswith("layers.") for n in names)


def test_convert_decodes_no_float_tensor(example_dir: Path, tmp_path: Path):
    read_dtypes: list[str] = []
    stop = observe_reads(lambda ref, whole: whole and read_dtypes.append(ref.dtype))
    try:
        assert run_cli("--to", "sglang", example_dir, tmp_path / "sg").exit_code == 0
        assert run_cli("--to", "speculators", tmp_path / "sg", tmp_path / "back").exit_code == 0
    finally:
        stop()
    assert read_dtypes, "the vocab map must have been decoded"
    assert not FLOAT_DTYPES & set(read_dtypes), read_dtypes


def test_k_not_three_writes_num_aux_and_survives(tmp_path: Path):
    build(tmp_path / "spec", "speculators", [1, 3, 5, 6])
    assert run_cli("--to", "sglang", tmp_path / "spec", tmp_path / "sg").exit_code == 0
    cfg = json.loads((tmp_path / "sg" / "config.json").read_text())
    assert cfg["num_aux_hidden_states"] == 4
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 2, 4, 5]
    assert run_cli("--to", "speculators", tmp_path / "sg", tmp_path / "back").exit_code == 0
    assert json.loads((tmp_path / "back" / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5, 6]


def test_full_vocab_sglang_gets_identity_map_and_speculators_none(tmp_path: Path):
    build(tmp_path / "spec", "speculators", [2, 4, 5])
    assert {"d2t", "t2d"}.isdisjoint(read_tensor_table(tmp_path / "spec")[0])
    assert run_cli("--to", "sglang", tmp_path / "spec", tmp_path / "sg").exit_code == 0
    tensors = read_tensor_table(tmp_path / "sg")[0]
    assert decode_ints(tensors["d2t"]) == [0] * 64 and decode_mask(tensors["t2d"]) == b"\x01" * 64
    assert run_cli("--to", "speculators", tmp_path / "sg", tmp_path / "back").exit_code == 0
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(tmp_path / "spec")


# ------------------------------------------------------------- refusals

@pytest.mark.parametrize("flags, code", [
    ({"norm_before_residual": True}, "E-FLAG-UNSUPPORTED"),
    ({"family": "qwen3"}, "E-FAMILY-UNSUPPORTED"),
    ({"attention_bias": True}, "E-BIAS-UNSUPPORTED"),
])
def test_sglang_refuses_what_it_cannot_express(tmp_path: Path, flags: dict, code: str):
    build(tmp_path / "spec", "speculators", [2, 4, 5], **flags)
    result = run_cli("--to", "sglang", tmp_path / "spec", tmp_path / "sg")
    assert result.exit_code == 1
    assert code in result.stderr and len(result.stderr.strip().splitlines()) == 2  # detected + one error line
    assert not (tmp_path / "sg").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sg.")]


def test_sglang_refuses_a_boundary_it_cannot_capture(tmp_path: Path):
    build(tmp_path / "spec", "speculators", [2, 4, 8])  # 8 = the last block's output of an 8-layer target
    target = write_target_config(tmp_path / "target", 8)
    result = run_cli("--to", "sglang", "--target", target, tmp_path / "spec", tmp_path / "sg")
    assert result.exit_code == 1 and "E-CAPTURE-UNREACHABLE" in result.stderr
    assert not (tmp_path / "sg").exists()


def test_speculators_needs_a_verifier(sample, tmp_path: Path):
    result = run_cli("--to", "speculators", sample("specforge-sglang"), tmp_path / "spec")
    assert result.exit_code == 1 and "--verifier" in result.stderr and "E-VERIFIER-MISSING" in result.stderr


def test_deepseek_target_quirk(tmp_path: Path):
    # SGLang adds 1 on DeepSeek targets only when ids[0] == 1; boundary 3 first must be written raw.
    build(tmp_path / "spec", "speculators", [3, 5, 6])
    target = write_target_config(tmp_path / "ds", 8, "deepseek_v3")
    assert run_cli("--to", "sglang", "--target", target, tmp_path / "spec", tmp_path / "sg").exit_code == 0
    ids = json.loads((tmp_path / "sg" / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert ids == [3, 5, 6]
    assert run_cli("--to", "speculators", "--target", target, tmp_path / "sg", tmp_path / "back").exit_code == 0
    assert json.loads((tmp_path / "back" / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [3, 5, 6]


# ------------------------------------------------------------- destination

def test_non_empty_destination_needs_force(example_dir: Path, tmp_path: Path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    result = run_cli("--to", "sglang", example_dir, dest)
    assert result.exit_code == 1 and "--force" in result.stderr
    assert (dest / "keep.txt").read_text() == "mine"
    # --force replaces only a checkpoint (or an empty directory): a user's file is never deleted
    forced = run_cli("--to", "sglang", "--force", example_dir, dest)
    assert forced.exit_code == 1 and "E-DEST-NOT-CHECKPOINT" in forced.stderr and "keep.txt" in forced.stderr
    assert (dest / "keep.txt").read_text() == "mine"
    (dest / "keep.txt").unlink()
    assert run_cli("--to", "sglang", example_dir, dest).exit_code == 0
    assert run_cli("--to", "sglang", "--force", example_dir, dest).exit_code == 0
    assert (dest / "model.safetensors").is_file()


def test_destination_inside_source_is_refused(example_dir: Path):
    before = tree_digest(example_dir)
    result = run_cli("--to", "sglang", example_dir, example_dir / "out")
    assert result.exit_code == 1 and "overlaps" in result.stderr
    assert tree_digest(example_dir) == before


def test_sharded_output_round_trips(tmp_path: Path):
    spec = tiny_spec([2, 4, 5], vocab_ids=list(range(0, 64, 2)))
    src = build_drafter(tmp_path / "spec", "speculators", spec)
    assert run_cli("--to", "sglang", "--max-shard-size", "4KB", src, tmp_path / "sg").exit_code == 0
    shards = sorted(p.name for p in (tmp_path / "sg").glob("model-*.safetensors"))
    assert len(shards) >= 3 and (tmp_path / "sg" / "model.safetensors.index.json").is_file()
    assert tensor_hashes(tmp_path / "sg") == {name: t.sha256 for name, t in stored_tensors("sglang", spec).items()}
    assert run_cli("--to", "speculators", tmp_path / "sg", tmp_path / "back").exit_code == 0
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)


def test_output_permissions_follow_umask(example_dir: Path, tmp_path: Path):
    assert run_cli("--to", "sglang", example_dir, tmp_path / "sg").exit_code == 0
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "sg").stat().st_mode & 0o777 == 0o777 & ~mask


# ------------------------------------------------------------- properties

LAYOUTS = ("speculators", "sglang")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_capture_boundaries_survive_any_chain(tmp_path_factory, data):
    depth = data.draw(st.integers(4, 80), label="target layers")
    # k >= 2: with one captured state k*Ht == H and SGLang skips fc (test_sglang_refuses_a_bypassed_fc)
    boundaries = sorted(data.draw(st.sets(st.integers(0, depth - 1), min_size=2, max_size=5), label="boundaries"))
    chain = data.draw(st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=4), label="chain")
    root = tmp_path_factory.mktemp("chain")
    target = write_target_config(root / "target", depth)
    current = build(root / "step0", "speculators", boundaries, target_layers=depth)
    for i, layout in enumerate(chain, 1):  # a registry per example: examples share weights, not capture layers
        result = run_cli("--to", layout, "--target", target, current, root / f"step{i}", "--registry",
                         root / "registry.db")
        assert result.exit_code == 0, result.stderr
        current = root / f"step{i}"
        drafter = read_source(str(current), options=make_options(target=str(target))).drafter
        assert drafter.config.capture_boundaries == boundaries


def test_sglang_refuses_a_bypassed_fc(tmp_path: Path):
    """One captured state of the drafter's own width: SGLang would skip fc silently, so --to sglang refuses."""
    target = write_target_config(tmp_path / "target", 8)
    src = build(tmp_path / "src", "speculators", [3], target_layers=8)
    result = run_cli("--to", "sglang", "--target", target, src, tmp_path / "out")
    assert result.exit_code == 1 and "[E-ENGINE-WRONG]" in result.stderr and "skips fc" in result.stderr
    assert not (tmp_path / "out").exists()
    assert run_cli("--to", "vllm", "--target", target, src, tmp_path / "v").exit_code == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_vocab_map_invariants_hold_after_every_write(tmp_path_factory, data):
    vocab_size = data.draw(st.integers(2, 300), label="V")
    ids = sorted(data.draw(st.sets(st.integers(0, vocab_size - 1), min_size=1, max_size=vocab_size), label="ids"))
    root = tmp_path_factory.mktemp("vocab")
    current = build(root / "step0", "speculators", [2, 4, 5], vocab_ids=ids, vocab_size=vocab_size)
    # a registry per example: examples share weights and draft vocabularies but not V, and a drafter is its weights
    for i, layout in enumerate(("sglang", "speculators", "sglang"), 1):
        assert run_cli("--to", layout, current, root / f"step{i}", "--registry", root / "registry.db").exit_code == 0
        current = root / f"step{i}"
        tensors = read_tensor_table(current)[0]
        if len(ids) == vocab_size and layout == "speculators":
            assert "d2t" not in tensors and "t2d" not in tensors
            continue
        d2t, t2d = decode_ints(tensors["d2t"]), decode_mask(tensors["t2d"])
        assert tensors["d2t"].dtype == "I64" and tensors["t2d"].dtype == "BOOL"
        assert [i + o for i, o in enumerate(d2t)] == ids
        assert [t for t, bit in enumerate(t2d) if bit] == ids


def test_drafter_id_is_the_same_in_every_layout(tmp_path: Path):
    build(tmp_path / "spec", "speculators", [2, 4, 5], vocab_ids=list(range(0, 64, 2)))
    assert run_cli("--to", "sglang", tmp_path / "spec", tmp_path / "sg").exit_code == 0
    assert run_cli("--to", "speculators", tmp_path / "sg", tmp_path / "back").exit_code == 0
    ids = {json.loads((tmp_path / d / "eagle3-convert.json").read_text())["drafter_id"] for d in ("sg", "back")}
    assert len(ids) == 1 and len(ids.pop()) == 64
    build(tmp_path / "other", "speculators", [2, 4, 5], vocab_ids=list(range(0, 64, 2)), seed=1)  # other bytes
    assert run_cli("--to", "sglang", tmp_path / "other", tmp_path / "other-sg").exit_code == 0
    other = json.loads((tmp_path / "other-sg" / "eagle3-convert.json").read_text())["drafter_id"]
    assert other not in {json.loads((tmp_path / "sg" / "eagle3-convert.json").read_text())["drafter_id"]}


def test_sglang_fc_bias_flag_is_refused_not_misread(sample, tmp_path: Path):
    src = sample("specforge-sglang")
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "bias": True}))
    result = run_cli("--to", "speculators", "--verifier", "org/target", src, tmp_path / "spec")
    assert result.exit_code == 1 and "E-BIAS-UNSUPPORTED" in result.stderr and "fc bias" in result.stderr
    assert not (tmp_path / "spec").exists()


@pytest.mark.parametrize("size", ["abc", "0", "-5GB", "5XB"])
def test_bad_shard_size_is_a_usage_error(example_dir: Path, tmp_path: Path, size: str):
    result = run_cli("--to", "sglang", "--max-shard-size", size, example_dir, tmp_path / "out")
    assert result.exit_code == 2 and "--max-shard-size" in result.stderr
    assert not (tmp_path / "out").exists()


def test_quiet_convert_prints_nothing_on_stderr(example_dir: Path, tmp_path: Path):
    result = run_cli("--to", "sglang", "--quiet", example_dir, tmp_path / "sg")
    assert result.exit_code == 0 and result.stderr == ""
    assert "wrote" in result.stdout


def test_a_legacy_pre_zip_bin_is_read_like_a_zip_one(sample, tmp_path: Path):
    torch = pytest.importorskip("torch")
    src = sample("eagle-original")
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "config.json").write_bytes((src / "config.json").read_bytes())
    state = torch.load(src / "pytorch_model.bin", weights_only=True)
    torch.save(state, legacy / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    for name, path in (("zip", src), ("legacy", legacy)):
        result = run_cli("--to", "speculators", "--verifier", "org/target", "--no-record", path, tmp_path / f"{name}-out")
        assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "legacy-out") == tensor_hashes(tmp_path / "zip-out")


def test_the_cli_turns_huggingface_hub_telemetry_off(example_dir: Path, monkeypatch: pytest.MonkeyPatch):
    # huggingface_hub reads it at import; off, it never calls huggingface.co behind a user's --endpoint.
    monkeypatch.delenv("HF_HUB_DISABLE_TELEMETRY", raising=False)
    assert run_cli("inspect", example_dir).exit_code == 0
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
