"""Every hint changes the verdict it was offered for (issue 34): each hint that validate, inspect and convert print
over the corpus below and that names an `eagle3-convert` command is run through the real CLI, as a user pastes it,
and then the file it wrote is checked again with the same options. The finding the hint was for (its code, for its
engine) must be gone; a hint that cannot be made to work must not be printed.

The corpus, chosen so that every kind of file the tool reads is in it once and the whole runs in about a minute on
two cores:
- the peer samples of tests/data (SpecForge, speculators, original EAGLE and the hazards made from them) and the
  block-diffusion configs of tests/data/block-diffusion (DFlash, DSpark), as tests/test_drafters_2026_block.py
  builds them;
- every published config of tests/data/real-configs, narrowed to a small width (hidden 64; MLA ranks, heads and
  intermediate size cut alike) with its architectures, model_type, vocabularies, capture ids and flags kept: what
  the hints depend on, without the gigabytes a full-size copy costs each conversion;
- a drafter whose config spells the RoPE base twice (issue 35);
- the broken copies: tests/test_hints.py runs the hints of the validate corpus (one broken thing per code) and of
  the hostile corpus with the same re-check (`run_hints`);
- each `--engine` release the tool knows: every file is checked once with no --engine and once with the fleet of
  every engine at the first release of each of its eras (`Releases.eras()`: the releases between two changes read
  every fact alike, so the first speaks for all of them).
Convert is run to every layout it writes (gguf needs the target's GGUF, which none of these has; `--to gguf`'s own
hints are in tests/test_gguf.py); where it refuses, the command its hint names must not refuse the same way (it may
stop at the next thing to fix, under another code: the speculators layout's verifier).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter
from conftest import DATA, run_cli
from test_drafters_2026_block import specforge_drafter
from test_hints import COMMAND, run_hint, without_paths
from test_real_configs import EXPECTED, REAL, rebuild_sparse

from eagle3_convert.engines import MODULES
from eagle3_convert.names import LAYOUTS

SAMPLES = ("specforge-sglang", "speculators-trained", "speculators-fullvocab-qwen3", "eagle-original",
           "h2-d2t-absolute", "h4-missing-lm_head", "h6-truncated", "h8-sglang-ids-toplevel-only")
WRITTEN = tuple(layout for layout in LAYOUTS if layout not in ("gguf", "nemo"))  # nemo is read only
REFUSAL = re.compile(r"\[(E-[A-Z0-9-]+)\](?: — hint: (.*))?$")
NARROW = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "q_lora_rank": 32,
          "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16}


def fleet() -> list[str]:
    """`--engine E==R` for the first release of each era of every engine."""
    return [arg for engine, module in MODULES.items() for first, _last in module.RELEASES.eras()
            for arg in ("--engine", f"{engine}=={first}")]


def narrowed(config: dict) -> dict:
    """A published config at a small width: every width key cut (a head_dim that differs from H / heads, and a target
    width that differs from H, still differ), nothing else changed."""
    out = dict(config)
    for layer in [out, *([dict(out["transformer_layer_config"])] if "transformer_layer_config" in out else [])]:
        hidden, heads = layer.get("hidden_size"), layer.get("num_attention_heads")
        odd_head = "head_dim" in layer and hidden and heads and layer["head_dim"] * heads != hidden
        layer.update({k: v for k, v in NARROW.items() if k in layer})
        if "num_key_value_heads" in layer:
            layer["num_key_value_heads"] = min(layer["num_key_value_heads"] or 2, 2)
        if "head_dim" in layer:
            layer["head_dim"] = 24 if odd_head else 16
        if "transformer_layer_config" in out and layer is not out:
            out["transformer_layer_config"] = layer
    if out.get("target_hidden_size") is not None:
        out["target_hidden_size"] = 64 if config.get("target_hidden_size") == config.get("hidden_size") else 96
    return out


def corpus(root: Path) -> Iterator[Path]:
    for name in SAMPLES:
        shutil.copytree(DATA / name / "checkpoint", root / name)
        yield root / name
    for kind in ("dflash", "dspark"):
        yield specforge_drafter(root / f"specforge-{kind}", kind)
    # issue 35: a config spelling the RoPE base twice, differently (W-ROPE-SPELLINGS; its --target findings,
    # W-ROPE-TARGET and the embedding's, are run by tests/test_hints.py and tests/test_target_facts.py)
    yield build_drafter(root / "rope-spellings", "sglang", DrafterSpec(extra={
        "rope_theta": 500000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}))
    for name, (prefix, *_rest) in sorted(EXPECTED.items()):
        rebuild_sparse(root / name, narrowed(json.loads((REAL / f"{name}.json").read_text())), prefix)
        yield root / name


def findings(command: str, path: Path, options: list[str]) -> list[dict]:
    result = run_cli(command, "--json", *options, path)
    doc = json.loads(result.stdout)
    assert "findings" in doc, doc  # (a usage error has none: it must not pass for a clean re-check)
    return doc["findings"]


def refusal(path: Path, to: str, dest: Path) -> dict | None:
    """convert's refusal (its code and hint, as printed), None when it converts."""
    result = run_cli("--to", to, "--no-record", path, dest)
    shutil.rmtree(dest, ignore_errors=True)
    if result.exit_code == 0:
        return None
    found = REFUSAL.search(result.stderr.splitlines()[-1])
    assert found, result.stderr
    return {"code": found[1], "hint": found[2]}


