"""Mutation testing of the core (issue 26): mutmut mutates one module at a time and runs a fast selection of
the tests that exercise it against every mutant; a mutant no test kills is a change of behaviour the suite
would let through. Writes a report: module, mutants, killed, survived (and the other outcomes), score.

    pip install -e ".[dev]"                                           # mutmut, pinned
    python tools/mutation.py eagle3_convert/capture_ids.py   # one module
    python tools/mutation.py                                          # every module of MODULES (hours)
    python tools/mutation.py --list                                   # the modules and their tests
    python tools/mutation.py MODULE --recheck tests/test_mutation_kills.py  # its survivors against new tests
    python tools/mutation.py MODULE --recheck tests/test_x.py --select "key"  # ... only the tests -k key selects
    python tools/mutation.py MODULE --recheck tests/test_x.py --unrun  # a stopped run: the mutants it did not reach
    python tools/mutation.py MODULE --rerun tests/test_x.py [--select EXPR] [--unrun]  # the same, run by mutmut

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

# Subprocess tests, which mutmut cannot select per mutant (see above), and whose child process, run from a temporary
# directory without the checkout on PYTHONPATH, imports eagle3_convert only where the package is installed
_NO_SUBPROCESS_VALIDATE = ["--deselect", "tests/test_validate.py::test_cli_validates_a_hub_repo_from_the_offline_cache"]
_NO_SUBPROCESS_DETECT = [arg for test in ("test_a_third_party_layout_is_found_through_entry_points",
                                          "test_a_broken_plugin_does_not_break_the_built_in_layouts",
                                          "test_inspect_resolves_a_repo_id_from_the_hf_cache_offline")
                         for arg in ("--deselect", f"tests/test_detect.py::{test}")]
# On a 2-core machine shared with other work a surviving mutant costs about three times its tests' CPU time, so the
# costliest tests are left out: the config-mutation corpus (one 8-second test) and the matrix's lossless round trips
# (three conversions and three reads each; the matrix's refusals and samples stay).
_NO_CORPUS = ["--deselect", "tests/test_config_mutations.py::test_no_config_mutation_changes_the_drafter_in_silence"]
# The layouts' own modules, which every conversion reaches: the kill tests first (the cheapest to fail).
_LAYOUT_TESTS = ["tests/test_mutation_kills_layouts.py", "tests/test_detect.py", *_NO_SUBPROCESS_DETECT,
                 "tests/test_layouts_matrix.py", "-k", "not test_round_trip_is_lossless"]
# The engines' readings, word for word (all in-process, a few seconds each file)
_ENGINE_READER_TESTS = ["tests/test_mutation_kills_engine_readers.py", "tests/test_mutation_kills_engines_validate.py",
                        "tests/test_engine_readers_2026.py", "tests/test_mutation_kills_engines.py",
                        "tests/test_engine_releases.py", "tests/test_engine_rules.py"]
# vLLM, ModelOpt and EAGLE: their own kill tests (session 7), and the readers' and writers' refusals, notes and
# configs written for them (session 6)
_FLAT_LAYOUT_TESTS = ["tests/test_mutation_kills_vllm_modelopt_eagle.py", "tests/test_mutation_kills_converters.py",
                      *_LAYOUT_TESTS]
# The provenance path's own tests: its kill tests (cheapest to fail), the corpus, the registry CLI, the identity story
_PROVENANCE_TESTS = ["tests/test_mutation_kills_provenance.py", "tests/test_provenance.py",
                     "tests/test_mutation_kills_capture_records.py", "tests/test_registry_cli.py",
                     "tests/test_identity_story.py"]
# module -> the in-process tests that exercise it, fastest first (mutmut runs, per mutant, those of them that
# reach the mutated function)
MODULES: dict[str, list[str]] = {
    "eagle3_convert/capture_ids.py": ["tests/test_capture_conventions.py", "tests/test_engine_rules.py",
                                      "tests/test_validate.py", "tests/test_determinism.py"],
    "eagle3_convert/vocab_map.py": ["tests/test_mutation_kills.py", "tests/test_caught_bugs.py",
                                    "tests/test_validate.py", "tests/test_convert_roundtrip.py"],
    # (test_caught_bugs and test_detect cost 7.6 s a mutant; the registry test starts a database per backend)
    "eagle3_convert/converters/layout.py": ["tests/test_mutation_kills_layouts.py",
                                            "tests/test_mutation_kills_sglang_layout.py",  # session 7's kill tests
                                            "tests/test_drafters_2026_block.py", "-k", "not registry_records"],
    # its own kill tests (session 8) and the block drafters' tests, without the registry's (a database per backend)
    "eagle3_convert/converters/dflash.py": ["tests/test_mutation_kills_dflash.py", "tests/test_drafters_2026_block.py",
                                            "-k", "not registry_records"],
    # session 6's kill tests of the key table first (the cheapest to fail), by name: a -k would select in every file
    "eagle3_convert/converters/config_keys.py": [
        *(f"tests/test_mutation_kills_converters.py::{test}" for test in (
            "test_config_key_findings_word_for_word", "test_convert_refuses_the_first_key_error",
            "test_convert_notes_each_key_warning", "test_a_wrong_capture_id_type_is_refused_as_a_capture_field",
            "test_unknown_keys_past_twenty_are_counted_not_named", "test_more_than_200_stray_keys_is_no_drafter_config",
            "test_more_than_200_stray_keys_in_a_nested_object_are_named_by_it")),
        "tests/test_validate.py", *_NO_SUBPROCESS_VALIDATE, "tests/test_config_mutations.py", *_NO_CORPUS],
    # its kill tests of sessions 6-8, and detection's (which files other layouts' tests sit in decides)
    "eagle3_convert/converters/sglang.py": ["tests/test_mutation_kills_config_reading.py",
                                            "tests/test_mutation_kills_sglang_layout.py", *_FLAT_LAYOUT_TESTS],
    "eagle3_convert/converters/vllm.py": _FLAT_LAYOUT_TESTS,
    # (session 8: the layout named in its engines' refusal; detection beside another layout's sure markers)
    # (session 6's speculators kill tests live in test_mutation_kills_converters.py: without it a full run is ~50 %)
    "eagle3_convert/converters/speculators.py": ["tests/test_mutation_kills_engine_verdict_lines.py",
                                                 "tests/test_mutation_kills_dflash.py",  # its DFlash/DSpark hand-off
                                                 *_FLAT_LAYOUT_TESTS],
    "eagle3_convert/converters/eagle.py": ["tests/test_mutation_kills_engine_verdict_lines.py", *_FLAT_LAYOUT_TESTS],
    "eagle3_convert/converters/modelopt.py": _FLAT_LAYOUT_TESTS,
    "eagle3_convert/validate/tensors.py": ["tests/test_mutation_kills_validate.py", "tests/test_caught_bugs.py",
                                           "tests/test_validate.py"],
    "eagle3_convert/validate/vocab.py": ["tests/test_mutation_kills.py", "tests/test_caught_bugs.py"],
    "eagle3_convert/validate/capture.py": ["tests/test_mutation_kills_capture_records.py",
                                           "tests/test_mutation_kills_capture.py",
                                           "tests/test_mutation_kills_validate.py",
                                           "tests/test_mutation_kills_engines_validate.py",
                                           "tests/test_engine_rules.py"],
    "eagle3_convert/validate/config.py": ["tests/test_mutation_kills_config_reading.py",
                                          "tests/test_mutation_kills_validate.py", "tests/test_config_mutations.py",
                                          *_NO_CORPUS, "tests/test_mutation_kills_engines_validate.py"],
    "eagle3_convert/validate/engine.py": ["tests/test_mutation_kills_engine_verdict_lines.py",
                                          "tests/test_mutation_kills_capture.py",
                                          "tests/test_mutation_kills_validate.py",
                                          "tests/test_mutation_kills_engines_validate.py",
                                          "tests/test_engine_releases.py", "tests/test_engine_rules.py"],
    # every verdict word for word, in-process (session 8: seconds a mutant, where the files below ran 150+ tests), the
    # block-diffusion verdicts (session 7's tests), and the one model-card test that reaches release()
    "eagle3_convert/engines/__init__.py": ["tests/test_mutation_kills_verdicts.py",
                                           "tests/test_mutation_kills_engine_readers.py", "tests/test_model_card.py",
                                           # releases_that_serve: validate's and convert's hints that name a release
                                           "tests/test_mutation_kills_engine_verdict_lines.py",
                                           "tests/test_mutation_kills_sglang_layout.py",
                                           "tests/test_mutation_kills_vllm_modelopt_eagle.py",
                                           "-k", "test_mutation_kills_verdicts or block_diffusion or block_files or "
                                           "reduced_draft_vocabulary or test_a_local_target_path_is_never_base_model "
                                           "or test_mutation_kills_engine_verdict_lines or release_asked or "
                                           "both_its_runners or an_engine_it_is_for_would_serve_it_wrong"],
    "eagle3_convert/engines/common.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_releases.py",
                                         "tests/test_engine_rules.py"],
    "eagle3_convert/engines/releases.py": ["tests/test_engine_releases.py", "tests/test_engine_spellings.py",
                                           "tests/test_mutation_kills_engines.py"],
    "eagle3_convert/engines/trtllm.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_releases.py",
                                         "tests/test_trtllm_serve.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/llamacpp.py": _ENGINE_READER_TESTS,
    "eagle3_convert/engines/block_diffusion.py": ["tests/test_mutation_kills_engine_readers.py",
                                                  "tests/test_drafters_2026_block.py"],
    "eagle3_convert/engines/mlxvlm.py": _ENGINE_READER_TESTS,
    "eagle3_convert/engines/lmdeploy.py": _ENGINE_READER_TESTS,
    "eagle3_convert/engines/speculators.py": ["tests/test_mutation_kills_engines.py",
                                              "tests/test_engine_releases.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/sglang.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_rules.py"],
    "eagle3_convert/engines/vllm.py": ["tests/test_mutation_kills_engines.py", "tests/test_engine_rules.py"],
    "eagle3_convert/atomic.py": ["tests/test_mutation_kills_atomic.py", "tests/test_force.py",
                                 "tests/test_caught_bugs.py", "tests/test_mutation_kills.py"],
    "eagle3_convert/registry/writes.py": ["tests/test_mutation_kills.py", "tests/test_caught_bugs.py",
                                          "tests/test_registry_store.py", "tests/test_registry_cli.py",
                                          "tests/test_registry_merge.py"],
    # The provenance path (issue 33 item 6). The registry tests on SQLite only (the PostgreSQL twins start a server and
    # decide the same lines), and without the identity story's every-name test (12 s a mutant; its commands are the
    # ones the story's other tests and test_provenance run)
    **{module: [*tests, "-k", "not postgresql and not every_name_of_the_target"] for module, tests in {
        "eagle3_convert/provenance.py": _PROVENANCE_TESTS,
        "eagle3_convert/registry/recording.py": [*_PROVENANCE_TESTS, "tests/test_registry_merge.py",
                                                 "tests/test_hub_lineage.py"],
        "eagle3_convert/target_identity.py": _PROVENANCE_TESTS,
        # (and the one test of a cast, which records two drafters: --outtype, GGUF only)
        "eagle3_convert/records.py": ["tests/test_mutation_kills_records.py", *_PROVENANCE_TESTS,
                                      "tests/test_registry_merge.py", "tests/test_hub_lineage.py",
                                      "tests/test_publish.py",
                                      "tests/test_gguf.py::test_a_cast_is_a_new_drafter_derived_from_the_source"],
        "eagle3_convert/sidecar.py": [*_PROVENANCE_TESTS, "tests/test_publish.py"],
        "eagle3_convert/cli/common.py": _PROVENANCE_TESTS,
        "eagle3_convert/sources.py": ["tests/test_mutation_kills_sources.py", "tests/test_sources.py",
                                      "tests/test_hub_lineage.py", "tests/test_publish.py"],
        "eagle3_convert/fingerprint.py": [*_PROVENANCE_TESTS, "tests/test_determinism.py"],
    }.items()},
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
    # (numbered as at 4898e26: ShiftedLayers, read first, moved it from 12)
    "eagle3_convert.converters.layout.x_to_canonical__mutmut_25": "to_stored=None reads as False, which it was",
    "eagle3_convert.converters.layout.x_all_ones__mutmut_5":
        "count = dim instead of count *= dim: a norm weight is 1-D, where the two are the same count",
    # (sglang's numbered as at d6cb5d5, after session 8 moved its fc-bias refusal out of read: the same mutations as
    # session 7's 126, 141, 143, 188, 190, 377 and 404, read with `mutmut show`)
    **{f"eagle3_convert.converters.sglang.xǁSGLangLayoutǁread__mutmut_{n}":
       "the default of an absent flag read through bool(): None is false as False is"
       for n in (122, 124, 139, 141, 186, 188)},
    "eagle3_convert.converters.sglang.xǁSGLangLayoutǁdetect__mutmut_36":
        "confident None instead of False: the registry tests it for truth, and None is as false",
    "eagle3_convert.converters.sglang.xǁSGLangLayoutǁread__mutmut_256":
        "no depth for the renaming rules: the single-layer midlayer rule is then skipped, and the read-only rule after "
        "it maps midlayer.* to layers.0. whatever the depth (reading only)",
    "eagle3_convert.converters.sglang.xǁSGLangLayoutǁread__mutmut_283":
        "a num_aux_hidden_states that is no integer never reaches it: refuse_key_errors refuses it first",
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
    # (between 4, `- 1`, is killed since session 8 deleted serve_verdicts' fallback for a release found in no era)
    "eagle3_convert.engines.releases.xǁReleasesǁbetween__mutmut_7":
        "serve_verdicts looks a release's era up in eras() order, newest first: `+ 2` adds the next newer release to "
        "an era, which the newer era, tried before, has already matched",
    "eagle3_convert.engines.releases.xǁReleasesǁunknown_why__mutmut_6":
        "> 2 or > 1 known releases: no engine knows exactly two (SGLang 19, vLLM 23, the others one)",
    "eagle3_convert.engines.trtllm.x_read__mutmut_101":
        "the first silent drop: r.silent is still empty there, so = and += give the same list",
    "eagle3_convert.engines.trtllm.x__yaml__mutmut_11":
        "the one list it prints is eagle3_layers_to_capture, ints, which str() and json.dumps spell alike",
    **{f"eagle3_convert.validate.vocab.x_check_vocab__mutmut_{n}":
       "the E-VOCAB-T2D code test: its one message (vocab_map) starts with 't2d', which the next test already "
       "points at t2d" for n in (19, 20)},
    # converters/config_keys.py (session 6)
    "eagle3_convert.converters.config_keys.x__edit_distance__mutmut_1":
        "prev2 is read only from the second row on, after the first row set it",
    "eagle3_convert.converters.config_keys.x__edit_distance__mutmut_6":
        "a longer first row changes only an empty key's distance, and every table key is longer than any limit (3)",
    "eagle3_convert.converters.config_keys.x__edit_distance__mutmut_15":
        "each cell of the row is written before it is read: its initial value is never used",
    "eagle3_convert.converters.config_keys.x__edit_distance__mutmut_43":
        "the wrap-around at j = 1 offers prev2[-1] + 1 (the whole candidate against a shorter prefix), never below "
        "the cell within a limit: 43,200 random near misses of every table key are judged the same",
    "eagle3_convert.converters.config_keys.x__edit_distance__mutmut_64":
        "a later early exit returns the exact distance, above the limit whenever the exit would have fired; callers "
        "only ask d <= limit",
    "eagle3_convert.converters.config_keys.x__edit_distance__mutmut_66":
        "limit + 2 or limit + 1: both above the limit, which is all callers ask",
    **{f"eagle3_convert.converters.config_keys.x__json_type__mutmut_{n}":
       "the name of a type json.loads never makes (every JSON type is in the table)" for n in (5, 7, 21)},
    **{f"eagle3_convert.converters.config_keys.x__squash__mutmut_{n}":
       "the same change on both sides of the comparison ('XXXX' between the letters, upper for lower): two ASCII "
       "keys squash equal exactly when they did" for n in (2, 3)},
    # converters/speculators.py (session 6; read renumbered as at 8efb49d, after session 7's boundary refusal)
    **{f"eagle3_convert.converters.speculators.x_required_mask_token__mutmut_{n}":
       "only an int or None reaches it: the key table refuses a speculators mask token that is no integer (a "
       "boolean included), vLLM's reader a flat one, so the regrouped `or`/`and` decide the same" for n in (2, 3)},
    **{f"eagle3_convert.converters.speculators.xǁSpeculatorsLayoutǁread__mutmut_{n}":
       "the key table refuses a draft_vocab_size that is no positive integer before this check (E-CONFIG-FIELD)"
       for n in (84, 87)},
    **{f"eagle3_convert.converters.speculators.xǁSpeculatorsLayoutǁread__mutmut_{n}":
       "raw.get(flag), raw.get(flag, None) and raw.get(flag, False) all read an absent flag as false"
       for n in (114, 116)},
    "eagle3_convert.converters.speculators.xǁSpeculatorsLayoutǁdetect__mutmut_23":
        "confident None instead of False: the registry tests it for truth, and None is as false",
    "eagle3_convert.converters.speculators.xǁSpeculatorsLayoutǁread__mutmut_178":
        "speculators has no renaming rule, so to_canonical never reads the layer count",
    "eagle3_convert.converters.speculators.xǁSpeculatorsLayoutǁread__mutmut_201":
        "a speculators_config that is no object is refused by the key table first; an absent one gives None both ways",
    **{f"eagle3_convert.converters.speculators.xǁSpeculatorsLayoutǁread__mutmut_{n}":
       "the verifier kept in the source's own speculators_config is overwritten by the writer with the one it names"
       for n in (244, 245)},
    **{f"eagle3_convert.validate.capture.x__convention_warning__mutmut_{n}":
       "one engine reads each place (vLLM the top level, SGLang the nested list): the join never puts its separator"
       for n in (36, 37)},
    # validate/capture.py, config.py, engine.py (session 7; numbered as at 4898e26, before EngineProfile.builds went)
    "eagle3_convert.validate.engine.x__engine_keys__mutmut_23":  # (29 at 4898e26; renumbered at ecbca83, session 8)
        "an unapplied twin norm lies in a layer >= 1 of a drafter of more than one layer, where the one-layer rule "
        "(layer 0 as midlayer.*) is skipped for no layer count as for that count",
    **{f"eagle3_convert.validate.capture.x_fc_bypass__mutmut_{n}":
       "an absent use_aux_hidden_state only has to read as not `False`: None is not False, as True is not"
       for n in (10, 12)},
    "eagle3_convert.validate.config.x__num_aux__mutmut_67":
        "fc's width / count, not //: wrong_target_width speaks only when count divides it, and the pydantic model "
        "takes the whole float as the int",
    "eagle3_convert.validate.capture.x_check_capture__mutmut_57":
        "with no ids anywhere every reader of ctx.intended (engine_capture, the engine modules' verdicts) reads None "
        "with the target's depth as the same default boundaries the branch writes: it is redundant",
    "eagle3_convert.validate.engine.x_check_engine_verdicts__mutmut_44":  # (50 at 4898e26; renumbered at ecbca83)
        "the caveat of vLLM's second runner is the same finding as its first's, which the report dedupes",
    "eagle3_convert.validate.config.x__intent__mutmut_8":
        "a model.-prefixed name the layout already reads as a drafter tensor reads the same without the prefix (every "
        "rule with a model. spelling has its plain twin: 986 such names of every layout read alike)",
    **{f"eagle3_convert.registry.writes.x_{fn}__mutmut_{n}": _SQL_CASE for fn, numbers in (
        ("insert_location", (7, 8, 10)), ("insert_edge", (7, 8, 10, 11)), ("touch", (6, 7)),
        ("forget_location", (11, 12, 18, 19)), ("delete", (6, 7)),
        ("absorb", (2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18)), ("add_alias", (7, 8))) for n in numbers},
    # engines/block_diffusion.py (session 7; numbered as at 4898e26). engines/__init__.py's own: session 8's block
    "eagle3_convert.engines.block_diffusion.x__nested__mutmut_6":
        "a flat file whose dflash_config is no object is refused by the dflash reader (E-CONFIG-FIELD, its "
        "target_layer_ids) before any engine reads it; a speculators file never reaches _nested",
    **{f"eagle3_convert.engines.block_diffusion.x__vllm__mutmut_{n}":
       "a flat DSpark whose model_type is not qwen3 never reaches _vllm: the drafter's family is its model_type, and "
       "judge() answers 'unknown' for any family but qwen3 first (qwen3_moe is refused by the reader, E-CONFIG-FAMILY)"
       for n in (26, 27, 28, 35, 36, 37, 38, 39, 40)},
    **{f"eagle3_convert.engines.block_diffusion.{fn}": "a flat file is a DFlash/DSpark one only through its "
       "DFlashDraftModel/DSparkDraftModel architectures (the dflash layout's detection; with --from dflash and another "
       "class it is judged as an EAGLE-3 drafter): the class check of a block-diffusion verdict cannot fail"
       for fn in ("x__vllm__mutmut_42", "x__sglang__mutmut_11", "x__sglang__mutmut_18")},
    **{f"eagle3_convert.engines.block_diffusion.x__vllm__mutmut_{n}":
       "a DFlash/DSpark file without a mask token (dflash_config's, the top-level one or the speculators one) is "
       "refused by its reader first (E-CONFIG-FIELD): the engine's own refusal is never reached"
       for n in (83, 84, 85, 86)},
    "eagle3_convert.engines.block_diffusion.x__sglang__mutmut_21": "top_level_too None or False: both falsy",
    "eagle3_convert.engines.mlxvlm.x_capture_hooks__mutmut_34":
        "max(n - 3, 0) or max(n - 3, 1) as the third default boundary: its hook is max(b - 1, 0), 0 for both",
    # converters/vllm.py and eagle.py (session 7), numbered as after the merge of main at 02:05 UTC (56cff95: vllm's
    # capture-id reading moved into _capture); the runs' own numbers are in tools/MUTATION-RESULTS.md
    "eagle3_convert.converters.vllm.xǁVLLMLayoutǁread__mutmut_39":
        "the correctly cased name instead of the miscased one: foreign_name is only tested against None afterwards",
    **{f"eagle3_convert.converters.vllm.xǁVLLMLayoutǁread__mutmut_{n}":
       "bool(raw.get(flag, None)) and bool(raw.get(flag)) read an absent flag as false, as the False default does"
       for n in (127, 129, 144, 146, 155, 157, 166, 168)},
    **{f"eagle3_convert.converters.vllm.xǁVLLMLayoutǁ_capture__mutmut_{n}":
       "int_list's own message: the key table refuses capture ids that are no list of integers first (E-CAPTURE-FIELD)"
       for n in (3, 9)},
    "eagle3_convert.converters.vllm.xǁVLLMLayoutǁread__mutmut_244":
        "vLLM's one renaming rule (midlayer.) is not single_layer_only: to_canonical never reads the layer count",
    "eagle3_convert.converters.vllm.xǁVLLMLayoutǁdetect__mutmut_15":
        "confident None instead of False: the registry tests it for truth, and None is as false",
    **{f"eagle3_convert.converters.vllm.xǁVLLMLayoutǁdetect__mutmut_{n}":
       "confident None instead of False: the registry tests it for truth, and None is as false" for n in (40, 98)},
    **{f"eagle3_convert.converters.eagle.xǁEagleLayoutǁplan__mutmut_{n}":
       "EAGLE's one renaming rule (midlayer.) is not single_layer_only: to_stored never reads the layer count"
       for n in (200, 204)},
    "eagle3_convert.converters.eagle.xǁEagleLayoutǁread__mutmut_20":
        "MODELED & FOREIGN_FLAGS (empty) for their union: every key of both is in NEVER_CARRIED or DECODER_SEMANTIC, "
        "which split_decoder_extra leaves out anyway (the sets are redundant)",
    **{f"eagle3_convert.converters.eagle.xǁEagleLayoutǁread__mutmut_{n}":
       "EAGLE's one renaming rule (midlayer.) is not single_layer_only: to_canonical never reads the layer count"
       for n in (138, 144)},
    "eagle3_convert.converters.vllm.xǁVLLMLayoutǁplan__mutmut_77":
        "nested_required=None reads as False: a nested list SGLang cannot spell is left out either way",
    # converters/modelopt.py (session 7, finished in session 8), numbered as at 7a7c269
    **{f"eagle3_convert.converters.modelopt.xǁModelOptLayoutǁread__mutmut_{n}":
       "bool(raw.get(flag, None)) and bool(raw.get(flag)) read an absent flag as false, as the False default does"
       for n in (171, 173, 182, 184, 194, 196, 201, 203)},
    "eagle3_convert.converters.modelopt.xǁModelOptLayoutǁread__mutmut_31":
        "eagle_config taken whatever its type: the key table refuses a non-object first (E-CONFIG-FIELD), and an "
        "absent one (None) fails `not eagle` as {} does",
    "eagle3_convert.converters.modelopt.xǁModelOptLayoutǁread__mutmut_92":
        "int_list's own message: the key table refuses capture ids that are no list of integers first (E-CAPTURE-FIELD)",
    "eagle3_convert.converters.modelopt.xǁModelOptLayoutǁread__mutmut_141":
        "the hint's ids of a top-level value that is no list: the key table refuses such ids first (E-CAPTURE-FIELD)",
    "eagle3_convert.registry.writes.x_forget_location__mutmut_3":
        "another string that is no drafter id spares nothing as '' does: drafter ids are 64 hex digits",
    "eagle3_convert.registry.writes.x_upsert__mutmut_74":
        "the path only names the registry when a stored record cannot be read; the record read back here was just "
        "written from a validated model, and an unreadable old one stops the first load_one (which names it)",
    # validate/capture.py (session 8, "Session 8: validate/capture"), numbered as at fbb1332
    "eagle3_convert.validate.capture.x__runtime_capture__mutmut_15":
        "only TensorRT-LLM takes its ids at runtime, and its block-output convention reads no target family (was "
        "engine_capture 61 before main's split of engine_capture)",
    # engines/__init__.py (session 8, tools/MUTATION-RESULTS.md "Session 8: engines/__init__.py, the verdicts"),
    # numbered as at ea3ec35
    "eagle3_convert.engines.x__verdict__mutmut_29":
        "the captures of a verdict that an engine builds another family's class: no file a layout reader takes makes "
        "an engine that reads capture ids do so (our readers refuse a class that contradicts model_type; mlx-vlm, "
        "LMDeploy and llama.cpp, Llama classes only, refuse a Qwen3 or MLA drafter's tensors or class); TensorRT-LLM, "
        "which builds its Llama class for one, takes the layers at serve time: its captures are None either way",
    **{f"eagle3_convert.engines.x_read_all__mutmut_{n}":
       "llama.cpp's reading of a GGUF (read_gguf, from the keys under 'gguf' and our record) takes neither the target "
       "context nor the release: left out, None or swapped, the same reading" for n in (15, 16, 19, 20, 21)},
    "eagle3_convert.engines.x_read_all__mutmut_26":
        "the label of a Reading that refuses (a GGUF, for an engine other than llama.cpp): its verdict says only the "
        "refusal",
    # validate/config.py (session 8: validate/config), numbered as at this branch's c4b0573
    "eagle3_convert.validate.config.x_check_schema__mutmut_15":
        "n + '.' never decides alone: a finding names an object's path only where the value is no object (the key "
        "table, the decoder's type check) or for ModelOpt's YaRN rope object, whose members the key table types at "
        "their own paths with the schema's own types (each rope key with 10 bad values tried)",
    # validate/engine.py (session 8, "validate/engine and the converters' last survivors"), numbered as at ecbca83
    # (releases_that_serve moved to engines/__init__.py at 79ac1c8, its body unchanged)
    "eagle3_convert.engines.x_releases_that_serve__mutmut_12":
        "> or >= between the index of the serving run's first release and the judged release's: the judged release "
        "is never in a serving run (its own verdict is wrong or refused), so the two indexes never meet",
    # converters/dflash.py (session 8: "Session 8: converters/dflash.py"), numbered as at 3f08576
    **{f"eagle3_convert.converters.dflash.x_plan_speculators__mutmut_{n}":
       "the WritePlan's layout name is read only in convert's E-ENGINE-WRONG/REFUSES message, when the speculators "
       "layout's home engines all refuse its output or one serves it wrong: the speculators library serves every "
       "DFlash/DSpark file this writer writes (it always names the verifier and the trained ids), and vLLM reads "
       "those same ids or is unknown" for n in (115, 121, 122)},
    # provenance.py (issue 33 item 6, "The provenance path"), numbered as at 6c925b7 (the module as on main at 55f2966)
    "eagle3_convert.provenance.x_fact_contradictions__mutmut_6":
        "out = instead of out += for the first list added: out is still empty there",
    "eagle3_convert.provenance.x_record_contradictions__mutmut_2":
        "`and` for the first `or`: where only one side has a target, compare() finds an unknown side 'same' and "
        "_target_contradictions returns [] as the early return does",
    # registry/recording.py (issue 33 item 6), numbered as at ec83fcf (the module as on main at 55f2966)
    "eagle3_convert.registry.recording.x_merge_twins__mutmut_13":
        "merged = None instead of False: it is only tested for truth",
    "eagle3_convert.registry.recording.x_adopt_former_ids__mutmut_21":
        "id_kind=CONTENT left out of the upsert that creates the record: a new record's id_kind defaults to 'content'",
    # target_identity.py (issue 33 item 6), numbered as at 00f6cfe (the module as on main at 55f2966)
    **{f"eagle3_convert.target_identity.x_config_digest__mutmut_{n}":
       "json.dumps without default=str: a target's config comes from json.loads, whose values all serialize"
       for n in (7, 11)},
    "eagle3_convert.target_identity.x__same_name__mutmut_4":
        "`and` for `or`: where only one name is a path, its leading / is a character the other lacks, so a == b and "
        "a.lower() == b.lower() are both false",
    # sidecar.py (issue 33 item 6), numbered as at fa89b12 (the module as on main at 55f2966)
    **{f"eagle3_convert.sidecar.x_build__mutmut_{n}":
       "json.dumps' sort_keys=None or left out: both read as its default, False, as the original says"
       for n in (14, 17)},
    "eagle3_convert.sidecar.x_read__mutmut_11": "'UTF-8' for 'utf-8': Python reads both names as the same codec",
    # records.py (issue 33 item 6), numbered as at 94a7b12 (after this branch's fix of add_checkpoint at 476f01f)
    **{f"eagle3_convert.records.x_{fn}__mutmut_{n}": "opened(create=None) for create=False: only tested for truth"
       for fn, n in (("list_records", 2), ("show", 2), ("lineage", 2), ("remove", 2), ("known_record", 2),
                     ("acceptance_of", 2), ("record_of", 3))},
    "eagle3_convert.records.x_known_record__mutmut_9":
        "the drafter its caller read from `path` not passed on: _recorded_at reads the same weights from `path` "
        "again, and finds the same key (only the cost differs)",
    "eagle3_convert.records.x_add_checkpoint__mutmut_94":
        "`or` for `and` between capture layers and convention: add_checkpoint has already refused one without the "
        "other (UsageError), so both are given or neither",
    **{f"eagle3_convert.records.x_add_checkpoint__mutmut_{n}":
       "--target's shape written over the facts (turned into a no-op, 69, or written to another key, 71, 72): the "
       "facts' target already holds every non-null model_type, depth, width and vocabulary of --target, whichever "
       "way convert.command_target settles it (--verifier: verifier.joined(target), --target's facts first; no "
       "name in config.json: merged(target, config's), --target first; a name one with --target: joined, "
       "--target's facts first; a name that differs: --target alone), and the merges after it only fill gaps"
       for n in (69, 71, 72)},
    "eagle3_convert.records.x_record_conversion__mutmut_22":
        "`or True` where a cast's output is read back: convert has just written and checked it, so it is always "
        "readable and the branch is the one taken anyway",
    **{f"eagle3_convert.records.x__known__mutmut_{n}":
       "the unknown-id message's fallback for a store without a path, and rstrip/lstrip of it: both RegistryStores "
       "have a non-empty path (SQLite's file, PostgreSQL's redacted URL), so neither ever applies"
       for n in (8, 11, 14, 17)},
    **{f"eagle3_convert.records.x__file_hashes__mutmut_{n}":
       "the size of each read (32 MiB, or the whole file) instead of 16 MiB: the same bytes are digested, only the "
       "memory held differs" for n in (20, 22, 23)},
    **{f"eagle3_convert.records.x_record_publication__mutmut_{n}":
       "the upload's edge dumped in pydantic's python mode (any mode but 'json'): record_facts validates each edge "
       "with LineageEdge.model_validate, which reads the python dump as the JSON one" for n in (28, 35, 36)},
    # sources.py (issue 33 item 6), numbered as at main's c36823f (the module unchanged since)
    "eagle3_convert.sources.x_hub_error__mutmut_148":
        "code None for the last fallback's 'E-HUB': HubError keeps its class code, E-HUB, where none is given",
    "eagle3_convert.sources.x_hub_error__mutmut_68":
        "`status or 402` for `status or 401`: a RepositoryNotFoundError always carries its response (huggingface_hub "
        "2.4.0 errors.py:119-130, HfHubHTTPError's required `response`, read in __init__), so the status it says is "
        "never the fallback",
    "eagle3_convert.sources.x_download__mutmut_37":
        "`or True` where the cached snapshot's folder is taken as its commit: huggingface_hub names every snapshot "
        "folder by its commit hash (2.4.0 _snapshot_download.py:345 and :429, snapshots/<commit_hash>), so the test "
        "always holds",
    "eagle3_convert.sources.x_no_such_directory__mutmut_11":
        "'XXXX' for '' among the parents that say nothing: a pathlib.Path never reads as '' (the empty path is '.', "
        "which the other member names)",
    "eagle3_convert.sources.x_fetch_config__mutmut_4":
        "the reachability probe run offline too: huggingface_hub's session refuses it offline without a request "
        "(2.4.0 utils/_http.py:294, OfflineModeIsEnabled), which makes local_files_only true, and the cached file is "
        "read either way",
    "eagle3_convert.sources.x_fetch_config__mutmut_45":
        "`or True` where the downloaded file's folder is taken as its commit: hf_hub_download's cache path is "
        "snapshots/<commit hash>/config.json, so the test always holds",
    "eagle3_convert.sources.x_download__mutmut_73":
        "the snapshot asked by `info.sha and revision` (the revision) instead of the commit model_info just named: "
        "the same commit unless the branch moves between the two calls, which no test can time",
    **{f"eagle3_convert.sources.x_no_such_directory__mutmut_{n}":
       "get_close_matches with n=3 or n=2 instead of n=1: only near[0], the closest, is used" for n in (27, 28)},
    "eagle3_convert.sources.x_hub_offline__mutmut_8":
        "'XXXX' for '' as an unset HF_HUB_OFFLINE's value: neither is a true spelling, both read as online",
    "eagle3_convert.sources.x_unreachable__mutmut_6":
        "follow_redirects=None for False: httpx2 uses its client's default only for USE_CLIENT_DEFAULT "
        "(httpx2/_client.py:970) and tests the None it is given for truth: not followed either way",
    **{f"eagle3_convert.sources.x_unreachable__mutmut_{n}":
       "the probe thread's name (None, left out, or respelled): only a debugger or a thread dump shows it"
       for n in (28, 31, 33, 34)},
    **{f"eagle3_convert.sources.x_unreachable__mutmut_{n}":
       "the probe thread not a daemon: its request's own timeout (REACH_TIMEOUT_S) ends it before the join's bound "
       "(+0.3 s) returns, so no thread is left running to hold the process at exit" for n in (29, 32, 35)},
    # fingerprint.py (issue 33 item 6), numbered as at e490c10 (the module as on main at 55f2966)
    **{f"eagle3_convert.fingerprint.x_tensor_digests__mutmut_{n}":
       "which tensors are hashed in threads, in what order, by how many workers and with how large a buffer (at "
       "least 1 MiB): the same bytes are digested and the result is sorted by name, so the digests are the same"
       for n in (1, 2, 4, 5, 9, 10, 11, 12, 13, 14, 15, 16, 17, 26, 27, 28, 31, 33, 35, 36, 51)},
    **{f"eagle3_convert.fingerprint.x__where__mutmut_{n}": why for n, why in (
        (1, "`or` for `and`: a TensorRef has both file and start, every other source neither"),
        (19, "getattr(src, 'end') without its default: only a TensorRef reaches that branch, and it has one"),
        (31, "type(None).__name__ for the source's class name: only an InMemoryTensor has data to compare by; any "
             "other source is compared by identity"))},
    **{f"eagle3_convert.fingerprint.x_tensor_sample__mutmut_{n}":
       "a span that only touches a streamed chunk's edge (a == its end, or b == its start) slices no bytes from it"
       for n in (32, 34)},
    "eagle3_convert.fingerprint.x_tensor_sample__mutmut_41":
        "the file opened in text mode: only its descriptor is used, by os.pread, which reads bytes either way",
}
TIERS = "not engines and not interop and not llamacpp"
# Tests that only run the CLI in a subprocess: mutmut never selects them for a mutant (see above), and its stats
# run, which runs them once, fails on them
SUBPROCESS_ONLY = ["tests/test_validate.py::test_cli_validates_a_hub_repo_from_the_offline_cache"]
ALSO_COPY = ["examples", "docs", "README.md", "mkdocs.yml"]  # what the tests read besides tests/ (mutmut copies those itself)
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


def stopped_run(work: Path) -> dict[str, list[str]]:
    """The mutants of a full run that was stopped (mutmut records each result in mutants/**/*.meta as it goes):
    those it ran, by outcome, and those it did not reach."""
    outcomes: dict[str, list[str]] = {"killed": [], "survived": [], "not_run": [], "other": []}
    for meta in (work / "mutants").rglob("*.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            key = {1: "killed", 0: "survived", None: "not_run"}.get(code, "other")
            outcomes[key].append(name)
    return {k: sorted(v) for k, v in outcomes.items()}


def recheck(module: str, tests: list[str], select: str | None = None, unrun: bool = False,
            mutants: list[str] | None = None) -> dict:
    """Run the survivors of the last full run of `module` again, against `tests` as they are now (the tests/ of the
    repository replace those of its copy): which of them a new test kills. Cheaper than a full run; the survivors
    of the full run are the only mutants whose outcome new tests can change."""
    work = OUT / module.replace("/", "_").removesuffix(".py")
    survivors_file = work / "survivors.txt"
    if mutants is not None:
        names = mutants
    elif survivors_file.exists() and not unrun:
        names = re.findall(r"^# (\S+): survived$", survivors_file.read_text(), re.M)
        # and the mutants no selected test reached (mutmut's "no tests"): a new test may reach them
        listed = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work,
                                capture_output=True, text=True,
                                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout
        names += re.findall(r"^\s+(\S+): no tests$", listed, re.M)
    elif (work / "mutants").is_dir():  # a stopped run: its survivors, or (unrun) the mutants it did not reach
        names = stopped_run(work)["not_run" if unrun else "survived"]
    else:
        raise SystemExit(f"no full run of {module} to recheck: run `python tools/mutation.py {module}` first")
    for name in subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "tests"], cwd=REPO, check=True,
                               capture_output=True).stdout.decode().split("\0"):
        if name:
            (work / "mutants" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, work / "mutants" / name)
    env = {**os.environ, "PYTHONPATH": str(work / "mutants"), "PY_IGNORE_IMPORTMISMATCH": "1"}

    def run(mutant: str) -> int:
        return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", TIERS,
                               *(["-k", select] if select else []), *tests], cwd=work / "mutants",
                              env=env | {"MUTANT_UNDER_TEST": mutant}, capture_output=True).returncode

    if run("") != 0:  # the unmutated code must pass, or a failure below would prove nothing
        raise SystemExit(f"{' '.join(tests)} fail on the unmutated copy of {module}")
    outcome: dict[str, int] = {}
    suffix = "-unrun" if unrun else ""
    with open(work / f"recheck{suffix}-progress.txt", "w", encoding="utf-8") as progress:  # to follow a long recheck
        for name in names:
            outcome[name] = run(name)
            print(name, outcome[name], file=progress, flush=True)
    return {"module": module, "tests": tests, "select": select,
            "killed_now": [n for n, rc in outcome.items() if rc == 1],
            "still_surviving": [n for n, rc in outcome.items() if rc == 0],
            "errors": {n: rc for n, rc in outcome.items() if rc not in (0, 1)}}


def rerun(module: str, tests: list[str], names: list[str], tag: str, max_children: int) -> dict:
    """Run the mutants `names` of `module` again with mutmut, in a fresh copy of the repository (the tests as they are
    now) whose selection is `tests`: the same outcome as --recheck, but each mutant is forked from one process that
    imported everything once (mutmut's runner), not started anew, which on a loaded machine is ten times cheaper."""
    work = OUT / f"{module.replace('/', '_').removesuffix('.py')}-{tag}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    copy_repo(work)
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(mutmut_settings(module, tests))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names],
                         cwd=work, env=env, capture_output=True, text=True)
    (work / "mutmut-run.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"mutmut failed on {module} (exit {run.returncode}); see {work / 'mutmut-run.log'}")
    outcome = {name: code for name, code in ((n, c) for meta in (work / "mutants").rglob("*.meta")
                                             for n, c in json.loads(meta.read_text())["exit_code_by_key"].items())
               if name in set(names)}
    return {"module": module, "tests": tests, "seconds": round(time.monotonic() - started),
            "killed_now": sorted(n for n, c in outcome.items() if c == 1),
            "still_surviving": sorted(n for n, c in outcome.items() if c == 0),
            "other": {n: c for n, c in outcome.items() if c not in (0, 1)}}


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
    parser.add_argument("--unrun", action="store_true", help="with --recheck, after a full run that was stopped: "
                        "the mutants it did not reach instead of its survivors (read from mutants/**/*.meta)")
    parser.add_argument("--rerun", nargs="+", metavar="TEST", help="like --recheck, but run by mutmut in a fresh "
                        "copy (one process forked per mutant): the survivors of the last full run, stopped or not, or "
                        "with --unrun the mutants a stopped run did not reach")
    parser.add_argument("--mutants", type=Path, metavar="FILE", help="with --rerun or --recheck: the mutants named in "
                        "FILE instead (one a line; e.g. those a first rerun left surviving, or mutants of code that "
                        "runs only at import, which only --recheck's fresh process sees)")
    parser.add_argument("--select", metavar="EXPR", help="with --recheck or --rerun: only the tests pytest -k EXPR "
                        "selects (a surviving mutant runs every selected test)")
    args = parser.parse_args()
    if args.list:
        for module, tests in MODULES.items():
            print(module, " ".join(tests))
        return
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        raise SystemExit(f"not in MODULES: {', '.join(unknown)} (see --list)")
    if args.rerun:
        for module in args.modules:
            work = OUT / module.replace("/", "_").removesuffix(".py")
            survivors = work / "survivors.txt"
            if args.mutants:
                names = args.mutants.read_text().split()
            elif survivors.exists() and not args.unrun:
                names = re.findall(r"^# (\S+): survived$", survivors.read_text(), re.M)
            else:
                names = stopped_run(work)["not_run" if args.unrun else "survived"]
            tests = args.rerun + (["-k", args.select] if args.select else [])
            tag = "rerun-unrun" if args.unrun else "rerun-again" if args.mutants else "rerun"
            result = rerun(module, tests, names, tag, args.max_children)
            (OUT / f"{tag}-{work.name}.json").write_text(json.dumps(result, indent=2) + "\n")
            print(f"{module}: {len(names)} mutants run again, {len(result['killed_now'])} killed now, "
                  f"{len(result['still_surviving'])} still surviving, {len(result['other'])} other outcomes "
                  f"({result['seconds']} s)")
            for name in result["still_surviving"]:
                print(f"- {name}: {EQUIVALENT.get(name, 'NOT CLASSIFIED: no test kills it')}")
        return
    if args.recheck:
        for module in args.modules or MODULES:
            result = recheck(module, args.recheck, args.select, args.unrun,
                             args.mutants.read_text().split() if args.mutants else None)
            name = module.replace("/", "_").removesuffix(".py")
            (OUT / f"recheck{'-unrun' if args.unrun else ''}-{name}.json").write_text(
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
