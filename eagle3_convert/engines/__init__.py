"""What each serving engine reads from a drafter checkpoint, and whether it then serves it as trained.

One module per engine states the engine's rules as data and replays its reading of a
config.json and its tensor names (`read`): the class it builds (or its loud refusal), the
capture boundaries it takes, the maths flags it applies, and what it drops without a word.
`verdict` compares such a reading with the drafter's truth. convert's serve lines, the
layouts' choice of architecture names and validate's engine findings all ask these modules;
the engine test tier (tests/engines/) checks them against the real engines.

Every verdict is for a release (releases.py): the one the user names (one this tool does not model: by the rules of
the known one nearest below it, `Releases.stand_in`), else the newest we know. Where the
releases we know read the file differently, the verdict also carries each run of releases and its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Collection, Mapping, Sequence

from ..capture_ids import a_layer_target, as_captured, capture_context, default_boundaries, depth_defaults
from ..drafter import BLOCK_KINDS, KINDS, DrafterConfig
from ..names import LABELS, NAMED_ONLY, RUNNERS, engine_of, runners_of
from . import block_diffusion, llamacpp, quantized, quantized_block, lmdeploy, mlxvlm, sglang, speculators, trtllm, vllm
from .common import AS_TRAINED, DEFAULT_LAYERS, FLAGS, REFUSES, RUNTIME_LAYERS, UNKNOWN, WRONG, Reading, TargetContext
from .releases import EngineChoice, Releases

SERVING = frozenset({AS_TRAINED, DEFAULT_LAYERS, RUNTIME_LAYERS})  # the verdicts under which it serves as trained
WORST_FIRST = (WRONG, REFUSES, UNKNOWN, RUNTIME_LAYERS, DEFAULT_LAYERS, AS_TRAINED)
SPAN_WORDS = {AS_TRAINED: "served as trained", DEFAULT_LAYERS: "served as trained (its default layers)",
              RUNTIME_LAYERS: "served when told the layers", REFUSES: "refused loudly", WRONG: "served WRONG",
              UNKNOWN: "unknown"}


@dataclass(frozen=True)
class Span:
    """A run of known releases that read the file alike, and their verdict."""

    releases: str  # "0.5.12–0.5.22", "≥ 0.5.13", "0.5.23"
    first: str
    last: str
    verdict: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"releases": self.releases, "first": self.first, "last": self.last, "verdict": self.verdict,
                "why": self.why}


@dataclass(frozen=True)
class Verdict:
    engine: str
    verdict: str
    captures: list[int] | None
    why: str
    caveats: tuple[str, ...] = ()  # the limits of a serving verdict (also in `why`)
    release: str | None = None  # the release judged (several, comma-separated, for a fleet); None: unknown
    judged: tuple[tuple[str, "Verdict"], ...] = ()  # a fleet: each release named, and its own verdict
    across: tuple[Span, ...] = ()  # where the releases we know disagree on the file: each run of them
    judged_by: str | None = None  # a release this tool does not model: the known one whose rules judged it

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "captures": self.captures, "why": self.why,
                               "release": self.release}
        if self.judged:
            out["judged"] = [v.to_dict() for _, v in self.judged]
        if self.across:
            out["releases"] = [span.to_dict() for span in self.across]
        if self.judged_by:
            out["judged_by"] = self.judged_by
        return out

    def disagreement(self) -> str | None:
        """One line where the releases we know disagree (describe_spans)."""
        return describe_spans([span.to_dict() for span in self.across]) if self.across else None


def describe_spans(spans: Sequence[Mapping[str, Any]]) -> str:
    """'served as trained on ≥ 0.5.12; served WRONG on 0.5.9–0.5.11 (why)': runs of releases (Span.to_dict)."""
    return "; ".join(f"{SPAN_WORDS[s['verdict']]} on {s['releases']}" + (
        f" ({s['why']})" if s["verdict"] not in SERVING else "") for s in spans)


def engine_modules() -> dict[str, Any]:
    """Engine name -> its module's `read`. vLLM has two runners that read capture ids differently."""
    return {"speculators": speculators.read, "vllm-v1": vllm.read_v1, "vllm-v2": vllm.read_v2,
            "sglang": sglang.read, "trtllm": trtllm.read, "llamacpp": llamacpp.read, "mlx-vlm": mlxvlm.read,
            "lmdeploy": lmdeploy.read}


MODULES = {"speculators": speculators, "vllm": vllm, "sglang": sglang, "trtllm": trtllm, "llamacpp": llamacpp,
           "mlx-vlm": mlxvlm, "lmdeploy": lmdeploy}


def release(engine: str) -> str:
    """The engine release its module's rules were read from (and its verdicts judged for by default)."""
    return MODULES[engine_of(engine)].RELEASE


