"""The documentation: README.md is the front door, docs/ the reference, built as a site by MkDocs (mkdocs.yml).

Checked here (issue 34 item 6):
- every page builds with `mkdocs build --strict`, which fails on a page left out of the nav and on a broken link or
  anchor (mkdocs.yml's `validation`); a broken link and a broken anchor planted in a copy make it fail;
- every relative link in README.md names a file of the repository, and its anchor a heading of that file;
- README's "Set up" shows exactly the two commands .ci/run runs, each in a block of its own; its table of the four
  target options names, for each, commands that take it;
- every command the docs show on the shipped files runs as shown. The convention (docs/index.md, "Commands that run
  as shown"): a `bash` block that names a path under examples/, tests/data/ or build/ is runnable (but for
  docs/architecture.md's sketches of a layout and an engine not written yet). Its `eagle3-convert` commands run
  with the real CLI, in order, page by page, in a temporary directory holding a copy of the files named, with a
  registry of their own and no network; each must exit 0 (1 where a line it is shown printing starts with FAIL or
  error:) and print every `# ` line shown under it; `export` sets a variable for the page's later commands.
  `pip install` is not run (the test extra installed it); commands that need the Hub (publish without --dry-run,
  registry sync, search --hub) are skipped and counted.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, run_cli

DOCS = REPO / "docs"
README = REPO / "README.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
RUNNABLE = re.compile(r"(?<![\w./-])(?:examples|tests/data|build)/[\w.-]+")
# A contributor's sketches: a layout and an engine not written yet (`--to mylayout`), output under /tmp.
SKETCHES = {"docs/architecture.md"}

# Commands each page runs as shown, and Hub commands it shows but the test skips. A page that gains or loses a
# runnable example changes these on purpose: a convention that silently stopped matching would run nothing.
RUNS = {"README.md": (9, 1), "docs/engines.md": (2, 0), "docs/validate.md": (7, 0)}


# ------------------------------------------------------------------------------------------------ reading pages

def code_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(info string, lines) of every fenced code block, in order."""
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
                blocks.append((line[3:].strip(), current))
            else:
                current = None
        elif current is not None:
            current.append(line)
    return blocks


@dataclass
class Step:
    words: list[str]
    line: str
    shown: list[str] = field(default_factory=list)


def runnable_steps(text: str) -> list[list[Step]]:
    """The runnable bash blocks of a page: each a list of commands (an `a && b` line is two) with the lines shown
    under them."""
    blocks = []
    for info, lines in code_blocks(text):
        if info != "bash":
            continue
        joined: list[str] = []
        for line in lines:  # a trailing backslash continues the command
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + line.strip()
            else:
                joined.append(line)
        commands = [line for line in joined if line.strip() and not line.startswith("#")]
        if not any(RUNNABLE.search(line.split(" #", 1)[0]) for line in commands):
            continue
        steps: list[Step] = []
        for line in joined:
            if not line.strip():
                continue
            if line.startswith("#"):
                assert steps, f"an output line before any command: {line!r}"
                steps[-1].shown.append(line[1:].strip())
                continue
            words = shlex.split(line, comments=True)
            while "&&" in words:
                cut = words.index("&&")
                steps.append(Step(words[:cut], line))
                words = words[cut + 1:]
            steps.append(Step(words, line))
        blocks.append(steps)
    return blocks


def needs_the_hub(words: list[str]) -> bool:
    return ((words[1] == "publish" and "--dry-run" not in words) or words[1:3] == ["registry", "sync"]
            or (words[1] == "search" and "--hub" in words))


def squeeze(line: str) -> str:
    return " ".join(line.split())


def name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


# ------------------------------------------------------------------------------------------------ the site

def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=300)


def test_every_page_builds_with_no_broken_link(tmp_path: Path):
    built = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    for page in DOCS.glob("*.md"):  # every page is in the site (and in the nav: strict fails on an omitted one)
        html = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert (tmp_path / "site" / html).is_file(), page


