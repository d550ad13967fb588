"""`verify`: the acceptance a drafter gets with its target, measured on CPU or GPU with our reference maths.

`measure(drafter, target, prompts, k)` is the Python API; `verify.target` runs the target, `verify.reference` the
drafter, `verify.rounds` the draft rounds. torch is imported with this package (transformers when a target is
loaded), so only the verify command imports it, inside its function.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import torch

from ..capture_ids import default_boundaries
from ..convert import read_source
from ..drafter import Drafter
from ..errors import RefusalError, UsageError
from . import target as target_mod
from .rounds import Rounds, accepted_per_start, drafts_per_start, walk_rounds
from .reference import DrafterMaths

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


@dataclass
class VerifyResult:
    """What `measure` found. mean_accepted_length counts the bonus token: it is tokens per target forward (1 when
    nothing is accepted, k+1 when everything is); per_position[j-1] is the share of rounds whose j-th draft was
    accepted, so mean_accepted_length == 1 + sum(per_position)."""

    k: int
    mean_accepted_length: float
    per_position: list[float]
    rounds: int
    tokens: int  # the target's generated tokens the rounds were measured on
    seconds: float
    tokens_per_second: float  # generated target tokens per second of the whole measurement (target and drafter)
    capture_boundaries: list[int]
    capture_from: str  # where the boundaries came from: "config", "engine default", or "given"
    prompts: int
    prompts_sha256: str
    target: str
    target_revision: str | None
    device: str
    max_new_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def acceptance_fields(self) -> dict[str, Any]:
        """What the registry keeps of it (registry.models.Acceptance, less the tool that measured it)."""
        return {"target_name_or_path": self.target, "target_revision": self.target_revision,
                "prompts_sha256": self.prompts_sha256, "prompts": self.prompts, "max_new_tokens": self.max_new_tokens,
                "k": self.k, "capture_boundaries": self.capture_boundaries,
                "mean_accepted_length": self.mean_accepted_length, "per_position": self.per_position,
                "rounds": self.rounds, "tokens_per_second": self.tokens_per_second, "device": self.device}


@dataclass
class Measured:
    """A drafter read once, its target loaded once and run once over the prompts, ready for any capture ids."""

    source: Any  # convert.Source: the drafter read, where from (path, uri, layout)
    target: Any  # target.LoadedTarget
    runs: list[Any]  # target.TargetRun per prompt
    prompts_sha256: str
    max_new_tokens: int
    embed: Callable[..., Any] = field(repr=False)  # token ids -> the embeddings the drafter reads
    maths: DrafterMaths = field(repr=False)

    @property
    def drafter(self) -> Drafter:
        return self.source.drafter


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


def prepare(drafter: str | Path, target: str | Path, prompts: list[str] | None = None, *, device: str = "auto",
            max_new_tokens: int = 64, endpoint: str | None = None, token: str | None = None,
            revision: str | None = None, progress: Callable[[int], None] | None = None) -> Measured:
    """Read the drafter, load the target, run the target over the prompts (every boundary's state kept)."""
    source = read_source(str(drafter), endpoint=endpoint, token=token, revision=revision)
    loaded = target_mod.load_target_model(str(target), device, endpoint=endpoint, token=token)
    maths, embed = bind(source.drafter, loaded)  # refused before the target runs: a wrong pair costs no generation
    prompts = list(prompts or DEFAULT_PROMPTS)
    runs = [target_mod.run_target(loaded, prompt, max_new_tokens, progress) for prompt in prompts]
    return Measured(source, loaded, runs, prompts_digest(prompts), max_new_tokens, embed, maths)


def with_drafter(measured: Measured, drafter: str | Path, *, endpoint: str | None = None, token: str | None = None,
                 revision: str | None = None) -> Measured:
    """The same target run with another drafter (any layout, or a Hub repo id): no target forward again."""
    source = read_source(str(drafter), endpoint=endpoint, token=token, revision=revision)
    maths, embed = bind(source.drafter, measured.target)
    return replace(measured, source=source, maths=maths, embed=embed)


def bind(drafter: Drafter, loaded: Any) -> tuple[DrafterMaths, Callable[..., Any]]:
    """The drafter's maths on the target's device, and the embedding it drafts with; refused when the two do not
    fit together."""
    cfg = drafter.config
    if cfg.resolved_target_hidden_size != loaded.hidden_size:
        raise RefusalError(f"the target's hidden_size is {loaded.hidden_size} but the drafter fuses states of width "
                           f"{cfg.resolved_target_hidden_size}", "pass the target the drafter was trained for",
                           code="E-VERIFY-WIDTH")
    if cfg.vocab_size != loaded.vocab_size:
        raise RefusalError(f"the target's vocabulary has {loaded.vocab_size} tokens but the drafter's has "
                           f"{cfg.vocab_size}", "pass the target the drafter was trained for",
                           code="E-VERIFY-VOCAB")
    refuse_outside(cfg.capture_boundaries or [], loaded.num_layers)
    maths = DrafterMaths(drafter, loaded.device)
    table = maths.w.get("embed_tokens.weight")
    if table is None:  # the engines' default: the target's own embedding (rows cast as read: no float32 copy of it)
        table = loaded.model.get_input_embeddings().weight.detach()
    return maths, lambda ids: table[ids].to(torch.float32)


def boundaries_of(measured: Measured, given: list[int] | None = None) -> tuple[list[int], str]:
    """The capture boundaries to measure with and where they came from."""
    cfg, depth = measured.drafter.config, measured.target.num_layers
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
    return boundaries, said


def refuse_outside(boundaries: list[int], depth: int) -> None:
    wrong = [b for b in boundaries if not 0 <= b <= depth]
    if wrong:
        raise RefusalError(f"capture boundaries {wrong} lie outside the {depth}-layer target (0..{depth})",
                           "pass the target the drafter was trained for", code="E-VERIFY-CAPTURE")


def acceptance(measured: Measured, k: int, boundaries: list[int] | None = None) -> VerifyResult:
    """The acceptance of the drafter at k drafts a round, capturing `boundaries` (None: its own)."""
    if k < 1:
        raise UsageError(f"-k {k}: a round drafts at least one token", "give -k 1 or more (engines default to 3)")
    chosen, said = boundaries_of(measured, boundaries)
    start = time.perf_counter()
    rounds = Rounds(k)
    for run in measured.runs:
        starts, drafts = drafts_per_start(measured.maths, run, chosen, k, measured.embed)
        walk_rounds(accepted_per_start(run, starts, drafts), run.prompt_length - 1, rounds)
    seconds = time.perf_counter() - start + sum(run.seconds for run in measured.runs)
    generated = sum(run.tokens.shape[0] - run.prompt_length for run in measured.runs)
    return VerifyResult(k, rounds.mean_accepted_length, rounds.per_position, len(rounds.accepted), generated, seconds,
                        generated / seconds if seconds else 0.0, sorted(chosen), said, len(measured.runs),
                        measured.prompts_sha256, measured.target.name_or_path, measured.target.revision,
                        str(measured.target.device), measured.max_new_tokens)


def measure(drafter: str | Path, target: str | Path, prompts: list[str] | None = None, k: int = 3, *,
            capture_boundaries: list[int] | None = None, device: str = "auto", max_new_tokens: int = 64,
            endpoint: str | None = None, token: str | None = None) -> VerifyResult:
    """The acceptance `drafter` (a directory in any layout we read, a GGUF, or a Hub repo id) gets with `target`
    (a model directory or Hub repo id) on `prompts` (None: DEFAULT_PROMPTS) at k drafts a round."""
    measured = prepare(drafter, target, prompts, device=device, max_new_tokens=max_new_tokens, endpoint=endpoint,
                       token=token)
    return acceptance(measured, k, capture_boundaries)


@dataclass
class Candidate:
    """One capture-id list scan_layers measured, and why it was a candidate."""

    boundaries: list[int]
    labels: list[str]  # "config", "recorded", "engine default", "id 2 -> 3", "all +1", ...
    result: VerifyResult


def scan_candidates(base: list[int], depth: int, recorded: list[int] | None = None) -> dict[tuple[int, ...], list[str]]:
    """The boundary lists worth measuring against `base` (the config's, or the engine default): the record's, each
    id one layer off, the whole list one layer off (a convention read wrongly), and the engine default."""
    out: dict[tuple[int, ...], list[str]] = {}

    def add(boundaries: list[int], label: str) -> None:
        key = tuple(sorted(boundaries))
        if len(set(key)) == len(base) and all(0 <= b <= depth for b in key):
            out.setdefault(key, []).append(label)

    add(base, "as measured")
    if recorded is not None:
        add(recorded, "recorded")
    for shift in (-1, 1):
        add([b + shift for b in base], f"all {shift:+d}")
    for i, b in enumerate(sorted(base)):
        for shift in (-1, 1):
            add([*sorted(base)[:i], b + shift, *sorted(base)[i + 1:]], f"id {b} -> {b + shift}")
    add(default_boundaries(depth), "engine default")
    return out


def scan_layers(measured: Measured, k: int, boundaries: list[int] | None = None,
                recorded: list[int] | None = None) -> list[Candidate]:
    """Acceptance under the drafter's capture boundaries and their neighbours, best first (ties: the order above)."""
    base, said = boundaries_of(measured, boundaries)
    candidates = scan_candidates(base, measured.target.num_layers, recorded)
    measured_ = [Candidate(list(key), [said if label == "as measured" else label for label in labels],
                           acceptance(measured, k, list(key))) for key, labels in candidates.items()]
    return sorted(measured_, key=lambda c: -c.result.mean_accepted_length)
