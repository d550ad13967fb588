"""`--to gguf` / `--from gguf`: llama.cpp's eagle3 GGUF (docs/formats.md §7).

Every drafter the eagle3 architecture can hold goes safetensors -> gguf -> safetensors with every
tensor byte for byte (peer samples and the builder variants, from every layout that holds them);
what it cannot hold is refused with a code before anything is written. The GGUF itself is read
with the `gguf` package's own reader and checked against llama.cpp's rules: key types, names,
the q/k RoPE permutation (llama.cpp's LlamaModel.permute, restated here in numpy), I64 absolute
d2t, no t2d, F32 norms, the target's tokenizer keys copied exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from builders import LAYOUTS, DrafterSpec, build_drafter, canonical_tensors, draft_vocab, expected_refusal, \
    write_target
from conftest import DATA, EXAMPLE, run_cli, tensor_hashes, tree_digest
from gguf_target import rewrite_gguf, write_target_gguf

gguf = pytest.importorskip("gguf")

from eagle3_convert.convert import convert, make_options, read_source  # noqa: E402
from eagle3_convert.converters.base import ConvertOptions  # noqa: E402
from eagle3_convert.safetensors_io import observe_reads, tensor_sha256  # noqa: E402

VARIANTS: dict[str, dict] = {
    "llama": {},
    "engine-default capture": {"capture_boundaries": None},
    "full vocab (Vd == V)": {"draft_vocab_size": None},
    "qwen3 (q_norm/k_norm)": {"family": "qwen3"},
    "MLA (Kimi/DeepSeek)": {"family": "deepseek_mla", "target_model_type": "deepseek_v3"},
    "3 layers": {"num_layers": 3},
    "norm_before_residual": {"norm_before_residual": True},
    "norm_before_fc": {"norm_before_fc": True},
    "fc_norm": {"fc_norm": True},
    "norm_output": {"norm_output": True},
    "k=4": {"num_aux": 4, "capture_boundaries": (1, 3, 5, 6)},
    "non-default capture": {"capture_boundaries": (1, 3, 6)},
    "target_hidden_size != hidden": {"target_hidden_size": 48},
    "head_dim != hidden/heads": {"head_dim": 16},
    "attention bias": {"attention_bias": True},
    "embed_tokens saved": {"embed_tokens": True},
    "ModelOpt HF-trained first layer": {"modelopt_hf_trained": True},
    "F16 weights": {"dtype": "F16"},
    "F32 weights": {"dtype": "F32"},
}


def gguf_refusal(spec: DrafterSpec) -> str | None:
    """What llama.cpp's eagle3 architecture cannot hold (docs/formats.md §7.4), in the writer's order."""
    rules = [
        (spec.family != "llama", "E-FAMILY-UNSUPPORTED"),  # no q/k norms, no MLA
        (spec.num_layers != 1, "E-LAYERS-UNSUPPORTED"),
        (spec.num_aux != 3, "E-CAPTURE-COUNT"),
        (spec.fc_norm or spec.norm_output, "E-FLAG-UNSUPPORTED"),
        (spec.attention_bias, "E-BIAS-UNSUPPORTED"),
    ]
    return next((code for applies, code in rules if applies), None)


def cases(refused: bool):
    for variant, changes in VARIANTS.items():
        spec = DrafterSpec(**changes)
        code = gguf_refusal(spec)
        for layout in LAYOUTS:
            if expected_refusal(layout, spec):
                continue
            if refused and code:
                yield pytest.param(variant, layout, code, id=f"{variant}: {layout} -> gguf refused {code}")
            elif not refused and not code:
                yield pytest.param(variant, layout, id=f"{variant}: {layout} -> gguf -> {layout}")


_targets: dict[tuple, Path] = {}


@pytest.fixture(scope="session")
def target_gguf(tmp_path_factory):
    """target_gguf(layers=, hidden=, vocab=, arch=) -> a tiny target GGUF, written once per shape."""
    root = tmp_path_factory.mktemp("gguf-targets")

    def make(layers: int = 8, hidden: int = 32, vocab: int = 96, arch: str = "llama") -> Path:
        key = (layers, hidden, vocab, arch)
        if key not in _targets:
            _targets[key] = write_target_gguf(root / f"t-{arch}-{layers}-{hidden}-{vocab}.gguf", layers=layers,
                                              hidden=hidden, vocab=vocab, arch=arch, heads=4, kv_heads=2)
        return _targets[key]

    return make


def gguf_options(target: Path, **more) -> ConvertOptions:
    options = ConvertOptions()
    options.target_gguf = str(target)
    for key, value in more.items():
        setattr(options, key, value)
    return options


def only_gguf(dest: Path) -> Path:
    files = sorted(dest.glob("*.gguf"))
    assert len(files) == 1, files
    return files[0]


def canonical_facts(path: Path) -> dict:
    drafter = read_source(str(path)).drafter
    return {"tensors": {n: (t.dtype, tuple(t.shape), tensor_sha256(t)) for n, t in drafter.tensors.items()},
            "draft_vocab": drafter.vocab.target_ids if drafter.vocab else None}


def permute(w: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """llama.cpp conversion/llama.py LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ------------------------------------------------------------------ round trips

