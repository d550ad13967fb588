"""Interop: the real peer libraries load what eagle3-convert writes.

speculators 0.9.0 and SpecForge 0.2.0 are pip-installed, pinned, into a venv of their own
(built once and cached: $EAGLE3_INTEROP_VENV, else ~/.cache/eagle3-convert/interop-<hash of
the pins>). The scripts in tests/interop/ run under that venv's python, load our outputs with
the peers' own `from_pretrained`, and report what the loaded model holds as JSON; every
assertion is made here. They skip only when the package index cannot be reached (with pip's
error as the reason); any other build failure fails them (tests/peer_venv.py, tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import peer_venv
import pytest
from conftest import DATA, EXAMPLE, run_cli
from peer_venv import PeerVenv

from eagle3_convert.convert import read_source
from eagle3_convert.safetensors_io import InMemoryTensor, read_tensor_table, tensor_sha256, write_safetensors

pytestmark = pytest.mark.interop

PROBES = Path(__file__).resolve().parent / "interop"

# Installed step by step, exactly in this order. The peers go in with --no-deps: speculators
# declares torchvision/torchaudio, SpecForge torch==2.11.0 and sglang, none needed to load.
PIP_STEPS = (
    ("torch==2.13.0",),
    ("transformers==5.19.0", "safetensors==0.8.0"),
    # what `import speculators` imports at module level (speculators/train/data.py)
    ("loguru==0.7.3", "openai==3.57.0", "datasets==5.1.0", "httpx==0.28.1"),
    ("--no-deps", "speculators==0.9.0", "hs-connectors==0.9.0", "specforge==0.2.0"),
)
# Guard: a resolution that would move torch (or pick PyPI's CUDA build of it) fails instead.
CONSTRAINTS = ("torch==2.13.0+cpu", "transformers==5.19.0")
PEER_VERSIONS = {"speculators": "0.9.0", "specforge": "0.2.0", "transformers": "5.19.0", "torch": "2.13.0+cpu"}
BUILD_TIMEOUT_S = 1200  # the whole build; a hung index must not eat CI's time
PROBE_TIMEOUT_S = 600

MIDLAYER = "midlayer."
EMBED = "embed_tokens.weight"
VERIFIER_ONLY = "verifier_"  # speculators' verifier_lm_head / verifier_norm: from the verifier, never saved
SPECFORGE_DROPS_EMBED = ("SpecForge's exporter drops embed_tokens on purpose (export/to_sglang.py); "
                         "SGLang takes the embedding from the target")
SPECULATORS_OMITS_EMBED = "a speculators checkpoint may omit embed_tokens: the embedding is the verifier's"


# --------------------------------------------------------------------------- the peer venv

INTEROP_VENV = PeerVenv(name="interop", env_var="EAGLE3_INTEROP_VENV", steps=PIP_STEPS, constraints=CONSTRAINTS,
                        build_timeout_s=BUILD_TIMEOUT_S)


def run_probe(python: Path, script: str, *args: object, cwd: Path) -> dict:
    """Run tests/interop/<script> under the peer venv; it prints one JSON object."""
    return peer_venv.run_probe(python, PROBES / script, *args, cwd=cwd, timeout_s=PROBE_TIMEOUT_S)


@pytest.fixture(scope="session")
def peer_python() -> Path:
    return INTEROP_VENV.ensure()


@pytest.fixture(scope="session")
def interop_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("interop")


@pytest.fixture(scope="session")
def verifier(peer_python: Path, interop_dir: Path) -> Path:
    """A tiny random LlamaForCausalLM written by transformers: 8 layers, hidden 64, vocab 512."""
    out = interop_dir / "verifier"
    run_probe(peer_python, "make_verifier.py", out, cwd=interop_dir)
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    return out


# --------------------------------------------------------------------------- our side

def file_facts(path: Path) -> dict[str, dict]:
    """What our output stores, in the probes' terms: name -> dtype, shape, sha256 of the raw bytes."""
    tensors, _ = read_tensor_table(path)
    return {name: {"dtype": ref.dtype, "shape": list(ref.shape), "sha256": tensor_sha256(ref)}
            for name, ref in tensors.items()}


def source_facts(src: Path) -> dict[str, dict]:
    """The source drafter's tensors (any layout, pytorch_model.bin too) by canonical name, d2t/t2d aside."""
    tensors = read_source(str(src)).drafter.tensors
    return {name: {"dtype": t.dtype, "shape": list(t.shape), "sha256": tensor_sha256(t)} for name, t in tensors.items()}


