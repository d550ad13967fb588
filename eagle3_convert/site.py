"""`registry site`: the registry as facts a page can show, gathered once per build.

For each drafter: its record, what `verify` measured, and each copy's verdicts for every engine runner at every
release the tool models and every release the user names (engines.serve_verdicts, the rules convert, validate and
search use), with the serve commands the model card would print (model_card.serve_section). Pages are rendered from
these facts by site_pages.py; nothing here formats HTML.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import charts
from .capture_ids import capture_context, convention_table
from .convert import read_source
from .drafter import BLOCK_KINDS
from .engines import SERVING, WORST_FIRST, releases_of, serve_verdicts, target_context
from .errors import Eagle3Error
from .model_card import hub_repo_id, serve_section
from .names import LABELS, NAMED_ONLY, RUNNERS, engine_of, runners_of
from .registry.base import RegistryStore
from .registry.models import Acceptance, DrafterRecord, Location
from .site_cache import VerdictCache, default_path

# What the index colours: each verdict as one of four classes a reader filters by.
VERDICT_CLASS = {"as-trained": "served", "default-layers": "served", "runtime-layers": "served", "wrong": "wrong",
                 "refuses": "refused", "unknown": "unknown"}
VERDICT_WORDS = {"as-trained": "as trained", "default-layers": "as trained (default layers)",
                 "runtime-layers": "when told the layers", "wrong": "served WRONG", "refuses": "refused",
                 "unknown": "unknown"}
NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class Column:
    """One engine runner at one release: a column of the index."""

    engine: str  # the runner: sglang, vllm-v1
    release: str  # the release judged (as named when this tool does not model it)
    label: str  # "SGLang 0.5.11", "vLLM (V1 runner) 0.24.0"
    judged_by: str | None = None  # a release not modelled: the known one whose rules judge it

    @property
    def key(self) -> str:
        return f"{self.engine}=={self.release}"


def columns(choices: Sequence[Any]) -> list[Column]:
    """The index's columns: each runner of each engine the user names (`--engine`, $EAGLE3_ENGINES: EngineChoice),
    at the release named, else its newest; every runner at its newest when none is named."""
    named = [(runner, c.release) for c in choices for runner in runners_of(c.spelling)] or [(r, None) for r in RUNNERS]
    out: list[Column] = []
    for runner, release in named:
        known = releases_of(runner)
        modelled = release is None or known.knows(release)
        shown = known.canonical(release) if modelled else release
        column = Column(runner, shown, f"{LABELS[runner]} {shown}", None if modelled else known.stand_in(release))
        if column not in out:
            out.append(column)
    return out


@dataclass
class Cell:
    verdict: str | None  # engines' verdict name; None: not judged
    why: str
    copy: int | None = None  # which copy of the drafter it is (its anchor on the drafter page)

    @property
    def css(self) -> str:
        return VERDICT_CLASS.get(self.verdict or "", "none")

    @property
    def words(self) -> str:
        return VERDICT_WORDS.get(self.verdict or "", NOT_JUDGED)


@dataclass(frozen=True)
class Judged:
    """An engine's verdict on a copy at one release, as the site shows it."""

    verdict: str
    why: str


@dataclass
class Span:
    """A run of an engine's known releases that judge a copy alike."""

    releases: str
    verdict: str
    why: str


@dataclass
class Copy:
    """One recorded location of a drafter, as read for the site."""

    index: int
    location: Location
    why: str | None = None  # why it was not judged
    family: str | None = None
    verdicts: dict[str, dict[str, Judged]] = field(default_factory=dict)  # runner -> release -> its verdict
    spans: dict[str, list[Span]] = field(default_factory=dict)  # runner -> runs of known releases, newest first
    serve: list[dict[str, str]] = field(default_factory=list)  # the model card's serve section, as blocks

    def judgement(self) -> dict[str, Any]:
        """What was judged of it, as the verdict cache stores it (site_cache.py)."""
        return {"family": self.family, "serve": self.serve,
                "verdicts": {r: {rel: [j.verdict, j.why] for rel, j in by.items()} for r, by in self.verdicts.items()},
                "spans": {r: [[s.releases, s.verdict, s.why] for s in spans] for r, spans in self.spans.items()}}

    def judged_as(self, stored: dict[str, Any]) -> Copy:
        self.family, self.serve = stored["family"], stored["serve"]
        self.verdicts = {r: {rel: Judged(*j) for rel, j in by.items()} for r, by in stored["verdicts"].items()}
        self.spans = {r: [Span(*s) for s in spans] for r, spans in stored["spans"].items()}
        return self


