"""The acceptance charts, as Vega-Lite specs: one spec per chart, drawn by Vega in the site's pages and into a PNG
or SVG file by `verify --plot`, so the picture a terminal user saves is the one the site shows.

Why Vega-Lite: the site must build a thousand drafter pages in seconds, so its charts are drawn in the reader's
browser (a Python plotter takes tens of milliseconds a chart); `verify --plot` must write a PNG without a
browser. Vega runs in both: its release build ships in the package for the pages (eagle3_convert/site_files/static,
no CDN), and vl-convert (Vega in an embedded JavaScript runtime, optional: the `plot` extra) renders the same spec
to a file. Labels are data: Vega draws them as text, never as markup.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import Eagle3Error, UsageError

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"  # names the spec's version; nothing is fetched
PLOT_SUFFIXES = (".png", ".svg")
PLOT_HINT = 'pip install "eagle3-convert[plot]" (vl-convert-python: Vega, without a browser)'
WIDTH, HEIGHT = 380, 200
MAX_RUNS = 6  # lines a per-position chart holds before it stops being readable: the newest ones


def _spec(title: str, values: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    return {"$schema": SCHEMA, "title": title, "width": WIDTH, "height": HEIGHT, "data": {"values": values},
            "config": {"font": "sans-serif", "legend": {"labelLimit": 260}}, **rest}


def run_label(target: str, k: int, boundaries: Sequence[int] | None, when: datetime | None) -> str:
    """One measurement as a legend names it: the target's last name part, k, the layers and the day."""
    short = target.rstrip("/").rsplit("/", 1)[-1] or target
    day = f" {when:%Y-%m-%d}" if when else ""
    return f"{short} k={k} {list(boundaries) if boundaries is not None else 'default'}{day}"


