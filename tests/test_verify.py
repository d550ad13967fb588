"""verify's maths (issue 24): the reference forward of every family and flag, chain drafting, the rounds.

The drafters are written by tests/builders.py (independently of our writers) with well-scaled random weights, and
read back through our readers; the forward is checked against tests/engines/reference.py (the trained maths the
engine tier holds SGLang and vLLM to), and the batched chain drafting against a plain recomputation of each chain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from builders import DrafterSpec, build_drafter  # noqa: E402
from engines import reference as engine_reference  # noqa: E402
from verify_fixtures import well_scaled, write_tiny_target  # noqa: E402

from eagle3_convert.convert import read_source  # noqa: E402
from eagle3_convert.verify import acceptance, prepare, with_drafter  # noqa: E402
from eagle3_convert.verify.rounds import Rounds, walk_rounds  # noqa: E402
from eagle3_convert.verify.reference import Chain, DrafterMaths  # noqa: E402

CPU = torch.device("cpu")
MLA_ROPE = {"type": "yarn", "rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": 2048,
            "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
CASES = {
    "llama": ("speculators", DrafterSpec()),
    "llama nbr+norm_output": ("speculators", DrafterSpec(norm_before_residual=True, norm_output=True)),
    "llama norm_before_fc": ("speculators", DrafterSpec(norm_before_fc=True)),
    "llama fc_norm": ("speculators", DrafterSpec(fc_norm=True)),
    "llama 3 layers": ("speculators", DrafterSpec(num_layers=3)),
    "llama bias": ("vllm", DrafterSpec(attention_bias=True)),
    "qwen3": ("speculators", DrafterSpec(family="qwen3")),
    "mla": ("vllm", DrafterSpec(family="deepseek_mla", capture_boundaries=(1, 3, 6), target_model_type="deepseek_v3",
                                extra={"rope_scaling": MLA_ROPE})),
}


def maths_of(path: Path) -> DrafterMaths:
    return DrafterMaths(read_source(str(path)).drafter, CPU)


def _case(name: str, tmp_path: Path):
    layout, spec = CASES[name]
    path = well_scaled(build_drafter(tmp_path / "drafter", layout, spec), seed=1)
    gen = torch.Generator().manual_seed(2)
    tokens = 12
    inputs = {"embeds": torch.randn(tokens, spec.hidden_size, generator=gen),
              "states": [torch.randn(tokens, spec.ht, generator=gen) for _ in range(spec.num_aux)],
              "table": torch.randn(spec.vocab_size, spec.hidden_size, generator=gen)}
    return name, spec, maths_of(path), inputs


@pytest.fixture(params=sorted(CASES))
def case(request, tmp_path: Path):
    return _case(request.param, tmp_path)


# tests/engines/reference.py models neither MLA nor attention biases: the chain test below covers those cases
REFERENCE_CASES = sorted(n for n, (_, spec) in CASES.items() if spec.family != "deepseek_mla" and not spec.attention_bias)


@pytest.fixture(params=REFERENCE_CASES)
def reference_case(request, tmp_path: Path):
    return _case(request.param, tmp_path)


def test_the_first_step_is_the_trained_maths(reference_case):
    """Draft-extend over 12 positions equals tests/engines/reference.py (Llama and Qwen3 families without bias: that
    reference has neither MLA nor biases), for every norm flag and for several layers."""
    name, spec, maths, inputs = reference_case
    chain = Chain(maths)
    with torch.no_grad():
        tokens, handed = maths.head(chain.extend(inputs["embeds"], maths.fuse(inputs["states"])))
        cfg = {"num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_key_value_heads,
               "head_dim": spec.head_dim, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
               "num_hidden_layers": spec.num_layers}
        flags = {f: getattr(spec, f) for f in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")}
        boundaries = list(range(spec.num_aux))  # states given in ascending order already
        want_out, want_handed = engine_reference.drafter_forward(maths.w, cfg, flags, inputs["embeds"],
                                                                 inputs["states"], boundaries, torch.arange(12))
    assert torch.allclose(handed, want_handed, atol=1e-4, rtol=1e-4), name
    want_tokens = (want_out @ maths.w["lm_head.weight"].T).argmax(-1)
    if maths.draft_to_target is not None:
        want_tokens = maths.draft_to_target[want_tokens]
    assert torch.equal(tokens, want_tokens), name


def test_chain_drafting_equals_each_chain_recomputed(case):
    """Every start's k drafts at once (the cache masked per start, each start's own drafted keys) equal drafting
    that start alone by recomputing its whole sequence causally: the verified positions, then its drafts."""
    name, spec, maths, inputs = case
    k, table = 4, inputs["table"]
    embed = lambda ids: table[ids]  # noqa: E731
    fused = maths.fuse(inputs["states"])
    with torch.no_grad():
        chain = Chain(maths)
        first, handed = maths.head(chain.extend(inputs["embeds"], fused))
        starts = torch.tensor([0, 3, 7, 11])
        batched, token, state = [first[starts]], first[starts], handed[starts]
        for depth in range(2, k + 1):
            token, state = maths.head(chain.step(starts, token, state, depth, embed))
            batched.append(token)
        batched = torch.stack(batched, 1)

        def causal(i, q, kk, v):
            return torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1), kk.transpose(0, 1), v.transpose(0, 1), is_causal=True,
                scale=maths.scale).transpose(0, 1)

        for row, p in enumerate(starts.tolist()):
            embeds, hidden = inputs["embeds"][: p + 1], fused[: p + 1]
            drafts = []
            for _ in range(k):
                pre = maths.layers(embeds, hidden, torch.arange(embeds.shape[0]), causal)
                tok, nxt = maths.head(pre[-1:])
                drafts.append(int(tok))
                embeds, hidden = torch.cat([embeds, embed(tok)]), torch.cat([hidden, nxt])
            assert batched[row].tolist() == drafts, (name, p)


def test_the_rounds_move_past_each_accepted_draft():
    rounds = Rounds(3)
    walk_rounds({4: 3, 5: 0, 8: 1, 9: 2, 10: 0, 12: 0}, 4, rounds)
    # round at 4 accepts 3 -> next at 8; accepts 1 -> 10; accepts 0 -> 11: no draft known there, the text ends
    assert rounds.accepted == [3, 1, 0]
    assert rounds.mean_accepted_length == pytest.approx(1 + 4 / 3)
    assert rounds.per_position == pytest.approx([2 / 3, 1 / 3, 1 / 3])
    assert rounds.mean_accepted_length == pytest.approx(1 + sum(rounds.per_position))


@pytest.fixture(scope="module")
def constant_target(tmp_path_factory) -> Path:
    """A tiny Llama whose head is zero: its greedy text is token 0 forever, so a drafter that always proposes 0 is
    accepted every time and one that proposes anything else never is."""
    return write_tiny_target(tmp_path_factory.mktemp("target") / "target", zero_head=True)


def test_a_drafter_that_always_agrees_gets_k_plus_one(constant_target: Path, tmp_path: Path):
    ids = tuple(range(0, 96, 3))  # draft id 0 is target id 0
    path = well_scaled(build_drafter(tmp_path / "always0", "speculators", DrafterSpec(vocab_ids=ids)), seed=3,
                       zero=("lm_head.weight",))
    measured = prepare(path, constant_target, ["abc", "hello world"], device="cpu", max_new_tokens=12)
    result = acceptance(measured, 3)
    assert result.mean_accepted_length == 4.0 and result.per_position == [1.0, 1.0, 1.0]
    # prompt of n tokens and 12 generated: drafts known from starts n-1 .. n+7 (3 more tokens needed to judge a
    # round); rounds at n-1, n+3, n+7, four tokens each
    assert result.rounds == 2 * 3 and result.tokens == 24
    # the same weights with draft id 0 mapped to target id 1: every first draft misses
    shifted = well_scaled(build_drafter(tmp_path / "always1", "speculators",
                                        DrafterSpec(vocab_ids=tuple(range(1, 97, 3)))), seed=3,
                          zero=("lm_head.weight",))
    missed = acceptance(with_drafter(measured, shifted), 3)
    assert missed.mean_accepted_length == 1.0 and missed.per_position == [0.0, 0.0, 0.0]
    assert missed.rounds == 2 * 9  # one token a round: every start n-1 .. n+7


def test_mla_attention_is_transformers_deepseek_v3(tmp_path: Path):
    """The MLA family's attention (latent q and kv, the shared rotary key, DeepSeek's interleaved rope, yarn) equals
    transformers' DeepseekV3Attention on the same weights: the independent check the engine reference lacks."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    layout, spec = CASES["mla"]
    maths = maths_of(well_scaled(build_drafter(tmp_path / "mla", layout, spec), seed=5))
    width, nh, v_dim = 2 * spec.hidden_size, spec.num_attention_heads, spec.mla_v_head_dim  # layer 0 reads 2H
    config = DeepseekV3Config(hidden_size=width, num_attention_heads=nh, num_key_value_heads=nh,
                              q_lora_rank=spec.mla_q_lora_rank, kv_lora_rank=spec.mla_kv_lora_rank,
                              qk_nope_head_dim=spec.mla_qk_nope_head_dim, qk_rope_head_dim=spec.mla_qk_rope_head_dim,
                              v_head_dim=v_dim, rope_parameters={"rope_theta": 10000.0, **MLA_ROPE},
                              max_position_embeddings=4096, rms_norm_eps=1e-5, attention_bias=False)
    config._attn_implementation = "sdpa"
    hf = DeepseekV3Attention(config, layer_idx=0)
    p = "layers.0.self_attn."
    with torch.no_grad():
        for name in ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj"):
            getattr(hf, name).weight.copy_(maths.w[p + name + ".weight"])
        hf.o_proj.weight.copy_(torch.eye(width, nh * v_dim))  # the heads' output itself in the first columns
        x = torch.randn(1, 10, width, generator=torch.Generator().manual_seed(6))
        positions = torch.arange(10)
        cos, sin = DeepseekV3RotaryEmbedding(config)(x, positions[None])
        want = hf(x, (cos, sin), None)[0][0, :, : nh * v_dim]
        q, k, v = maths.qkv(0, x[0], positions)
        got = torch.nn.functional.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1),
                                                               v.transpose(0, 1), is_causal=True, scale=maths.scale)
    assert torch.allclose(got.transpose(0, 1).reshape(10, -1), want, atol=1e-5, rtol=1e-4)