@dataclass
class DrafterFacts:
    record: DrafterRecord
    measured: list[Acceptance]
    copies: list[Copy]
    cells: dict[str, Cell]  # Column.key -> the best verdict over the copies
    conventions: dict[str, Any]  # engine convention -> the capture ids it spells the boundaries with
    charts: dict[str, dict[str, Any]]  # name -> Vega-Lite spec

    @property
    def target(self) -> str:
        t = self.record.target
        return t.name_or_path if t is not None and t.name_or_path else "unknown"

    @property
    def newest(self) -> Acceptance | None:
        return max(self.measured, key=lambda m: m.measured_at) if self.measured else None

    @property
    def layouts(self) -> list[str]:
        return sorted({loc.layout for loc in self.record.locations})


@dataclass
class SiteFacts:
    source: str  # where the registry is (a PostgreSQL URL without its password)
    columns: list[Column]
    drafters: list[DrafterFacts]
    judged_hub: bool
    cache: VerdictCache  # how many copies were judged, how many reused

    def targets(self) -> dict[str, list[DrafterFacts]]:
        """Target name -> its drafters, best newest acceptance first (unmeasured last)."""
        out: dict[str, list[DrafterFacts]] = {}
        for d in self.drafters:
            out.setdefault(d.target, []).append(d)
        for items in out.values():
            items.sort(key=lambda d: -(d.newest.mean_accepted_length if d.newest else -1.0))
        return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def slug(name: str) -> str:
    """A file name for any target name (paths, odd Unicode, markup): its readable ASCII part and a digest."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:48] or "target"
    return f"{readable}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def gather(store: RegistryStore, choices: Sequence[Any], hub: Any = None, cache: bool = False) -> SiteFacts:
    """Every drafter of the registry with what the site shows of it; `hub`: a HubReader to judge Hub copies by
    (None: they are listed, not judged). Each copy is judged for the newest release of every engine and the
    releases named; across the releases modelled by the verdict's own runs (one judgement per era of releases).
    `cache`: reuse and keep verdicts in the verdict cache (site_cache.py; False: every copy is judged)."""
    cols = columns(choices)
    engines = tuple(dict.fromkeys([*RUNNERS, *(c.engine for c in cols if engine_of(c.engine) in NAMED_ONLY)]))
    releases: dict[str, list[str | None]] = {engine_of(e): [releases_of(e).newest] for e in engines}
    for c in cols:
        if c.release not in releases[engine_of(c.engine)]:
            releases[engine_of(c.engine)].append(c.release)
    judged = VerdictCache(default_path() if cache else None, {"engines": engines, "releases": releases})
    try:
        drafters = [_drafter(record, store.acceptance(record.drafter_id), cols, engines, releases, hub, judged)
                    for record in store.list()]
    finally:
        judged.close()  # what was judged is kept even when a later drafter fails the build
    return SiteFacts(str(getattr(store, "path", "")), cols, drafters, hub is not None, judged)


def _drafter(record: DrafterRecord, measured: list[Acceptance], cols: list[Column], engines: tuple[str, ...],
             releases: dict[str, list[str | None]], hub: Any, cache: VerdictCache) -> DrafterFacts:
    copies = []
    for i, loc in enumerate(record.locations):
        key = cache.key(loc, record)  # the copy's state before it is read: a change while read is judged again
        stored = cache.get(key)
        copies.append(Copy(i, loc).judged_as(stored) if stored is not None
                      else _copy(i, loc, record, engines, releases, hub))
        if stored is None:
            cache.put(key, copies[-1].judgement() if copies[-1].why is None else None)  # not judged: asked again
    cells = {}
    for col in cols:
        judged = [Cell(c.verdicts[col.engine][col.release].verdict, c.verdicts[col.engine][col.release].why, c.index)
                  for c in copies if col.engine in c.verdicts]
        best = min(judged, key=lambda cell: -WORST_FIRST.index(cell.verdict), default=None)
        cells[col.key] = best or Cell(None, next((c.why for c in copies if c.why), "no copy recorded"),
                                      copies[0].index if copies else None)
    family = next((c.family for c in copies if c.family), "default")
    depth = record.target.num_hidden_layers if record.target else None
    conventions = convention_table(record.capture_boundaries, depth, family)
    return DrafterFacts(record, measured, copies, cells, conventions, _charts(record, measured))


def _copy(index: int, location: Location, record: DrafterRecord, engines: tuple[str, ...],
          releases: dict[str, list[str | None]], hub: Any) -> Copy:
    copy = Copy(index, location)
    read = _read(location, hub)
    if isinstance(read, str):
        copy.why = read
        return copy
    config, names, cfg, target, files = read
    if record.capture_boundaries is not None and record.capture_boundaries != cfg.capture_boundaries:
        cfg = cfg.model_copy(update={"capture_boundaries": list(record.capture_boundaries)})  # the training truth
    copy.family = capture_context(cfg.family, target, cfg.target)[0]
    ctx = target_context(cfg, target)
    verdicts: dict[str, dict[str, Any]] = {}  # runner -> release -> engines.Verdict
    if cfg.kind in BLOCK_KINDS:  # judged one release at a time: a fleet of releases is one verdict for these
        for e in engines:
            verdicts[e] = {str(r): serve_verdicts(config, names, cfg, ctx, (e,), {engine_of(e): [r]})[e]
                           for r in releases[engine_of(e)]}
            copy.spans[e] = [Span(v.release or r, v.verdict, v.why) for r, v in verdicts[e].items()]
    else:
        for runner, v in serve_verdicts(config, names, cfg, ctx, engines, releases).items():
            verdicts[runner] = {release: verdict for release, verdict in v.judged} if v.judged else {v.release: v}
            copy.spans[runner] = _spans(releases_of(runner), v, verdicts[runner])
    copy.verdicts = {runner: {release: Judged(v.verdict, v.why) for release, v in by.items()}
                     for runner, by in verdicts.items()}
    newest = {runner: by[releases_of(runner).newest] for runner, by in verdicts.items()
              if releases_of(runner).newest in by}
    serving = {runner: v for runner, v in newest.items() if v.verdict in SERVING}
    if serving:
        name = location.path_or_repo
        target_name = record.target.name_or_path if record.target else None
        lines = serve_section(name, location.layout, newest, record.target, hub_repo_id(target_name) or target_name,
                              location.revision, cfg, {"capture_boundaries": record.capture_boundaries}, files)
        copy.serve = _blocks(lines[2:])  # without "## Serve"
    return copy


def _read(location: Location, hub: Any) -> tuple[Any, ...] | str:
    """(config.json as stored, tensor names, DrafterConfig, target, file names) of a copy, or why it was not read."""
    if location.kind == "local":
        path = Path(location.uri)
        if not path.exists():
            return "this copy is no longer there"
        try:
            source = read_source(str(path))
        except Eagle3Error as exc:
            return f"unreadable: {exc.message} [{exc.code}]"
        cfg = source.drafter.config
        files = sorted(p.name for p in path.iterdir()) if path.is_dir() else [path.name]
        return source.stored_config or {}, source.stored_names, cfg, cfg.target, files
    if location.kind != "hub":
        return "a copy on another machine"
    if hub is None:
        return "a Hub copy: `registry site --hub` reads it (headers only)"
    try:
        read = hub.read(location.path_or_repo, headers=True, revision=location.revision)
    except Eagle3Error as exc:
        return f"{exc.message} [{exc.code}]"
    if read.problem is not None or read.drafter is None:
        code, message = read.problem or ("E-LAYOUT-UNKNOWN", "not read")
        return f"{message} [{code}]"
    cfg = read.drafter.config
    return read.config or {}, read.names or [], cfg, read.target or cfg.target, sorted(read.repo.files)


def _spans(known: Any, v: Any, named: dict[str, Any]) -> list[Span]:
    """The verdict across the releases this tool models, newest first: the runs where they disagree (the verdict's
    `across`, one judgement per era of releases), else one run of them all; then each release named that is not
    modelled, judged by the rules of the one below it."""
    if v.across:
        spans = [Span(s.releases, s.verdict, s.why) for s in v.across]
    else:
        newest = named.get(known.newest) or next(iter(named.values()))
        spans = [Span(known.span(known.known[0], known.newest), newest.verdict, newest.why)]
    return spans + [Span(f"{release} (by {known.stand_in(release)}'s rules)", w.verdict, w.why)
                    for release, w in named.items() if not known.knows(release)]


def _blocks(lines: list[str]) -> list[dict[str, str]]:
    """The model card's serve section (Markdown: headings, paragraphs, fenced code) as blocks a template shows."""
    blocks: list[dict[str, str]] = []
    code: list[str] | None = None
    for line in lines:
        if line.startswith("```"):
            if code is None:
                code = []
            else:
                blocks.append({"kind": "code", "text": "\n".join(code)})
                code = None
        elif code is not None:
            code.append(line)
        elif line.startswith("### "):
            blocks.append({"kind": "heading", "text": line[4:]})
        elif line.strip():
            blocks.append({"kind": "text", "text": line})
    return blocks