def source_target_ids(src: Path) -> list[int]:
    """The target token id each draft token stands for, as eagle3_convert reads the source."""
    return list(read_source(str(src)).drafter.vocab.target_ids)


def canonical_name(name: str) -> str:
    return "layers.0." + name[len(MIDLAYER):] if name.startswith(MIDLAYER) else name


def sglang_name(name: str) -> str:
    return MIDLAYER + name[len("layers.0."):] if name.startswith("layers.0.") else name


def with_embedding(example: Path, dest: Path) -> Path:
    """The shipped example plus a BF16 embed_tokens [V, H], written by eagle3_convert's own writer."""
    shutil.copytree(example, dest)
    tensors, _ = read_tensor_table(example)
    rng = np.random.default_rng(11)
    bits = (rng.normal(0.0, 0.02, size=(512, 64)).astype("<f4").view("<u4") >> 16).astype("<u2")
    (dest / "model.safetensors").unlink()
    write_safetensors(dest / "model.safetensors",
                      {**tensors, EMBED: InMemoryTensor("BF16", (512, 64), bits.tobytes())},
                      metadata={"format": "pt"})
    return dest


def convert_chain(source: Path, hops: tuple[str, ...], out: Path, verifier: Path) -> Path:
    """Convert through each layout in turn with the real CLI; the last directory is the output."""
    current = source
    for i, layout in enumerate(hops):
        dest = out / f"{i}-{layout}"
        extra = ("--verifier", str(verifier)) if layout == "speculators" else ()
        result = run_cli("--to", layout, *extra, "--no-record", "--quiet", str(current), str(dest))
        assert result.exit_code == 0, f"{current} -> {layout}: {result.stderr or result.stdout}"
        current = dest
    return current


def load_problems(report: dict, stored: dict[str, dict], allowed_missing: set[str]) -> dict[str, list]:
    """Keys the peer left unfilled or ignored, tensors it holds differently, and non-finite values."""
    state = report["state"]
    info = report["loading_info"]
    assert info is not None, f"{report['class']}: the library's own loading report was not observed"
    problems = {
        "missing": sorted(k for k in state
                          if k not in stored and k not in allowed_missing and not k.startswith(VERIFIER_ONLY)),
        "unexpected": sorted(k for k in stored if k not in state),
        "changed": sorted(k for k in stored if k in state and state[k] != stored[k]),
        # a key the checkpoint does not hold is whatever the peer made of it (uninitialised memory, even)
        "nonfinite": sorted(set(report["nonfinite"]) - allowed_missing),
        "library_missing": sorted(set(info["missing_keys"]) - allowed_missing),
        "library_unexpected": info["unexpected_keys"],
        "library_mismatched": info["mismatched_keys"],
    }
    return {k: v for k, v in problems.items() if v}


def assert_loaded_exactly(report: dict, stored: dict[str, dict], allowed_missing: set[str], why: str = "") -> None:
    assert report["ok"], report.get("error")
    problems = load_problems(report, stored, allowed_missing)
    note = f" (allowed missing: {sorted(allowed_missing)}: {why})" if allowed_missing else ""
    assert not problems, f"{report['class']} did not load the checkpoint exactly{note}: {problems}"


# --------------------------------------------------------------------------- speculators 0.9.0

SOURCES = {
    "specforge-sglang": lambda tmp: DATA / "specforge-sglang" / "checkpoint",
    "eagle-original": lambda tmp: DATA / "eagle-original" / "checkpoint",
    "speculators-trained": lambda tmp: DATA / "speculators-trained" / "checkpoint",
    "speculators-fullvocab-qwen3": lambda tmp: DATA / "speculators-fullvocab-qwen3" / "checkpoint",
    "example": lambda tmp: EXAMPLE,
    "example+embed": lambda tmp: with_embedding(EXAMPLE, tmp / "example-with-embed"),
}

