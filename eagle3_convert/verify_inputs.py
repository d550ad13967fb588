"""verify's inputs, checked before torch loads: the prompts, the drafter, the target's files and config, their fit,
the device and the threads. Importing torch and transformers takes seconds; every error found here is told first.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .capture_ids import default_boundaries
from .convert import Source, read_source
from .converters.base import read_json_file
from .drafter import DrafterConfig
from .errors import Eagle3Error, FormatError, RefusalError, UsageError
from .sources import is_repo_id, resolve_source
from .targets import load_target

# The built-in prompts when none are given: short, varied, in English (chat, code, facts, arithmetic, lists).
DEFAULT_PROMPTS = (
    "The quick brown fox jumps over the lazy dog. Then the dog",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The capital of France is Paris. The capital of Germany is",
    "Question: what is 12 times 7? Answer:",
    "Here is a list of three fruits:\n1.",
    "Once upon a time, in a small village by the sea, there lived",
    "To install the package, run the following command:",
    "The theory of relativity, proposed by Albert Einstein,",
)
# What a target needs to run: config, weights and tokenizer (no .bin when safetensors exist: the Hub decides).
MODEL_FILES = ("*.json", "*.safetensors", "tokenizer*", "*.model", "*.tiktoken", "*.txt", "*.py")
WEIGHTS = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "*.tiktoken")
# The thread rule (benchmarks/RESULTS-verify.md): under this many weights a token (the target's blocks), a forward is
# over before torch's threads have shared it out; above, a thread a core other jobs leave idle, since each parallel
# step waits for its slowest thread
ONE_THREAD_BELOW = 200_000_000
INSTALL_HINT = 'pip install "eagle3-convert[verify]" (torch and transformers)'


@dataclass
class Inputs:
    """Everything verify measures with, read and checked: nothing here needs torch."""

    source: Source  # the drafter read (convert.Source)
    target_path: Path  # the target's directory (a Hub snapshot when it came from the Hub)
    target_name: str  # as the registry names targets: the Hub repo id, or the local copy's name
    target_revision: str | None  # the Hub commit, when the target came from the Hub
    hidden_size: int
    vocab_size: int
    num_layers: int
    weights_per_token: int  # the target's block weights: what one token's forward multiplies by
    prompts: list[str]
    k: int
    boundaries: list[int]
    capture_from: str  # "config", "engine default" or "given"
    device: str


def require_torch() -> None:
    """torch and transformers installed (found, not imported)."""
    for name in ("torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            raise Eagle3Error(f"verify needs torch and transformers, which are not installed ({name})", INSTALL_HINT,
                              code="E-VERIFY-DEPS")


def prompts_digest(prompts: list[str]) -> str:
    """sha256 of the prompts as one JSON list: the same prompts in the same order give the same digest."""
    return hashlib.sha256(json.dumps(list(prompts), ensure_ascii=False).encode()).hexdigest()


def read_prompts(path: str | Path) -> list[str]:
    """--prompts FILE: a JSON list of strings, or JSON Lines ({"prompt": ...} or strings), or one prompt a line."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--prompts {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})",
                         "give a text file: one prompt a line, JSON Lines, or a JSON list of strings") from None
    prompts: list[str] = []
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, list):
        prompts = [p for p in data if isinstance(p, str) and p.strip()]
    else:  # one prompt a line, each plain text or JSON (a string, or an object with "prompt" or "text")
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                item = line
            if not isinstance(item, (str, dict)):  # `42`, `true`: text that happens to parse
                item = line
            if isinstance(item, dict):
                item = item.get("prompt") or item.get("text")
            if isinstance(item, str) and item.strip():
                prompts.append(item)
    if not prompts:
        raise UsageError(f"--prompts {path} holds no prompt",
                         "give a text file: one prompt a line, JSON Lines, or a JSON list of strings")
    return prompts