@pytest.mark.parametrize("variant, layout", list(cases(refused=False)))
def test_round_trip_through_gguf_is_byte_identical(tmp_path: Path, target_gguf, variant: str, layout: str):
    spec = DrafterSpec(**VARIANTS[variant])
    src = build_drafter(tmp_path / "a", layout, spec)
    before = tree_digest(src)
    target = target_gguf(layers=spec.target_layers, hidden=spec.ht, vocab=spec.vocab_size)
    convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target))
    gfile = only_gguf(tmp_path / "g")
    assert (tmp_path / "g" / "eagle3-convert.json").is_file() and not (tmp_path / "g" / "config.json").exists()
    reader = gguf.GGUFReader(gfile)
    assert reader.fields["general.architecture"].contents() == "eagle3"
    written = reader.fields["eagle3.target_layers"].contents()
    assert written == sorted(spec.capture_boundaries or [2, spec.target_layers // 2, spec.target_layers - 3])

    convert(str(tmp_path / "g"), tmp_path / "a2", layout, options=make_options())
    assert tensor_hashes(tmp_path / "a2") == tensor_hashes(src)
    first = read_source(str(src)).drafter
    middle = read_source(str(tmp_path / "g")).drafter
    assert middle.config.semantic_dict() == first.config.semantic_dict()
    assert read_source(str(tmp_path / "a2")).drafter.config.semantic_dict() == first.config.semantic_dict()
    assert tree_digest(src) == before


@pytest.mark.parametrize("variant, layout, code", list(cases(refused=True)))
def test_what_the_eagle3_architecture_cannot_hold_is_refused(tmp_path: Path, target_gguf, variant: str, layout: str,
                                                             code: str):
    spec = DrafterSpec(**VARIANTS[variant])
    src = build_drafter(tmp_path / "a", layout, spec)
    target = target_gguf(layers=spec.target_layers, hidden=spec.ht, vocab=spec.vocab_size)
    result = run_cli("--to", "gguf", "--target-gguf", target, src, tmp_path / "g")
    assert result.exit_code == 1, result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"[{code}]" in errors[0] and "hint:" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "g").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".g.")]


