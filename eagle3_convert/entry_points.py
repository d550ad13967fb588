"""Whether an installed distribution may declare an entry-point group, without importlib.metadata.

Importing importlib.metadata and parsing every installed package's metadata costs ~15 ms of a command (issue 16).
A plain scan of sys.path for `*.dist-info`/`*.egg-info` entry_points.txt naming the group takes ~1 ms: when none
does, there is no plugin of that group. Whatever the scan cannot rule out (a zip or .egg on sys.path, a finder that
lists distributions of its own) counts as declared, and the caller asks importlib.metadata as before.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder


def none_declare(group: str) -> bool:
    """True when no installed distribution can declare entry points of `group`."""
    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return False
    section = f"[{group}]".encode()
    for entry in sys.path:
        try:
            it = os.scandir(entry or ".")
        except NotADirectoryError:
            return False  # a zip archive: importlib.metadata reads inside it
        except OSError:
            continue  # absent: nothing there for importlib.metadata either
        with it:
            for e in it:
                name = e.name.lower()
                if name.endswith(".egg"):
                    return False
                if name.endswith((".dist-info", ".egg-info")):
                    try:
                        with open(os.path.join(e.path, "entry_points.txt"), "rb") as f:
                            if section in f.read():
                                return False
                    except OSError:
                        continue
    return True


def pydantic_plugins_off_when_none_declared() -> None:
    """pydantic looks its plugins up with importlib.metadata when it builds the first model; where no distribution
    declares one (the `pydantic` group), say so (PYDANTIC_DISABLE_PLUGINS, pydantic's own switch) and skip the
    lookup. A user's own setting of it stands."""
    if "PYDANTIC_DISABLE_PLUGINS" not in os.environ and none_declare("pydantic"):
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