def resolve_target(spec: str, revision: str | None, endpoint: str | None, token: str | None
                   ) -> tuple[Path, str | None]:
    """A local model directory as is, or a Hub repo id snapshotted (weights and tokenizer) into the HF cache; its
    config, weights and tokenizer present either way."""
    local = Path(spec).expanduser()
    if local.is_dir() and not (local / "config.json").is_file():
        raise FormatError(f"target {spec}: no config.json", "pass the target model's directory (config.json, "
                          "weights and tokenizer) or its Hub repo id", code="E-TARGET-MISSING")
    if not local.is_dir() and not is_repo_id(spec):
        raise FormatError(f"target {spec}: no such directory", "pass the target model's directory or its Hub repo "
                          "id (e.g. meta-llama/Llama-3.1-8B-Instruct)", code="E-TARGET-MISSING")
    path, commit = resolve_source(spec, revision, endpoint=endpoint, token=token, files=MODEL_FILES,
                                  label=f"target {spec}")
    for what, patterns in (("weights (*.safetensors or pytorch_model*.bin)", WEIGHTS),
                           ("tokenizer (tokenizer.json, tokenizer.model, tokenizer_config.json, ...)", TOKENIZER)):
        if not any(next(path.glob(pattern), None) for pattern in patterns):
            raise FormatError(f"target {spec}: no {what} in {path}", "pass the target model's directory as "
                              "transformers saves it: config.json, its weights and its tokenizer",
                              code="E-TARGET-MISSING")
    return path, commit


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's config (multimodal targets keep it under text_config), with the top level as fallback."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def target_size(spec: str, config: dict[str, Any]) -> tuple[int, int, int, int]:
    """(hidden size, vocabulary, blocks, block weights a token) from the target's config.json."""
    text = text_config(config)
    try:
        hidden, vocab, layers = (int(text[key]) for key in ("hidden_size", "vocab_size", "num_hidden_layers"))
        inner = int(text.get("intermediate_size") or 4 * hidden)
    except (KeyError, TypeError, ValueError):
        raise FormatError(f"target {spec}: config.json gives no integer hidden_size, vocab_size and "
                          "num_hidden_layers", "pass a causal LM's directory (its config.json as transformers saves "
                          "it)", code="E-VERIFY-TARGET") from None
    return hidden, vocab, layers, layers * (4 * hidden * hidden + 3 * hidden * inner)


def check_pair(cfg: DrafterConfig, hidden: int, vocab: int, layers: int) -> None:
    """The drafter fits the target: the width of the states it fuses, its vocabulary, its capture boundaries."""
    if cfg.resolved_target_hidden_size != hidden:
        raise RefusalError(f"the target's hidden_size is {hidden} but the drafter fuses states of width "
                           f"{cfg.resolved_target_hidden_size}", "pass the target the drafter was trained for",
                           code="E-VERIFY-WIDTH")
    if cfg.vocab_size != vocab:
        raise RefusalError(f"the target's vocabulary has {vocab} tokens but the drafter's has {cfg.vocab_size}",
                           "pass the target the drafter was trained for", code="E-VERIFY-VOCAB")
    refuse_outside(cfg.capture_boundaries or [], layers)


def refuse_outside(boundaries: list[int], depth: int) -> None:
    wrong = [b for b in boundaries if not 0 <= b <= depth]
    if wrong:
        raise RefusalError(f"capture boundaries {wrong} lie outside the {depth}-layer target (0..{depth})",
                           "pass the target the drafter was trained for", code="E-VERIFY-CAPTURE")