SAMPLES = {"specforge-sglang": None, "speculators-trained": "E-FLAG-UNSUPPORTED",  # trained with norm_output
           "eagle-original": None,
           "speculators-fullvocab-qwen3": "E-FAMILY-UNSUPPORTED"}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_every_peer_sample_round_trips_or_is_refused(sample, tmp_path: Path, target_gguf, name: str):
    if name == "eagle-original":
        pytest.importorskip("torch")
    src = sample(name)
    facts = json.loads((DATA / name / "manifest.json").read_text())
    target = target_gguf(layers=facts["target_num_hidden_layers"], hidden=facts["target_hidden_size"],
                         vocab=facts["vocab_size"])
    result = run_cli("--to", "gguf", "--target-gguf", target, src, tmp_path / "g")
    if SAMPLES[name]:
        assert result.exit_code == 1 and f"[{SAMPLES[name]}]" in result.stderr and "Traceback" not in result.stderr
        return
    assert result.exit_code == 0, result.stderr
    layout = read_source(str(src)).detection.layout
    back = run_cli("--to", layout, tmp_path / "g", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    if layout == "eagle":  # pytorch_model.bin in, safetensors out: the same tensors by canonical name
        assert canonical_facts(tmp_path / "back") == canonical_facts(src)
    else:
        assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
    reader = gguf.GGUFReader(only_gguf(tmp_path / "g"))
    assert reader.fields["eagle3.target_layers"].contents() == facts["capture_boundaries"]


def test_the_shipped_example_round_trips(tmp_path: Path, target_gguf):
    target = target_gguf(layers=8, hidden=64, vocab=512)
    convert(str(EXAMPLE), tmp_path / "g", "gguf", options=gguf_options(target))
    convert(str(tmp_path / "g"), tmp_path / "back", "speculators")
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(EXAMPLE)


# ------------------------------------------------------------------ what the file holds

def test_the_gguf_holds_what_llama_cpp_reads(tmp_path: Path, target_gguf):
    spec = DrafterSpec(capture_boundaries=(5, 1, 3), norm_before_fc=True, norm_before_residual=True,
                       extra={"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                              "rope_theta": 500000.0})
    src = build_drafter(tmp_path / "a", "speculators", spec)
    target = target_gguf(layers=8, hidden=32, vocab=96)
    convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target))
    reader = gguf.GGUFReader(only_gguf(tmp_path / "g"))
    f = reader.fields
    vt = gguf.GGUFValueType
    assert f["eagle3.target_layers"].types == [vt.ARRAY, vt.INT32] and f["eagle3.target_layers"].contents() == [1, 3, 5]
    assert f["eagle3.target_hidden_size"].types == [vt.UINT32] and f["eagle3.target_hidden_size"].contents() == 32
    assert f["eagle3.norm_before_residual"].types == [vt.BOOL] and f["eagle3.norm_before_residual"].contents() is True
    assert f["eagle3.norm_before_fc"].contents() is True and f["eagle3.block_count"].contents() == 1
    # the target's tokenizer keys, byte for byte
    t = gguf.GGUFReader(target)
    for key, field in t.fields.items():
        if key.startswith("tokenizer."):
            assert [bytes(p) for p in f[key].parts[1:]] == [bytes(p) for p in field.parts[1:]], key
    tensors = {t.name: t for t in reader.tensors}
    assert "t2d" not in tensors and "blk.0.attn_norm_2.weight" in tensors and "enc.output_norm.weight" in tensors
    assert tensors["d2t"].tensor_type == gguf.GGMLQuantizationType.I64
    assert tensors["d2t"].data.tolist() == draft_vocab(spec)  # absolute target ids
    for name, t in tensors.items():
        if len(t.shape) == 1 and name != "d2t":
            assert t.tensor_type == gguf.GGMLQuantizationType.F32, name  # GGML multiplies F32 by F32 norms
    assert tensors["rope_freqs.weight"].data.shape == (spec.head_dim // 2,)
    raw = canonical_tensors(spec)

    def bf16(name: str, shape) -> np.ndarray:
        return np.frombuffer(raw[name].data, dtype="<u2").reshape(shape)

    q = bf16("layers.0.self_attn.q_proj.weight", (4 * 8, 64))
    k = bf16("layers.0.self_attn.k_proj.weight", (2 * 8, 64))
    assert np.array_equal(tensors["blk.0.attn_q.weight"].data.view("<u2").reshape(q.shape), permute(q, 4, 4))
    assert np.array_equal(tensors["blk.0.attn_k.weight"].data.view("<u2").reshape(k.shape), permute(k, 4, 2))
    assert tensors["blk.0.attn_norm_2.weight"].data.tolist() == (
        bf16("layers.0.hidden_norm.weight", (32,)).astype("<u4") << 16).view("<f4").tolist()
    assert only_gguf(tmp_path / "g").name == "eagle3-g-BF16.gguf"


@pytest.mark.parametrize("outtype, ggml", [("f32", "F32"), ("f16", "F16"), ("bf16", "BF16")])
def test_outtype(tmp_path: Path, target_gguf, outtype: str, ggml: str):
    src = build_drafter(tmp_path / "a", "speculators", DrafterSpec())
    result = run_cli("--to", "gguf", "--target-gguf", target_gguf(), "--outtype", outtype, src, tmp_path / "g")
    assert result.exit_code == 0, result.stderr
    gfile = only_gguf(tmp_path / "g")
    assert gfile.name == f"eagle3-g-{ggml}.gguf"
    tensors = {t.name: t for t in gguf.GGUFReader(gfile).tensors}
    assert tensors["fc.weight"].tensor_type == getattr(gguf.GGMLQuantizationType, ggml)
    back = read_source(str(tmp_path / "g")).drafter
    assert back.tensors["fc.weight"].dtype == ggml
    if outtype == "f32":  # widening is exact: the values are the source's
        fc = np.frombuffer(canonical_tensors(DrafterSpec())["fc.weight"].data, dtype="<u2")
        assert np.array_equal(tensors["fc.weight"].data.reshape(-1).view("<u4"), fc.astype("<u4") << 16)


def test_writing_streams_every_weight(tmp_path: Path, target_gguf):
    """No weight tensor is read whole: bytes move in bounded chunks (one head's rows for q/k)."""
    src = build_drafter(tmp_path / "a", "speculators", DrafterSpec(embed_tokens=True))
    whole: list[str] = []
    stop = observe_reads(lambda ref, at_once: whole.append(ref.name) if at_once else None)
    try:
        convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target_gguf()))
        convert(str(tmp_path / "g"), tmp_path / "back", "speculators")
    finally:
        stop()
    assert not [n for n in whole if n not in ("d2t", "t2d") and not n.endswith("norm.weight")
                and not n.startswith("blk.0.") and n not in ("output_norm.weight",)]
    assert not [n for n in whole if n.startswith("blk.0.attn_") and not n.endswith("norm.weight")
                and not n.endswith("norm_2.weight")]


