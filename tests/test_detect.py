"""`--from auto`: the five layouts told apart on the peers' samples, on each layout's own spelling
and on our outputs, with a reason, or an error that says why not; the layout list in --help;
third-party layouts through entry points; Hub repo ids resolved from the HF cache offline."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from builders import LAYOUTS, DrafterSpec, build_drafter, expected_refusal, write_target
from conftest import DATA, run_cli
from eagle3_convert.cli.common import LAYOUT_HELP
from eagle3_convert.converters.base import load_checkpoint
from eagle3_convert import names
from eagle3_convert.converters.registry import detect, layouts
from eagle3_convert.errors import FormatError

CLI = [sys.executable, "-c", "from eagle3_convert.cli import main; main()"]


def detected(path: Path) -> str:
    return detect(load_checkpoint(path)).layout


# ----------------------------------------------------------------- samples

@pytest.mark.parametrize("sample_name, layout", [
    ("specforge-sglang", "sglang"),
    ("speculators-trained", "speculators"),
    ("speculators-fullvocab-qwen3", "speculators"),
    ("eagle-original", "eagle"),
])
def test_peer_samples_are_told_apart(sample, sample_name: str, layout: str):
    if sample_name == "eagle-original":
        pytest.importorskip("torch")
    result = run_cli("inspect", "--json", sample(sample_name))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["layout"] == layout and data["detected_by"]


def test_ids_only_at_top_level_are_ambiguous_and_say_why(sample, tmp_path: Path):
    src = sample("h8-sglang-ids-toplevel-only")
    result = run_cli("--to", "speculators", "--verifier", "org/t", src, tmp_path / "out")
    assert result.exit_code == 1 and "[E-LAYOUT-AMBIGUOUS]" in result.stderr
    assert "sglang: " in result.stderr and "vllm: " in result.stderr and "--from" in result.stderr
    # Said explicitly, each reading is what that engine does with the file.
    as_sglang = run_cli("--from", "sglang", "--to", "vllm", src, tmp_path / "sg")
    assert as_sglang.exit_code == 1 and "[E-CAPTURE-AMBIGUOUS]" in as_sglang.stderr
    assert run_cli("--from", "vllm", "--to", "speculators", "--verifier", "org/t", src, tmp_path / "v").exit_code == 0
    assert json.loads((tmp_path / "v" / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]


def test_unknown_config_says_what_it_looked_for(tmp_path: Path):
    src = build_drafter(tmp_path / "d", "sglang")
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    with pytest.raises(FormatError) as info:
        detect(load_checkpoint(src))
    assert info.value.code == "E-LAYOUT-UNKNOWN" and "--from" in info.value.hint


# ------------------------------------------- each layout's own spelling, no sidecar

SPELLINGS = {"llama": {}, "engine-default capture": {"capture_boundaries": None}, "3 layers": {"num_layers": 3},
             "3 layers, default capture": {"num_layers": 3, "capture_boundaries": None},
             "full vocab": {"draft_vocab_size": None}, "qwen3": {"family": "qwen3"},
             "MLA": {"family": "deepseek_mla", "target_model_type": "deepseek_v3"}}
# A safetensors EAGLE checkpoint is the same file SpecForge exports (midlayer.*, no ids, no eagle_config);
# SGLang serves it with the same maths, so reading it as sglang loses nothing.
SAME_FILE_AS = {"eagle": "sglang"}


@pytest.mark.parametrize("variant, layout", [
    pytest.param(v, layout, id=f"{v} in {layout} -> {SAME_FILE_AS.get(layout, layout)}")
    for v, changes in SPELLINGS.items() for layout in LAYOUTS if not expected_refusal(layout, DrafterSpec(**changes))])
def test_each_layouts_own_spelling_is_detected(tmp_path: Path, variant: str, layout: str):
    src = build_drafter(tmp_path / "d", layout, DrafterSpec(**SPELLINGS[variant]))
    assert detected(src) == SAME_FILE_AS.get(layout, layout)


def test_pickled_eagle_is_detected(tmp_path: Path):
    pytest.importorskip("torch")
    assert detected(build_drafter(tmp_path / "d", "eagle", pickled=True)) == "eagle"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_our_outputs_are_detected_as_written(tmp_path: Path, layout: str):
    target = write_target(tmp_path / "target")
    src = build_drafter(tmp_path / "src", "sglang")
    result = run_cli("--to", layout, "--verifier", target, "--target", target, src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    detection = detect(load_checkpoint(tmp_path / "out"))
    assert detection.layout == layout and "eagle3-convert" in detection.reason
    # Once config.json is edited the sidecar no longer speaks for it: the file's own markers decide.
    config = tmp_path / "out" / "config.json"
    config.write_text(config.read_text() + " ")
    assert detected(tmp_path / "out") == SAME_FILE_AS.get(layout, layout)


# ------------------------------------------------------------- the layout list

def test_help_lists_exactly_the_registered_layouts():
    listed = [line.split()[0] for line in LAYOUT_HELP.splitlines()]
    assert listed == list(layouts()) == list(names.LAYOUTS)
    assert all(len(line.split(maxsplit=1)[1]) > 20 for line in LAYOUT_HELP.splitlines())
    result = run_cli("--help")
    for name in LAYOUTS:
        assert f"\n  {name} " in result.stdout


def test_every_layout_names_who_writes_or_serves_it():
    for layout in layouts().values():
        assert layout.summary and layout.engine


# ------------------------------------------------------------ entry points

PLUGIN = """
    from eagle3_convert.converters.speculators import SpeculatorsLayout

    class AcmeLayout(SpeculatorsLayout):
        name = "acme"
        summary = "ACME's in-house trainer (speculators files under another name)"

        def detect(self, ckpt):
            return None

    LAYOUT = AcmeLayout()
