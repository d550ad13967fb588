"""The proof that conversions keep acceptance and that the seed failures lose it (issue 24 item 4), on CPU.

tests/data/verify-tiny holds a tiny Llama target and an EAGLE-3 drafter trained against it until it drafts the
target's greedy text far above chance; tools/train_verify_fixture.py made both with its own drafter maths, without
this package (the README there has the command). Here `verify` measures that drafter:
  (a) converted by the real CLI to every layout we write, and back, it gets the same acceptance to the last token;
  (b) each seed failure, written as a real file, loses acceptance, by the margin each case states;
and the fixture's training-time forward and verify's reference forward give the same logits on the same inputs;
and (item 2) `verify --scan-layers` recovers capture ids that were lost or read one off, and confirms a record.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import DATA, REPO, run_cli  # noqa: E402
from gguf_target import write_target_gguf  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from eagle3_convert.convert import read_source  # noqa: E402
from eagle3_convert.verify import acceptance, prepare, read_prompts, with_drafter  # noqa: E402
from eagle3_convert.verify.reference import Chain, DrafterMaths  # noqa: E402
from eagle3_convert.verify.rounds import drafts_per_start  # noqa: E402

FIXTURE = DATA / "verify-tiny"
DRAFTER, TARGET = FIXTURE / "drafter", FIXTURE / "target"
K = 3  # drafts a round, the engines' default
MAX_NEW_TOKENS = 64
LAYOUTS = ("speculators", "sglang", "vllm", "eagle", "modelopt", "gguf")
TRAINED_IDS = [2, 4, 5]  # the drafter's capture boundaries, the engines' default for 8 layers
OTHER_IDS = [1, 3, 6]  # a second drafter's, on the same target: not the default, so no scan finds them by default
OTHER = FIXTURE / "drafter-1-3-6"


def fixture_maths_module():
    """tools/train_verify_fixture.py, the fixture's own (independent) drafter maths."""
    spec = importlib.util.spec_from_file_location("train_verify_fixture", REPO / "tools" / "train_verify_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Matrices this small gain nothing from torch's thread pool, and on a busy machine its threads wait on each other
    (a prompt took 11 s on 2 shared cores with 2 threads, 0.7 s with 1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def measured():
    """The target loaded and run once over the fixture's prompts; each drafter below is measured on that run."""
    return prepare(DRAFTER, TARGET, read_prompts(FIXTURE / "prompts.txt"), device="cpu",
                   max_new_tokens=MAX_NEW_TOKENS)


@pytest.fixture(scope="module")
def trained(measured):
    return acceptance(measured, K)


def counts(result) -> tuple[int, list[int]]:
    """The rounds, and per draft position the rounds that accepted it: what 'the same acceptance to the last token'
    compares (the shares verify reports are these counts over the rounds)."""
    return result.rounds, [round(share * result.rounds) for share in result.per_position]


def measure(measured, drafter: Path):
    return acceptance(with_drafter(measured, drafter), K)


def test_the_fixture_drafts_far_above_chance(trained):
    """The trained drafter's first draft is right in most rounds and its rounds yield well over 2 tokens per target
    forward; chance is 1 in 32 draft tokens per position (a mean accepted length near 1.03). Measured: 148 rounds,
    mean accepted length 3.405, per position 0.851 / 0.811 / 0.743."""
    assert trained.capture_boundaries == TRAINED_IDS and trained.capture_from == "config"
    assert trained.rounds >= 100  # enough rounds that one token more or less moves a share by under 1 %
    assert trained.per_position[0] >= 0.75
    assert trained.mean_accepted_length >= 3.0, trained.per_position


# --- (a) every layout and back --------------------------------------------------------------------------------

def convert(src: Path, dst: Path, layout: str, tmp_path: Path) -> Path:
    args = [src, dst, "--to", layout]
    if layout == "eagle":  # the original EAGLE layout holds no ids: convert checks the hard-coded ones on the target
        args += ["--target", TARGET]
    if layout == "gguf":  # llama.cpp takes the drafter's tokenizer from the target's GGUF
        gguf_target = tmp_path / "target.gguf"
        if not gguf_target.exists():
            cfg = json.loads((TARGET / "config.json").read_text())
            write_target_gguf(gguf_target, layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
                              vocab=cfg["vocab_size"], heads=cfg["num_attention_heads"],
                              kv_heads=cfg["num_key_value_heads"], ff=cfg["intermediate_size"])
        args += ["--target-gguf", gguf_target]
    if layout == "speculators":  # the verifier the fixture names, for sources whose layout keeps none
        cfg = json.loads((DRAFTER / "config.json").read_text())
        args += ["--verifier", cfg["speculators_config"]["verifier"]["name_or_path"]]
    result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    return dst


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_and_back_keeps_the_acceptance_to_the_last_token(measured, trained, layout: str,
                                                                      tmp_path: Path):
    """Both copies: the same rounds accepting the same drafts, and beneath them the same K tokens drafted from every
    start of every prompt and the same first-step states, bit for bit (a conversion copies the weights' bytes; the
    acceptance alone would not see a weight scaled by 1 %: this fixture's counts do not move for fc * 1.01)."""
    there = convert(DRAFTER, tmp_path / layout, layout, tmp_path)
    back = convert(there, tmp_path / f"{layout}-back", "speculators", tmp_path)
    source = drafted_everywhere(measured)
    for copy in (there, back):
        result = measure(measured, copy)
        assert result.capture_boundaries == trained.capture_boundaries, copy
        assert counts(result) == counts(trained), copy
        assert result.mean_accepted_length == trained.mean_accepted_length
        for (drafts, states), (want_drafts, want_states) in zip(drafted_everywhere(with_drafter(measured, copy)),
                                                                source):
            assert torch.equal(drafts, want_drafts) and torch.equal(states, want_states), copy


def drafted_everywhere(measured) -> list[tuple]:
    """Per prompt: the K drafts from every start (verify's chain) and the states the first step hands on."""
    boundaries = sorted(measured.drafter.config.capture_boundaries)
    out = []
    for run in measured.runs:
        _, drafts = drafts_per_start(measured.maths, run, boundaries, K, measured.embed)
        _, states = measured.maths.head(Chain(measured.maths).extend(
            measured.embed(run.tokens[1:]), measured.maths.fuse([run.states[b] for b in boundaries])))
        out.append((drafts, states))
    return out


# --- (b) the seed failures, each a real file ----------------------------------------------------------------

def broken_copy(tmp_path: Path, name: str, config=None, tensors=None, source: Path = DRAFTER) -> Path:
    """A fixture drafter copied and broken: `config(dict)` and `tensors(dict)` edit config.json and the weights in
    place."""
    dst = tmp_path / name
    shutil.copytree(source, dst)
    if config is not None:
        cfg = json.loads((dst / "config.json").read_text())
        config(cfg)
        (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if tensors is not None:
        weights = load_file(dst / "model.safetensors")
        tensors(weights)
        save_file(weights, dst / "model.safetensors")
    return dst


def shift_ids(by: int):
    def edit(cfg: dict) -> None:
        cfg["eagle_aux_hidden_state_layer_ids"] = [b + by for b in cfg["eagle_aux_hidden_state_layer_ids"]]
    return edit


def layer0_as_an_engine_initialises_it(weights: dict) -> None:
    """What an engine runs when the file's layer-0 weights never reach it (SGLang 0.5.9-0.5.11 on layers.0.*,
    vLLM on any unknown prefix): its freshly built layer, nn.Linear's default init and norms of ones."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for name, value in weights.items():
            if name.startswith("layers.0."):
                weights[name] = (torch.ones_like(value) if name.endswith("norm.weight") else
                                 torch.nn.Linear(value.shape[1], value.shape[0], bias=False).weight.detach().clone())


def fc_bypassed(measured):
    """SGLang skips fc when the captured width equals the drafter's (k = 1, or no capture): the decoder then reads
    the target's last hidden state as is. Written as a file: the last capture id moved to L (the last block's output)
    and an fc that passes that state through unchanged."""
    depth = measured.target.num_layers

    def config(cfg: dict) -> None:
        cfg["eagle_aux_hidden_state_layer_ids"] = [*cfg["eagle_aux_hidden_state_layer_ids"][:-1], depth]

    def tensors(weights: dict) -> None:
        h = weights["fc.weight"].shape[0]
        weights["fc.weight"] = torch.cat([torch.zeros(h, weights["fc.weight"].shape[1] - h), torch.eye(h)], 1)

    return config, tensors


def wrong_norm_before_residual(cfg: dict) -> None:
    """vLLM's reading of a speculators config without the key (it defaults to true): trained false, served true."""
    cfg["norm_before_residual"] = not cfg["norm_before_residual"]


def drafts_per_round(result) -> float:
    """Accepted drafts per round: the mean accepted length without the bonus token every round yields anyway."""
    return result.mean_accepted_length - 1


# Each failure: its accepted drafts per round at most this share of the trained drafter's, and (where stated) its
# first-draft acceptance at most this share of the trained one's. Measured on this fixture at K = 3 (trained: 2.41
# drafts a round, 85 % of first drafts), as (drafts, first drafts): ids +1 (0.057, 0.150), ids -1 (0.095, 0.221),
# layers.0 at init (0.161, 0.448), norm_before_residual flipped (0.453, 0.916: the first draft hardly moves, the
# state it hands on does), fc bypassed (0.079, 0.146). A capture one layer off collapses it because the fixture's
# target rewrites its residual stream at every block and its drafter leans on the states it was trained on
# (tools/train_verify_fixture.py: SEPARATION, TOKEN_NOISE); before both, ids +1 and -1 kept 0.90 and 0.85.
MARGINS = {
    "ids all +1 (SGLang block-output ids read as boundaries)": (shift_ids(+1), None, 0.20, 0.35),
    "ids all -1 (boundaries read as SGLang block outputs)": (shift_ids(-1), None, 0.20, 0.35),
    "layers.0 weights dropped, engine's random init": (None, layer0_as_an_engine_initialises_it, 0.25, 0.60),
    "norm_before_residual wrong": (wrong_norm_before_residual, None, 0.60, None),
}
# A scan's best candidate (the trained ids) against its runner-up, in mean accepted length: measured 1.22 from ids
# [2, 4, 6] (runner-up [2, 4, 7], 2.19), 1.80 from [3, 5, 6] (runner-up [3, 5, 7], 1.61), and 0.43 among the
# trained ids' own neighbours ([3, 4, 5], 2.98); the second drafter from [2, 4, 7]: 1.22 (runner-up [3, 5, 8],
# 2.27; the engine default [2, 4, 5] 1.41).
SCAN_MARGIN = 0.4
OTHER_TRAINED_AT_LEAST = 3.0  # the second drafter at its own ids: measured 3.486 (0.868 / 0.826 / 0.792)


@pytest.mark.parametrize("failure", sorted(MARGINS))
def test_each_seed_failure_loses_the_acceptance(measured, trained, failure: str, tmp_path: Path):
    config, tensors, drafts_share, first_share = MARGINS[failure]
    result = measure(measured, broken_copy(tmp_path, "broken", config, tensors))
    assert result.rounds > 0
    assert drafts_per_round(result) <= drafts_share * drafts_per_round(trained), result.per_position
    if first_share is not None:
        assert result.per_position[0] <= first_share * trained.per_position[0], result.per_position


def test_fc_bypassed_collapses_the_acceptance(measured, trained, tmp_path: Path):
    config, tensors = fc_bypassed(measured)
    result = measure(measured, broken_copy(tmp_path, "fc-bypassed", config, tensors))
    assert result.capture_boundaries[-1] == measured.target.num_layers
    assert drafts_per_round(result) <= 0.15 * drafts_per_round(trained), result.per_position
    assert result.per_position[0] <= 0.25 * trained.per_position[0], result.per_position


def absolute_d2t(weights: dict) -> None:
    """d2t written as the draft vocab's target ids instead of offsets (target = draft + d2t)."""
    weights["d2t"] = weights["d2t"] + torch.arange(weights["d2t"].shape[0])


def first_drafts_right(measured, drafter: Path) -> float:
    """The share of starting positions (the prompt's last token on) whose first draft is the target's token, by the
    fixture's own maths, with d2t read as offsets whatever it holds (as SGLang and vLLM read it: an id past the
    vocabulary never matches)."""
    fixture = fixture_maths_module()
    config = json.loads((drafter / "config.json").read_text())
    boundaries = config["eagle_aux_hidden_state_layer_ids"]
    maths = fixture.DraftMaths(load_file(drafter / "model.safetensors"), config,
                               measured.target.model.get_input_embeddings().weight.detach())
    right = starts = 0
    for run in measured.runs:
        tokens, n = run.tokens, run.tokens.shape[0] - 1  # states exist for positions 0..n-1
        fused = maths.fuse({b: run.states[b][None] for b in boundaries}, boundaries)
        logits, _ = maths.step(tokens[None, 1:], fused, torch.arange(n), [])
        drafts = maths.to_target(logits[0].argmax(-1))  # at position j: the guess for token j + 2
        span = torch.arange(run.prompt_length - 1, n - 1)
        right += int((drafts[span] == tokens[span + 2]).sum())
        starts += span.numel()
    return right / starts


def test_d2t_stored_as_absolute_ids_is_refused_and_would_collapse(measured, tmp_path: Path):
    """verify will not measure it (the reader names the fault); what the engines would draft from it, read by the
    fixture's own maths, gets at most a third of the first drafts the trained map gets (measured 0.903 -> 0.208)."""
    broken = broken_copy(tmp_path, "d2t-absolute", tensors=absolute_d2t)
    refused = run_cli("verify", broken, "--target-model", TARGET, "--prompts", FIXTURE / "prompts.txt",
                      "--device", "cpu", "--no-record", "-q")
    assert refused.exit_code != 0 and "E-VOCAB-ABSOLUTE" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    right, engines = first_drafts_right(measured, DRAFTER), first_drafts_right(measured, broken)
    assert right >= 0.80
    assert engines <= right / 3, (right, engines)


# --- the fixture's training-time forward against verify's reference forward ---------------------------------

def test_the_training_forward_and_the_reference_forward_agree(measured):
    """On every prompt's real target states: the fused state, then K chained draft steps (each fed the tokens the
    previous step drafted), give the same logits, the same drafted tokens and the same handed-on state in the
    fixture's maths (tools/train_verify_fixture.py, which trained the drafter) and in verify's (eagle3_convert)."""
    fixture = fixture_maths_module()
    config = json.loads((DRAFTER / "config.json").read_text())
    boundaries = config["eagle_aux_hidden_state_layer_ids"]
    table = measured.target.model.get_input_embeddings().weight.detach()
    ours = fixture.DraftMaths(load_file(DRAFTER / "model.safetensors"), config, table)
    reference = DrafterMaths(read_source(str(DRAFTER)).drafter, torch.device("cpu"))
    close = {"rtol": 1e-4, "atol": 1e-5}
    for run in measured.runs:
        tokens, n = run.tokens, run.tokens.shape[0] - 1
        fused = reference.fuse([run.states[b] for b in sorted(boundaries)])
        our_fused = ours.fuse({b: run.states[b][None] for b in boundaries}, boundaries)
        torch.testing.assert_close(our_fused[0], fused, **close)

        chain, cache = Chain(reference), []
        drafted, handed = reference.head(chain.extend(table[tokens[1:]], fused))
        logits, state = ours.step(tokens[None, 1:], our_fused, torch.arange(n), cache)
        starts = torch.arange(n)
        for depth in range(1, K + 1):
            if depth > 1:
                fed = drafted
                drafted, handed = reference.head(chain.step(starts, fed, handed, depth, lambda ids: table[ids]))
                logits, state = ours.step(fed[None], state, starts + depth - 1, cache)
            torch.testing.assert_close(logits[0], reference.outputs(handed)[1], **close)
            torch.testing.assert_close(state[0], handed, **close)
            assert torch.equal(ours.to_target(logits[0].argmax(-1)), drafted), depth


# --- item 2: lost capture ids recovered, and a record confirmed, by measurement --------------------------------

SCAN_ROW = re.compile(r"^  (\[[\d, ]+\])\s+(\d+\.\d+)\s+(?:\d\.\d\d ?)+\s+(.+)$")


def scan(drafter: Path, *extra) -> tuple[dict, str]:
    """The real CLI's --scan-layers on the fixture's prompts: its ranking read from its table ({"capture":,
    "scan": [{"boundaries":, "mean_accepted_length":, "labels":}]}, as --json names them), and its words. One run:
    the target's generation is what a run costs."""
    result = run_cli("verify", drafter, "--target-model", TARGET, "--prompts", FIXTURE / "prompts.txt", "-k", K,
                     "--device", "cpu", "--scan-layers", "-q", *extra)
    assert result.exit_code == 0, result.stderr
    rows = [SCAN_ROW.match(line) for line in result.stdout.splitlines() if line.startswith("  [")]
    assert rows and all(rows), result.stdout
    capture = re.search(r"^capture boundaries (\[[\d, ]+\]) \((.+)\)$", result.stdout, re.M)
    return {"capture": {"boundaries": json.loads(capture[1]), "from": capture[2]},
            "scan": [{"boundaries": json.loads(row[1]), "mean_accepted_length": float(row[2]),
                      "labels": row[3].strip().split(", ")} for row in rows]}, result.stdout


def set_ids(ids: list[int]):
    def edit(cfg: dict) -> None:
        cfg["eagle_aux_hidden_state_layer_ids"] = ids
    return edit


def test_a_scan_recovers_capture_ids_one_off(tmp_path: Path):
    """The config says [2, 4, 6] (its last id one off): the scan ranks the trained [2, 4, 5] first, ahead of every
    other candidate by SCAN_MARGIN accepted drafts a round, and says the drafter was likely trained on them."""
    lost = broken_copy(tmp_path, "one-off", config=set_ids([2, 4, 6]))
    doc, words = scan(lost, "--no-record")
    first, runner_up = doc["scan"][:2]
    assert doc["capture"] == {"boundaries": [2, 4, 6], "from": "config"}
    assert first["boundaries"] == TRAINED_IDS and "id 6 -> 5" in first["labels"], doc["scan"]
    assert first["mean_accepted_length"] - runner_up["mean_accepted_length"] >= SCAN_MARGIN, doc["scan"]
    assert "best: [2, 4, 5] (id 6 -> 5, engine default), not the [2, 4, 6] the drafter is read with: it was likely " \
           "trained on them; `eagle3-convert --capture-layers 2,4,5 --convention boundary ...` writes them" in words


def test_a_scan_confirms_a_correct_record(tmp_path: Path):
    """The registry records the trained ids for a copy whose config holds them all one off (SGLang's block-output
    ids read as boundaries): the scan ranks the record first and says it is confirmed."""
    shifted = broken_copy(tmp_path, "shifted", config=shift_ids(+1))
    assert run_cli("registry", "add", shifted, "--capture-layers", "2,4,5", "--convention", "boundary").exit_code == 0
    doc, words = scan(shifted, "--no-record")
    assert doc["scan"][0]["boundaries"] == TRAINED_IDS and "recorded" in doc["scan"][0]["labels"], doc["scan"]
    assert doc["scan"][0]["mean_accepted_length"] - doc["scan"][1]["mean_accepted_length"] >= SCAN_MARGIN
    assert "the registry's record [2, 4, 5] ranks first: confirmed by measurement" in words


def test_a_scan_does_not_confirm_a_record_one_off(tmp_path: Path):
    """The same drafter recorded with [2, 4, 6]: its config's [2, 4, 5] are confirmed, the record is not."""
    copy = broken_copy(tmp_path, "recorded-wrong")
    assert run_cli("registry", "add", copy, "--capture-layers", "2,4,6", "--convention", "boundary").exit_code == 0
    doc, words = scan(copy, "--no-record")
    assert doc["scan"][0]["boundaries"] == TRAINED_IDS and "recorded" not in doc["scan"][0]["labels"], doc["scan"]
    assert "best: [2, 4, 5] (config), as the drafter is read: its capture layers are confirmed" in words
    assert "the registry's record [2, 4, 6] is not confirmed" in words


def test_a_scan_finds_trained_ids_that_are_not_the_default(tmp_path: Path):
    """The second drafter (trained on [1, 3, 6]) with its ids written in SGLang's convention and read as boundaries
    ([2, 4, 7]): the scan ranks [1, 3, 6] first, by SCAN_MARGIN, far above the engine default it was not trained on,
    and says the drafter was likely trained on them."""
    lost = broken_copy(tmp_path, "other-shifted", config=set_ids([b + 1 for b in OTHER_IDS]), source=OTHER)
    doc, words = scan(lost, "--no-record")
    first, runner_up = doc["scan"][:2]
    default = next(c for c in doc["scan"] if "engine default" in c["labels"])
    assert first["boundaries"] == OTHER_IDS and first["labels"] == ["all -1"], doc["scan"]
    assert first["mean_accepted_length"] >= OTHER_TRAINED_AT_LEAST, first
    assert first["mean_accepted_length"] - runner_up["mean_accepted_length"] >= SCAN_MARGIN, doc["scan"]
    assert first["mean_accepted_length"] - default["mean_accepted_length"] >= SCAN_MARGIN, doc["scan"]
    assert "best: [1, 3, 6] (all -1), not the [2, 4, 7] the drafter is read with: it was likely trained on them" in words
