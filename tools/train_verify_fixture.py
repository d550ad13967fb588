"""Train the verify proof's fixture (issue 24 item 4): a tiny Llama target and an EAGLE-3 drafter trained on it.

    python tools/train_verify_fixture.py             # writes tests/data/verify-tiny/ (a minute of one CPU core)
    python tools/train_verify_fixture.py --out DIR   # anywhere else

Deterministic (seeded, torch on one thread, CPU). Nothing here imports eagle3_convert: the drafter's maths is
this file's own, written from the peers' sources (speculators 0.9.0 `models/eagle3/{core,model_definitions}.py`,
SGLang 0.5.23 `srt/models/llama_eagle3.py`, SpecForge 0.2.0 `modeling/draft/llama3_eagle.py`), and the drafter is
written in the speculators layout with safetensors directly, so the fixture is independent of the code it checks.

1. A corpus of structured sentences ("anna takes two apples to the market.") where each word depends on the
   ones before it, with noise, over a character vocabulary (a `tokenizers` BPE without merges, saved so that
   the target directory loads with transformers' AutoTokenizer).
2. The target: transformers' LlamaForCausalLM (8 layers, hidden 48), trained briefly on the corpus, with a
   term that makes each block rewrite the residual stream (SEPARATION): a state one layer off is another code.
3. The target's own greedy continuations of corpus prefixes, with the hidden states at every capture boundary
   (HF `output_hidden_states` indices, before the final norm) and its greedy next token at every position.
4. The drafter (one decoder layer, draft vocab of the 32 target tokens it predicts most, d2t as offsets), trained
   with test-time training: TTT_STEPS chained draft steps, each fed its own previous state and the target's
   greedy token (TOKEN_NOISE of them replaced by random ones, so that it leans on the target's states), attending
   to the target-fed keys of earlier positions and its own keys of the chain.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "data" / "verify-tiny"
SEED = 0

# The character vocabulary: id 0 unknown, then what the corpus uses and some it never does (so the draft vocab
# is a real subset with gaps and d2t offsets are not all zero).
VOCAB = ["<unk>", " ", *"abcdefghijklmnopqrstuvwxyz", *"0123456789", *".,;:!?-'\"()"]
TARGET = {"vocab_size": len(VOCAB), "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 8,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12, "rms_norm_eps": 1e-5,
          "max_position_embeddings": 256, "rope_theta": 10000.0}
# capture boundaries (speculators / vLLM ids, HF hidden_states indices): the engines' default [2, L//2, L-3], the
# only ids the original EAGLE layout can hold (it has none in its config)
BOUNDARIES = [2, 4, 5]
# a second drafter, on the same target, captures ids that are not the default: a scan that finds them again cannot
# have found them by trying the default (tests/test_verify_proof.py, item 2)
OTHER_BOUNDARIES = [1, 3, 6]
DRAFT_VOCAB = 32
TTT_STEPS = 4
DRAFTER_INTERMEDIATE = 96
# The target's blocks are trained to rewrite the residual stream (SEPARATION weighs the squared cosine between each
# block's input and output state): in a model this small neighbouring states are otherwise nearly the same vector,
# and a drafter reading one layer off would hardly notice. Real targets' neighbouring layers differ more.
SEPARATION = 1.0
# The share of the drafter's training tokens replaced by a random one: the token alone then predicts less than
# the target's states do, so the drafter leans on the states, as a real drafter over a real vocabulary must (over
# this 49-character text the token alone drafts most of a word).
TOKEN_NOISE = 0.5
VERIFIER_NAME = "eagle3-convert-tests/verify-tiny-target"  # a repo-id-like name: engines refuse a local path there

# --- 1. the corpus -------------------------------------------------------------------------------------------

NAMES = ["anna", "bob", "cleo", "dan", "eve", "finn"]
VERBS = ["takes", "sends", "brings", "sells"]
NOUNS = ["apple", "box", "book", "cup", "lamp", "hat"]
PLACES = {"apple": "market", "box": "office", "book": "school", "cup": "kitchen", "lamp": "garden", "hat": "shop"}
COUNTS = ["one", "two", "three", "four"]


def sentence(rng: random.Random) -> str:
    """Each word depends on the ones before (a name's verb, a name's noun, a noun's place), with some noise."""
    name = rng.choice(NAMES)
    i = NAMES.index(name)
    verb = VERBS[i % len(VERBS)] if rng.random() < 0.8 else rng.choice(VERBS)
    noun = NOUNS[i] if rng.random() < 0.6 else rng.choice(NOUNS)
    count = rng.choice(COUNTS)
    plural = "" if count == "one" else ("es" if noun.endswith("x") else "s")
    place = PLACES[noun] if rng.random() < 0.85 else rng.choice(list(PLACES.values()))
    return f"{name} {verb} {count} {noun}{plural} to the {place}. "


def corpus_text(rng: random.Random, chars: int) -> str:
    parts: list[str] = []
    while sum(map(len, parts)) < chars:
        parts.append(sentence(rng))
    return "".join(parts)


def encode(text: str) -> list[int]:
    index = {c: i for i, c in enumerate(VOCAB)}
    return [index.get(c, 0) for c in text]


def save_tokenizer(out: Path) -> None:
    """A character-level tokenizer (BPE with no merges) that AutoTokenizer loads from the target directory."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(VOCAB)}, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(out)


# --- 2. the target -------------------------------------------------------------------------------------------

def build_target():
    from transformers import LlamaConfig, LlamaForCausalLM

    t = TARGET
    config = LlamaConfig(vocab_size=t["vocab_size"], hidden_size=t["hidden_size"],
                         intermediate_size=t["intermediate_size"], num_hidden_layers=t["num_hidden_layers"],
                         num_attention_heads=t["num_attention_heads"], num_key_value_heads=t["num_key_value_heads"],
                         head_dim=t["head_dim"], rms_norm_eps=t["rms_norm_eps"],
                         max_position_embeddings=t["max_position_embeddings"],
                         rope_parameters={"rope_type": "default", "rope_theta": t["rope_theta"]},
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(config).float()


def neighbour_similarity(hidden_states) -> torch.Tensor:
    """The mean squared cosine between each block's input and output state, over boundaries 1..L-1 (HF's last
    entry is after the final norm): near 0 when every block rewrites the residual stream instead of adding to it."""
    states = hidden_states[1:-1]
    return torch.stack([F.cosine_similarity(a, b, dim=-1).pow(2).mean() for a, b in zip(states, states[1:])]).mean()


def train_target(model, ids: torch.Tensor, steps: int, seq: int = 64, batch: int = 32) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(SEED)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - seq - 1, (batch,), generator=gen)
        x = torch.stack([ids[s:s + seq + 1] for s in starts.tolist()])
        out = model(input_ids=x[:, :-1], labels=x[:, :-1].clone(), output_hidden_states=True)  # HF shifts labels
        loss = out.loss + SEPARATION * neighbour_similarity(out.hidden_states)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return float(loss.detach())


@torch.no_grad()
def greedy_sequences(model, ids: torch.Tensor, count: int, prompt: int, new: int) -> torch.Tensor:
    """The target's own greedy continuations of `count` corpus prefixes: [count, prompt + new]."""
    gen = torch.Generator().manual_seed(SEED + 1)
    starts = torch.randint(0, len(ids) - prompt, (count,), generator=gen)
    x = torch.stack([ids[s:s + prompt] for s in starts.tolist()])
    return model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new, do_sample=False,
                          pad_token_id=0)