"""


def test_a_third_party_layout_is_found_through_entry_points(tmp_path: Path):
    site = tmp_path / "site"
    dist = site / "acme_layouts-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "acme_layout.py").write_text(textwrap.dedent(PLUGIN))
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-layouts\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[eagle3_convert.layouts]\nacme = acme_layout:LAYOUT\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    listed = subprocess.run([sys.executable, "-c", "from eagle3_convert.converters.registry import layouts; "
                             "print(' '.join(layouts()))"], env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [*names.LAYOUTS, "acme"]

    src = build_drafter(tmp_path / "src", "sglang")
    converted = subprocess.run([*CLI, "--to", "acme", "--verifier", "org/target", str(src), str(tmp_path / "out")],
                               env=env, capture_output=True, text=True, timeout=120)
    assert converted.returncode == 0, converted.stderr
    assert json.loads((tmp_path / "out" / "eagle3-convert.json").read_text())["layout"] == "acme"
    unknown = subprocess.run([*CLI, "--to", "nope", str(src), str(tmp_path / "x")], env=env, capture_output=True,
                             text=True, timeout=120)
    assert unknown.returncode == 2 and "nope" in unknown.stderr


def test_a_broken_plugin_does_not_break_the_built_in_layouts(tmp_path: Path):
    site = tmp_path / "site"
    dist = site / "broken_layouts-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "broken_layout.py").write_text("raise ImportError('needs a library that is not installed')\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-layouts\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[eagle3_convert.layouts]\nbroken = broken_layout:LAYOUT\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    src = build_drafter(tmp_path / "src", "sglang")

    fine = subprocess.run([*CLI, "--to", "vllm", str(src), str(tmp_path / "out"), "--no-record"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert fine.returncode == 0, fine.stderr
    broken = subprocess.run([*CLI, "--to", "broken", str(src), str(tmp_path / "x"), "--no-record"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert broken.returncode == 2 and "E-LAYOUT-PLUGIN" in broken.stderr and "not installed" in broken.stderr


# ---------------------------------------------------------------- Hub cache

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def populate_hf_cache(cache: Path, repo_id: str, files: Path) -> Path:
    """The standard HF cache layout by hand: blobs by hash, a snapshot of symlinks, refs/main."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for f in sorted(files.iterdir()):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        (repo / "blobs" / digest).write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(Path("..", "..", "blobs", digest))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def test_inspect_resolves_a_repo_id_from_the_hf_cache_offline(tmp_path: Path):
    populate_hf_cache(tmp_path / "hub", "org/tiny-drafter",
                                 build_drafter(tmp_path / "files", "vllm", family="qwen3"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_HOME": str(tmp_path / "hf-home")}
    env.pop("HF_ENDPOINT", None)
    found = subprocess.run([*CLI, "inspect", "--json", "org/tiny-drafter"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["layout"] == "vllm" and data["drafter"]["config"]["family"] == "qwen3"
    assert data["source"] == f"hf://org/tiny-drafter@{COMMIT}"  # named by repo and the cached commit

    missing = subprocess.run([*CLI, "inspect", "org/not-cached"], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert "[E-HUB-OFFLINE]" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1



def test_validate_and_convert_give_an_ambiguous_file_one_verdict(tmp_path: Path):
    """Issue 34: validate said "OK: 0 errors, 3 warnings" of h8 (a SpecForge export whose ids sit only at the top
    level, where vLLM reads them as boundaries and SGLang ignores them) while convert refused it,
    E-LAYOUT-AMBIGUOUS. Whichever layout wrote it, one of the two engines serves it on other layers than the
    other: an error in both, and --from settles it in both."""
    src = DATA / "h8-sglang-ids-toplevel-only" / "checkpoint"
    validated = run_cli("validate", src)
    assert validated.exit_code == 1 and "E-LAYOUT-AMBIGUOUS:" in validated.stdout, validated.stdout
    converted = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert converted.exit_code == 1 and "[E-LAYOUT-AMBIGUOUS]" in converted.stderr, converted.stderr
    for given in ("sglang", "vllm"):  # --from settles the layout in both (the ids' meaning is another question)
        assert "LAYOUT-AMBIGUOUS" not in run_cli("validate", "--from", given, src).stdout
        done = run_cli("--no-record", "--from", given, "--to", "vllm", src, tmp_path / f"out-{given}")
        assert "LAYOUT-AMBIGUOUS" not in done.stderr, done.stderr
