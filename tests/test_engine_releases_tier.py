"""Engine truth per release (issue 23): an older SGLang and an older vLLM, from the package index, load the same
files as today's, and our verdict for each release agrees with what that release does, cell by cell.

Releases: SGLang 0.5.11 (before PR 24663, layers.{i} / fc_norm / norm_output, and PR 25454, DeepSeek ids) beside
0.5.23; vLLM 0.24.0 (before PR 46488, fc_norm / norm_output on the speculators path) beside 0.33.0. The old
releases get venvs of their own, cached like the tier's (tests/peer_venv.py), with the tier's torch (the local CPU
wheel), its module-level dependencies, and the transformers the release pins where the tier's is too new for it
(SGLang 0.5.11 re-registers `qwen3_asr`, which transformers 5.19 has). The probes are the tier's
(tests/engines/probe_*.py): they take each release's own API where it differs (SGLang 0.5.11 has no
runtime_context; vLLM 0.24.0 reads no VLLM_TARGET_DEVICE) and report the flags the engine's module applied.

A cell is LOUD (the release raised), SERVED (loaded, captures the trained boundaries, applies the trained flags,
layer 0's weights loaded bit for bit) or WRONG (loaded, and one of those is not so). Our verdict for that release
(`validate --engine ENGINE==RELEASE`, the engine modules' rules) must be refuses / a serving verdict / wrong.
Measured on the 2-core machine under load (nice 19): 9 min 37 s building both venvs (dependency wheels already in
pip's cache) and probing; 3 min 4 s with the venvs cached (the four probes, 0.5.23 / 0.33.0 from the tier's venv).
"""

from __future__ import annotations

import json
from pathlib import Path

import peer_venv
import pytest
from builders import DrafterSpec, write_target
from conftest import run_cli
from peer_venv import PeerVenv
from test_engines import CONSTRAINTS, ENGINES, ENGINES_VENV, PIP_STEPS, SITE, write_source

pytestmark = pytest.mark.engines

torch = pytest.importorskip("torch")

DEPENDENCIES = PIP_STEPS[-1]  # the module-level imports of the engines' loading path, pinned (shared with the tier)
SGLANG_OLD = PeerVenv(name="engines-sglang-0.5.11", env_var="EAGLE3_ENGINES_SGLANG_OLD_VENV", steps=(
    # httpx2: the tier's openai imports it, and transformers 5.6.0 (unlike 5.19.0) does not bring it
    ("torch==2.13.0",), ("transformers==5.6.0", "safetensors==0.8.0", "httpx2==2.16.2"),
    ("--no-deps", "sglang==0.5.11"), DEPENDENCIES), constraints=("torch==2.13.0+cpu", "transformers==5.6.0"),
    build_timeout_s=1800)
VLLM_OLD = PeerVenv(name="engines-vllm-0.24.0", env_var="EAGLE3_ENGINES_VLLM_OLD_VENV", steps=(
    ("torch==2.13.0",), ("transformers==5.19.0", "safetensors==0.8.0"), ("--no-deps", "vllm==0.24.0"),
    DEPENDENCIES), constraints=CONSTRAINTS, build_timeout_s=1800)
RELEASES = {("sglang", "0.5.11"): SGLANG_OLD, ("sglang", "0.5.23"): ENGINES_VENV,
            ("vllm", "0.24.0"): VLLM_OLD, ("vllm", "0.33.0"): ENGINES_VENV}
# SGLang before 0.5.2x takes its CPU paths (rotary embedding among them) only when told it runs on CPU.
PROBE_ENV = {("sglang", "0.5.11"): {"SGLANG_USE_CPU_ENGINE": "1"}}
FLAGS = ("fc_norm", "norm_output")

# name -> (engine, layout, spec, how the file is edited after convert, {release: expected outcome})
LLAMA = DrafterSpec(target_layers=8, capture_boundaries=(1, 3, 6))
CELLS = {
    "sglang midlayer": ("sglang", "sglang", LLAMA, None, {"0.5.11": "SERVED", "0.5.23": "SERVED"}),
    "sglang layers.0": ("sglang", "sglang", LLAMA, "layers.0", {"0.5.11": "WRONG", "0.5.23": "SERVED"}),
    "sglang fc_norm+norm_output": ("sglang", "sglang", LLAMA.with_(fc_norm=True, norm_output=True), None,
                                   {"0.5.11": "WRONG", "0.5.23": "SERVED"}),
    "sglang 2 layers": ("sglang", "sglang", LLAMA.with_(num_layers=2), None, {"0.5.11": "LOUD", "0.5.23": "SERVED"}),
    # a Llama drafter on a DeepSeek target: 0.5.23 reads [3, 5, 7] as boundaries, 0.5.11 adds 1 (PR 25454)
    "sglang deepseek (3,5,7)": ("sglang", "sglang", LLAMA.with_(capture_boundaries=(3, 5, 7),
                                                                 target_model_type="deepseek_v3"), None,
                                {"0.5.11": "WRONG", "0.5.23": "SERVED"}),
    "sglang deepseek (2,4,6)": ("sglang", "sglang", LLAMA.with_(capture_boundaries=(2, 4, 6),
                                                                 target_model_type="deepseek_v3"), None,
                                {"0.5.11": "SERVED", "0.5.23": "SERVED"}),
    "vllm speculators fc_norm+norm_output": ("vllm", "speculators", LLAMA.with_(fc_norm=True, norm_output=True),
                                             None, {"0.24.0": "LOUD", "0.33.0": "SERVED"}),
    "vllm speculators norm_output": ("vllm", "speculators", LLAMA.with_(norm_output=True), None,
                                     {"0.24.0": "WRONG", "0.33.0": "SERVED"}),
    "vllm native norm_output": ("vllm", "vllm", LLAMA.with_(norm_output=True), None,
                                {"0.24.0": "SERVED", "0.33.0": "SERVED"}),
}