def releases_of(engine: str) -> Releases:
    """The releases an engine (or one of its runners) is known in, and what changed between them."""
    return MODULES[engine_of(engine)].RELEASES


def judged_releases(choices: Sequence[EngineChoice]) -> dict[str, list[str | None]]:
    """Engine -> the releases named for it (None: the newest), from the user's --engine choices."""
    out: dict[str, list[str | None]] = {}
    for choice in choices:
        named = out.setdefault(engine_of(choice.spelling), [])
        if choice.release not in named:
            named.append(choice.release)
    return out


def releases_that_serve(engine: str, release: str, serving: list[Span], fix: str) -> str:
    """The hint for a release's fault (any release named: it is placed by the known one whose rules judge it): the
    newest releases that serve the file (newer or older than the one judged), else `fix`."""
    if not serving:
        return fix
    known = releases_of(engine)
    move = "upgrade" if known.known.index(serving[0].first) > known.known.index(known.stand_in(release)) else "downgrade"
    return f"{move} to {known.label} {serving[0].releases}, which serves this file as trained; or {fix}"


def release_label(engine: str, releases: Sequence[str | None] | None = None) -> str:
    """'SGLang 0.5.23', 'SGLang 0.5.10, 0.5.23': the releases a verdict is for (one not modelled as named)."""
    known = releases_of(engine)
    shown = [known.canonical(r) if r is None or known.knows(r) else r for r in (releases or [None])]
    return f"{known.label} {', '.join(dict.fromkeys(shown))}"


def _same(a: list[int], b: list[int]) -> bool:
    return sorted(set(a)) == sorted(set(b))  # engines sort and dedupe; fc columns follow ascending order


@lru_cache(maxsize=1024)
def _default_depths(boundaries: tuple[int, ...]) -> list[int]:
    """The target depths whose default layers {2, L//2, L-3} are `boundaries` (a thousand depths tried: cached, as
    `registry site` asks it for every engine, release and copy)."""
    return [d for d in range(4, 1024) if _same(default_boundaries(d), list(boundaries))]


def verdict(reading: Reading, cfg: DrafterConfig, ctx: TargetContext) -> Verdict:
    """Whether the engine, reading the file as `reading` says, serves the drafter `cfg` as trained; a serving
    verdict names the reading's caveats (a limit, or a serve-time flag it needs)."""
    judged = _verdict(reading, cfg, ctx)
    if judged.verdict not in SERVING or not reading.caveats:
        return judged
    return replace(judged, why="; ".join([judged.why, *reading.caveats]), caveats=tuple(reading.caveats))


def _verdict(reading: Reading, cfg: DrafterConfig, ctx: TargetContext) -> Verdict:
    name = reading.engine
    if reading.refusal:
        return Verdict(name, REFUSES, None, reading.refusal)
    if cfg.kind in reading.undecided:
        return Verdict(name, UNKNOWN, None, reading.undecided[cfg.kind])
    if reading.kind != cfg.kind:
        return Verdict(name, WRONG, reading.captures, f"builds its {reading.kind} drafter for a {cfg.kind} drafter")
    if reading.family != cfg.family:
        return Verdict(name, WRONG, reading.captures, f"builds its {reading.family} drafter class for a {cfg.family} "
                                                      "drafter")
    applied = {f: bool(reading.flags[f]) for f in FLAGS}  # (every reading that is no refusal states all four)
    flags = [f"{f} {getattr(cfg, f)} in training, {applied[f]} in {reading.label}" for f in FLAGS
             if applied[f] != getattr(cfg, f)]
    if flags or reading.silent:
        return Verdict(name, WRONG, reading.captures, "; ".join(flags + reading.silent))
    fed = _fed(reading, cfg)
    if fed is not None:
        return fed
    if cfg.capture == "final":
        return Verdict(name, AS_TRAINED, None, "feeds the target's final hidden state, trained maths")
    trained = as_captured(cfg.capture_boundaries, ctx.depth)  # its own list, else the universal default
    if reading.runtime:
        defaults = depth_defaults(ctx.depth)
        if trained is not None and defaults is not None and _same(trained, defaults):
            return Verdict(name, DEFAULT_LAYERS, trained, "captures its default layers, the trained ones")
        if trained is None:
            return Verdict(name, RUNTIME_LAYERS, None, "takes the capture layers at serve time; the trained ones "
                                                       "are unknown without the target's depth")
        return Verdict(name, RUNTIME_LAYERS, trained, f"takes the capture layers at serve time: pass "
                                                      f"eagle3_layers_to_capture: {trtllm.runtime_ids(trained)}")
    if reading.captures is None or trained is None:
        if cfg.capture_boundaries is None:
            return Verdict(name, DEFAULT_LAYERS, None, "captures its default layers {2, L//2, L-3}, as in training")
        depths = _default_depths(tuple(cfg.capture_boundaries))
        if depths:  # the target's depth decides: say on which target the defaults are the trained layers
            return Verdict(name, DEFAULT_LAYERS, None, f"captures its default layers {{2, L//2, L-3}}: the trained "
                                                       f"{cfg.capture_boundaries} only on {a_layer_target(depths[0])} "
                                                       "(pass --target to check)")
        return Verdict(name, WRONG, None, f"captures its default layers {{2, L//2, L-3}}, never the trained "
                                          f"{cfg.capture_boundaries}")
    if not _same(reading.captures, trained):
        how = "its default layers" if reading.from_default else "layers"
        return Verdict(name, WRONG, reading.captures, f"captures {how} {sorted(set(reading.captures))}, trained on "
                                                      f"{trained}")
    if reading.from_default:
        return Verdict(name, DEFAULT_LAYERS, reading.captures, "captures its default layers, the trained ones")
    approx = (" (with ModelOpt's first-layer norm approximated, as every engine does)"
              if cfg.input_layernorm_on_hidden else "")
    return Verdict(name, AS_TRAINED, reading.captures, f"captures {reading.captures}, trained maths{approx}")


