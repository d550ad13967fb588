"""Mutation testing of the core (issue 26): mutmut mutates one module at a time and runs a fast selection of
the tests that exercise it against every mutant; a mutant no test kills is a change of behaviour the suite
would let through. Writes a report: module, mutants, killed, survived (and the other outcomes), score.

    pip install -e ".[dev]"                                           # mutmut, pinned
    python tools/mutation.py eagle3_convert/capture_ids.py   # one module
    python tools/mutation.py                                          # every module of MODULES (hours)
    python tools/mutation.py --list                                   # the modules and their tests
    python tools/mutation.py MODULE --recheck tests/test_mutation_kills.py  # its survivors against new tests

It is not part of the test command: each selected test runs once per mutant that reaches it. Each module runs
in its own copy of the repository's tracked files under build/mutation/<module>/ (mutmut reads its settings
from the pyproject.toml of the directory it runs in, and writes mutants/ there); the report goes to
build/mutation/report.md and report.json, the surviving mutants' diffs to build/mutation/<module>/survivors.txt.

What mutmut cannot see: tests that reach a module only through a subprocess (python -m eagle3_convert). Such a
subprocess does run the mutant (tests/hostile.py's subprocess_env puts the checkout the tests run from first on
PYTHONPATH, which under mutmut is mutants/, and MUTANT_UNDER_TEST is inherited), but mutmut picks the tests of a
mutant from the functions each test reached in its stats run, and a child process's calls are not recorded there:
a test that reaches a function only through a subprocess is never run against that function's mutants. So only
in-process tests (run_cli, direct calls) are selected below.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "build" / "mutation"

# module -> the in-process tests that exercise it, fastest first (mutmut runs, per mutant, those of them that
# reach the mutated function)
MODULES: dict[str, list[str]] = {
    "eagle3_convert/capture_ids.py": ["tests/test_capture_conventions.py", "tests/test_engine_rules.py",
                                      "tests/test_validate.py", "tests/test_determinism.py"],
    "eagle3_convert/vocab_map.py": ["tests/test_mutation_kills.py", "tests/test_caught_bugs.py",
                                    "tests/test_validate.py", "tests/test_convert_roundtrip.py"],
    "eagle3_convert/converters/layout.py": ["tests/test_mutation_kills_layouts.py", "tests/test_caught_bugs.py",
                                            "tests/test_detect.py"],
    "eagle3_convert/converters/config_keys.py": ["tests/test_validate.py", "tests/test_config_mutations.py"],
    "eagle3_convert/converters/sglang.py": ["tests/test_layouts_matrix.py", "tests/test_detect.py"],
    "eagle3_convert/converters/vllm.py": ["tests/test_layouts_matrix.py", "tests/test_detect.py"],
    "eagle3_convert/converters/speculators.py": ["tests/test_layouts_matrix.py", "tests/test_detect.py"],
    "eagle3_convert/converters/eagle.py": ["tests/test_layouts_matrix.py", "tests/test_detect.py"],
    "eagle3_convert/converters/modelopt.py": ["tests/test_layouts_matrix.py", "tests/test_detect.py"],
    "eagle3_convert/validate/tensors.py": ["tests/test_mutation_kills_validate.py", "tests/test_caught_bugs.py",
                                           "tests/test_validate.py"],
    "eagle3_convert/validate/vocab.py": ["tests/test_mutation_kills.py", "tests/test_caught_bugs.py"],
    "eagle3_convert/validate/capture.py": ["tests/test_mutation_kills_capture.py", "tests/test_engine_rules.py"],
    "eagle3_convert/validate/config.py": ["tests/test_mutation_kills_validate.py", "tests/test_config_mutations.py"],
    "eagle3_convert/validate/engine.py": ["tests/test_mutation_kills_capture.py", "tests/test_engine_releases.py",
                                          "tests/test_engine_rules.py"],
    "eagle3_convert/engines/__init__.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_releases.py",
                                           "tests/test_engine_spellings.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/common.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_releases.py",
                                         "tests/test_engine_rules.py"],
    "eagle3_convert/engines/releases.py": ["tests/test_engine_releases.py", "tests/test_engine_spellings.py",
                                           "tests/test_mutation_kills_engines.py"],
    "eagle3_convert/engines/trtllm.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_releases.py",
                                         "tests/test_trtllm_serve.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/llamacpp.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_releases.py",
                                           "tests/test_engine_rules.py"],
    "eagle3_convert/engines/speculators.py": ["tests/test_mutation_kills_engines.py",
                                              "tests/test_engine_releases.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/sglang.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/vllm.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_rules.py"],
    "eagle3_convert/atomic.py": ["tests/test_mutation_kills_atomic.py", "tests/test_force.py",
                                 "tests/test_caught_bugs.py", "tests/test_mutation_kills.py"],
    "eagle3_convert/registry/writes.py": ["tests/test_mutation_kills.py", "tests/test_caught_bugs.py",
                                          "tests/test_registry_store.py", "tests/test_registry_cli.py",
                                          "tests/test_registry_merge.py"],
}
# Survivors that are equivalent to the original (no behaviour differs), with the reason: the report lists them
# apart, and the score counts them neither way. Every other survivor is a missing test.
_DEFAULT_FAMILY = "any family name but deepseek/gpt_oss selects the default rules: another default string is the same"
_BIG_ENDIAN_ONLY = ("the byteswap runs only where sys.byteorder is 'big'; on the little-endian hosts this runs on "
                    "(x86-64, aarch64) the mutated comparison is False as the original is: untestable here")
_REENCODED_SAME = ("the source tensor is passed through only to save re-encoding it: re-encoding an I64 d2t / a 0-1 "
                   "BOOL t2d from the decoded target ids gives the same bytes")
_SQL_CASE = "only the case of SQL keywords or unquoted names changes: SQLite and PostgreSQL read both the same"
EQUIVALENT: dict[str, str] = {
    **{f"eagle3_convert.capture_ids.x_{fn}__mutmut_{n}": _DEFAULT_FAMILY
       for fn in ("engine_boundaries", "ids_for_engine", "convention_table") for n in (1, 2)},
    "eagle3_convert.capture_ids.x_engine_boundaries__mutmut_47":
        "the message of an unknown engine name: the engines are a closed set, no input reaches it",
    "eagle3_convert.capture_ids.x_ids_for_engine__mutmut_32":
        "for b = x engines only the unshifted list reads back, so the order the two are tried in changes nothing",
    "eagle3_convert.capture_ids.x_ids_for_engine__mutmut_39":
        "only gpt-oss's raw rule reads the depth, and the shifted list (tried first) always reads back +1: "
        "capturable() already bounds b <= L, so max(b - 1) < L",
    "eagle3_convert.capture_ids.x_ids_for_engine__mutmut_43": "the same call as mutant 39 (depth left out)",
    # ids_for_engine's two ways of preferring the spelling older SGLang releases read alike, each moot given the
    # other: the shifted list (b - 1) always reads back as b under the default rule (+1), SGLang tries it first,
    # and where it works `safest` picks it; where it does not, only the unshifted list can work
    **{f"eagle3_convert.capture_ids.x_ids_for_engine__mutmut_{n}":
       "the order the candidates are tried in: `safest` picks the shifted list wherever it works, and every other "
       "engine reads exactly one of the two back" for n in (33, 34)},
    "eagle3_convert.capture_ids.x_ids_for_engine__mutmut_45":
        "without `safest`, works[0]: SGLang tries the shifted list first, which, where it works, is the one safest "
        "holds (b - 1 read +1 is b)",
    **{f"eagle3_convert.capture_ids.x_ids_for_engine__mutmut_{n}": _DEFAULT_FAMILY.replace("string", "value")
       for n in (48, 52, 54, 55)},
    **{f"eagle3_convert.capture_ids.x_ids_for_engine__mutmut_{n}":
       "the default rule never reads the target's depth (only gpt-oss's does): None or no depth is the same"
       for n in (49, 53)},
    **{f"eagle3_convert.vocab_map.x_{fn}__mutmut_{n}": _BIG_ENDIAN_ONLY
       for fn, n in (("encode_d2t", 9), ("encode_d2t", 10), ("decode_ints", 17), ("decode_ints", 18))},
    **{f"eagle3_convert.vocab_map.xǁVocabMapǁ{fn}__mutmut_{n}": _REENCODED_SAME
       for fn in ("d2t_tensor", "t2d_tensor") for n in (4, 5)},
    **{f"eagle3_convert.vocab_map.x_read_vocab_map__mutmut_{n}":
       "the source tensors a VocabMap keeps are only passed through by d2t_tensor/t2d_tensor; without them (or "
       "swapped) it re-encodes the same bytes from its target ids" for n in (193, 194, 197, 198, 202, 205, 206)},
    "eagle3_convert.atomic.x__umask__mutmut_3":
        "the umask is set for an instant and put back; only the old value it returns is used, and no file is made "
        "in between",
    "eagle3_convert.atomic.x__lock_dir__mutmut_6":
        "O_RDONLY & O_DIRECTORY is O_RDONLY: the path is a directory mkdtemp just made, which O_RDONLY opens as well",
    **{f"eagle3_convert.atomic.x__exchange__mutmut_{n}":
       "CDLL(None) looks the symbol up in the process, which has glibc loaded: the same renameat2"
       for n in (7, 11, 13, 14)},
    **{f"eagle3_convert.atomic.x__exchange__mutmut_{n}":
       "differs only on a C library without renameat2 (glibc < 2.28): untestable on the glibc hosts this runs on"
       for n in (21, 25)},
    **{f"eagle3_convert.atomic.x__exchange__mutmut_{n}":
       "both paths are absolute (dest.resolve(), and mkdtemp beside it), and renameat2 ignores the dirfd of an "
       "absolute path" for n in (27, 28, 30, 32)},
    **{f"eagle3_convert.atomic.x_write_directory__mutmut_{n}":
       "tmp '' instead of None (at the start, or once swapped): an exception then runs rmtree('', "
       "ignore_errors=True), which removes nothing and raises nothing" for n in (11, 89)},
    **{f"eagle3_convert.atomic.x__remove_dead_temp_dirs__mutmut_{n}":
       "O_DIRECTORY/O_NOFOLLOW only make the open of a file or a symlink fail early: without them iterdir, rmdir or "
       "rmtree of it fails (OSError, caught; rmtree refuses a symlink) and nothing is removed either way"
       for n in (9, 10)},
    **{f"eagle3_convert.atomic.x__remove_dead_temp_dirs__mutmut_{n}":
       "rmtree stopping at the first entry of a dead dir it cannot delete instead of going on (its OSError is "
       "caught by the loop's handler): the dir is left for the next writer either way, and which entries go first "
       "is the filesystem's directory order, which no test can pin" for n in (19, 21, 22)},
    "eagle3_convert.atomic.x__remove_dead_temp_dirs__mutmut_25":
        "> or >= a minute of a float clock: no test can land on the exact instant, and no writer cares",
    "eagle3_convert.converters.layout.x_to_stored__mutmut_4":
        "to_stored=None reads as False: the same as mutant 8",
    "eagle3_convert.converters.layout.x_to_stored__mutmut_8":
        "a canonical drafter holds no layers.{i>=1}.hidden_norm (E-KEY-UNUSED), so the swap in the wrong direction "
        "leaves input_layernorm, and every writer with the LayerRename (SGLang) then adds hidden_norm beside it "
        "(with_both_later_norms): the same names and bytes",
    "eagle3_convert.converters.layout.x__swap_in_layer__mutmut_13":
        "always the stored -> canonical direction: reading is unchanged, and writing is to_stored mutant 8",
    "eagle3_convert.converters.layout.x_to_canonical__mutmut_12": "to_stored=None reads as False, which it was",
    "eagle3_convert.converters.layout.x_to_stored__mutmut_14":
        "no table has a writable renaming rule after one skipped by `continue` (SGLang's later one, layers. -> "
        "layers., is an identity): stopping there writes the same names",
    "eagle3_convert.converters.layout.x_with_both_later_norms__mutmut_5":
        "layer 0 always holds both norms (hidden_norm for the captured states, input_layernorm for the embeddings), "
        "or, spelled midlayer.*, neither: the loop changes nothing there",
    "eagle3_convert.engines.sglang.x_read__mutmut_90":
        "SGLang applies no norm_before_residual (not in FLAGS_READ): the value is masked to False either way",
    **{f"eagle3_convert.engines.sglang.x_read__mutmut_{n}":
       "an absent use_aux_hidden_state only has to read as not `False`: None is not False, as True is not"
       for n in (133, 135)},
    "eagle3_convert.engines.vllm.x_served_family__mutmut_2":
        "architectures() already keeps only the strings: no entry that is not one reaches the loop",
    "eagle3_convert.engines.vllm.x__read__mutmut_264":
        "> 1 or >= 1 layers: a one-layer file has no layer >= 1 for unread_later_norms to find (numbered as at "
        "main's 8e17d18, after the issue-23 merge)",
    **{f"eagle3_convert.engines.common.x_flag__mutmut_{n}":
       "config.get(key) without the default: an absent key then reads None, which returns the default as well"
       for n in (4, 6)},
    **{f"eagle3_convert.engines.common.x_num_layers__mutmut_{n}":
       "the midlayer.* rule only adds layer 0, which never changes max(found) + 1 (and with nothing else found the "
       "count is 1 either way): the rule is redundant" for n in (7, 9, 10, 11)},
    "eagle3_convert.engines.common.x_trained_window__mutmut_19":
        "a window of 0 comes back as 0 instead of None, and every caller (trtllm, sglang) tests it for truth",
    **{f"eagle3_convert.engines.releases.xǁReleasesǁbetween__mutmut_{n}":
       "serve_verdicts judges a release at its era's first release only to share one reading per era: a release "
       "found in no era (-1) is judged at itself, which reads as its era does (eras are cut where a change lands), "
       "and the era after (+2) is newer, tried before" for n in (4, 7)},
    "eagle3_convert.engines.releases.xǁReleasesǁunknown_why__mutmut_6":
        "> 2 or > 1 known releases: no engine knows exactly two (SGLang 19, vLLM 23, the others one)",
    **{f"eagle3_convert.validate.vocab.x_check_vocab__mutmut_{n}":
       "the E-VOCAB-T2D code test: its one message (vocab_map) starts with 't2d', which the next test already "
       "points at t2d" for n in (19, 20)},
    **{f"eagle3_convert.validate.capture.x__convention_warning__mutmut_{n}":
       "one engine reads each place (vLLM the top level, SGLang the nested list): the join never puts its separator"
       for n in (36, 37)},
    **{f"eagle3_convert.registry.writes.x_{fn}__mutmut_{n}": _SQL_CASE for fn, numbers in (
        ("insert_location", (7, 8, 10)), ("insert_edge", (7, 8, 10, 11)), ("touch", (6, 7)),
        ("forget_location", (11, 12, 18, 19)), ("delete", (6, 7)),
        ("absorb", (2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18)), ("add_alias", (7, 8))) for n in numbers},
    "eagle3_convert.registry.writes.x_forget_location__mutmut_3":
        "another string that is no drafter id spares nothing as '' does: drafter ids are 64 hex digits",
    "eagle3_convert.registry.writes.x_upsert__mutmut_74":
        "the path only names the registry when a stored record cannot be read; the record read back here was just "
        "written from a validated model, and an unreadable old one stops the first load_one (which names it)",
}
TIERS = "not engines and not interop and not llamacpp"
# Tests that only run the CLI in a subprocess: mutmut never selects them for a mutant (see above), and its stats
# run, which runs them once, fails on them
SUBPROCESS_ONLY = ["tests/test_validate.py::test_cli_validates_a_hub_repo_from_the_offline_cache"]
ALSO_COPY = ["examples", "docs", "README.md"]  # what the tests read besides tests/ (mutmut copies those itself)
OUTCOMES = ("killed", "survived", "no_tests", "timeout", "suspicious", "skipped", "segfault")


def copy_repo(dest: Path) -> None:
    """The tracked and untracked-but-not-ignored files, as the tests see them (no build/, no mutants/)."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def mutmut_settings(module: str, tests: list[str]) -> str:
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    deselected = [arg for test in SUBPROCESS_ONLY for arg in ("--deselect", test)]

    return ("\n[tool.mutmut]\n"
            f"debug = {json.dumps(bool(os.environ.get('MUTATION_DEBUG')))}\n"  # mutmut prints each pytest run
            'source_paths = ["eagle3_convert"]\n'
            f"only_mutate = {toml_list([module])}\n"
            f"also_copy = {toml_list(ALSO_COPY)}\n"
            f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
            f"pytest_add_cli_args = {toml_list(['-p', 'no:cacheprovider', '-m', TIERS, *deselected])}\n")