@pytest.mark.parametrize("plant, said", [
    ("[a page that is not there](nowhere.md)", "nowhere.md"),
    ("[a heading that is not there](formats.md#no-such-section)", "no-such-section"),
], ids=["link", "anchor"])
def test_a_broken_link_fails_the_build(tmp_path: Path, plant: str, said: str):
    """The strict build is a real check: the same site with one broken link or anchor does not build."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copyfile(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "convert.md"
    page.write_text(page.read_text() + f"\nSee {plant}.\n")
    built = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0 and said in built.stderr, built.stderr


# ------------------------------------------------------------------------------------------------ the README

def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading (what a link to README.md or docs/*.md#... on GitHub needs)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    inside = False
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            found.add(github_anchor(line.lstrip("#")))
    return found


def test_every_readme_link_resolves():
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    relative = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(relative) >= 15, relative  # the front door links the reference
    for link in relative:
        path, _, anchor = link.partition("#")
        target = (REPO / path) if path else README
        assert target.is_file(), f"README.md links {link}: no such file"
        if anchor:
            assert anchor in anchors(target), f"README.md links {link}: {path} has no heading with that anchor"


def test_the_readme_sets_up_with_exactly_the_two_commands_ci_runs():
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("pip install")]
    assert len(ci) == 2, ci
    section = README.read_text().split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    assert [lines for _, lines in code_blocks(section)] == [[ci[0]], [ci[1]]]


def test_the_readme_says_what_each_target_option_is_for():
    """One row each; every command the row says takes the option does take it (`--help` lists it)."""
    section = README.read_text().split("\n## Which target option to pass\n", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `--")]
    assert [row[0] for row in rows] == ["`--verifier`", "`--target`", "`--target-model`", "`--target-gguf`"]
    for option, passed, purpose, taken_by in rows:
        flag = option.strip("`")
        assert passed and purpose, option
        commands = re.findall(r"`([^`]+)`", taken_by)
        assert commands, option
        for command in commands:  # `--to gguf` is the root's shorthand for `convert --to gguf`
            words = command.split()
            argv = words[:next((i for i, w in enumerate(words) if w.startswith("-")), len(words))] or ["convert"]
            out = run_cli(*argv, "--help").stdout
            assert re.search(rf"(?m)^\s+{re.escape(flag)}\b", out), (flag, command)


def test_the_readme_repeats_no_reference_paragraph():
    """Every fact once: no sentence line of the README's prose is also in a docs page (the README links)."""
    docs = "\n".join(page.read_text() for page in DOCS.glob("*.md"))
    inside = False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside and len(line) > 60 and not line.startswith(("|", "#", "- ")):
            assert line not in docs, f"README.md and docs/ both say: {line}"


# ------------------------------------------------------------------------------------------------ the commands

def test_the_runnable_pages_are_the_ones_counted():
    found = {name(page) for page in PAGES if runnable_steps(page.read_text())}
    assert found - SKETCHES == set(RUNS), found


@pytest.mark.parametrize("page", sorted(RUNS))
def test_every_command_runs_as_shown(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    blocks = runnable_steps((REPO / page).read_text())
    named = {m.group(0) for steps in blocks for step in steps for m in RUNNABLE.finditer(" ".join(step.words))}
    for path in sorted(named):
        if path.startswith("build/"):  # written by an earlier command
            continue
        if path.startswith("examples/"):
            path = "examples"
        if not (tmp_path / path).exists():
            assert (REPO / path).exists(), f"{page} names {path}, which the repository does not hold"
            copy = shutil.copytree if (REPO / path).is_dir() else shutil.copyfile
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            copy(REPO / path, tmp_path / path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    ran = skipped = 0
    for steps in blocks:
        for step in steps:
            words = step.words
            if words[:2] == ["pip", "install"]:
                assert not step.shown, step.line
                continue
            if words[0] == "cp":
                shutil.copyfile(words[1], words[2])
                continue
            if words[0] == "export":  # for the commands after it on the page
                assert not step.shown and len(words) == 2, step.line
                monkeypatch.setenv(*words[1].split("=", 1))
                continue
            assert words[0] == "eagle3-convert", f"{page}: `{step.line}` is no command the docs test can run"
            if needs_the_hub(words):
                assert not step.shown, f"{page}: `{step.line}` is not run here, so it cannot show output"
                skipped += 1
                continue
            result = run_cli(*words[1:])
            printed = {squeeze(line) for line in (result.stdout + "\n" + result.stderr).splitlines()}
            missing = [line for line in step.shown if squeeze(line) not in printed]
            assert not missing, f"{page}: `{step.line}` did not print {missing}:\n{result.stdout}{result.stderr}"
            expected = 1 if any(line.startswith(("FAIL", "error:")) for line in step.shown) else 0
            assert result.exit_code == expected, f"{page}: `{step.line}`:\n{result.stdout}{result.stderr}"
            ran += 1
    assert (ran, skipped) == RUNS[page], f"{page}: {ran} commands run, {skipped} Hub commands skipped"