def _charts(record: DrafterRecord, measured: list[Acceptance]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    ordered = sorted(measured, key=lambda m: m.measured_at)
    if ordered:
        out["per-position"] = charts.per_position([
            {"label": charts.run_label(m.target_name_or_path, m.k, m.capture_boundaries, m.measured_at),
             "per_position": m.per_position} for m in ordered])
        out["over-time"] = charts.over_time([{"when": m.measured_at, "mean": m.mean_accepted_length, "k": m.k}
                                             for m in ordered])
    ranked = _ranked(list(record.capture_boundaries or ()), ordered)
    if ranked:
        out["ranked"] = charts.ranked(ranked)
    if record.lineage:
        out["lineage"] = charts.lineage_graph(*lineage_layout(record))
    return out


def _ranked(recorded: list[int], ordered: list[Acceptance]) -> list[dict[str, Any]]:
    """Capture layers to rank: the newest `verify --scan-layers` ranking (one run's decoded text, its layers and
    their neighbours), else the layers measured apart (the newest measurement of each), where there are two."""
    scanned = next((m for m in reversed(ordered) if m.scan), None)
    if scanned is not None and scanned.scan is not None:
        return [{"layers": c.boundaries, "mean": c.mean_accepted_length, "what": ", ".join(c.labels),
                 "note": "recorded" if c.boundaries == recorded else "as measured"
                 if c.boundaries == scanned.capture_boundaries else "scanned"} for c in scanned.scan]
    best = {tuple(m.capture_boundaries): m for m in ordered}
    if len(best) < 2:
        return []
    return [{"layers": list(layers), "mean": m.mean_accepted_length,
             "note": "recorded" if list(layers) == recorded else "measured"} for layers, m in best.items()]


def lineage_layout(record: DrafterRecord) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lineage's copies as graph nodes, each in the column of its longest path from a first copy (a copy
    converted twice is right of both), rows in order of appearance; and its edges."""
    edges = [{"source": e.source.uri, "dest": e.dest.uri, "kind": e.kind} for e in record.lineage]
    layouts = {e.source.uri: e.source.layout for e in record.lineage} | {e.dest.uri: e.dest.layout
                                                                         for e in record.lineage}
    column = {uri: 0 for uri in layouts}
    for _ in range(len(layouts)):  # longest path, relaxed (a cycle stops after as many rounds as nodes)
        for e in edges:
            column[e["dest"]] = max(column[e["dest"]], column[e["source"]] + 1)
    rows: dict[int, int] = {}
    nodes = []
    for uri, layout in layouts.items():
        col = min(column[uri], len(layouts))
        kind = "hub" if uri.startswith("hf://") else "elsewhere" if uri.startswith("local:") else "local"
        nodes.append({"id": uri, "label": f"{uri} ({layout})", "column": col, "row": rows.get(col, 0), "kind": kind})
        rows[col] = rows.get(col, 0) + 1
    return nodes, edges