def run_module(module: str, tests: list[str], max_children: int) -> dict:
    work = OUT / module.replace("/", "_").removesuffix(".py")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    copy_repo(work)
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(mutmut_settings(module, tests))
    # mutmut puts its mutants/ first on sys.path itself; a PYTHONPATH naming the original would hide the mutants.
    # Naming mutants/ lets the tests' subprocesses (python -m eagle3_convert) import the package too, wherever the
    # installed one points; made now, as Python caches a path entry missing at start-up as one with nothing in it
    (work / "mutants").mkdir()
    env = {**os.environ, "PYTHONPATH": str(work / "mutants")}
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)], cwd=work,
                         env=env, capture_output=True, text=True)
    took = time.monotonic() - started
    (work / "mutmut-run.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"mutmut failed on {module} (exit {run.returncode}); see {work / 'mutmut-run.log'}")
    subprocess.run([sys.executable, "-m", "mutmut", "export-cicd-stats"], cwd=work, env=env, check=True,
                   capture_output=True)
    stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
    survivors = survivor_diffs(work, env)
    (work / "survivors.txt").write_text("\n".join(survivors))
    names = [s.split(":")[0].removeprefix("# ") for s in survivors]
    equivalent = {n: EQUIVALENT[n] for n in names if n in EQUIVALENT}
    killed, counted = stats["killed"], stats["total"] - len(equivalent)
    return {"module": module, "mutants": stats["total"], **{k: stats[k] for k in OUTCOMES},
            "equivalent": len(equivalent), "score": round(100 * killed / counted, 1) if counted else None,
            "seconds": round(took), "tests": tests, "equivalent_survivors": equivalent,
            "missing_tests": [n for n in names if n not in EQUIVALENT]}


def survivor_diffs(work: Path, env: dict[str, str]) -> list[str]:
    listed = subprocess.run([sys.executable, "-m", "mutmut", "results"], cwd=work, env=env, check=True,
                            capture_output=True, text=True).stdout
    names = [m.group(1) for m in re.finditer(r"^\s+(\S+): survived$", listed, re.M)]
    return [subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env, check=True,
                           capture_output=True, text=True).stdout for name in names]