SPECULATORS_CASES = {
    "specforge-sglang->speculators": ("specforge-sglang", ("speculators",)),
    "example->sglang->speculators": ("example", ("sglang", "speculators")),
    "example+embed->sglang->speculators": ("example+embed", ("sglang", "speculators")),
    "eagle-original->speculators": ("eagle-original", ("speculators",)),
    # norm_before_residual / input_norm (and Qwen3 q_norm, k_norm, fc_norm, full vocab): no SGLang form
    "speculators-trained->vllm->speculators": ("speculators-trained", ("vllm", "speculators")),
    "speculators-fullvocab-qwen3->vllm->speculators": ("speculators-fullvocab-qwen3", ("vllm", "speculators")),
}

SPECFORGE_CASES = {
    "example->sglang": ("example", ("sglang",)),
    "example+embed->sglang": ("example+embed", ("sglang",)),
    "specforge-sglang->speculators->sglang": ("specforge-sglang", ("speculators", "sglang")),
    "eagle-original->sglang": ("eagle-original", ("sglang",)),
}


@pytest.fixture(scope="session")
def sources(interop_dir: Path) -> dict[str, Path]:
    return {name: make(interop_dir) for name, make in SOURCES.items()}


def converted(cases: dict, sources: dict[str, Path], verifier: Path, root: Path) -> dict[str, tuple[Path, Path]]:
    """case -> (source dir, output dir)."""
    return {case: (sources[src], convert_chain(sources[src], hops, root / case, verifier))
            for case, (src, hops) in cases.items()}


@pytest.fixture(scope="session")
def speculators_loads(peer_python: Path, verifier: Path, sources, interop_dir: Path) -> dict:
    """All speculators cases loaded by one probe run (importing speculators takes seconds)."""
    outputs = converted(SPECULATORS_CASES, sources, verifier, interop_dir / "to-speculators")
    # negative control: our own output less d2t (speculators' own report ignores a missing d2t)
    good = outputs["example->sglang->speculators"][1]
    without_d2t = interop_dir / "speculators-without-d2t"
    without_d2t.mkdir()
    shutil.copy(good / "config.json", without_d2t / "config.json")
    tensors, _ = read_tensor_table(good)
    write_safetensors(without_d2t / "model.safetensors", {k: v for k, v in tensors.items() if k != "d2t"})
    probe = run_probe(peer_python, "load_speculators.py", verifier, without_d2t,
                      *(out for _, out in outputs.values()), cwd=interop_dir)
    cases = {case: (src, out, probe["results"][str(out)]) for case, (src, out) in outputs.items()}
    cases["negative-control"] = (good, without_d2t, probe["results"][str(without_d2t)])
    return {"versions": probe["versions"], "cases": cases}


@pytest.mark.parametrize("case", list(SPECULATORS_CASES))
def test_speculators_loads_our_output_exactly(case: str, speculators_loads: dict):
    src, out, report = speculators_loads["cases"][case]
    assert report["ok"], report.get("error")
    assert report["class"] == "Eagle3DraftModel"
    source = source_facts(src)
    allowed = set() if EMBED in source else {EMBED}
    assert_loaded_exactly(report, file_facts(out), allowed, SPECULATORS_OMITS_EMBED)
    # the peer holds the source's own bytes: nothing was re-encoded on the way
    assert {k: report["state"][k] for k in source} == source


def test_speculators_loads_our_dflash2_exactly(peer_python: Path, verifier: Path, interop_dir: Path):
    """Issue 35: speculators' own DFlash2 file (tests/data/dflash2-speculators), through the flat layout and back,
    loads into speculators' DFlash2DraftModel with every stored tensor as written; the embedding and head come
    from the verifier, as the library fills them (load_verifier_weights)."""
    src = Path(shutil.copytree(DATA / "dflash2-speculators", interop_dir / "dflash2-src"))
    config = json.loads((src / "config.json").read_text())  # trained against the tiny verifier the probe has
    config["speculators_config"]["verifier"] = {"name_or_path": "org/tiny-llama-verifier",
                                                "architectures": ["LlamaForCausalLM"]}
    (src / "config.json").write_text(json.dumps(config, indent=2))
    out = convert_chain(src, ("dflash", "speculators"), interop_dir / "dflash2", verifier)
    report = run_probe(peer_python, "load_speculators.py", verifier, out, cwd=interop_dir)["results"][str(out)]
    assert report["ok"], report.get("error")
    assert report["class"] == "DFlash2DraftModel"
    stored = file_facts(out)
    assert stored == file_facts(src)
    assert_loaded_exactly(report, stored, {EMBED, "lm_head.weight"}, "DFlash2 borrows the verifier's embedding and "
                          "head (load_verifier_weights)")