def unfixed(hint_for: tuple[str, str | None], command: str, path: Path, options: list[str], out: Path,
            printed_by: str) -> str | None:
    """Why the hint's `command` does not remove the finding `hint_for` (code, engine) it was printed for; None
    when it does. `options` are the ones the finding was found with (validate's or inspect's), or convert's --to."""
    code, err = run_hint(command, path, str(path), out)
    words = shlex.split(command)[1:]
    if printed_by == "convert" and words[0] != "inspect":  # convert's own command, changed: its refusal is gone
        return f"the command still refuses: {err.strip()[:300]}" if f"[{hint_for[0]}]" in err else None
    if code != 0:
        return f"the command fails: {err.strip()[:300]}"
    if words[0] == "inspect":  # a hint to look: nothing to re-check
        return None
    written = out / Path(words[-1]).name
    named = [e for flag, e in zip(words, words[1:]) if flag == "--engine"]
    options, checker = without_from(options), printed_by
    if named:  # written for an engine (at a release): checked for it, as the command names it (inspect has no
        # --engine: its findings are validate's)
        options, checker = without_engines(options) + [a for e in named for a in ("--engine", e)], "validate"
    rechecked = [f for f in findings(checker, written, options) if f["severity"] == "error"]
    if all(e.split("==")[0] == hint_for[1] for e in named):  # the same engine: the finding itself must be gone
        rechecked = [f for f in rechecked if (f["code"], f["engine"]) == hint_for]
    return f"what it wrote still shows {rechecked[0]['message']}" if rechecked else None


def without(flag: str, options: list[str]) -> list[str]:
    """`options` without `flag` and its values."""
    out, skip = [], False
    for word in options:
        if skip or word == flag:
            skip = word == flag
            continue
        out.append(word)
    return out


def without_from(options: list[str]) -> list[str]:
    """The options a finding was found with, for the file a hint wrote: that file is in the layout the hint named."""
    return without("--from", options)


def without_engines(options: list[str]) -> list[str]:
    return without("--engine", options)


def test_every_hint_over_the_corpus_removes_its_finding(tmp_path: Path):
    runs, loops, seen = 0, [], set()
    for path in corpus(tmp_path / "corpus"):
        printed: list[tuple[str, list[str], tuple[str, str | None], str]] = []
        for options in ([], fleet()):
            printed += [("validate", options, (f["code"], f["engine"]), f["hint"])
                        for f in findings("validate", path, options) if f["hint"]]
        printed += [("inspect", [], (f["code"], f["engine"]), f["hint"])
                    for f in findings("inspect", path, []) if f["hint"]]
        for to in WRITTEN:
            error = refusal(path, to, tmp_path / "refused")
            if error and error["hint"]:
                printed.append(("convert", [to], (error["code"], None), error["hint"]))
        for printed_by, options, hint_for, hint in printed:
            for command in COMMAND.findall(hint):
                key = (path.name, printed_by, hint_for, without_paths(command, str(path)), tuple(options))
                if key in seen:
                    continue
                seen.add(key)
                runs += 1
                out = tmp_path / f"run{runs}"
                why = unfixed(hint_for, command, path, options, out, printed_by)
                shutil.rmtree(out, ignore_errors=True)
                if why:
                    loops.append(f"{path.name}: {printed_by} {' '.join(options[:2])}… {hint_for}: `{command}`: {why}")
    print(f"{runs} hint commands run", file=sys.stderr)
    assert loops == []
    assert runs > 100  # 119 at the time of writing: a hint that stops naming its command shows here
