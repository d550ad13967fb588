"""The target model run greedily with transformers, its hidden state kept at every capture boundary.

Boundaries are this tool's canonical capture ids (docs/formats.md §4): b = 0 is the input of the first decoder
block (the embedding output), b = j the output of block j-1, b = L the last block's output BEFORE the final norm.
They are read by hooks on the decoder blocks, not from `output_hidden_states`, whose last entry transformers
hands back after the final norm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import FormatError, UsageError
from ..sources import is_repo_id, resolve_source
from ..targets import load_target

# What a target needs to run: config, weights and tokenizer (no .bin when safetensors exist: the Hub decides).
MODEL_FILES = ("*.json", "*.safetensors", "tokenizer*", "*.model", "*.tiktoken", "*.txt", "*.py")


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
    token's own states are never computed: no draft starts there)."""

    tokens: torch.Tensor
    prompt_length: int
    states: list[torch.Tensor]
    seconds: float


def resolve_target(spec: str, revision: str | None, endpoint: str | None, token: str | None
                   ) -> tuple[Path, str | None]:
    """A local model directory as is, or a Hub repo id snapshotted (weights and tokenizer) into the HF cache."""
    local = Path(spec).expanduser()
    if local.is_dir() and not (local / "config.json").is_file():
        raise FormatError(f"target {spec}: no config.json", "pass the target model's directory (config.json, "
                          "weights and tokenizer) or its Hub repo id", code="E-TARGET-MISSING")
    if not local.is_dir() and not is_repo_id(spec):
        raise FormatError(f"target {spec}: no such directory", "pass the target model's directory or its Hub repo "
                          "id (e.g. meta-llama/Llama-3.1-8B-Instruct)", code="E-TARGET-MISSING")
    return resolve_source(spec, revision, endpoint=endpoint, token=token, files=MODEL_FILES,
                          label=f"target {spec}")


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


def load_target_model(spec: str, device: str = "auto", *, revision: str | None = None, endpoint: str | None = None,
                      token: str | None = None) -> LoadedTarget:
    """The target with transformers (AutoModelForCausalLM, in the dtype it was saved in) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # its notes and load bars are not this command's output
    transformers_logging.disable_progress_bar()
    path, commit = resolve_target(spec, revision, endpoint, token)
    chosen = pick_device(device)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto").to(chosen).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError) as exc:
        raise FormatError(f"target {spec}: transformers cannot load it ({str(exc).splitlines()[0][:200]})",
                          "pass a causal LM's directory holding config.json, its weights and its tokenizer",
                          code="E-VERIFY-TARGET") from None
    text = model.config.get_text_config()
    layers = int(text.num_hidden_layers)
    # a local copy is named as the registry names targets: the Hub repo its config came from, else its absolute path
    name = spec if commit is not None else load_target(str(path)).name_or_path
    return LoadedTarget(model, tokenizer, chosen, layers, int(text.hidden_size),
                        int(model.get_input_embeddings().weight.shape[0]), name, commit,
                        decoder_blocks(model, layers))


def end_of_text(target: LoadedTarget) -> set[int]:
    """The ids that end the text: the tokenizer's eos and the generation config's (Llama 3 lists three)."""
    ids = {target.tokenizer.eos_token_id}
    config = getattr(target.model, "generation_config", None)
    said = getattr(config, "eos_token_id", None)
    ids.update(said if isinstance(said, (list, tuple)) else [said])
    return {i for i in ids if isinstance(i, int)}


@torch.no_grad()
def run_target(target: LoadedTarget, prompt: str, max_new_tokens: int,
               progress: Callable[[int], None] | None = None) -> TargetRun:
    """The prompt and `max_new_tokens` greedy tokens (fewer if the target ends the text), with every boundary's
    state. One token at a time through the KV cache, as a serving engine decodes."""
    start = time.perf_counter()
    ids = target.tokenizer(prompt, return_tensors="pt").input_ids.to(target.device)
    if ids.shape[1] == 0:
        raise UsageError(f"the prompt {prompt[:40]!r} is no token to the target's tokenizer",
                         "give prompts of at least one token")
    captured: list[list[torch.Tensor]] = [[] for _ in range(target.num_layers + 1)]

    def keep(b: int, value: Any) -> None:
        captured[b].append((value[0] if isinstance(value, tuple) else value)[0].to(torch.float32))

    hooks = [target.blocks[0].register_forward_pre_hook(lambda _m, args, *_: keep(0, args[0]))]
    hooks += [block.register_forward_hook(lambda _m, _a, out, b=j + 1: keep(b, out))
              for j, block in enumerate(target.blocks)]
    eos = end_of_text(target)
    tokens = [ids[0]]
    try:
        out = target.model(input_ids=ids, use_cache=True)
        for made in range(1, max_new_tokens + 1):
            nxt = out.logits[0, -1].argmax()
            tokens.append(nxt.view(1))
            if progress is not None:
                progress(1)
            if made == max_new_tokens or int(nxt) in eos:
                break  # the last token's own states would serve no draft: no forward for it
            out = target.model(input_ids=nxt.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
    finally:
        for hook in hooks:
            hook.remove()
    return TargetRun(torch.cat(tokens), ids.shape[1], [torch.cat(parts) for parts in captured],
                     time.perf_counter() - start)
