"""`registry site` (issue 37): a registry built by the real CLI, written as a static site, and read in a real
headless Chromium (tests/browser.py): the index lists every drafter, a filter narrows it, a drafter's page shows its
verdict matrix and its charts, every link resolves, nothing is fetched from the network, and a screenshot of each
page kind shows its parts. Hostile names stay text; no token reaches a page. `verify --plot` draws the chart.

EAGLE3_SITE_SCREENSHOTS=DIR keeps the screenshots (the README's come from here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

import browser
from browser import chromium  # noqa: F401 (the module's browser, a fixture)
import pytest
from conftest import DATA, copy_sample, run_cli

from eagle3_convert.records import record_acceptance
from eagle3_convert.schemas import output_violations

FLEET = "sglang==0.5.11,vllm==0.24.0"
HOSTILE = "<script>window.__pwned=1</script>\"'><img src=x onerror=window.__pwned=2>‮ܐ𝕏\u200b🐍"
SECRET = "hf_TOKENthatmustNEVERappear0123456789"
# A `verify --scan-layers` ranking as verify records it (cli/verify.py's document), best first
SCAN = [{"boundaries": [2, 4, 6], "labels": ["id 5 -> 6"], "mean_accepted_length": 2.7,
         "per_position": [0.8, 0.7, 0.5]},
        {"boundaries": [2, 4, 5], "labels": ["config", "recorded"], "mean_accepted_length": 2.5,
         "per_position": [0.8, 0.6, 0.5]},
        {"boundaries": [1, 4, 5], "labels": ["id 2 -> 1"], "mean_accepted_length": 1.9,
         "per_position": [0.6, 0.4, 0.2]},
        {"boundaries": [3, 5, 6], "labels": ["all +1"], "mean_accepted_length": 1.4, "per_position": [0.3, 0.1, 0.0]}]


def measured(day: int, mean: float, per_position: list[float], layers: list[int], target: str = "llama-tiny") -> dict:
    """One measurement as `verify` records it (its Acceptance fields)."""
    return {"target_name_or_path": target, "target_revision": None, "prompts_sha256": "ab" * 32, "prompts": 8,
            "max_new_tokens": 64, "k": len(per_position), "capture_boundaries": layers, "mean_accepted_length": mean,
            "per_position": per_position, "rounds": 120, "tokens_per_second": 40.0, "device": "cpu",
            "measured_at": (datetime(2026, 1, 5, tzinfo=timezone.utc) + timedelta(days=day)).isoformat()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """A registry made by the CLI from tests/data samples (a conversion with its lineage, two drafters added, one
    with three measurements at two sets of layers), and the site written from it."""
    tmp = tmp_path_factory.mktemp("site")
    registry = str(tmp / "registry.db")
    sg = copy_sample(tmp, "specforge-sglang")
    assert run_cli("--to", "speculators", sg, tmp / "sg-speculators", "--verifier", "meta-llama/Llama-3.1-8B-Instruct",
                   "--registry", registry).exit_code == 0
    spec = copy_sample(tmp, "speculators-trained")
    assert run_cli("registry", "add", spec, "--trained-with", "speculators trainer, 2 epochs",
                   "--registry", registry).exit_code == 0
    assert run_cli("registry", "add", copy_sample(tmp, "eagle-original"), "--registry", registry).exit_code == 0
    for m in (measured(0, 2.1, [0.7, 0.5, 0.3], [2, 4, 5]), measured(7, 2.4, [0.8, 0.6, 0.4], [2, 4, 5]),
              measured(9, 1.9, [0.6, 0.4, 0.2], [1, 4, 5]), {**measured(10, 2.5, [0.8, 0.6, 0.5], [2, 4, 5]),
                                                            "scan": SCAN}):
        record_acceptance(str(spec), m, registry=registry)
    out = tmp / "out"
    result = run_cli("registry", "site", out, "--registry", registry, "--engine", FLEET, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert output_violations(doc) == []
    records = json.loads(run_cli("registry", "list", "--registry", registry, "--json").stdout)["records"]
    measured_id = next(r["drafter_id"] for r in records if any(loc["uri"] == str(spec) for loc in r["locations"]))
    return {"out": out, "doc": doc, "records": records, "registry": registry, "measured": measured_id, "tmp": tmp}


def test_the_site_holds_every_page(built):
    out, doc, records = built["out"], built["doc"], built["records"]
    assert doc["drafters"] == len(records) == 3
    assert doc["columns"] == ["sglang==0.5.11", "vllm-v1==0.24.0", "vllm-v2==0.24.0"]
    for r in records:
        assert (out / "drafters" / f"{r['drafter_id']}.html").is_file()
    assert len(list((out / "targets").glob("*.html"))) == doc["targets"]
    assert not list(out.parent.glob(".out.tmp-*"))  # written in one step: no temp dir left


def test_the_index_lists_filters_and_links(built, chromium):
    out = built["out"]
    chromium.open((out / "index.html").as_uri())
    ids = chromium.eval("Array.from(document.querySelectorAll('#drafters tbody tr td:first-child')).map(td => "
                        "td.dataset.value)")
    assert sorted(ids) == sorted(r["drafter_id"] for r in built["records"])
    assert chromium.eval("document.querySelector('#drafters thead').innerText").count("0.24.0") == 2
    # A filter narrows it: SGLang 0.5.11 refuses the speculators copy of one drafter, serves the sglang copy of another
    chromium.eval("(() => { const f = document.getElementById('filters'); f.elements.engine.value = "
                  "'sglang==0.5.11'; f.elements.verdict.value = 'served'; "
                  "f.dispatchEvent(new Event('change')); })()")
    shown = chromium.eval("Array.from(document.querySelectorAll('#drafters tbody tr')).filter(r => !r.hidden)"
                          ".map(r => r.cells[0].dataset.value)")
    assert 0 < len(shown) < len(ids), shown
    assert "served" in chromium.eval("location.search") and chromium.eval(
        "document.getElementById('shown').textContent") == f"{len(shown)} of {len(ids)} shown"
    # the same filter from the address alone: a link to a filtered index
    chromium.open((out / "index.html").as_uri() + "?engine=sglang%3D%3D0.5.11&verdict=served")
    assert chromium.visible("#drafters tbody tr") == len(shown)
    # sorting by the newest acceptance puts the measured drafter first (descending: click twice)
    chromium.eval("(() => { const th = Array.from(document.querySelectorAll('#drafters th'))"
                  ".find(h => h.textContent.includes('newest acceptance')); th.click(); th.click(); })()")
    assert chromium.eval("document.querySelector('#drafters tbody tr:not([hidden]) td').dataset.value") == \
        built["measured"] or built["measured"] not in shown


def test_a_drafter_page_shows_its_verdict_matrix_and_charts(built, chromium):
    page = built["out"] / "drafters" / f"{built['measured']}.html"
    chromium.open(page.as_uri())
    assert chromium.visible("table.matrix") >= 1
    engines = chromium.eval("Array.from(document.querySelectorAll('table.matrix th[rowspan]')).map(t => t.textContent)")
    assert {"sglang", "vllm-v1", "vllm-v2", "speculators"} <= set(engines)
    assert chromium.eval("Array.from(document.querySelectorAll('table.matrix td')).some(td => "
                         "td.textContent.includes('0.19.0'))")  # its releases, not only the newest
    drawn = chromium.eval("Array.from(document.querySelectorAll('figure.chart')).map(f => [f.dataset.chart, "
                          "f.dataset.drawn || f.dataset.error, f.querySelectorAll('svg path, svg .mark-symbol').length])")
    names = {name for name, state, _ in drawn if state == "true"}
    assert {"per-position", "over-time", "ranked"} <= names, drawn
    assert all(marks > 0 for _, _, marks in drawn), drawn
    assert chromium.visible("figure.chart svg") == len(drawn)
    assert "trained with" in chromium.eval("document.body.innerText")
    assert chromium.visible("#acceptance table tbody tr") == 4
    # the ranking `verify --scan-layers` recorded, one bar per set of layers, best on top
    bars = chromium.eval("Array.from(document.querySelectorAll('figure.chart[data-chart=ranked] svg .mark-rect "
                         "path')).map(p => p.getBoundingClientRect().y)")
    assert len(bars) == len(SCAN) and bars == sorted(bars), bars
    axis = chromium.eval("Array.from(document.querySelectorAll('figure.chart[data-chart=ranked] svg text'))"
                         ".map(t => t.textContent)")
    assert [a for a in axis if a.startswith("[")] == [str(c["boundaries"]) for c in SCAN], axis


def _links(chromium) -> list[str]:
    return chromium.eval("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")


def test_every_link_resolves_and_nothing_is_fetched(built, chromium):
    out = built["out"]
    pages = [out / "index.html", out / "drafters" / f"{built['measured']}.html",
             next((out / "targets").glob("*.html"))]
    for page in pages:
        chromium.events.clear()
        chromium.open(page.as_uri())
        for href in _links(chromium):
            url = urlparse(href)
            assert url.scheme == "file", href  # the site links only into itself
            target = Path(unquote(url.path))
            assert target.is_file(), href
            if url.fragment:
                assert f'id="{url.fragment}"' in target.read_text(), href
        fetched = chromium.requested()
        assert fetched and all(u.startswith(("file://", "data:", "about:")) for u in fetched), fetched


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("kind", ["index", "drafter", "target"])
def test_a_screenshot_of_each_page_kind_shows_its_parts(built, chromium, kind, tmp_path):
    out = built["out"]
    page, parts = {
        "index": (out / "index.html", ["#drafters", "#filters", "#drafters td.v-served", "header.top"]),
        "drafter": (out / "drafters" / f"{built['measured']}.html",
                    ["#record table.facts", "table.matrix", "figure.chart[data-chart=per-position] svg",
                     "figure.chart[data-chart=over-time] svg"]),
        "target": (next(p for p in (out / "targets").glob("*.html") if "llama-tiny" in p.name),
                   ["#target-drafters", "#target-drafters td.v"]),
    }[kind]
    chromium.open(page.as_uri())
    chromium.eval("window.scrollTo(0, 0)")
    for selector in parts:
        assert chromium.visible(selector) >= 1, selector
    keep = os.environ.get("EAGLE3_SITE_SCREENSHOTS")
    shot = (Path(keep) if keep else tmp_path) / f"site-{kind}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    data = chromium.screenshot(shot)
    assert _png_size(data) == (1280, 860)
    assert len(data) > 20_000  # a page with tables and colour, not a blank frame


def test_hostile_names_stay_text_and_no_token_is_written(tmp_path, chromium, monkeypatch):
    """Every field a user or the Hub fills (target name and alias, trained-with notes, a measurement's target and
    device) holds markup and odd Unicode: the pages show it as text and run none of it."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    registry = str(tmp_path / "registry.db")
    src = copy_sample(tmp_path, "speculators-trained")
    result = run_cli("registry", "add", src, "--verifier", HOSTILE, "--trained-with", HOSTILE, "--registry", registry)
    assert result.exit_code == 0, result.stderr
    record_acceptance(str(src), {**measured(1, 2.0, [0.7, 0.5, 0.3], [2, 4, 5], target=HOSTILE), "device": HOSTILE},
                      registry=registry)
    out = tmp_path / "out"
    assert run_cli("registry", "site", out, "--registry", registry, "--token", SECRET).exit_code == 0
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert SECRET.encode() not in text, path
            if path.suffix == ".html":
                assert b"<script>window.__pwned" not in text and b"<img src=x" not in text, path
    pages = [out / "index.html", *(out / "drafters").glob("*.html"), *(out / "targets").glob("*.html")]
    for page in pages:
        chromium.open(page.as_uri())
        assert chromium.eval("window.__pwned === undefined && !document.querySelector('img')"), page
        assert HOSTILE in chromium.eval("document.body.innerText"), page
        assert chromium.eval("document.querySelectorAll('figure.chart[data-error]').length") == 0, page


