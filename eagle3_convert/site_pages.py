"""`registry site`'s pages: the facts of site.py rendered with Jinja2 (autoescaped: every name, target and note
from a record or the Hub is text, never markup), written as one directory atomically, and served on 127.0.0.1.

The pages are readable without JavaScript (tables); site.js sorts and filters the index and draws the charts with
the Vega release build shipped in site_files/static (no CDN). Nothing secret is rendered: the registry is named
by its path or its URL without the password, and no Hub token reaches a page.
"""

from __future__ import annotations

import errno
import functools
import http.server
import json
import threading
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator

from .atomic import write_tree
from .errors import DestinationError, Eagle3Error
from .site import VERDICT_CLASS, SiteFacts, slug

MANIFEST = "eagle3-convert-site.json"  # what a previous build wrote: --force replaces only such a directory
STATIC = ("site.css", "site.js", "vega.min.js", "vega-lite.min.js", "VEGA-LICENSES.txt")
TIME = "%Y-%m-%d %H:%M"


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("eagle3_convert", "site_files/templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["when"] = lambda value: f"{value:{TIME}}" if value else ""
    env.filters["short"] = lambda value: value[:12]
    env.globals.update(verdict_class=VERDICT_CLASS, slug=slug)
    return env


def _static() -> Iterator[tuple[str, bytes]]:
    folder = resources.files("eagle3_convert") / "site_files" / "static"
    for name in STATIC:
        yield f"static/{name}", folder.joinpath(name).read_bytes()


def render(facts: SiteFacts) -> dict[str, bytes]:
    """Every file of the site by its relative path: the index, a page per drafter and per target, the static
    files, and the manifest."""
    env = _environment()
    generated = datetime.now(timezone.utc)
    common = {"facts": facts, "generated": generated}
    files: dict[str, bytes] = {}
    page = env.get_template("index.html")
    files["index.html"] = page.render(root="", **common).encode()
    drafter_page = env.get_template("drafter.html")
    for d in facts.drafters:
        files[f"drafters/{d.record.drafter_id}.html"] = drafter_page.render(root="../", d=d, **common).encode()
    target_page = env.get_template("target.html")
    for name, drafters in facts.targets().items():
        files[f"targets/{slug(name)}.html"] = target_page.render(root="../", name=name, drafters=drafters,
                                                                 **common).encode()
    files.update(_static())
    files[MANIFEST] = (json.dumps({"tool": "eagle3-convert registry site", "files": sorted([*files, MANIFEST])},
                                  indent=1) + "\n").encode()
    return files


def _strays(dest: Path) -> list[str]:
    """What in `dest` a previous `registry site` did not write (all of it, where it holds no manifest)."""
    try:
        ours = set(json.loads((dest / MANIFEST).read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        ours = set()
    found = [str(p.relative_to(dest)) for p in sorted(dest.rglob("*")) if not p.is_dir() or p.is_symlink()]
    return [name for name in found if name not in ours]


def _refusal(dest: Path, strays: list[str]) -> DestinationError:
    shown = ", ".join(strays[:6]) + (f" (and {len(strays) - 6} more)" if len(strays) > 6 else "")
    return DestinationError(f"destination {dest} holds files `registry site` did not write: {shown}",
                            "choose a new directory, or an empty one; --force replaces only a site this command "
                            "wrote", code="E-DEST-NOT-SITE")


def write(dest: Path, files: dict[str, bytes], force: bool) -> None:
    """The whole site at `dest` in one step: a reader sees the old site or the new one, never half of one."""
    write_tree(dest, files, force=force, strays_of=_strays, refusal=_refusal)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the stdlib's name)
        pass  # a quick look needs no access log on the terminal


def bind(root: Path, port: int) -> http.server.ThreadingHTTPServer:
    """A server for `root` on 127.0.0.1 (loopback only: a quick look, not a publication), bound before the site is
    built, so that a port in use costs nothing and writes nothing."""
    handler = functools.partial(_Quiet, directory=str(root))
    try:
        return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise Eagle3Error(f"port {port} on 127.0.0.1 is in use (another server, or a site served before)",
                              "pass another --port, or --port 0 for any free one", code="E-PORT-IN-USE") from None
        if exc.errno == errno.EACCES:
            raise Eagle3Error(f"port {port} on 127.0.0.1 needs privileges to listen on",
                              "pass a --port from 1024 up, or --port 0 for any free one",
                              code="E-PORT-IN-USE") from None
        raise


def serve(server: http.server.ThreadingHTTPServer, seconds: float, ready: Callable[[str], None]) -> None:
    """Serve until `seconds` pass or Ctrl-C; `ready` is told the URL once it answers."""
    with server:
        server.timeout = 0.5
        ready(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        stop = threading.Timer(seconds, server.shutdown)
        stop.daemon = True
        stop.start()
        try:
            server.serve_forever(poll_interval=0.25)
        finally:
            stop.cancel()
