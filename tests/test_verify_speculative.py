"""verify as speculative decoding (issue 36) measures what the token-by-token measurement measured.

verify decodes each prompt as a serving engine does: the drafter drafts k tokens, the target checks the k+1
positions in one forward through its KV cache, the greedy prefix is kept and the cache cropped back. The reference
is verify's measurement before (tests/verify_fixtures.greedy_run: one target forward a token, the rounds then walked
over drafts computed on that text). On the trained fixture (tests/data/verify-tiny) both give the same tokens, the
same rounds and every figure equal, for the drafter's own measurement at several k and for every `--scan-layers`
candidate.

The equality is exact on the fixtures, not in general. A forward over k+1 positions sums in another order than k+1
one-token forwards, so the hidden states differ in the last bits (here at most a few 1e-6); a greedy choice (the
target's argmax, or the drafter's) whose two best logits lie closer than that difference can go either way, a tie
in exact arithmetic. The rule: the text and the figures are equal whenever every greedy choice's margin (best logit
minus the runner-up) exceeds the logit difference between the two computations. The last test checks that the
fixtures hold it with room: the closest choice is over 100 times the largest difference.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import DATA  # noqa: E402
from verify_fixtures import greedy_run  # noqa: E402

from eagle3_convert.verify import acceptance, prepare, read_prompts, scan_layers, with_drafter  # noqa: E402
from eagle3_convert.verify.reference import Chain  # noqa: E402

FIXTURE = DATA / "verify-tiny"
PROMPTS = read_prompts(FIXTURE / "prompts.txt")
MAX_NEW_TOKENS = 64


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def decoded():
    """k -> the fixture's drafter measured by speculative decoding at k drafts a round."""
    return {k: prepare(FIXTURE / "drafter", FIXTURE / "target", PROMPTS, k=k, device="cpu",
                       max_new_tokens=MAX_NEW_TOKENS) for k in (1, 3, 5)}


@pytest.fixture(scope="module")
def reference(decoded):
    """The token-by-token measurement of the same target: each prompt's run, and its greedy choices' logits."""
    target = decoded[3].target
    return [greedy_run(target, prompt, MAX_NEW_TOKENS) for prompt in PROMPTS]


def by_token(measured, reference):
    """The same drafter measured on the token-by-token runs (its rounds drafted on that text)."""
    return replace(measured, runs=[run for run, _ in reference], decoded_with=None)


def figures(result) -> tuple:
    return (result.rounds, result.tokens, result.mean_accepted_length, result.per_position,
            result.capture_boundaries)


def test_the_text_is_the_token_by_token_text(decoded, reference):
    for measured in decoded.values():
        for run, (want, _) in zip(measured.runs, reference):
            assert run.tokens.tolist() == want.tokens.tolist()
            assert [s.shape for s in run.states] == [s.shape for s in want.states]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_each_round_and_figure_equals_the_token_by_token_measurement(decoded, reference, k):
    measured = decoded[k]
    old = by_token(measured, reference)
    assert figures(acceptance(measured, k)) == figures(acceptance(old, k))
    # round by round: what each decoding round accepted is what the walk over the old text accepts at that start
    from eagle3_convert.verify.rounds import accepted_per_start, drafts_per_start

    for run, want in zip(measured.runs, old.runs):
        walked = accepted_per_start(want, *drafts_per_start(old.maths, want, [2, 4, 5], k, old.embed))
        assert run.accepted == {p: walked[p] for p in run.accepted} and run.accepted
    # and the decoding took one target forward a round, after the prompt's: fewer than one a token
    forwards = sum(run.forwards for run in measured.runs)
    assert forwards < sum(run.tokens.shape[0] - run.prompt_length for run in measured.runs)
    if k == 3:  # the fixture's published figures (tests/data/verify-tiny/README.md)
        result = acceptance(measured, k)
        assert result.rounds == 148 and round(result.mean_accepted_length, 3) == 3.405


@pytest.mark.parametrize("given", [None, [2, 4, 6], [3, 5, 6]])
def test_every_scan_candidate_equals_the_token_by_token_scan(decoded, reference, given):
    """--scan-layers from the drafter's own ids and from the ids a wrong config would give (the proof's cases)."""
    measured = decoded[3]
    new, old = scan_layers(measured, 3, given), scan_layers(by_token(measured, reference), 3, given)
    assert [(c.boundaries, c.labels, figures(c.result)) for c in new] == [
        (c.boundaries, c.labels, figures(c.result)) for c in old]
    assert len(new) >= 6


def test_a_second_drafter_and_its_scan_equal_too(decoded, reference):
    """drafter-1-3-6 measured on the same decoding (with_drafter: its rounds drafted on the decoded text)."""
    measured = with_drafter(decoded[3], FIXTURE / "drafter-1-3-6")
    new, old = scan_layers(measured, 3), scan_layers(by_token(measured, reference), 3)
    assert [figures(c.result) for c in new] == [figures(c.result) for c in old]
    assert new[0].boundaries == [1, 3, 6]


def top2_margin(logits: torch.Tensor) -> torch.Tensor:
    best = logits.topk(2, dim=-1).values
    return best[..., 0] - best[..., 1]


def test_the_fixtures_hold_the_tolerance_rule(decoded, reference):
    """The two computations differ in the last bits (so exact equality is no law), by far less than the closest
    greedy choice of the target and of the drafter's first draft at every position."""
    measured = decoded[3]
    target, maths = measured.target, measured.maths
    state_gap = target_gap = target_margin = draft_gap = draft_margin = 0.0
    target_margin = draft_margin = float("inf")
    with torch.no_grad():
        for run, (want, logits) in zip(measured.runs, reference):
            state_gap = max(state_gap, *(float((a - b).abs().max()) for a, b in zip(run.states, want.states)))
            # the target's choices: its head over the last boundary's states of the generated positions
            rows = slice(run.prompt_length - 1, None)
            own = target.model.lm_head(target.model.model.norm(run.states[target.num_layers][rows]))
            target_gap = max(target_gap, float((own - logits[: own.shape[0]]).abs().max()))
            target_margin = min(target_margin, float(top2_margin(logits).min()))
            # the drafter's first draft from every position, on each computation's states
            drafted = []
            for states in (run.states, want.states):
                fused = maths.fuse([states[b] for b in (2, 4, 5)])
                drafted.append(maths.outputs(Chain(maths).extend(measured.embed(run.tokens[1:]), fused))[1])
            draft_gap = max(draft_gap, float((drafted[0] - drafted[1]).abs().max()))
            draft_margin = min(draft_margin, float(top2_margin(drafted[1]).min()))
    assert 0 < state_gap < 1e-4, state_gap  # not bit-equal: the batched forward sums in another order
    assert target_margin > 100 * target_gap, (target_margin, target_gap)
    assert draft_margin > 100 * draft_gap, (draft_margin, draft_gap)