def recheck(module: str, tests: list[str]) -> dict:
    """Run the survivors of the last full run of `module` again, against `tests` as they are now (the tests/ of the
    repository replace those of its copy): which of them a new test kills. Cheaper than a full run; the survivors
    of the full run are the only mutants whose outcome new tests can change."""
    work = OUT / module.replace("/", "_").removesuffix(".py")
    survivors_file = work / "survivors.txt"
    if not survivors_file.exists():
        raise SystemExit(f"no full run of {module} to recheck: run `python tools/mutation.py {module}` first")
    names = re.findall(r"^# (\S+): survived$", survivors_file.read_text(), re.M)
    # mutants no selected test reached ("no tests"): a new test may reach them
    listed = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, capture_output=True,
                            text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout
    names += re.findall(r"^\s+(\S+): no tests$", listed, re.M)
    for name in subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "tests"], cwd=REPO, check=True,
                               capture_output=True).stdout.decode().split("\0"):
        if name:
            (work / "mutants" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, work / "mutants" / name)
    env = {**os.environ, "PYTHONPATH": str(work / "mutants"), "PY_IGNORE_IMPORTMISMATCH": "1"}

    def run(mutant: str) -> int:
        return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", TIERS,
                               *tests], cwd=work / "mutants", env=env | {"MUTANT_UNDER_TEST": mutant},
                              capture_output=True).returncode

    if run("") != 0:  # the unmutated code must pass, or a failure below would prove nothing
        raise SystemExit(f"{' '.join(tests)} fail on the unmutated copy of {module}")
    outcome = {name: run(name) for name in names}
    return {"module": module, "tests": tests, "killed_now": [n for n, rc in outcome.items() if rc == 1],
            "still_surviving": [n for n, rc in outcome.items() if rc == 0],
            "errors": {n: rc for n, rc in outcome.items() if rc not in (0, 1)}}


