"""The target model run in transformers as speculative decoding: each round the drafter proposes k tokens, the
target checks the k+1 positions in ONE forward through its KV cache (a DynamicCache, cropped back past the rejected
drafts), and the greedy prefix is accepted. The text is the target's own greedy text; its hidden state is kept at
every capture boundary.

Boundaries are this tool's canonical capture ids (docs/formats.md §4): b = 0 is the input of the first decoder
block (the embedding output), b = j the output of block j-1, b = L the last block's output BEFORE the final norm.
They are read by hooks on the decoder blocks, not from `output_hidden_states`, whose last entry transformers
hands back after the final norm.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import FormatError, UsageError
from ..verify_inputs import Inputs

# drafts(tokens, states, p, k): the k tokens the drafter proposes after the verified token p+1, from the tokens
# 0..p+1 and the states at every boundary of positions 0..p (rounds.Drafting)
Drafts = Callable[[torch.Tensor, list[torch.Tensor], int, int], torch.Tensor]


@dataclass
class LoadedTarget:
    model: Any
    tokenizer: Any
    device: torch.device
    num_layers: int
    hidden_size: int
    vocab_size: int
    name_or_path: str
    revision: str | None  # the Hub commit, when the target came from the Hub
    blocks: Any = field(repr=False, default=None)


@dataclass
class TargetRun:
    """One prompt and the target's greedy continuation: `tokens` [T] (prompt first), and the hidden state at every
    boundary 0..L, `states[b]` [T-1, Ht] float32: row i is what the target computed at position i (the last
    token's own states are never computed: no draft starts there). `accepted`: the drafts each judged round of the
    decoding accepted, by its start p (the round after the verified token p+1; judged: last_start)."""

    tokens: torch.Tensor
    prompt_length: int
    states: list[torch.Tensor]
    seconds: float  # the whole decoding, drafting included
    accepted: dict[int, int] = field(default_factory=dict)
    forwards: int = 0  # the target's forwards: the prompt's, then one a round
    drafting_seconds: float = 0.0


def last_start(length: int, k: int) -> int:
    """The last start whose round can be judged in a text of `length` tokens: its k drafts (tokens p+2..p+k+1) are
    all in the text. The rounds a text cut short at max_new_tokens or an end of text ends with are not counted."""
    return length - k - 2


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise FormatError("--device cuda: torch sees no CUDA device", "use --device cpu (or auto)",
                          code="E-VERIFY-DEVICE")
    return torch.device(device)


def decoder_blocks(model: Any, num_layers: int) -> Any:
    """The model's list of decoder blocks: the one ModuleList as long as the config's num_hidden_layers."""
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == num_layers:
            return module
    raise FormatError(f"the target has no list of {num_layers} decoder blocks to capture hidden states from",
                      "verify runs causal LMs whose blocks form one list (Llama, Qwen, DeepSeek, Mistral, ...)",
                      code="E-VERIFY-TARGET")


def load_target_model(inputs: Inputs) -> LoadedTarget:
    """The target with transformers (AutoModelForCausalLM, in the dtype it was saved in) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # its notes and load bars are not this command's output
    transformers_logging.disable_progress_bar()
    chosen = pick_device(inputs.device)
    try:
        model = AutoModelForCausalLM.from_pretrained(inputs.target_path, dtype="auto").to(chosen).eval()
        tokenizer = AutoTokenizer.from_pretrained(inputs.target_path)
    except (OSError, ValueError, KeyError) as exc:
        raise FormatError(f"target {inputs.target_name}: transformers cannot load it "
                          f"({str(exc).splitlines()[0][:200]})",
                          "pass a causal LM's directory holding config.json, its weights and its tokenizer",
                          code="E-VERIFY-TARGET") from None
    text = model.config.get_text_config()
    layers = int(text.num_hidden_layers)
    return LoadedTarget(model, tokenizer, chosen, layers, int(text.hidden_size),
                        int(model.get_input_embeddings().weight.shape[0]), inputs.target_name,
                        inputs.target_revision, decoder_blocks(model, layers))


def end_of_text(target: LoadedTarget) -> set[int]:
    """The ids that end the text: the tokenizer's eos and the generation config's (Llama 3 lists three)."""
    ids = {target.tokenizer.eos_token_id}
    config = getattr(target.model, "generation_config", None)
    said = getattr(config, "eos_token_id", None)
    ids.update(said if isinstance(said, (list, tuple)) else [said])
    return {i for i in ids if isinstance(i, int)}


def tokenize(target: LoadedTarget, prompt: str) -> torch.Tensor:
    ids = target.tokenizer(prompt, return_tensors="pt").input_ids.to(target.device)
    if ids.shape[1] == 0:
        raise UsageError(f"the prompt {prompt[:40]!r} is no token to the target's tokenizer",
                         "give prompts of at least one token")
    return ids


class Capture:
    """Hooks on the decoder blocks writing each forward's hidden states at every boundary into `states[b]`, from the
    forward's first position `at` on (a round's rejected positions are written over by the next round's); and
    `states[L + 1]`, the base model's output after its final norm: what vLLM and SGLang feed a head trained without
    aux states (converters/final_state.py)."""

    def __init__(self, target: LoadedTarget, positions: int):
        self.at = 0
        self.states = [torch.empty((positions, target.hidden_size), dtype=torch.float32, device=target.device)
                       for _ in range(target.num_layers + 2)]
        self.hooks = [target.blocks[0].register_forward_pre_hook(lambda _m, args, *_: self.keep(0, args[0]))]
        self.hooks += [block.register_forward_hook(lambda _m, _a, out, b=j + 1: self.keep(b, out))
                       for j, block in enumerate(target.blocks)]
        final = target.num_layers + 1
        self.hooks.append(target.model.base_model.register_forward_hook(lambda _m, _a, out: self.keep(final, out)))

    def keep(self, b: int, value: Any) -> None:
        value = getattr(value, "last_hidden_state", value)  # the base model's output (a ModelOutput)
        rows = (value[0] if isinstance(value, tuple) else value)[0]
        self.states[b][self.at: self.at + rows.shape[0]] = rows

    def close(self) -> None:
        for hook in self.hooks:
            hook.remove()


@torch.no_grad()
def decode(target: LoadedTarget, drafts: Drafts, prompt: str, k: int, max_new_tokens: int,
           progress: Callable[[int], None] | None = None) -> TargetRun:
    """The prompt and `max_new_tokens` greedy tokens (fewer if the target ends the text), with every boundary's
    state, decoded speculatively: a round from start p feeds the verified token p+1 and k drafts, and keeps the
    drafts up to the first the target disagrees with, then the target's own token there (the bonus)."""
    start = time.perf_counter()
    ids = tokenize(target, prompt)
    n = ids.shape[1]
    limit = n + max_new_tokens
    eos = end_of_text(target)
    tokens = torch.empty(limit, dtype=torch.long, device=target.device)
    tokens[:n] = ids[0]
    capture = Capture(target, limit)
    accepted: dict[int, int] = {}
    drafting = 0.0
    try:
        # the prompt's logits but the last are never read: not computed, where the model lets us (as generate does)
        keeps = "logits_to_keep" in inspect.signature(target.model.forward).parameters
        last_only = {"logits_to_keep": 1} if keeps else {}
        out = target.model(input_ids=ids, use_cache=True, **last_only)
        cache, forwards = out.past_key_values, 1
        tokens[n] = out.logits[0, -1].argmax()
        length, p = n + 1, n - 1
        if progress is not None:
            progress(1)
        while length < limit and int(tokens[length - 1]) not in eos:
            width = min(k, limit - length)  # near max_new_tokens a round drafts no token past it
            began = time.perf_counter()
            proposed = drafts(tokens[:length], capture.states, p, width)
            drafting += time.perf_counter() - began
            capture.at = p + 1
            logits = target.model(input_ids=torch.cat([tokens[p + 1: p + 2], proposed])[None],
                                  past_key_values=cache, use_cache=True).logits[0]
            forwards += 1
            own = logits.argmax(-1)  # the target's token after each fed position: p+2 .. p+2+width
            took = int((proposed == own[:width]).long().cumprod(0).sum())
            if width == k:
                accepted[p] = took
            new = own[: took + 1].tolist()[: limit - length]
            ended = next((i for i, t in enumerate(new) if t in eos), None)
            new = new if ended is None else new[: ended + 1]
            tokens[length: length + len(new)] = torch.tensor(new, device=target.device)
            length += len(new)
            if width > took:
                cache.crop(took - width)  # the rejected drafts' positions
            p += took + 1
            if progress is not None:
                progress(len(new))
    finally:
        capture.close()
    judged = {s: a for s, a in accepted.items() if s <= last_start(length, k)}
    return TargetRun(tokens[:length], n, [state[: length - 1] for state in capture.states],
                     time.perf_counter() - start, judged, forwards, drafting)