@torch.no_grad()
def target_features(model, seqs: torch.Tensor):
    """Hidden states at every boundary [L+1, B, T, H] (before the final norm) and the greedy next token [B, T]."""
    # HF's last hidden_states entry is AFTER the final norm; boundary L is the last block's output before it
    last: dict = {}
    hook = model.model.layers[-1].register_forward_hook(
        lambda module, args, output: last.update(h=output[0] if isinstance(output, tuple) else output))
    out = model(input_ids=seqs, output_hidden_states=True)
    hook.remove()
    return torch.stack([*out.hidden_states[:-1], last["h"]]), out.logits.argmax(-1)


# --- 3. the drafter's maths (independent of eagle3_convert) --------------------------------------------------

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Llama's default rotary embedding (rotate_half) of x [B, heads, T, hd] at positions [T]."""
    hd = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    angles = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    half = hd // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class DraftMaths:
    """The EAGLE-3 drafter's forward over a dict of tensors with speculators key names.

    fused = fc(cat(h_b for b in ascending boundaries)); layer 0 attends over cat(input_layernorm(embed(token)),
    hidden_norm(state)) with residual `state` (hidden_norm(state) under norm_before_residual); then the MLP with
    post_attention_layernorm; logits = lm_head(norm(out)) over the draft vocab; the next draft step is fed `out`
    (the pre-norm state). Draft step s of position j sits at position j + s and attends to the step-0 keys of
    positions <= j and to its own chain's keys of steps 1..s (speculators' TTT mask, an engine's draft chain)."""

    def __init__(self, weights: dict[str, torch.Tensor], config: dict, embed: torch.Tensor):
        self.w, self.embed = weights, embed
        layer = config["transformer_layer_config"]
        self.nh, self.nkv, self.hd = layer["num_attention_heads"], layer["num_key_value_heads"], layer["head_dim"]
        self.eps = layer["rms_norm_eps"]
        self.theta = layer["rope_parameters"]["rope_theta"]
        self.norm_before_residual = config["norm_before_residual"]
        self.d2t = weights["d2t"]

    def fuse(self, states: torch.Tensor, boundaries: list[int]) -> torch.Tensor:
        """states [L+1, B, T, H] -> the fc's output [B, T, H]."""
        return torch.cat([states[b] for b in sorted(boundaries)], -1) @ self.w["fc.weight"].T

    def step(self, tokens: torch.Tensor, state: torch.Tensor, positions: torch.Tensor, cache: list):
        """One draft step over all positions: tokens [B, T] (target ids), state [B, T, H]. Appends this step's
        keys and values to `cache` (step 0's are attended causally, later steps' on the diagonal only).
        Returns (draft-vocab logits [B, T, Vd], the state for the next step [B, T, H])."""
        w, p = self.w, "layers.0."
        b, t, _ = state.shape
        normed = rms_norm(state, w[p + "hidden_norm.weight"], self.eps)
        residual = normed if self.norm_before_residual else state
        x = torch.cat([rms_norm(self.embed[tokens], w[p + "input_layernorm.weight"], self.eps), normed], -1)
        q = (x @ w[p + "self_attn.q_proj.weight"].T).view(b, t, self.nh, self.hd).transpose(1, 2)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).view(b, t, self.nkv, self.hd).transpose(1, 2)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).view(b, t, self.nkv, self.hd).transpose(1, 2)
        q, k = rotate(q, positions, self.theta), rotate(k, positions, self.theta)
        cache.append((k.repeat_interleave(self.nh // self.nkv, 1), v.repeat_interleave(self.nh // self.nkv, 1)))
        attn = self.attend(q, cache).transpose(1, 2).reshape(b, t, self.nh * self.hd)
        h = residual + attn @ w[p + "self_attn.o_proj.weight"].T
        m = rms_norm(h, w[p + "post_attention_layernorm.weight"], self.eps)
        out = h + (F.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[
            p + "mlp.down_proj.weight"].T
        logits = rms_norm(out, w["norm.weight"], self.eps) @ w["lm_head.weight"].T
        return logits, out

    def attend(self, q: torch.Tensor, cache: list) -> torch.Tensor:
        scale = self.hd ** -0.5
        (k0, v0), chain = cache[0], cache[1:]
        t = q.shape[2]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        scores = [(q @ k0.transpose(-1, -2) * scale).masked_fill(~causal, float("-inf"))]
        scores += [(q * k).sum(-1, keepdim=True) * scale for k, _ in chain]
        probs = torch.cat(scores, -1).softmax(-1)
        out = probs[..., :t] @ v0
        for i, (_, v) in enumerate(chain):
            out = out + probs[..., t + i:t + i + 1] * v
        return out

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]  # d2t holds offsets


def ttt_loss(maths: DraftMaths, states, seqs, greedy, boundaries, t2d_index, steps: int,
             noise: torch.Generator | None = None):
    """Cross-entropy of every chained step against the target's greedy token, where the chain so far is the
    target's own greedy path (the only drafts an engine keeps). Step s at position j is fed token seqs[j+1+s]
    and predicts greedy[j+1+s]; it counts only if seqs[j+1+i] == greedy[j+i] for i = 1..s. With `noise`, a
    TOKEN_NOISE share of the fed tokens is replaced by random ones (the labels and the path are not)."""
    t = seqs.shape[1] - 1 - steps
    state = maths.fuse(states[:, :, :t], boundaries)
    on_path = torch.ones_like(seqs[:, :t], dtype=torch.bool)
    cache: list = []
    total, accepted = 0.0, []
    for s in range(steps):
        if s:
            on_path = on_path & (seqs[:, 1 + s:t + 1 + s] == greedy[:, s:t + s])
        fed = seqs[:, 1 + s:t + 1 + s]
        if noise is not None:
            swap = torch.rand(fed.shape, generator=noise) < TOKEN_NOISE
            fed = torch.where(swap, torch.randint(0, TARGET["vocab_size"], fed.shape, generator=noise), fed)
        logits, state = maths.step(fed, state, torch.arange(t) + s, cache)
        label = t2d_index[greedy[:, 1 + s:t + 1 + s]]  # -1 where the target's token is not in the draft vocab
        keep = on_path & (label >= 0)
        total = total + F.cross_entropy(logits[keep], label[keep])
        accepted.append(((logits.argmax(-1) == label) & keep).float().sum() / keep.float().sum())
    return total / steps, [float(a) for a in accepted]


def init_drafter(hidden: int, vocab_draft: int, k: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    nh, nkv, hd = TARGET["num_attention_heads"], TARGET["num_key_value_heads"], TARGET["head_dim"]
    inter = DRAFTER_INTERMEDIATE

    def linear(out_f: int, in_f: int) -> torch.Tensor:
        return torch.randn(out_f, in_f, generator=gen) * in_f ** -0.5

    p = "layers.0."
    return {
        "fc.weight": linear(hidden, k * hidden),
        p + "self_attn.q_proj.weight": linear(nh * hd, 2 * hidden),
        p + "self_attn.k_proj.weight": linear(nkv * hd, 2 * hidden),
        p + "self_attn.v_proj.weight": linear(nkv * hd, 2 * hidden),
        p + "self_attn.o_proj.weight": linear(hidden, nh * hd) * 0.5,
        p + "mlp.gate_proj.weight": linear(inter, hidden),
        p + "mlp.up_proj.weight": linear(inter, hidden),
        p + "mlp.down_proj.weight": linear(hidden, inter) * 0.5,
        p + "input_layernorm.weight": torch.ones(hidden),
        p + "hidden_norm.weight": torch.ones(hidden),
        p + "post_attention_layernorm.weight": torch.ones(hidden),
        "norm.weight": torch.ones(hidden),
        "lm_head.weight": linear(vocab_draft, hidden),
    }


def drafter_config(draft_vocab: int, boundaries: list[int]) -> dict:
    """The speculators config (FORMATS §2.1, §2.7), written out by hand."""
    t = TARGET
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": TTT_STEPS, "verifier_accept_k": 1,
                                  "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": VERIFIER_NAME, "architectures": ["LlamaForCausalLM"]}},
        "transformer_layer_config": {
            "model_type": "llama", "hidden_size": t["hidden_size"], "intermediate_size": DRAFTER_INTERMEDIATE,
            "num_attention_heads": t["num_attention_heads"], "num_key_value_heads": t["num_key_value_heads"],
            "head_dim": t["head_dim"], "num_hidden_layers": 1, "hidden_act": "silu", "rms_norm_eps": t["rms_norm_eps"],
            "vocab_size": t["vocab_size"], "max_position_embeddings": t["max_position_embeddings"],
            "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": t["rope_theta"]}},
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": boundaries,
        "norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False,
        "embed_requires_grad": False, "tie_word_embeddings": False,
        "dtype": "float32",
    }