def write_report(rows: list[dict], path: Path) -> None:
    lines = ["score = killed / (mutants - equivalent survivors)", "",
             "| module | mutants | killed | survived | of them equivalent | no tests | timeout | score % | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['module']} | {r['mutants']} | {r['killed']} | {r['survived']} | {r['equivalent']} "
                     f"| {r['no_tests']} | {r['timeout']} | {r['score']} | {r['seconds']} |")
    for r in rows:
        lines += [f"\n{r['module']}: surviving, no test kills them (see survivors.txt):",
                  *(f"- {n}" for n in r["missing_tests"]), "equivalent:",
                  *(f"- {n}: {why}" for n, why in r["equivalent_survivors"].items())]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    path.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: all of MODULES)")
    parser.add_argument("--max-children", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--report", type=Path, default=OUT / "report")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests, run nothing")
    parser.add_argument("--recheck", nargs="+", metavar="TEST", help="rerun the survivors of the last full run of "
                        "each module against these test files only (after adding tests that kill them)")
    args = parser.parse_args()
    if args.list:
        for module, tests in MODULES.items():
            print(module, " ".join(tests))
        return
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        raise SystemExit(f"not in MODULES: {', '.join(unknown)} (see --list)")
    if args.recheck:
        for module in args.modules or MODULES:
            result = recheck(module, args.recheck)
            (OUT / f"recheck-{module.replace('/', '_').removesuffix('.py')}.json").write_text(
                json.dumps(result, indent=2) + "\n")
            equivalent = [n for n in result["still_surviving"] if n in EQUIVALENT]
            print(f"{module}: {len(result['killed_now'])} survivors killed now, {len(result['still_surviving'])} "
                  f"still surviving ({len(equivalent)} of them equivalent), {len(result['errors'])} errors")
            for name in result["still_surviving"]:
                print(f"- {name}: {EQUIVALENT.get(name, 'NOT CLASSIFIED: no test kills it')}")
        return
    rows = [run_module(m, MODULES[m], args.max_children) for m in (args.modules or MODULES)]
    write_report(rows, args.report)


if __name__ == "__main__":
    main()