# ------------------------------------------------------------------ refusals about the target

def run_to_gguf(src: Path, dest: Path, *args) -> tuple[int, str]:
    result = run_cli("--to", "gguf", *args, src, dest)
    assert "Traceback" not in result.stderr
    return result.exit_code, result.stderr


@pytest.mark.parametrize("what, target_kw, spec_kw, code", [
    ("target width != Ht", {"hidden": 48}, {}, "E-HIDDEN-UNSUPPORTED"),
    ("target vocab != V", {"vocab": 128}, {}, "E-GGUF-VOCAB"),
    ("boundary L on a llama target", {}, {"capture_boundaries": (2, 4, 8)}, "E-CAPTURE-UNREACHABLE"),
    ("boundary L on a qwen3 target", {"arch": "qwen3"}, {"capture_boundaries": (2, 4, 8)}, "E-CAPTURE-UNREACHABLE"),
    ("boundary past L", {"arch": "qwen35"}, {"capture_boundaries": (2, 4, 9)}, "E-CAPTURE-UNREACHABLE"),
    ("a target without layer inputs", {"arch": "gemma"}, {}, "E-CAPTURE-UNREACHABLE"),
])
def test_targets_llama_cpp_cannot_serve_are_refused(tmp_path: Path, target_gguf, what, target_kw, spec_kw, code):
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec(**spec_kw))
    rc, err = run_to_gguf(src, tmp_path / "g", "--target-gguf", target_gguf(**target_kw))
    assert rc == 1 and f"[{code}]" in err and "hint:" in err, err
    assert not (tmp_path / "g").exists()


def test_boundary_L_is_written_for_targets_that_expose_it(tmp_path: Path, target_gguf):
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec(capture_boundaries=(2, 4, 8)))
    rc, err = run_to_gguf(src, tmp_path / "g", "--target-gguf", target_gguf(arch="qwen35"))
    assert rc == 0, err
    assert gguf.GGUFReader(only_gguf(tmp_path / "g")).fields["eagle3.target_layers"].contents() == [2, 4, 8]