def per_position(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Acceptance at each draft position, one line per run ({"label", "per_position"}), newest runs kept."""
    values = [{"run": run["label"], "position": j, "acceptance": rate}
              for run in list(runs)[-MAX_RUNS:] for j, rate in enumerate(run["per_position"], 1)]
    return _spec("Acceptance by draft position", values, mark={"type": "line", "point": True, "tooltip": True},
                 encoding={"x": {"field": "position", "type": "ordinal", "title": "draft position",
                                 "axis": {"labelAngle": 0}},
                           "y": {"field": "acceptance", "type": "quantitative", "title": "share of rounds accepting it",
                                 "scale": {"domain": [0, 1]}},
                           "color": {"field": "run", "type": "nominal", "title": None,
                                     "legend": {"orient": "bottom", "direction": "vertical"}}})


def over_time(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean accepted length at each measurement ({"when": datetime, "mean", "k"}), one line per k."""
    values = [{"when": p["when"].isoformat(), "mean accepted length": p["mean"], "k": f"k={p['k']}"} for p in points]
    return _spec("Mean accepted length over time", values, mark={"type": "line", "point": True, "tooltip": True},
                 encoding={"x": {"field": "when", "type": "temporal", "title": "measured (UTC)"},
                           "y": {"field": "mean accepted length", "type": "quantitative",
                                 "title": "tokens per target forward", "scale": {"zero": False}},
                           "color": {"field": "k", "type": "nominal", "title": None}})


def ranked(candidates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Capture layers ranked by the mean accepted length measured with them ({"layers", "mean"}, optionally "note":
    the colour, and "what": the tooltip's words), best on top."""
    values = [{"layers": str(list(c["layers"])) if c["layers"] is not None else "engine default",
               "mean accepted length": c["mean"], "note": c.get("note", ""),
               **({"what": c["what"]} if c.get("what") else {})} for c in candidates]
    return _spec("Capture layers ranked", values, mark={"type": "bar", "tooltip": True},
                 height={"step": 22},
                 encoding={"y": {"field": "layers", "type": "nominal", "title": "capture boundaries",
                                 "sort": "-x"},
                           "x": {"field": "mean accepted length", "type": "quantitative",
                                 "title": "mean accepted length"},
                           "color": {"field": "note", "type": "nominal", "title": None}})


def lineage_graph(nodes: Sequence[Mapping[str, Any]], edges: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The copies of a drafter as a graph: each node ({"id", "label", "column", "row", "kind"}) placed by the caller
    (a column per conversion step), an arrow-less rule per edge ({"source", "dest", "kind"}) from left to right."""
    at = {n["id"]: n for n in nodes}
    lines = [{"x": at[e["source"]]["column"], "y": at[e["source"]]["row"], "x2": at[e["dest"]]["column"],
              "y2": at[e["dest"]]["row"], "kind": e["kind"]} for e in edges if e["source"] in at and e["dest"] in at]
    columns = max((n["column"] for n in nodes), default=0) + 1
    rows = max((n["row"] for n in nodes), default=0) + 1
    x = {"type": "quantitative", "axis": None, "scale": {"domain": [-0.3, columns - 0.4]}}
    y = {"type": "quantitative", "axis": None, "scale": {"domain": [rows - 0.5, -0.5]}}
    return {"$schema": SCHEMA, "title": "Lineage", "width": max(260, 230 * columns), "height": max(60, 48 * rows),
            "config": {"font": "sans-serif", "view": {"stroke": None}},
            "layer": [
                {"data": {"values": lines}, "mark": {"type": "rule", "strokeWidth": 2},
                 "encoding": {"x": {"field": "x", **x}, "y": {"field": "y", **y}, "x2": {"field": "x2"},
                              "y2": {"field": "y2"},
                              "color": {"field": "kind", "type": "nominal", "title": "step"}}},
                {"data": {"values": [dict(n) for n in nodes]}, "mark": {"type": "point", "filled": True, "size": 120},
                 "encoding": {"x": {"field": "column", **x}, "y": {"field": "row", **y},
                              "shape": {"field": "kind", "type": "nominal", "title": "copy"},
                              "tooltip": [{"field": "label"}]}},
                {"data": {"values": [dict(n) for n in nodes]},
                 "mark": {"type": "text", "align": "left", "dx": 9, "dy": -9, "limit": 210},
                 "encoding": {"x": {"field": "column", **x}, "y": {"field": "row", **y}, "text": {"field": "label"}}},
            ]}


def one_run(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`verify`'s chart of one run (its --json document): the acceptance by position and, after --scan-layers, the
    layers ranked beside it."""
    label = run_label(str(doc["target"]), doc["k"], doc["capture"]["boundaries"], None)
    chart = per_position([{"label": label, "per_position": doc["per_position"]}])
    if not doc.get("scan"):
        return chart
    scan = ranked([{"layers": c["boundaries"], "mean": c["mean_accepted_length"], "note": ", ".join(c["labels"])}
                   for c in doc["scan"]])
    return {"$schema": SCHEMA, "hconcat": [{k: v for k, v in part.items() if k != "$schema"} for part in (chart, scan)],
            "config": chart["config"], "resolve": {"scale": {"color": "independent"}}}  # a legend each


def check_plot_path(path: str) -> Path:
    """`--plot FILE`, checked before anything is measured: a PNG or SVG name, and the renderer installed."""
    out = Path(path)
    if out.suffix.lower() not in PLOT_SUFFIXES:
        raise UsageError(f"--plot {path}: the chart is written as PNG or SVG, named by its suffix",
                         "name the file chart.png or chart.svg")
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        raise Eagle3Error("--plot needs vl-convert-python, which is not installed", PLOT_HINT,
                          code="E-PLOT-DEPS") from None
    return out


def render(spec: Mapping[str, Any], suffix: str) -> bytes:
    """The chart drawn by Vega (vl-convert): PNG or SVG bytes."""
    import vl_convert

    if suffix.lower() == ".svg":
        return vl_convert.vegalite_to_svg(dict(spec)).encode()
    return bytes(vl_convert.vegalite_to_png(dict(spec), scale=2))


def save(spec: Mapping[str, Any], path: Path) -> None:
    """Write the chart to `path` atomically: a reader never finds half a picture."""
    data = render(spec, path.suffix)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
