"""The package's shape (issue 13): no module a newcomer cannot hold in their head, and no import cycle.

Run `python -m pytest -q tests/test_package_shape.py` after adding or growing a module.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eagle3_convert"
MAX_LINES = 500

# Modules allowed over MAX_LINES for now, each with why. Remove an entry once its module is split.
# (Empty now: converters/gguf.py and torch_zip.py, once in progress elsewhere, have been split.)
OVER_LIMIT_ALLOWED: dict[str, str] = {}

# Module-level import cycles that are known and deliberate. Each entry is the exact set of modules.
KNOWN_CYCLES = [
    # click's registration pattern: cli/__init__ defines the `main` group, then imports each command
    # module, which imports `main` back to attach its command. Moving `main` into a module of its own
    # would end it; until then it is the only cycle allowed.
    {"eagle3_convert.cli", "eagle3_convert.cli.convert", "eagle3_convert.cli.inspect", "eagle3_convert.cli.publish",
     "eagle3_convert.cli.registry", "eagle3_convert.cli.search", "eagle3_convert.cli.validate",
     "eagle3_convert.cli.verify"},
]

# (Every other import circle is refused, even one closed by an import inside a function.)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(module: str, path: Path, *, in_functions: bool) -> set[str]:
    """The package modules `module` imports (an `if TYPE_CHECKING:` import counts too: a circle of types is one)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not in_functions:
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = _target(module, is_package, child.level, child.module)
                for alias in child.names:  # `from . import x` imports the module x when there is one
                    sub = f"{target}.{alias.name}"
                    found.add(sub if sub in MODULES else target)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in MODULES and m != module}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def test_no_module_over_the_line_limit():
    sizes = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
             for path in MODULES.values()}
    offenders = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in OVER_LIMIT_ALLOWED}
    for name, n in sorted(offenders.items(), key=lambda item: -item[1]):
        print(f"{name}: {n} lines (limit {MAX_LINES}): split it by concern")
    assert not offenders, f"modules over {MAX_LINES} lines: {sorted(offenders)}"


def test_allowed_exceptions_name_real_modules():
    missing = [name for name in OVER_LIMIT_ALLOWED if not (ROOT / name).is_file()]
    assert not missing, f"OVER_LIMIT_ALLOWED names modules that no longer exist: {missing}"


def test_no_module_level_import_cycle():
    graph = {name: _imports(name, path, in_functions=False) for name, path in MODULES.items()}
    cycles = [c for c in _cycles(graph) if c not in KNOWN_CYCLES]
    for cycle in cycles:
        print("import cycle:", " <-> ".join(sorted(cycle)))
    assert not cycles, f"module-level import cycles: {[sorted(c) for c in cycles]}"


def test_no_import_cycle_even_inside_functions():
    """Not even an import inside a function closes a circle: each module sits below the ones that use it
    (the model layer < I/O < layouts/engines/registry < pipelines < cli), so any module can be imported first and
    a lower layer takes what it needs as arguments. The one circle left is click's registration in cli/."""
    graph = {name: _imports(name, path, in_functions=True) for name, path in MODULES.items()}
    cycles = [c for c in _cycles(graph) if c not in KNOWN_CYCLES]
    for cycle in cycles:
        print("import cycle:", " <-> ".join(sorted(cycle)))
    assert not cycles, f"import cycles (counting imports inside functions): {[sorted(c) for c in cycles]}"


MODEL_LAYER = ("eagle3_convert.names", "eagle3_convert.drafter", "eagle3_convert.target_identity",
               "eagle3_convert.vocab_map", "eagle3_convert.capture_ids", "eagle3_convert.quantization")
BELOW_THE_MODEL = ("eagle3_convert.errors", "eagle3_convert.safetensors_io", "eagle3_convert.atomic")


def test_the_model_layer_imports_nothing_above_it():
    """drafter, the vocab map and the capture conventions are the bottom: they import each other and the I/O
    below them, never a layout, an engine, the registry or a pipeline."""
    above = {name: sorted(m for m in _imports(name, MODULES[name], in_functions=True)
                          if m not in MODEL_LAYER + BELOW_THE_MODEL)
             for name in MODEL_LAYER}
    assert not {name: found for name, found in above.items() if found}


def test_every_split_module_imports_first_in_a_fresh_interpreter():
    """Importing any module of the split packages first (as a tool or test might) works: no cycle that
    only the usual import order hides."""
    names = [name for name in MODULES if name.startswith(("eagle3_convert.validate", "eagle3_convert.registry"))
             or name in ("eagle3_convert.converters.checkpoint", "eagle3_convert.converters.layout",
                         "eagle3_convert.converters.base", "eagle3_convert.converters.gguf",
                         "eagle3_convert.converters.gguf_file", "eagle3_convert.converters.gguf_tensors")]
    code = ("import importlib, sys\nfor name in sys.argv[1:]:\n"
            "    for loaded in [m for m in sys.modules if m.startswith('eagle3_convert')]:\n"
            "        del sys.modules[loaded]\n"
            "    importlib.import_module(name)\n")
    subprocess.run([sys.executable, "-c", code, *names], check=True, timeout=300, cwd=ROOT)