def test_no_target_gguf_is_a_usage_error(tmp_path: Path):
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec())
    rc, err = run_to_gguf(src, tmp_path / "g")
    assert rc != 0 and "[E-GGUF-TARGET]" in err and "--target-gguf" in err
    rc, err = run_to_gguf(src, tmp_path / "g", "--target-gguf", tmp_path / "nope.gguf")
    assert rc != 0 and "[E-GGUF-TARGET]" in err


def test_a_drafter_without_lm_head_is_refused_both_ways(sample, tmp_path: Path, target_gguf):
    rc, err = run_to_gguf(sample("h4-missing-lm_head"), tmp_path / "g", "--target-gguf", target_gguf(vocab=512))
    assert rc == 1 and "lm_head" in err
    # a GGUF without output.weight (llama.cpp would use the target's head, so Vd must be V): not readable back
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec(draft_vocab_size=None))
    convert(str(src), tmp_path / "g2", "gguf", options=gguf_options(target_gguf()))
    stripped = rewrite_gguf(only_gguf(tmp_path / "g2"), tmp_path / "g3" / "d.gguf", drop_tensor="output.weight")
    result = run_cli("--to", "vllm", stripped.parent, tmp_path / "back")
    assert result.exit_code == 1 and "[E-GGUF-NO-LM-HEAD]" in result.stderr


def test_force_replaces_a_gguf_output(tmp_path: Path, target_gguf):
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec())
    assert run_to_gguf(src, tmp_path / "g", "--target-gguf", target_gguf())[0] == 0
    rc, err = run_to_gguf(src, tmp_path / "g", "--target-gguf", target_gguf())
    assert rc == 1 and "--force" in err
    assert run_to_gguf(src, tmp_path / "g", "--target-gguf", target_gguf(), "--force")[0] == 0
    assert len(list((tmp_path / "g").glob("*.gguf"))) == 1


def test_a_gguf_from_another_tool_reads_from_its_keys(tmp_path: Path, target_gguf):
    """Without our record (llama.cpp's own converter writes none), the keys llama.cpp reads define the drafter."""
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec(capture_boundaries=(1, 3, 6)))
    convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target_gguf()))
    bare = rewrite_gguf(only_gguf(tmp_path / "g"), tmp_path / "bare" / "x.gguf", drop_key="eagle3_convert.record")
    convert(str(bare.parent), tmp_path / "back", "vllm")
    theirs, ours = tensor_hashes(tmp_path / "back"), tensor_hashes(src)
    # norms stay F32 without the record of their source dtype; every other tensor is byte-identical
    assert {n: h for n, h in theirs.items() if "norm" not in n} == {n: h for n, h in ours.items() if "norm" not in n}
    assert read_source(str(bare.parent)).drafter.config.capture_boundaries == [1, 3, 6]



def test_the_target_identity_of_the_target_config_is_kept(tmp_path: Path, target_gguf):
    spec = DrafterSpec()
    src = build_drafter(tmp_path / "a", "speculators", spec)
    target_dir = write_target(tmp_path / "t", spec)
    options = make_options(verifier=str(target_dir), target=str(target_dir))
    options.target_gguf = str(target_gguf())
    convert(str(src), tmp_path / "g", "gguf", options=options)
    side = json.loads((tmp_path / "g" / "eagle3-convert.json").read_text())
    assert side["layout"] == "gguf" and side["target"]["num_hidden_layers"] == 8


