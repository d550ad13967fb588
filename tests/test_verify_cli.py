"""`eagle3-convert verify` through the real CLI (issue 24): the figures, the JSON document, the registry record,
the model card, --scan-layers, a GGUF and a Hub drafter, and bad input as one line.

The target is a tiny Llama whose head is zero (its greedy text is token 0 forever) and the drafter proposes draft
id 0 always (a zero lm_head): mapped to target id 0 it is accepted every time (k+1), mapped elsewhere never (1).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from builders import DrafterSpec, build_drafter  # noqa: E402
from conftest import run_cli  # noqa: E402
from verify_fixtures import well_scaled, write_tiny_target  # noqa: E402

from eagle3_convert.registry.store import open_registry  # noqa: E402
from eagle3_convert.schemas import output_violations  # noqa: E402
from eagle3_convert.verify import scan_candidates  # noqa: E402

AGREEING_VOCAB = tuple(range(0, 96, 3))  # draft id 0 is target id 0
MISSING_VOCAB = tuple(range(1, 97, 3))  # draft id 0 is target id 1
FAST = ("--device", "cpu", "--max-new-tokens", "12", "-q")


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_tiny_target(tmp_path_factory.mktemp("target") / "tiny-target", zero_head=True)


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.txt"
    path.write_text("abc\nhello world\n")
    return path


def drafter(dest: Path, vocab: tuple[int, ...], layout: str = "speculators", **spec) -> Path:
    return well_scaled(build_drafter(dest, layout, DrafterSpec(vocab_ids=vocab, **spec)), seed=3,
                       zero=("lm_head.weight",))


def verify(*args) -> tuple[int, dict, str]:
    result = run_cli("verify", *map(str, args), "--json")
    doc = json.loads(result.stdout)
    assert output_violations(doc) == [], output_violations(doc)
    return result.exit_code, doc, result.stderr


def test_verify_reports_records_and_the_card_shows_it(target: Path, prompts: Path, tmp_path: Path,
                                                      registry_of_this_test: Path):
    src = drafter(tmp_path / "agrees", AGREEING_VOCAB)
    code, doc, _ = verify(src, "--target-model", target, "--prompts", prompts, "-k", "3", *FAST)
    assert code == 0 and doc["ok"]
    assert doc["mean_accepted_length"] == 4.0 and doc["per_position"] == [1.0, 1.0, 1.0]
    assert doc["k"] == 3 and doc["prompts"] == 2 and doc["tokens"] == 24 and doc["rounds"] == 6
    assert doc["capture"] == {"boundaries": [2, 4, 5], "from": "config"} and doc["tokens_per_second"] > 0
    # recorded with the drafter, under the id `registry add` gives it
    added = json.loads(run_cli("registry", "add", src, "--json").stdout)
    assert doc["recorded"]["drafter_id"] == added["record"]["drafter_id"]
    with open_registry(registry_of_this_test) as store:
        [row] = store.acceptance(doc["recorded"]["drafter_id"])
    assert (row.k, row.mean_accepted_length, row.per_position, row.prompts_sha256) == (
        3, 4.0, [1.0, 1.0, 1.0], doc["prompts_sha256"])
    assert row.target_name_or_path == str(target.resolve()) and row.target_revision is None
    shown = json.loads(run_cli("registry", "show", doc["recorded"]["drafter_id"][:12], "--json").stdout)
    assert output_violations(shown) == [] and [m["mean_accepted_length"] for m in shown["acceptance"]] == [4.0]
    text = run_cli("registry", "show", doc["recorded"]["drafter_id"][:12]).stdout
    assert "acceptance 1 measurement(s) by verify" in text and "4.000 at k=3 (by position 1.00 1.00 1.00)" in text
    # publish shows it on the card (the local target by its directory name only)
    card = json.loads(run_cli("publish", src, "org/agrees", "--dry-run", "--json").stdout)["card"]
    assert "## Measured acceptance" in card and "a local copy `tiny-target`" in card
    assert "| 3 | 4.00 | 1.00 / 1.00 / 1.00 | 2 (`" + doc["prompts_sha256"][:12] in card
    assert str(tmp_path) not in card


def test_text_output_states_the_convention(target: Path, prompts: Path, tmp_path: Path):
    src = drafter(tmp_path / "misses", MISSING_VOCAB)
    result = run_cli("verify", src, "--target-model", target, "--prompts", prompts, "-k", "2", "--no-record", *FAST)
    assert result.exit_code == 0, result.stderr
    assert "mean accepted length at k=2: 1.000 tokens per target forward (the bonus token counted" in result.stdout
    assert "acceptance by draft position: 1: 0.000  2: 0.000" in result.stdout
    # prompts of n tokens, 12 generated: a round from every start n-1 .. n+8 (k=2 more tokens judge the last)
    assert "20 draft rounds over 24 target tokens" in result.stdout
    assert "recorded" not in result.stdout


def test_scan_layers_ranks_the_neighbours_and_the_record(target: Path, prompts: Path, tmp_path: Path,
                                                         registry_of_this_test: Path):
    src = drafter(tmp_path / "agrees", AGREEING_VOCAB)
    assert run_cli("registry", "add", src, "--capture-layers", "2,4,6", "--convention", "boundary").exit_code == 0
    code, doc, _ = verify(src, "--target-model", target, "--prompts", prompts, "--scan-layers", *FAST)
    assert code == 0
    scanned = {tuple(c["boundaries"]): c["labels"] for c in doc["scan"]}
    assert scanned == {(2, 4, 5): ["config", "engine default"], (2, 4, 6): ["recorded", "id 5 -> 6"],
                       (1, 3, 4): ["all -1"], (3, 5, 6): ["all +1"], (1, 4, 5): ["id 2 -> 1"],
                       (3, 4, 5): ["id 2 -> 3"], (2, 3, 5): ["id 4 -> 3"]}
    assert all(c["mean_accepted_length"] == 4.0 for c in doc["scan"])  # token 0 forever: every layer predicts it
    # recorded with the measurement (schema v9), so `registry site` charts it; `registry show --json` shows it
    shown = json.loads(run_cli("registry", "show", doc["recorded"]["drafter_id"][:12], "--json").stdout)
    assert output_violations(shown) == [] and [m["scan"] for m in shown["acceptance"]] == [doc["scan"]]
    with open_registry(registry_of_this_test) as store:
        [row] = store.acceptance(doc["recorded"]["drafter_id"])
    assert [c.boundaries for c in row.scan or []] == [c["boundaries"] for c in doc["scan"]]
    out = tmp_path / "site"
    assert run_cli("registry", "site", out).exit_code == 0
    page = (out / "drafters" / f"{doc['recorded']['drafter_id']}.html").read_text()
    ranked = re.search(r'data-chart="ranked">.*?<script type="application/json" class="chart-spec">(.*?)</script>',
                       page).group(1)
    assert [v["what"] for v in json.loads(ranked)["data"]["values"]] == [", ".join(c["labels"]) for c in doc["scan"]]


@pytest.mark.parametrize("vocab, says", [
    (AGREEING_VOCAB, "best: [2, 4, 5] (config), as the drafter is read: its capture layers are confirmed"),
    (MISSING_VOCAB, "no capture layers get a draft accepted: the drafter does not fit this target"),
])
def test_scan_layers_in_words(target: Path, prompts: Path, tmp_path: Path, vocab: tuple[int, ...], says: str):
    src = drafter(tmp_path / "d", vocab)
    result = run_cli("verify", src, "--target-model", target, "--prompts", prompts, "--scan-layers", "--no-record",
                     *FAST)
    assert result.exit_code == 0, result.stderr
    assert "capture layers ranked by acceptance at k=3:" in result.stdout and says in result.stdout
    # the config's (= the engine default), the whole list one off each way, four single ids one off (4 -> 5 and
    # 5 -> 4 collide)
    assert len([line for line in result.stdout.splitlines() if line.startswith("  [")]) == 7


def test_scan_candidates_stay_inside_the_target():
    found = scan_candidates([0, 4, 8], 8)
    assert (0, 4, 8) in found and (1, 4, 8) in found and (0, 4, 7) in found and (1, 5, 9) not in found
    assert all(0 <= b <= 8 and len(set(key)) == 3 for key in found for b in key)
    assert found[(2, 4, 5)] == ["engine default"]


def test_a_gguf_drafter_measures_as_its_source(target: Path, prompts: Path, tmp_path: Path):
    from gguf_target import write_target_gguf

    src = drafter(tmp_path / "agrees", AGREEING_VOCAB)
    gguf_target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=32, vocab=96)
    out = tmp_path / "as-gguf"
    assert run_cli("--to", "gguf", src, out, "--target-gguf", gguf_target, "--no-record").exit_code == 0
    _, of_source, _ = verify(src, "--target-model", target, "--prompts", prompts, "--no-record", *FAST)
    code, of_gguf, _ = verify(out, "--target-model", target, "--prompts", prompts, "--no-record", *FAST)
    assert code == 0 and of_gguf["mean_accepted_length"] == of_source["mean_accepted_length"] == 4.0
    assert of_gguf["capture"] == of_source["capture"]


def test_drafter_and_target_from_the_hub(hub, target: Path, prompts: Path, tmp_path: Path):
    src = drafter(tmp_path / "agrees", AGREEING_VOCAB)
    for repo, folder in (("org/drafter", src), ("org/target", target)):
        hub.create_repo(repo)
        hub.commit(repo, {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()})
    code, doc, stderr = verify("org/drafter", "--target-model", "org/target", "--prompts", prompts,
                               "--endpoint", hub.url, *FAST)
    assert code == 0, stderr
    assert doc["mean_accepted_length"] == 4.0 and doc["target"] == "org/target"
    assert doc["target_revision"] == hub.repo("org/target").resolve("main")


def one_line_error(result, code: str, exit_code: int = 1) -> str:
    assert result.exit_code == exit_code, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"[{code}]" in line and "hint:" in line and "Traceback" not in result.stderr
    return line


def test_a_target_of_another_width_is_refused_naming_both(target: Path, tmp_path: Path):
    wide = drafter(tmp_path / "wide", AGREEING_VOCAB, target_hidden_size=64)
    line = one_line_error(run_cli("verify", wide, "--target-model", target, *FAST), "E-VERIFY-WIDTH")
    assert "hidden_size is 32" in line and "width 64" in line


@pytest.mark.parametrize("spec, args, code, says", [
    ({"vocab_size": 128, "vocab_ids": None}, (), "E-VERIFY-VOCAB", "has 96 tokens but the drafter's has 128"),
    ({"capture_boundaries": (2, 5, 9), "target_layers": 10}, (), "E-VERIFY-CAPTURE",
     "boundaries [9] lie outside the 8-layer target"),
    ({}, ("--device", "cuda"), "E-VERIFY-DEVICE", "--device cuda: "),  # a CPU build of torch, or no driver, or none seen
])
def test_a_drafter_that_cannot_run_on_this_target_is_refused(target: Path, tmp_path: Path, spec: dict, args: tuple,
                                                             code: str, says: str):
    import torch

    if args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: --device cuda is no refusal here")
    src = drafter(tmp_path / "d", spec.pop("vocab_ids", AGREEING_VOCAB), **spec)
    line = one_line_error(run_cli("verify", src, "--target-model", target, "-q", "--max-new-tokens", "2",
                                  *(args or ("--device", "cpu"))), code)
    assert says in line


def test_without_transformers_the_hint_installs_the_extra(target: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    line = one_line_error(run_cli("verify", tmp_path, "--target-model", target), "E-VERIFY-DEPS")
    assert 'pip install "eagle3-convert[verify]"' in line


@pytest.mark.parametrize("content, says", [("", "holds no prompt"), (None, "cannot read it")])
def test_bad_prompts_are_a_usage_error(target: Path, tmp_path: Path, content: str | None, says: str):
    path = tmp_path / "prompts.txt"
    if content is not None:
        path.write_text(content)
    src = drafter(tmp_path / "d", AGREEING_VOCAB)
    line = one_line_error(run_cli("verify", src, "--target-model", target, "--prompts", path), "E-USAGE", 2)
    assert says in line


def test_a_missing_target_is_one_line(tmp_path: Path):
    src = drafter(tmp_path / "d", AGREEING_VOCAB)
    result = run_cli("verify", src, "--target-model", tmp_path / "nowhere", "--json")
    one_line_error(result, "E-TARGET-MISSING")
    assert json.loads(result.stdout)["error"]["code"] == "E-TARGET-MISSING"


@pytest.mark.parametrize("content, prompts", [
    ("hello\n\nworld\n", ["hello", "world"]),
    ("42\n", ["42"]),  # text that happens to parse as JSON is still a prompt
    ('["a", "b c"]', ["a", "b c"]),
    ('{"prompt": "x"}\n{"text": "y"}\n"z"\n', ["x", "y", "z"]),
])
def test_prompt_files_in_each_spelling(tmp_path: Path, content: str, prompts: list[str]):
    from eagle3_convert.verify import prompts_digest, read_prompts

    path = tmp_path / "prompts"
    path.write_text(content)
    assert read_prompts(path) == prompts
    assert prompts_digest(prompts) != prompts_digest(list(reversed(prompts))) or len(set(prompts)) == 1


@pytest.fixture
def torch_threads():
    """--threads sets the threads of the process it runs in (here, pytest's): put them back."""
    import torch

    before = torch.get_num_threads()
    yield torch
    torch.set_num_threads(before)


def test_threads_sets_torch_s_threads_and_leaves_the_figures(torch_threads, tmp_path: Path):
    """On the trained fixture (figures that are not all-or-nothing): one thread and two draft the same."""
    fixture = Path(__file__).resolve().parent / "data" / "verify-tiny"
    figures = []
    for n in (1, 2):
        code, doc, _ = verify(fixture / "drafter", "--target-model", fixture / "target", "--prompts",
                              fixture / "prompts.txt", "--threads", n, "--no-record", *FAST)
        assert code == 0 and torch_threads.get_num_threads() == n
        figures.append((doc["rounds"], doc["mean_accepted_length"], doc["per_position"]))
    assert figures[0] == figures[1] and 1.5 < figures[0][1] < 4, figures


def test_zero_threads_is_a_usage_error(tmp_path: Path, target: Path):
    line = one_line_error(run_cli("verify", tmp_path, "--target-model", target, "--threads", "0"), "E-USAGE", 2)
    assert "--threads" in line