PIPELINES = ("eagle3_convert.convert", "eagle3_convert.publish", "eagle3_convert.records", "eagle3_convert.hints",
             "eagle3_convert.validate", "eagle3_convert.cli")


def test_the_registry_imports_no_pipeline():
    """The registry stores and queries; the pipelines record into it (eagle3_convert.records), never the
    reverse — not even through an import inside a function."""
    upward = {name: sorted(m for m in _imports(name, path, in_functions=True)
                           if any(m == p or m.startswith(p + ".") for p in PIPELINES))
              for name, path in MODULES.items() if name.startswith("eagle3_convert.registry")}
    assert not {name: found for name, found in upward.items() if found}


# The layers of docs/architecture.md, top to bottom: a module imports only from its own layer or below.
LAYERS = [
    ("cli", ("cli", "__main__")),
    ("pipelines", ("convert", "validate", "publish", "model_card", "sources", "targets", "records", "hints",
                   "hub_read", "hub_index", "verify", "site", "site_cache", "site_pages", "charts",
                   "verify_inputs", "target_weights", "target_options", "finetune")),
    ("layouts / engines / registry", ("converters", "engines", "registry", "schemas", "sidecar", "fingerprint",
                                      "provenance")),
    ("model", ("drafter", "target_identity", "vocab_map", "capture_ids", "names", "quantization")),
    ("I/O", ("safetensors_io", "atomic", "writeback", "torch_zip", "torch_pickle", "bin_reader", "hub_client",
             "entry_points", "errors", "json_values", "")),
]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _layer(module: str) -> int:
    top = module.removeprefix("eagle3_convert").lstrip(".").split(".")[0]  # "": the package's own __init__
    return next(i for i, (_, tops) in enumerate(LAYERS) if top in tops)


def test_every_module_has_a_layer_and_imports_flow_downwards():
    upward = [f"{name} ({LAYERS[_layer(name)][0]}) imports {m} ({LAYERS[_layer(m)][0]})"
              for name, path in MODULES.items() for m in sorted(_imports(name, path, in_functions=True))
              if _layer(m) < _layer(name)]
    assert not upward, upward