def train_drafter(states, seqs, greedy, embed, steps: int, boundaries: list[int], seed: int):
    # the draft vocab: the target's most frequent greedy tokens, in ascending target id (FORMATS §3)
    counts = torch.bincount(greedy.flatten(), minlength=TARGET["vocab_size"])
    draft_to_target = counts.topk(DRAFT_VOCAB).indices.sort().values
    t2d_index = torch.full((TARGET["vocab_size"],), -1, dtype=torch.long)
    t2d_index[draft_to_target] = torch.arange(DRAFT_VOCAB)
    gen = torch.Generator().manual_seed(seed)
    weights = init_drafter(TARGET["hidden_size"], DRAFT_VOCAB, len(boundaries), gen)
    for w in weights.values():
        w.requires_grad_(True)
    config = drafter_config(DRAFT_VOCAB, boundaries)
    maths = DraftMaths({**weights, "d2t": draft_to_target - torch.arange(DRAFT_VOCAB)}, config, embed)
    opt = torch.optim.AdamW(list(weights.values()), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    batch = 16
    for _ in range(steps):
        pick = torch.randint(0, seqs.shape[0], (batch,), generator=gen)
        loss, accepted = ttt_loss(maths, states[:, pick], seqs[pick], greedy[pick], boundaries, t2d_index, TTT_STEPS,
                                  noise=gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    tensors = {name: w.detach().contiguous() for name, w in weights.items()}
    tensors["d2t"] = (draft_to_target - torch.arange(DRAFT_VOCAB)).to(torch.int64)
    t2d = torch.zeros(TARGET["vocab_size"], dtype=torch.bool)
    t2d[draft_to_target] = True
    tensors["t2d"] = t2d
    return tensors, config, float(loss.detach()), accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--target-steps", type=int, default=200)
    parser.add_argument("--drafter-steps", type=int, default=150)
    args = parser.parse_args()

    from safetensors.torch import save_file

    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # the same float sums on every machine this runs on
    began = time.monotonic()
    rng = random.Random(SEED)
    ids = torch.tensor(encode(corpus_text(rng, 60_000)))

    target = build_target()
    target_loss = train_target(target, ids, args.target_steps)
    seqs = greedy_sequences(target, ids, count=256, prompt=16, new=64)
    states, greedy = target_features(target, seqs)
    embed = target.get_input_embeddings().weight.detach()
    drafters = {name: train_drafter(states, seqs, greedy, embed, args.drafter_steps, boundaries, seed)
                for name, boundaries, seed in (("drafter", BOUNDARIES, SEED + 2),
                                               ("drafter-" + "-".join(map(str, OTHER_BOUNDARIES)), OTHER_BOUNDARIES,
                                                SEED + 3))}

    out = args.out
    (out / "target").mkdir(parents=True, exist_ok=True)
    target.save_pretrained(out / "target")
    save_tokenizer(out / "target")
    for name, (tensors, config, _, _) in drafters.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(out / name / "model.safetensors"))
        (out / name / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # verify's prompts: the first words of fresh sentences, one a line
    prompt_rng = random.Random(SEED + 100)
    prompts = [" ".join(sentence(prompt_rng).split()[:2 + i % 3]) for i in range(8)]
    (out / "prompts.txt").write_text("".join(p + "\n" for p in prompts))
    print(json.dumps({"seconds": round(time.monotonic() - began, 1), "target_loss": round(target_loss, 4),
                      "drafters": {name: {"loss": round(loss, 4), "train_batch_step_accuracy": [round(a, 3) for a in acc]}
                                   for name, (_, _, loss, acc) in drafters.items()}}))


if __name__ == "__main__":
    main()