def _rename_layer_0(path: Path) -> None:
    """midlayer.* stored as layers.0.* (what SGLang 0.5.12+ also loads), the config left as written."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path / "model.safetensors"))
    assert any(n.startswith("midlayer.") for n in tensors), sorted(tensors)
    save_file({n.replace("midlayer.", "layers.0."): t for n, t in tensors.items()}, str(path / "model.safetensors"))
    (path / "eagle3-convert.json").unlink(missing_ok=True)  # the sidecar describes the names as written


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("releases")
    jobs: dict[str, list[dict]] = {"sglang": [], "vllm": []}
    made = {}
    for i, (name, (engine, layout, spec, edit, _)) in enumerate(CELLS.items()):
        src = write_source(root / f"c{i}-source", "speculators", spec)
        target = write_target(root / f"c{i}-target", spec)
        dest = root / f"c{i}-{layout}"
        done = run_cli("--to", layout, "--verifier", "org/target-model", "--target", target, "--json", "--no-record",
                       src, dest)
        assert done.exit_code == 0, (name, done.stdout, done.stderr)
        if edit == "layers.0":
            _rename_layer_0(dest)
        made[name] = {"dest": dest, "target": target}
        jobs[engine].append({"id": f"c{i}", "draft": str(dest), "target": str(target), "inputs": None, "name": name})
    reports = {}
    for (engine, release), venv in RELEASES.items():  # one probe at a time: the CI machine has 2 cores
        python = venv.ensure()
        work = root / f"{engine}-{release}"
        (work / "out").mkdir(parents=True)
        (work / "jobs.json").write_text(json.dumps(jobs[engine]))
        report = peer_venv.run_probe(python, ENGINES / f"probe_{engine}.py", work / "jobs.json", work / "out",
                                     cwd=work, timeout_s=1200,
                                     env={"PYTHONPATH": str(SITE), **PROBE_ENV.get((engine, release), {})})
        assert report["versions"][engine] == release, report["versions"]
        for job in jobs[engine]:
            reports[(job["name"], release)] = report["results"][job["id"]]
    return {"made": made, "reports": reports}


def observed(report: dict, engine: str, spec: DrafterSpec, dest: Path) -> tuple[str, str]:
    """What the release did: LOUD, SERVED or WRONG, and why."""
    if not report["ok"]:
        return "LOUD", f"[{report['stage']}] {report['error']}"
    captured = report.get("layers_to_capture") if engine == "sglang" else report["capture_ids"]["vllm-v1"]
    problems = []
    if sorted(set(captured or ())) != sorted(spec.capture_boundaries):
        problems.append(f"captures {captured}, trained on {list(spec.capture_boundaries)}")
    applied = report.get("applied") or {}
    problems += [f"{flag} {getattr(spec, flag)} in training, {applied.get(flag)} in the engine" for flag in FLAGS
                 if bool(applied.get(flag)) != getattr(spec, flag)]
    from safetensors.torch import load_file

    stored = load_file(str(dest / "model.safetensors"))
    params = load_file(report["params"])
    trained = next(stored[n] for n in ("midlayer.self_attn.o_proj.weight", "layers.0.self_attn.o_proj.weight")
                   if n in stored)
    loaded = next(params[n] for n in ("model.midlayer.self_attn.o_proj.weight", "model.layers.0.self_attn.o_proj.weight")
                  if n in params)
    if not torch.allclose(trained.float(), loaded.float(), rtol=0, atol=0, equal_nan=True):
        problems.append("layer 0's o_proj is not the trained tensor (not loaded)")
    return ("WRONG", "; ".join(problems)) if problems else ("SERVED", "")


def ours(made: dict, engine: str, release: str) -> str:
    """Our verdict for that release, as validate states it: refuses, wrong or serves."""
    done = run_cli("validate", "--json", "--engine", f"{engine}=={release}", "--target", made["target"],
                   made["dest"])
    report = json.loads(done.stdout)
    codes = {f["code"] for f in report["findings"] if f["severity"] == "error"}
    assert report["releases"][0].endswith(release), report["releases"]
    if codes & {"E-ENGINE-REFUSES", "E-CONFIG-ARCH"}:  # (E-ENGINE-UNSUPPORTED: said of a file it loads)
        return "LOUD"
    return "WRONG" if codes else "SERVED"


@pytest.mark.parametrize("name,release", [(n, r) for n, cell in CELLS.items() for r in cell[4]],
                         ids=[f"{n} @ {r}" for n, cell in CELLS.items() for r in cell[4]])
def test_our_verdict_per_release_agrees_with_the_release(cells: dict, name: str, release: str) -> None:
    engine, _, spec, _, expected = CELLS[name]
    made = cells["made"][name]
    outcome, why = observed(cells["reports"][(name, release)], engine, spec, made["dest"])
    assert outcome == expected[release], (name, release, outcome, why)
    assert ours(made, engine, release) == outcome, (name, release, outcome, why)