def test_speculators_missing_d2t_is_caught(speculators_loads: dict):
    """Negative control: speculators' own loading report ignores a missing d2t; the raw comparison does not."""
    _, broken, report = speculators_loads["cases"]["negative-control"]
    assert report["ok"], report.get("error")
    assert "d2t" not in report["loading_info"]["missing_keys"]  # the library's own report stays silent
    problems = load_problems(report, file_facts(broken), {EMBED})
    assert problems["missing"] == ["d2t"]
    with pytest.raises(AssertionError, match="d2t"):
        assert_loaded_exactly(report, file_facts(broken), {EMBED})


# --------------------------------------------------------------------------- SpecForge 0.2.0

@pytest.fixture(scope="session")
def specforge_loads(peer_python: Path, verifier: Path, sources, interop_dir: Path) -> dict:
    """All SpecForge cases, plus the negative control, loaded by one probe run."""
    outputs = converted(SPECFORGE_CASES, sources, verifier, interop_dir / "to-sglang")
    # negative control: our own SGLang output with the draft layer under speculators' names
    renamed = interop_dir / "sglang-named-layers.0"
    renamed.mkdir()
    good = outputs["example->sglang"][1]
    shutil.copy(good / "config.json", renamed / "config.json")
    tensors, _ = read_tensor_table(good)
    write_safetensors(renamed / "model.safetensors", {canonical_name(k): v for k, v in tensors.items()})
    probe = run_probe(peer_python, "load_specforge.py", renamed, *(out for _, out in outputs.values()),
                      cwd=interop_dir)
    cases = {case: (src, out, probe["results"][str(out)]) for case, (src, out) in outputs.items()}
    cases["negative-control"] = (good, renamed, probe["results"][str(renamed)])
    return {"versions": probe["versions"], "cases": cases}


@pytest.mark.parametrize("case", list(SPECFORGE_CASES))
def test_specforge_loads_our_output_exactly(case: str, specforge_loads: dict):
    src, out, report = specforge_loads["cases"][case]
    assert report["ok"], report.get("error")
    assert report["class"] == "LlamaForCausalLMEagle3"
    source = {sglang_name(k): v for k, v in source_facts(src).items()}
    allowed = set() if EMBED in source else {EMBED}
    stored = file_facts(out)
    assert_loaded_exactly(report, stored, allowed, SPECFORGE_DROPS_EMBED)
    assert (EMBED in stored) == (EMBED in source)
    assert {k: report["state"][k] for k in source} == source
    # the vocab map as SpecForge holds it: draft id i proposes target id i + d2t[i], t2d marks exactly
    # those, and they are the source's own draft -> target ids
    d2t, t2d_true = report["d2t"], report["t2d_true"]
    assert t2d_true == [i + offset for i, offset in enumerate(d2t)]
    assert t2d_true == source_target_ids(src)


@pytest.mark.parametrize("cases", [SPECULATORS_CASES, SPECFORGE_CASES], ids=["speculators", "specforge"])
def test_each_peer_sees_sources_with_and_without_an_embedding(cases: dict, sources: dict[str, Path]):
    """Missing embed_tokens is excused only for a source without one: both kinds must be among the cases."""
    has_embed = {EMBED in source_facts(sources[src]) for src, _ in cases.values()}
    assert has_embed == {True, False}


def test_specforge_reports_every_midlayer_key_missing_for_layers_0_names(specforge_loads: dict):
    """Negative control: the assertion machinery above really sees keys SpecForge did not load."""
    _, renamed, report = specforge_loads["cases"]["negative-control"]
    assert report["ok"], report.get("error")
    midlayer_keys = sorted(k for k in report["state"] if k.startswith(MIDLAYER))
    assert len(midlayer_keys) == 10
    problems = load_problems(report, file_facts(renamed), {EMBED})
    assert problems["missing"] == midlayer_keys
    assert problems["library_missing"] == midlayer_keys
    assert problems["unexpected"] == sorted(canonical_name(k) for k in midlayer_keys)
    with pytest.raises(AssertionError, match="midlayer"):
        assert_loaded_exactly(report, file_facts(renamed), {EMBED})


def test_peers_are_the_pinned_versions(speculators_loads: dict, specforge_loads: dict):
    seen = {**speculators_loads["versions"], **specforge_loads["versions"]}
    assert seen == PEER_VERSIONS