def test_validate_and_inspect_read_a_gguf(tmp_path: Path, target_gguf):
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec(capture_boundaries=(1, 3, 6)))
    convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target_gguf()))
    result = run_cli("validate", tmp_path / "g", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["layout"] == "gguf" and report["counts"]["error"] == 0
    assert any(f["code"] == "I-CAPTURE-GGUF" and "[1, 3, 6]" in f["message"] for f in report["findings"])
    deep = json.loads(run_cli("validate", tmp_path / "g", "--deep", "--json").stdout)  # random builder bytes: NaN
    assert "fc.weight" in deep["manifest"] and "Traceback" not in deep.get("error", {}).get("message", "")
    result = run_cli("validate", tmp_path / "g", "--engine", "vllm")
    assert result.exit_code == 1 and "[E-ENGINE-REFUSES]" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("inspect", only_gguf(tmp_path / "g"))
    assert result.exit_code == 0 and "layout       gguf" in result.stdout and "eagle3.target_layers: [1, 3, 6]" in \
        result.stdout


def test_a_large_target_tokenizer_is_copied_without_being_decoded(tmp_path: Path):
    """The target's tokenizer.* records are byte spans copied verbatim: reading a 64k-token target costs
    kilobytes, not the numpy object per string the gguf package's reader builds."""
    import tracemalloc

    from eagle3_convert.converters.gguf import read_target_gguf

    w = gguf.GGUFWriter(tmp_path / "big.gguf", "llama")
    w.add_block_count(8)
    w.add_embedding_length(32)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"token-{i}" for i in range(65536)])
    w.add_token_merges([f"a{i} b{i}" for i in range(65536)])
    w.add_tensor("token_embd.weight", np.zeros((2, 2), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tracemalloc.start()
    target = read_target_gguf(str(tmp_path / "big.gguf"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert target.identity.model_dump(exclude_none=True) == {"architectures": [], "num_hidden_layers": 8,
                                                             "hidden_size": 32, "vocab_size": 65536, "aliases": []}
    assert {key for key, _, _ in target.tokenizer} == {"tokenizer.ggml.model", "tokenizer.ggml.tokens",
                                                        "tokenizer.ggml.merges"}
    assert peak < 4 * 1024 * 1024, peak


@pytest.mark.parametrize("damage", ["truncated header", "truncated data", "not a gguf", "huge string"])
def test_a_damaged_gguf_is_one_line_with_a_code(tmp_path: Path, target_gguf, damage: str):
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec())
    convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target_gguf()))
    path = only_gguf(tmp_path / "g")
    data = path.read_bytes()
    if damage == "truncated header":
        path.write_bytes(data[:200])
    elif damage == "truncated data":
        path.write_bytes(data[:-1000])
    elif damage == "not a gguf":
        path.write_bytes(b"GGML" + data[4:])
    else:  # the first key's length claims more bytes than the file holds
        path.write_bytes(data[:24] + (1 << 60).to_bytes(8, "little") + data[32:])
    for argv in (("--to", "vllm", tmp_path / "g", tmp_path / "back"), ("validate", tmp_path / "g")):
        result = run_cli(*argv)
        assert result.exit_code == 1, (damage, argv, result.stdout)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "[E-" in errors[0] and "hint:" in errors[0], result.stderr
        assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ publish --layout gguf

def test_publish_layout_gguf_uploads_the_sidecar_name_and_a_llama_server_card(monkeypatch, tmp_path: Path,
                                                                                 target_gguf):
    from huggingface_hub import ModelCard, snapshot_download

    from hub_server import isolated_hub

    repo, token = "test-user/tiny-drafter-gguf", "hf_publish_test_token"
    with isolated_hub(monkeypatch, tmp_path / "hf-home") as hub:
        result = run_cli("publish", EXAMPLE, repo, "--layout", "gguf", "--target-gguf",
                         target_gguf(layers=8, hidden=64, vocab=512), "--endpoint", hub.url, "--token", token,
                         "--no-registry")
        assert result.exit_code == 0, result.stderr
        snapshot = Path(snapshot_download(repo, endpoint=hub.url, token=token, cache_dir=tmp_path / "dl"))
        assert sorted(p.name for p in snapshot.iterdir()) == [
            ".gitattributes", "README.md", "eagle3-convert.json", "eagle3-tiny-drafter-BF16.gguf"]
        card = ModelCard.load(snapshot / "README.md")
        assert card.data.library_name == "gguf" and "llamacpp" in card.data.tags
        assert "llama-server -m TARGET.gguf -md eagle3-tiny-drafter-BF16.gguf" in card.text
        assert "--spec-type draft-eagle3" in card.text and "Judged for llama.cpp b11434:" in card.text
        assert "### vLLM" not in card.text  # only llama.cpp opens a GGUF
        # what was published reads back as the drafter it was made from
        convert(str(snapshot), tmp_path / "back", "speculators")
        assert tensor_hashes(tmp_path / "back") == tensor_hashes(EXAMPLE)
        validated = run_cli("validate", repo, "--endpoint", hub.url, "--token", token)
        assert validated.exit_code == 0, validated.stdout + validated.stderr


def test_keys_edited_after_writing_win_over_the_record(tmp_path: Path, target_gguf):
    """llama.cpp reads the keys: a GGUF whose eagle3.target_layers were edited (gguf-set-metadata) reads as the
    keys say, and the stale record is said to be ignored."""
    src = build_drafter(tmp_path / "a", "vllm", DrafterSpec())
    convert(str(src), tmp_path / "g", "gguf", options=gguf_options(target_gguf()))
    edited = rewrite_gguf(only_gguf(tmp_path / "g"), tmp_path / "e" / "x.gguf", replace={
        "eagle3.target_layers": ([1, 3, 6], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)})
    drafter = read_source(str(edited.parent)).drafter
    assert drafter.config.capture_boundaries == [1, 3, 6]
    assert any("eagle3_convert.record describes another drafter" in note for note in drafter.notes)


def test_a_target_gguf_of_another_depth_than_the_target_config_is_refused(tmp_path: Path, target_gguf):
    spec = DrafterSpec(target_layers=32, capture_boundaries=(2, 4, 5))
    src = build_drafter(tmp_path / "a", "vllm", spec)
    target_dir = write_target(tmp_path / "t", spec)
    rc, err = run_to_gguf(src, tmp_path / "g", "--target", target_dir, "--target-gguf", target_gguf(layers=8))
    assert rc == 1 and "[E-GGUF-TARGET]" in err and "32-layer" in err


def test_a_cast_is_a_new_drafter_derived_from_the_source(tmp_path: Path, target_gguf):
    """Issue 21: `--outtype f16` over BF16 weights writes other bytes: a new drafter id, whose sidecar and
    registry lineage say it is a cast of the source's; converted back, its config's dtype names the F16 tensors
    (not the source's "bfloat16") and its id is the one the cast recorded. Same dtype: no cast, one id."""
    src = build_drafter(tmp_path / "a", "speculators", DrafterSpec())
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat16"}))
    registry = tmp_path / "reg.db"
    same = run_cli("--to", "gguf", "--target-gguf", target_gguf(), "--outtype", "bf16", src, tmp_path / "b",
                   "--registry", registry, "--json")
    cast = run_cli("--to", "gguf", "--target-gguf", target_gguf(), "--outtype", "f16", src, tmp_path / "g",
                   "--registry", registry, "--json")
    assert same.exit_code == 0 and cast.exit_code == 0, same.stderr + cast.stderr
    source_id = json.loads(same.stdout)["drafter_id"]
    side = json.loads((tmp_path / "g" / "eagle3-convert.json").read_text())
    assert side["drafter_id"] == json.loads(cast.stdout)["drafter_id"] != source_id
    assert side["derived_from"] == source_id and side["lineage"][-1]["kind"] == "cast"
    assert json.loads((tmp_path / "b" / "eagle3-convert.json").read_text())["lineage"][-1]["kind"] == "convert"
    back = run_cli("--to", "speculators", tmp_path / "g", tmp_path / "back", "--registry", registry, "--json")
    assert back.exit_code == 0, back.stderr
    assert json.loads(back.stdout)["drafter_id"] == side["drafter_id"]
    written = json.loads((tmp_path / "back" / "config.json").read_text())
    assert written["torch_dtype"] == "float16"
    listed = {r["drafter_id"]: r for r in json.loads(run_cli("registry", "list", "--registry", registry,
                                                             "--json").stdout)["records"]}
    assert set(listed) == {source_id, side["drafter_id"]}
    edges = json.loads(run_cli("registry", "lineage", side["drafter_id"], "--registry", registry, "--json").stdout)
    casts = [e for e in edges["lineage"] if e["kind"] == "cast"]
    assert [e["derived_from"] for e in casts] == [source_id]