def load(target: Path, drafter: Path, k: int = 3):
    """The target loaded as verify loads it, and the drafter's side of its decoding (rounds.Drafting)."""
    from eagle3_convert.verify import bind
    from eagle3_convert.verify.rounds import Drafting
    from eagle3_convert.verify.target import load_target_model
    from eagle3_convert.verify_inputs import check_inputs

    inputs = check_inputs(drafter, target, k=k, device="cpu")
    loaded = load_target_model(inputs)
    maths, embed = bind(inputs.source.drafter, loaded)
    return loaded, lambda: Drafting(maths, inputs.boundaries, embed)


def test_the_target_run_keeps_each_boundary_before_the_final_norm(tmp_path: Path):
    """Boundary b < L is transformers' output_hidden_states[b]; boundary L is the last block's output BEFORE the
    final norm, which output_hidden_states[L] is not (transformers 5 norms it): verify's hooks read what engines
    capture, through rounds of k+1 positions and the cache cropped back. And the greedy tokens are the target's own
    argmax, one state per token but the last."""
    from eagle3_convert.verify.target import decode

    drafter = well_scaled(build_drafter(tmp_path / "d", "speculators", DrafterSpec(target_layers=4,
                                                                                    capture_boundaries=(1, 2, 3))), 4)
    loaded, drafting = load(write_tiny_target(tmp_path / "target", layers=4), drafter)
    run = decode(loaded, drafting(), "hello", 3, 6)
    assert run.prompt_length == 5 and run.tokens.shape[0] == 11
    assert 2 <= run.forwards <= 1 + 6  # the prompt's, then a round for each token at most
    with torch.no_grad():
        full = loaded.model(input_ids=run.tokens[None], output_hidden_states=True)
    assert torch.equal(full.logits[0, 4:-1].argmax(-1), run.tokens[5:])
    hidden = [h[0, :10] for h in full.hidden_states]
    assert all(state.shape == (10, 32) for state in run.states)
    for b in range(4):
        assert torch.allclose(run.states[b], hidden[b], atol=1e-5), b
    assert not torch.allclose(run.states[4], hidden[4], atol=1e-3)  # transformers' last entry is normed...
    assert torch.allclose(loaded.model.model.norm(run.states[4]), hidden[4], atol=1e-5)  # ...ours is not


