"""What verify's tests build: a tiny transformers target with a character tokenizer, and drafters with well-scaled
weights (tests/builders.py fills tensors with hash bytes, which as BF16 hold NaNs and huge values)."""

from __future__ import annotations

import string
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

CHARACTERS = [c for c in string.printable if c not in "\x0b\x0c"][:95]  # with <unk>: a 96-token vocabulary


def write_tiny_target(dest: Path, *, layers: int = 8, hidden: int = 32, vocab: int = 96, seed: int = 0,
                      zero_head: bool = False) -> Path:
    """A LlamaForCausalLM (random init, float32) and a one-character-a-token tokenizer, saved as transformers does."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    assert vocab == len(CHARACTERS) + 1
    tok = Tokenizer(models.WordLevel(vocab={"<unk>": 0, **{c: i + 1 for i, c in enumerate(CHARACTERS)}},
                                     unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                         head_dim=hidden // 4, max_position_embeddings=512, tie_word_embeddings=False,
                                         bos_token_id=None, eos_token_id=None))  # no text ends early: fixed lengths
    if zero_head:
        with torch.no_grad():
            model.lm_head.weight.zero_()
    model.save_pretrained(dest)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(dest)
    return dest


def well_scaled(path: Path, seed: int, zero: tuple[str, ...] = ()) -> Path:
    """The drafter in `path` with its float tensors redrawn (projections ~ N(0, 0.2), norms ~ 1), same names, shapes
    and dtypes; the tensors whose stored name ends with a name in `zero` set to zero."""
    file = path / "model.safetensors"
    tensors = load_file(file)
    gen = torch.Generator().manual_seed(seed)
    for name, value in sorted(tensors.items()):
        if not value.is_floating_point():
            continue
        drawn = torch.randn(value.shape, generator=gen)
        drawn = 1 + 0.1 * drawn if name.endswith("norm.weight") or "norm." in name else 0.2 * drawn
        tensors[name] = (torch.zeros(value.shape) if name.endswith(zero) else drawn).to(value.dtype)
    save_file(tensors, file, metadata={"format": "pt"})
    return path


@torch.no_grad()
def greedy_run(target, prompt: str, max_new_tokens: int):
    """verify's token-by-token measurement before issue 36, kept as the reference the speculative decoding is held
    to (tests/test_verify_speculative.py): one target forward a token through the KV cache, every boundary's state
    kept by the same hooks. Returns (the TargetRun, the logits of each greedy choice [new tokens, V])."""
    from eagle3_convert.verify.target import Capture, TargetRun, end_of_text, tokenize

    ids = tokenize(target, prompt)
    n = ids.shape[1]
    capture, eos, tokens, logits = Capture(target, n + max_new_tokens), end_of_text(target), [ids[0]], []
    try:
        out = target.model(input_ids=ids, use_cache=True)
        for made in range(1, max_new_tokens + 1):
            logits.append(out.logits[0, -1])
            tokens.append(out.logits[0, -1].argmax().view(1))
            if made == max_new_tokens or int(tokens[-1]) in eos:
                break  # the last token's own states would serve no draft: no forward for it
            capture.at = n + made - 1
            out = target.model(input_ids=tokens[-1].view(1, 1), past_key_values=out.past_key_values, use_cache=True)
    finally:
        capture.close()
    text = torch.cat(tokens)
    return TargetRun(text, n, [state[: text.shape[0] - 1] for state in capture.states], 0.0), torch.stack(logits)