def test_a_directory_it_did_not_write_is_refused_and_left_alone(built, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me")
    for extra in ((), ("--force",)):
        result = run_cli("registry", "site", mine, "--registry", built["registry"], *extra)
        assert result.exit_code != 0 and "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "[E-DEST" in lines[0] and "hint:" in lines[0], result.stderr
    assert [p.name for p in mine.iterdir()] == ["todo.txt"] and not list(tmp_path.glob(".notes.tmp-*"))
    # a site written before is replaced with --force, refused without it
    again = run_cli("registry", "site", built["out"], "--registry", built["registry"])
    assert again.exit_code != 0 and "--force" in again.stderr
    assert run_cli("registry", "site", built["out"], "--registry", built["registry"], "--force").exit_code == 0


def test_bad_input_is_one_line(tmp_path):
    for args, code in (((), "E-USAGE"), ((str(tmp_path / "o"), "--engine", "sglang==banana"), "E-USAGE"),
                       ((str(tmp_path / "o"), "--registry", str(tmp_path / "none.db")), "E-")):
        result = run_cli("registry", "site", *args)
        assert result.exit_code != 0, args
        assert len(result.stderr.strip().splitlines()) == 1 and f"[{code}" in result.stderr, result.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "none.db").exists()


def test_serve_answers_on_loopback_and_stops(built, tmp_path):
    env = {**os.environ, "EAGLE3_CONVERT_REGISTRY": built["registry"]}
    proc = subprocess.Popen([sys.executable, "-m", "eagle3_convert", "registry", "site", "--serve", "--port", "0",
                             "--serve-for", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            found = re.search(r"serving (http://127\.0\.0\.1:\d+/index\.html)", line)
            url = found.group(1) if found else None
        assert url, proc.stderr.read() if proc.poll() is not None else "no URL printed"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200 and b'id="drafters"' in answer.read()
    finally:
        proc.send_signal(2)  # Ctrl-C
        assert proc.wait(timeout=20) == 0
    assert "Traceback" not in proc.stderr.read()


def test_verify_plot_draws_the_chart(tmp_path):
    """verify --plot FILE writes the PNG or SVG; a name of another kind is refused before anything is measured."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from verify_fixtures import write_tiny_target

    from builders import DrafterSpec, build_drafter

    target = write_tiny_target(tmp_path / "target", zero_head=True)
    src = build_drafter(tmp_path / "drafter", "speculators", DrafterSpec(vocab_ids=tuple(range(0, 96, 3))))
    (tmp_path / "p.txt").write_text("abc\n")
    refused = run_cli("verify", src, "--target-model", target, "--plot", tmp_path / "chart.pdf", "--no-record", "-q")
    assert refused.exit_code != 0 and "[E-USAGE]" in refused.stderr and not (tmp_path / "chart.pdf").exists()
    for name in ("chart.png", "chart.svg"):
        result = run_cli("verify", src, "--target-model", target, "--prompts", tmp_path / "p.txt", "-k", "2",
                         "--device", "cpu", "--max-new-tokens", "6", "-q", "--no-record", "--plot", tmp_path / name,
                         "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["plot"] == str(tmp_path / name)
    width, height = _png_size((tmp_path / "chart.png").read_bytes())
    assert width > 300 and height > 200
    svg = (tmp_path / "chart.svg").read_text()
    assert "<svg" in svg and "Acceptance by draft position" in svg


def test_engine_fleet_in_one_value_is_the_env_fleet(monkeypatch):
    from eagle3_convert.cli.common import EngineSpelling, chosen_engines
    from eagle3_convert.engines.releases import EngineChoice

    given = (EngineSpelling().convert(FLEET, None, None),)
    monkeypatch.setenv("EAGLE3_ENGINES", FLEET)
    assert chosen_engines(given) == chosen_engines(()) == (EngineChoice("sglang", "0.5.11"),
                                                           EngineChoice("vllm", "0.24.0"))


def test_a_rebuild_judges_only_the_copies_that_changed(tmp_path, monkeypatch):
    """The verdict cache (site_cache.py): a second build reuses every local copy's verdicts and writes the same
    pages; a copy rewritten with its size and mtime put back (only its ctime tells) is read and judged again, as is
    one whose record changed; --no-cache judges all."""
    monkeypatch.setenv("EAGLE3_SITE_CACHE", str(tmp_path / "cache" / "verdicts.db"))
    registry = str(tmp_path / "registry.db")
    spec, sg = copy_sample(tmp_path, "speculators-trained"), copy_sample(tmp_path, "specforge-sglang")
    for src in (spec, sg):
        assert run_cli("registry", "add", src, "--registry", registry).exit_code == 0

    def build(*extra: str) -> tuple[dict, dict[str, str]]:
        out = tmp_path / "out"
        result = run_cli("registry", "site", out, "--registry", registry, "--engine", FLEET, "--force", "--json",
                         *extra)
        assert result.exit_code == 0, result.stderr
        pages = {str(p.relative_to(out)): re.sub(r"registry site</code> at [^<]*", "", p.read_text())
                 for p in out.rglob("*.html")}
        return json.loads(result.stdout), pages

    first, pages = build()
    assert (first["copies_judged"], first["copies_unchanged"]) == (2, 0)
    again, same = build()
    assert (again["copies_judged"], again["copies_unchanged"]) == (0, 2) and same == pages
    config = Path(spec) / "config.json"
    stat = config.stat()
    config.write_bytes(b"{" + b" " * (stat.st_size - 1))  # same size, not JSON
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited, now = build()
    assert (edited["copies_judged"], edited["copies_unchanged"]) == (1, 1)
    assert "unreadable" in "".join(now.values()) and "unreadable" not in "".join(pages.values())
    assert run_cli("registry", "add", sg, "--capture-layers", "1,3,5", "--convention", "sglang", "--registry",
                   registry).exit_code == 0
    restated, _ = build()
    assert (restated["copies_judged"], restated["copies_unchanged"]) == (2, 0)  # the unreadable copy is never kept
    fresh, _ = build("--no-cache")
    assert (fresh["copies_judged"], fresh["copies_unchanged"]) == (2, 0)


def test_a_cache_that_cannot_be_opened_is_skipped_saying_so(built, tmp_path, monkeypatch):
    (tmp_path / "not-a-dir").write_text("a file where the cache's folder would be")
    monkeypatch.setenv("EAGLE3_SITE_CACHE", str(tmp_path / "not-a-dir" / "verdicts.db"))
    result = run_cli("registry", "site", tmp_path / "out", "--registry", built["registry"])
    assert result.exit_code == 0, result.stderr
    assert "verdict cache" in result.stdout and "not used" in result.stdout and "0 unchanged" in result.stdout


def test_serve_on_a_port_in_use_says_so_in_one_line_and_writes_nothing(built, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = tmp_path / "out"
        result = run_cli("registry", "site", out, "--serve", "--port", port, "--registry", built["registry"])
        assert result.exit_code == 1 and "Traceback" not in result.stderr
        [line] = result.stderr.strip().splitlines()
        assert f"port {port}" in line and "[E-PORT-IN-USE]" in line and "--port 0" in line, line
        assert not out.exists() and not list(tmp_path.glob(".out.tmp-*"))
        # the hint, followed: any free port serves it
        again = run_cli("registry", "site", out, "--serve", "--port", "0", "--serve-for", "1", "--registry",
                        built["registry"])
        assert again.exit_code == 0 and "serving http://127.0.0.1:" in again.stdout, again.stderr
        assert (out / "index.html").is_file()