def choose_boundaries(cfg: DrafterConfig, depth: int, given: list[int] | None = None) -> tuple[list[int], str]:
    """The capture boundaries to measure with and where they came from; a head fed the target's final state reads
    index depth + 1, the post-norm state (verify.target.Capture), and takes no other."""
    if cfg.capture == "final":
        if given is not None:
            raise UsageError(f"capture boundaries {given} given, but the drafter is fed the target's final post-norm "
                             "state (eagle_config.use_aux_hidden_state false) and captures no layers",
                             "measure it without --capture-layers")
        return [depth + 1], "final post-norm state"
    if given is not None:
        boundaries, said = list(given), "given"
    elif cfg.capture_boundaries is not None:
        boundaries, said = list(cfg.capture_boundaries), "config"
    else:
        boundaries, said = default_boundaries(depth), "engine default"
    if len(boundaries) != cfg.num_aux_hidden_states:
        raise UsageError(f"{len(boundaries)} capture boundaries {boundaries} given, but fc fuses "
                         f"{cfg.num_aux_hidden_states} target states", "give one boundary per fused state")
    refuse_outside(boundaries, depth)
    return sorted(boundaries), said


def check_device(device: str) -> None:
    """--device cuda where no CUDA can be: a CPU build of torch (its version.py, read without importing it), or no
    GPU driver. Anything subtler is torch's to say once it loads (verify.target.pick_device)."""
    if device != "cuda":
        return
    spec = importlib.util.find_spec("torch")
    version = Path(spec.origin).with_name("version.py") if spec and spec.origin else None
    text = version.read_text(encoding="utf-8") if version and version.is_file() else ""
    if text and all(re.search(rf"^{name}\b[^=\n]*=\s*None\s*$", text, re.MULTILINE) for name in ("cuda", "hip")):
        built = re.search(r"^__version__\s*=\s*'([^']+)'", text, re.MULTILINE)
        raise FormatError(f"--device cuda: the installed torch{' ' + built[1] if built else ''} is built without CUDA",
                          "use --device cpu (or auto), or install a CUDA build of torch", code="E-VERIFY-DEVICE")
    if not any(Path(p).exists() for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd")):
        raise FormatError("--device cuda: this machine has no GPU driver (no /proc/driver/nvidia, no /dev/kfd)",
                          "use --device cpu (or auto)", code="E-VERIFY-DEVICE")


def default_threads(inputs: Inputs) -> int | None:
    """The torch threads verify uses when --threads is not given: 1 for a target under ONE_THREAD_BELOW block weights
    a token; else the cores this process may use less the 1-minute load average (at least 1), or None (torch's own:
    one a core) where none of them is busy."""
    if inputs.weights_per_token < ONE_THREAD_BELOW:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    idle = cores - round(os.getloadavg()[0]) if hasattr(os, "getloadavg") else cores
    return None if idle >= cores else max(1, idle)


def check_k(k: int) -> None:
    if k < 1:
        raise UsageError(f"-k {k}: a round drafts at least one token", "give -k 1 or more (engines default to 3)")


def check_inputs(drafter: str | Path, target: str | Path, prompts: list[str] | None = None, *, k: int = 3,
                 capture_boundaries: list[int] | None = None, device: str = "auto", endpoint: str | None = None,
                 token: str | None = None, revision: str | None = None) -> Inputs:
    """Everything verify is given, read and checked without torch: the first error is told within a second."""
    check_k(k)
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device {device}: not a device verify runs on", "give --device auto, cpu or cuda")
    require_torch()
    check_device(device)
    source = read_source(str(drafter), endpoint=endpoint, token=token, revision=revision)
    path, commit = resolve_target(str(target), None, endpoint, token)
    config = read_json_file(path / "config.json", f"target {target}/config.json")
    hidden, vocab, layers, weights = target_size(str(target), config)
    check_pair(source.drafter.config, hidden, vocab, layers)
    boundaries, said = choose_boundaries(source.drafter.config, layers, capture_boundaries)
    # a local copy is named as the registry names targets: the Hub repo its config came from, else its absolute path
    name = str(target) if commit is not None else load_target(str(path)).name_or_path
    return Inputs(source, path, name, commit, hidden, vocab, layers, weights, list(prompts or DEFAULT_PROMPTS), k,
                  boundaries, said, device)
