"""Every layout <-> every layout, and every peer sample into every layout that can hold it.

For each drafter variant and each ordered pair (A, B) of layouts: when both can hold the
drafter, A -> B writes exactly what layout B's own spelling of it holds (tests/builders.py,
written independently of the tool), and A -> B -> A gives back every tensor byte for byte
with an equal canonical config; when B cannot, the conversion is refused with a specific
code and nothing is written. The parametrize ids read as the table of which and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import LAYOUTS, DrafterSpec, build_drafter, expected_refusal, stored_tensors, write_target
from conftest import DATA, run_cli, tensor_hashes, tree_digest
from eagle3_convert.convert import convert, make_options, read_source
from eagle3_convert.capture_ids import default_boundaries
from eagle3_convert.safetensors_io import tensor_sha256

VARIANTS: dict[str, dict] = {
    "llama": {},
    "engine-default capture": {"capture_boundaries": None},
    "full vocab (Vd == V)": {"draft_vocab_size": None},
    "qwen3 (q_norm/k_norm)": {"family": "qwen3"},
    "MLA (Kimi/DeepSeek)": {"family": "deepseek_mla", "target_model_type": "deepseek_v3"},
    "3 layers": {"num_layers": 3},
    "MLA, 2 layers": {"family": "deepseek_mla", "target_model_type": "deepseek_v3", "num_layers": 2},
    "norm_before_residual": {"norm_before_residual": True},
    "norm_before_fc": {"norm_before_fc": True},
    "fc_norm": {"fc_norm": True},
    "norm_output": {"norm_output": True},
    "k=4": {"num_aux": 4, "capture_boundaries": (1, 3, 5, 6)},
    "non-default capture": {"capture_boundaries": (1, 3, 6)},
    "target_hidden_size != hidden": {"target_hidden_size": 48},
    "attention bias": {"attention_bias": True},
    "embed_tokens saved": {"embed_tokens": True},
    "ModelOpt HF-trained first layer": {"modelopt_hf_trained": True},
}


def matrix(refused: bool):
    for variant, changes in VARIANTS.items():
        spec = DrafterSpec(**changes)
        for a in LAYOUTS:
            if expected_refusal(a, spec):
                continue  # no A holds it: nothing to convert from
            for b in LAYOUTS:
                refusal = expected_refusal(b, spec)
                if refused and refusal:
                    yield pytest.param(variant, a, b, refusal[0],
                                       id=f"{variant}: {a} -> {b} refused {refusal[0]} ({refusal[1]})")
                elif not refused and not refusal:
                    yield pytest.param(variant, a, b, id=f"{variant}: {a} -> {b} -> {a}")


def options_for(spec: DrafterSpec, tmp_path: Path):
    target = write_target(tmp_path / "target", spec)
    return target, make_options(verifier=str(target), target=str(target))


@pytest.mark.parametrize("variant, a, b", list(matrix(refused=False)))
def test_round_trip_is_lossless(tmp_path: Path, variant: str, a: str, b: str):
    spec = DrafterSpec(**VARIANTS[variant])
    target, options = options_for(spec, tmp_path)
    src = build_drafter(tmp_path / "a", a, spec)
    before = tree_digest(src)

    convert(str(src), tmp_path / "b", b, options=options)
    # B holds what layout B's own spelling of this drafter holds: the same names, the same bytes.
    assert tensor_hashes(tmp_path / "b") == {name: t.sha256 for name, t in stored_tensors(b, spec).items()}
    convert(str(tmp_path / "b"), tmp_path / "a2", a, options=options)

    assert tensor_hashes(tmp_path / "a2") == tensor_hashes(src)
    first = read_source(str(src), options=options).drafter
    middle = read_source(str(tmp_path / "b"), options=options).drafter
    second = read_source(str(tmp_path / "a2"), options=options).drafter
    assert middle.config.semantic_dict() == first.config.semantic_dict()
    assert second.config.semantic_dict() == first.config.semantic_dict()
    assert first.config.target is None or first.config.target.name_or_path == spec.verifier
    assert second.config.target is not None and second.config.target.name_or_path in (str(target), spec.verifier)
    assert tree_digest(src) == before


@pytest.mark.parametrize("variant, a, b, code", list(matrix(refused=True)))
def test_what_a_layout_cannot_express_is_refused(tmp_path: Path, variant: str, a: str, b: str, code: str):
    spec = DrafterSpec(**VARIANTS[variant])
    target, _ = options_for(spec, tmp_path)
    src = build_drafter(tmp_path / "a", a, spec)
    result = run_cli("--to", b, "--verifier", target, "--target", target, src, tmp_path / "b")
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"[{code}]" in errors[0] and "hint:" in errors[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "b").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".b.")]


def test_the_matrix_covers_every_ordered_pair():
    converted = {(a, b) for _, a, b in (p.values for p in matrix(refused=False))}
    assert converted == {(a, b) for a in LAYOUTS for b in LAYOUTS}
    refusing = {b for _, _, b, _ in (p.values for p in matrix(refused=True))}
    # every layout but vllm has something it must refuse: vLLM serves every variant another layout can hold
    assert refusing == set(LAYOUTS) - {"vllm"}


# --------------------------------------------------------- the peers' samples

# What each layout must answer for each sample written by a peer library: None = it converts.
SAMPLE_EXPECTATIONS = {
    "specforge-sglang": dict.fromkeys(LAYOUTS),
    "eagle-original": dict.fromkeys(LAYOUTS),
    "speculators-trained": {"speculators": None, "vllm": None, "sglang": "E-FLAG-UNSUPPORTED",
                            "eagle": "E-FLAG-UNSUPPORTED", "modelopt": "E-FLAG-UNSUPPORTED"},
    "speculators-fullvocab-qwen3": {"speculators": None, "vllm": None, "sglang": "E-FLAG-UNSUPPORTED",
                                    "eagle": "E-FAMILY-UNSUPPORTED", "modelopt": "E-FAMILY-UNSUPPORTED"},
}
TARGET = DATA / "targets" / "llama-tiny"
VERIFIER = "org/llama-tiny"  # its Hub name: `vllm serve DRAFTER` refuses a speculators verifier that is a local path


def manifest(sample_name: str) -> dict:
    return json.loads((DATA / sample_name / "manifest.json").read_text())


def manifest_hashes_by_canonical_name(data: dict) -> dict[str, str]:
    out = {}
    for name, facts in data["tensors"].items():
        if name not in ("d2t", "t2d"):
            out["layers.0." + name[len("midlayer."):] if name.startswith("midlayer.") else name] = facts["sha256"]
    return out


@pytest.mark.parametrize("sample_name, layout", [
    pytest.param(s, layout, id=f"{s} -> {layout}" + (f" refused {code}" if code else ""))
    for s, expected in SAMPLE_EXPECTATIONS.items() for layout, code in expected.items()])
def test_every_sample_converts_to_every_layout_that_can_hold_it(sample, tmp_path: Path, sample_name: str,
                                                                 layout: str):
    if sample_name == "eagle-original":
        pytest.importorskip("torch")
    src = sample(sample_name)
    truth = manifest(sample_name)
    code = SAMPLE_EXPECTATIONS[sample_name][layout]
    result = run_cli("--to", layout, "--verifier", VERIFIER, "--target", TARGET, src, tmp_path / "out")
    if code is not None:
        assert result.exit_code == 1 and f"[{code}]" in result.stderr and not (tmp_path / "out").exists()
        return
    assert result.exit_code == 0, result.stderr

    out = read_source(str(tmp_path / "out")).drafter
    assert {n: tensor_sha256(t) for n, t in out.tensors.items()} == manifest_hashes_by_canonical_name(truth)
    cfg = out.config
    assert (cfg.vocab_size, cfg.draft_vocab_size) == (truth["vocab_size"], truth["draft_vocab_size"])
    if truth["draft_vocab_size"] < truth["vocab_size"]:
        assert list(out.vocab.target_ids) == truth["vocab_map"]["draft_to_target_ids (arange+d2t)"]
    else:
        assert out.vocab is None
    for flag in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
        assert getattr(cfg, flag) == truth[flag], flag
    if truth["aux_ids_as_written"] is None:  # original EAGLE: the engine default, which is the manifest's list
        assert cfg.capture_boundaries is None
        assert default_boundaries(truth["target_num_hidden_layers"]) == truth["capture_boundaries"]
    else:
        assert cfg.capture_boundaries == truth["capture_boundaries"]

    # ... and back into the sample's own layout, tensor for tensor.
    assert run_cli("--to", truth["layout"], "--target", TARGET, tmp_path / "out", tmp_path / "back").exit_code == 0
    back = read_source(str(tmp_path / "back")).drafter
    original = read_source(str(src)).drafter
    assert {n: tensor_sha256(t) for n, t in back.tensors.items()} == \
        {n: tensor_sha256(t) for n, t in original.tensors.items()}
    assert back.config.semantic_dict() == original.config.semantic_dict()
    if truth["weights_files"] == ["model.safetensors"]:
        assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