def test_the_module_map_is_the_package():
    """docs/architecture.md's module map has one row per module of the package, no row for a module that is
    gone, and each module in the layer whose imports test_every_module_has_a_layer_and_imports_flow_downwards
    checks, with a role."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## The module map", 1)[1]
    rows = re.findall(r"^\| `([\w/]+\.py)` \| ([^|]+?) \| ([^|]*?) \|$", text, re.MULTILINE)
    mapped = {path: (layer, role) for path, layer, role in rows}
    assert len(mapped) == len(rows), "a module has two rows"
    modules = {str(path.relative_to(PACKAGE)): name for name, path in MODULES.items()}
    assert sorted(set(modules) - set(mapped)) == [], "modules the map does not list"
    assert sorted(set(mapped) - set(modules)) == [], "rows for modules that do not exist"
    wrong = {path: layer for path, (layer, _) in mapped.items() if layer != LAYERS[_layer(modules[path])][0]}
    assert not wrong, f"rows in another layer than the module's: {wrong}"
    assert all(role.strip() for _, role in mapped.values())


# First-party imports inside a function, outside cli/: each defers a module a command may not need, and says so here.
DEFERRED_IMPORTS = {
    ("eagle3_convert.__main__", "eagle3_convert.cli"): "python -m eagle3_convert: a Ctrl-C while the CLI is "
                                                       "imported is no traceback either",
    ("eagle3_convert.converters.checkpoint", "eagle3_convert.bin_reader"): "the .bin reader, for pickled weights",
    ("eagle3_convert.validate.raw", "eagle3_convert.bin_reader"): "the .bin reader, for pickled weights",
    ("eagle3_convert.converters.nemo_meta", "eagle3_convert.torch_zip"): "the pickle reader, only for NeMo "
                                                                         "Automodel's eagle_meta.pt",
    ("eagle3_convert.hints", "eagle3_convert.convert"): "the convert pipeline, only for a hint naming a command: "
                                                        "validate imports none of it",
}

# In cli/, a command imports the pipeline it runs when it runs, so that `--help` (and every other command) imports
# none of it: each module a cli function imports, with why. test_the_cli_defers_only_what_help_does_not_import
# checks that `--help` indeed imports none of them; anything `--help` imports anyway belongs at the top.
PYDANTIC = "pydantic, through the canonical model"
CLI_DEFERRED = {
    "eagle3_convert.atomic": "the record of destinations written, asked only after an interrupt",
    "eagle3_convert.convert": "the convert pipeline: " + PYDANTIC,
    "eagle3_convert.converters.registry": "the layouts, for a layout a plugin names: " + PYDANTIC,
    "eagle3_convert.drafter": PYDANTIC,
    "eagle3_convert.quantization": "inspect's view of a quantized drafter: " + PYDANTIC,
    "eagle3_convert.engines": "the engines' rules: " + PYDANTIC,
    "eagle3_convert.engines.llamacpp": "llama.cpp's serve command: " + PYDANTIC,
    "eagle3_convert.engines.releases": "the releases --engine names, in the engines package: " + PYDANTIC,
    "eagle3_convert.engines.trtllm": "TensorRT-LLM's serve snippet: " + PYDANTIC,
    "eagle3_convert.hub_index": "the Hub side of sync and search: " + PYDANTIC,
    "eagle3_convert.provenance": "a registry record as checked facts: " + PYDANTIC,
    "eagle3_convert.publish": "the publish pipeline: " + PYDANTIC,
    "eagle3_convert.records": "the registry's pipeline side: sqlite3 and " + PYDANTIC,
    "eagle3_convert.registry.recording": "the registry's recording rules: " + PYDANTIC,
    "eagle3_convert.registry.store": "the store: sqlite3 and the record models (pydantic)",
    "eagle3_convert.site": "the site's facts, gathered from the registry and the engines: " + PYDANTIC,
    "eagle3_convert.site_pages": "the site's pages: Jinja2",
    "eagle3_convert.charts": "verify --plot's chart, drawn by vl-convert",
    "eagle3_convert.sources": "SRC resolved, a Hub repo downloaded: " + PYDANTIC,
    "eagle3_convert.validate": "the validate pipeline: " + PYDANTIC + " and jsonschema",
    "eagle3_convert.verify": "the acceptance measurement: torch and transformers",
    "eagle3_convert.verify_inputs": "verify's inputs checked before torch loads: the convert pipeline's reader, "
                                    + PYDANTIC,
}


def _function_level_imports() -> set[tuple[str, str]]:
    """(module, first-party module it imports inside a function)."""
    found = set()
    for name, path in MODULES.items():
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
                            "eagle3_convert")):
                        target = _target(name, path.name == "__init__.py", node.level, node.module)
                        found |= {(name, f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target)
                                  for a in node.names}
                    elif isinstance(node, ast.Import):
                        found |= {(name, a.name) for a in node.names if a.name.startswith("eagle3_convert")}
    return found


def test_first_party_imports_are_at_the_top_of_the_module():
    """A module's header says what it depends on: a first-party import inside a function is listed, with why, in
    DEFERRED_IMPORTS or (in cli/) CLI_DEFERRED."""
    found = _function_level_imports()
    in_cli = {(name, m) for name, m in found if name.startswith("eagle3_convert.cli")}
    assert found - in_cli <= set(DEFERRED_IMPORTS), sorted(found - in_cli - set(DEFERRED_IMPORTS))
    assert set(DEFERRED_IMPORTS) <= found, f"no longer deferred: {sorted(set(DEFERRED_IMPORTS) - found)}"
    cli_deferred = {m for _, m in in_cli}
    assert cli_deferred <= set(CLI_DEFERRED), f"deferred in cli/, no reason: {sorted(cli_deferred - set(CLI_DEFERRED))}"
    assert set(CLI_DEFERRED) <= cli_deferred, f"no longer deferred: {sorted(set(CLI_DEFERRED) - cli_deferred)}"


def test_the_cli_defers_only_what_help_does_not_import():
    """What `--help` imports anyway (the cli modules, what they import at the top) costs nothing at the top of a
    module: a deferred import of it only hides a dependency."""
    code = "import sys, eagle3_convert.cli\nprint('\\n'.join(sorted(sys.modules)))"
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120,
                                cwd=ROOT).stdout.split())
    assert "eagle3_convert.cli.convert" in loaded  # the check is live: the command modules are registered
    assert not loaded & set(CLI_DEFERRED), sorted(loaded & set(CLI_DEFERRED))


# Each heavy third-party library the package calls sits behind one small adapter module: only it imports it, when
# called, so a command that does not need the library does not load it (tests/test_imports.py checks which do).
# Not yet: numpy (validate/deep.py and the three GGUF modules), tqdm (cli/common.py, cli/verify.py), torch
# (bin_reader.py, verify/); pydantic is the model library, imported where models are defined or checked.
ADAPTERS = {"huggingface_hub": "eagle3_convert.hub_client",
            "jsonschema": "eagle3_convert.schemas", "referencing": "eagle3_convert.schemas",
            "gguf": "eagle3_convert.converters.gguf_file",
            "packaging": "eagle3_convert.engines.releases",
            "jinja2": "eagle3_convert.site_pages", "vl_convert": "eagle3_convert.charts"}


def test_each_heavy_library_is_imported_by_its_adapter_alone():
    """Each library of ADAPTERS is imported by its adapter and nowhere else (at any level, inside functions too),
    so a new release of it is checked against one module."""
    found = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                        [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found |= {(library, name) for library in ADAPTERS for module in imported
                      if module == library or module.startswith(library + ".")}
    assert found == {(library, adapter) for library, adapter in ADAPTERS.items()}, sorted(found)