def test_the_text_ends_at_any_end_of_text_id(constant_target: Path, tmp_path: Path):
    """Generation stops at an id the generation config lists as eos (Llama 3 lists three), as serving does, even
    inside a round that accepted drafts past it."""
    from eagle3_convert.verify.target import decode

    always0 = well_scaled(build_drafter(tmp_path / "always0", "speculators",
                                        DrafterSpec(vocab_ids=tuple(range(0, 96, 3)))), seed=3, zero=("lm_head.weight",))
    loaded, drafting = load(constant_target, always0)
    whole = decode(loaded, drafting(), "abc", 3, 5)
    # the prompt's forward gives one token, a round of 3 drafts all accepted 4 more: two forwards for 5 tokens
    assert whole.tokens.shape[0] == 3 + 5 and whole.forwards == 2 and whole.accepted == {2: 3}
    loaded.model.generation_config.eos_token_id = [7, 0]  # the constant target's one token
    ended = decode(loaded, drafting(), "abc", 3, 5)
    assert ended.tokens.tolist()[3:] == [0] and all(state.shape[0] == 3 for state in ended.states)
    assert ended.forwards == 1


def test_modelopt_s_first_layer_normalises_the_hidden_state_twice(tmp_path: Path):
    """A ModelOpt HF-trainer drafter (use_input_layernorm_in_first_layer) computes hidden_norm(input_layernorm(h))
    where every engine computes hidden_norm(h): the reference maths are the trained ones, built here from
    tests/engines/reference.py's attention and mlp."""
    path = well_scaled(build_drafter(tmp_path / "modelopt", "modelopt", DrafterSpec(modelopt_hf_trained=True)), seed=7)
    maths = maths_of(path)
    assert maths.cfg.input_layernorm_on_hidden
    gen = torch.Generator().manual_seed(8)
    embeds, h = torch.randn(9, 32, generator=gen), torch.randn(9, 32, generator=gen)
    w, eps, positions = maths.w, 1e-5, torch.arange(9)
    cfg = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "rms_norm_eps": eps, "rope_theta": 10000.0}
    rms = engine_reference.rms
    with torch.no_grad():
        normed = rms(rms(h, w["layers.0.input_layernorm.weight"], eps), w["layers.0.hidden_norm.weight"], eps)
        x = torch.cat([rms(embeds, w["layers.0.input_layernorm.weight"], eps), normed], -1)
        residual = engine_reference.attention(x, w, "layers.0.", cfg, positions) + h
        want = engine_reference.mlp(rms(residual, w["layers.0.post_attention_layernorm.weight"], eps), w, "layers.0.")
        _, handed = maths.head(Chain(maths).extend(embeds, h))
    assert torch.allclose(handed, want + residual, atol=1e-4, rtol=1e-4)