def _fed(reading: Reading, cfg: DrafterConfig) -> Verdict | None:
    """The verdict when the engine feeds the head other states than it was trained on (drafter.Capture)."""
    if reading.capture == cfg.capture or (reading.capture is None and cfg.capture == "aux"):
        return None
    if reading.capture is None:
        return Verdict(reading.engine, UNKNOWN, None, f"the sources read do not say how {reading.label} feeds a head "
                                                      "trained on the target's final state (no fc)")
    if reading.capture == "final":
        return Verdict(reading.engine, WRONG, reading.captures, "feeds the target's final hidden state alone "
                       f"(eagle_config.use_aux_hidden_state false) and never applies the fc that fuses "
                       f"{cfg.num_aux_hidden_states} captured states")
    return Verdict(reading.engine, WRONG, reading.captures, "feeds captured states through fc to a head trained on "
                   "the target's final state, which has no fc")


def gguf_metadata(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A GGUF's keys: `--to gguf`'s plan ({"gguf": keys}) or a GGUF read from disk (its keys, with `_gguf`)."""
    if isinstance(config.get("gguf"), dict):
        return config["gguf"]
    return config if isinstance(config.get("_gguf"), dict) else None


def read_all(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext,
             engines: Collection[str] = RUNNERS, releases: Mapping[str, str] | None = None) -> dict[str, Reading]:
    """Each engine's reading of the file, by the release `releases` names for it (a known one), else its newest."""
    readers = engine_modules()

    def own(e: str) -> str | None:
        return (releases or {}).get(engine_of(e))

    meta = gguf_metadata(config)
    if meta is not None:  # a GGUF file: only llama.cpp opens it
        config = {**config, "gguf": meta}  # a GGUF read from disk: its keys where llama.cpp reads a plan's
        return {e: readers[e](config, names, ctx, own(e)) if e == "llamacpp" else
                Reading(e, LABELS[e], refusal="a GGUF is llama.cpp's format, not one this engine loads")
                for e in engines}
    readings = {e: readers[e](config, names, ctx, own(e)) for e in engines}
    if quantized.is_quantized(names):  # only vLLM's and SGLang's loading of ModelOpt's scales was read
        for e, r in readings.items():
            if engine_of(e) not in quantized.READ_IN and r.refusal is None:
                why = trtllm.QUANTIZED_UNDECIDED if engine_of(e) == "trtllm" else \
                    f"{LABELS[e]}'s loading of a quantized drafter was not read"
                r.undecided = {kind: why for kind in KINDS}
    return readings


def serve_verdicts(config: Mapping[str, Any], names: Collection[str], cfg: DrafterConfig, ctx: TargetContext,
                   engines: Collection[str] | None = None,
                   releases: Mapping[str, Sequence[str | None]] | None = None) -> dict[str, Verdict]:
    """Every engine's verdict on a checkpoint with this config.json and these stored tensor names, for the
    releases named per engine (`releases`: engine -> releases, None = the newest we know; default: the newest).
    Default engines: every runner, and the readers judged only when named (NAMED_ONLY) that `releases` names.
    Each verdict also carries the runs of known releases that disagree on the file (`across`)."""
    if engines is None:
        engines = RUNNERS + tuple(r for e in NAMED_ONLY if e in (releases or {}) for r in runners_of(e))
    if cfg.kind in BLOCK_KINDS:  # DFlash, DSpark: read by other classes than EAGLE-3's
        return _block_diffusion_verdicts(config, names, cfg, engines, releases)
    out = {}
    for e in engines:
        known = releases_of(e)
        eras = known.eras()
        judged_eras: dict[str, Verdict] = {}

        def at(release: str | None) -> Verdict:  # all releases of an era read alike: judge its first one
            key = known.canonical(release)
            first = next(f for f, last in eras if key in known.between(f, last))  # (every known release is in one era)
            if first not in judged_eras:
                reading = read_all(config, names, ctx, (e,), {engine_of(e): first})[e]
                judged_eras[first] = verdict(reading, cfg, ctx)
            return judged_eras[first]

        across = _spans(known, [(first, last, at(first)) for first, last in eras])
        named = list(dict.fromkeys(known.canonical(r) if r is None or known.knows(r) else r
                                   for r in (releases or {}).get(engine_of(e)) or [None]))
        judged = [(known.canonical(r), replace(at(r), release=known.canonical(r))) if r is None or known.knows(r)
                  else (r, replace(at(known.stand_in(r)), release=r, judged_by=known.stand_in(r))) for r in named]
        worst = min(judged, key=lambda rv: WORST_FIRST.index(rv[1].verdict))[1]
        why = worst.why if len(judged) == 1 else "; ".join(f"{r}: {v.verdict} ({v.why})" for r, v in judged)
        out[e] = replace(worst, why=why, release=", ".join(r for r, _ in judged),
                         judged=tuple(judged) if len(judged) > 1 else (), across=across,
                         judged_by=worst.judged_by if len(judged) == 1 else None)
    return out


def _block_diffusion_verdicts(config: Mapping[str, Any], names: Collection[str], cfg: DrafterConfig,
                              engines: Collection[str], releases: Mapping[str, Sequence[str | None]] | None) -> dict[str, Verdict]:
    """A DFlash/DSpark file's verdicts, judged for the newest release we know (the only one its readers were read
    in), and for a newer one by its rules: any other release named is unknown."""
    out = {}
    for e in engines:
        known = releases_of(e)
        named = (releases or {}).get(engine_of(e)) or ()
        other = next((r for r in named if r is not None and known.stand_in(r) != known.newest), None)
        if other is not None:
            out[e] = Verdict(e, UNKNOWN, None, f"{block_diffusion.LABEL[cfg.kind]} drafters were read in "
                                               f"{known.label} {known.newest} only, not {other}", release=other)
            continue
        newer = next((r for r in named if r is not None and not known.knows(r)), None)
        out[e] = Verdict(e, *_with_quantization(e, config, names, cfg), release=newer or known.newest,
                         judged_by=newer and known.newest)
    return out


def _with_quantization(runner: str, config: Mapping[str, Any], names: Collection[str],
                       cfg: DrafterConfig) -> tuple[str, list[int] | None, str]:
    """The block-diffusion verdict, overruled where the engine's loading of the quantized weights decides it: a
    refusal stands first (the engine never serves), then a silent misload, then a loading not read."""
    base = block_diffusion.judge(runner, config, cfg)
    quant = quantized_block.judge(runner, cfg.kind, config, names)
    if quant is None or base[0] == REFUSES or (quant[0] == UNKNOWN and base[0] in (WRONG, UNKNOWN)):
        return base
    return quant[0], base[1], quant[1]


def _spans(known: Releases, eras: list[tuple[str, str, Verdict]]) -> tuple[Span, ...]:
    """Runs of releases (newest first) whose verdicts agree; () when every release we know agrees."""
    runs: list[list[Any]] = []
    for first, last, v in eras:  # newest first
        if runs and (runs[-1][2].verdict, runs[-1][2].why) == (v.verdict, v.why):
            runs[-1][0] = first
        else:
            runs.append([first, last, v])
    if len(runs) < 2:
        return ()
    return tuple(Span(known.span(first, last), first, last, v.verdict, v.why) for first, last, v in runs)


def target_context(cfg: DrafterConfig, *targets: Any) -> TargetContext:
    family, depth = capture_context(cfg.family, *targets, cfg.target)
    return TargetContext(family, depth, any(getattr(t, "uses_mrope", False) for t in targets))


def shield_from_sglang(config: dict[str, Any], names: Collection[str], cfg: DrafterConfig, target: Any) -> list[str]:
    """A flat config that SGLang would load and serve wrong (for `target`, a TargetIdentity or None) gets the
    vLLM-only spelling of its class, so SGLang refuses it loudly (vLLM, TensorRT-LLM and llama.cpp resolve both
    names). Returns the note that says so, if any."""
    ctx = target_context(cfg, target)
    judged = verdict(sglang.read(config, names, ctx), cfg, ctx)
    if judged.verdict != WRONG:
        return []
    config["architectures"] = [vllm.VLLM_ONLY[cfg.family]]
    return [f"architectures set to {config['architectures']}, a name vLLM resolves and SGLang refuses: SGLang "
            f"would load this file and serve it wrong ({judged.why})"]
