"""The docs are true of this repository: what they cite exists, their commands parse, their records are built.

- Every repository path README.md and docs/*.md cite (in backticks or as a Markdown link) exists, and
  no doc cites a folder outside a clone (`../shared`) or a machine's own path (`/work/...`).
- Every `mmfaith ...` command in a fenced bash block parses against the real CLI parser (argparse,
  nothing is run); an abridged command (with `...`) must at least name options its verb has.
- Every JSON record a doc shows is a record of a real build: filled in from the build's record of
  the same id where the doc abridges it (`"...": "..."`), it validates against its schema, and every
  value the doc shows is the build's.
- The README's cheap examples run: `mmfaith families`, and the MCoT block (build, serve the
  zoom-oracle, run, score), whose printed score line must match the one the README shows.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from mmfaith.cli import parser
from mmfaith.schema import schema_errors

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOP = ("docs", "schemas", "mmfaith", "tests", "tools", "benchmarks", "builders", "evaluators", "loaders", "annotation",
       "cards", ".ci")
CITED = re.compile(r"`((?:%s)/[^`\s]*)`|\]\(([^)#\s]+)(?:#[^)]*)?\)" % "|".join(re.escape(t) for t in TOP))
MACHINE_PATH = re.compile(r"\.\./shared|(?<![\w.])/(?:work|home|Users|root)/")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SHELL_OPERATORS = {"&&", "||", ";", "|", "&"}
SCHEMA_OF_ID = {"spdf-": "spd_faith_pair"}


def _blocks(language: str) -> list[tuple[Path, str]]:
    return [(doc, m.group(2)) for doc in DOCS for m in FENCE.finditer(doc.read_text(encoding="utf-8"))
            if m.group(1) == language]


def _commands(block: str) -> list[list[str]]:
    """The `mmfaith ...` commands of a bash block: continuations joined, comments dropped, split at operators,
    environment assignments before the command dropped."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words: list[str] = []
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split, lexer.commenters = True, "#"
        for word in [*lexer, ";"]:
            if word in SHELL_OPERATORS:
                while words and re.match(r"^[A-Z_]+=", words[0]):
                    words.pop(0)
                if words[:1] == ["mmfaith"]:
                    commands.append(words[1:])
                words = []
            else:
                words.append(word)
    return commands


def _exists(base: Path, cited: str) -> bool:
    """A cited file or folder, `file.py::name` or `file.py:name` (a test or function), or `module.name` (a
    module's function, the file being module.py), where the name is defined in the file."""
    path, *name = re.split(r"::|:", cited, maxsplit=1)
    target = base / path.rstrip("/")
    if not name and not target.exists() and "." in target.name:
        target, name = target.with_name(target.name.split(".")[0]), [target.name.split(".", 1)[1]]
    if not target.exists() and target.with_suffix(".py").is_file():
        target = target.with_suffix(".py")
    if not name:
        return target.exists()
    return target.is_file() and re.search(rf"^\s*(?:def|class) {re.escape(name[0])}\b|^{re.escape(name[0])} =",
                                          target.read_text(encoding="utf-8"), re.M) is not None


def test_every_cited_path_exists_and_none_is_a_machine_path() -> None:
    missing, foreign = [], []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        foreign += [f"{doc.name}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
        for match in CITED.finditer(text):
            cited = match.group(1) or match.group(2)
            if cited.startswith(("http://", "https://", "mailto:")) or any(c in cited for c in "*<>{}$"):
                continue
            base = REPO if match.group(1) else doc.parent
            if not _exists(base, cited):
                missing.append(f"{doc.relative_to(REPO)}: {cited}")
    assert not foreign, foreign
    assert not missing, missing


def _subparser(words: list[str]) -> Any:
    """The argparse parser of a command's verb (and family or sub-verb)."""
    current = parser()
    for word in words:
        choices = next((a.choices for a in current._actions if a.choices and isinstance(a.choices, dict)), None)
        if not choices or word not in choices:
            break
        current = choices[word]
    current.format_help()  # a family's subcommand adds its options when first used (cli_help.FamilyParser)
    return current


def test_every_fenced_mmfaith_command_parses_against_the_cli() -> None:
    commands = [(doc, words) for doc, block in _blocks("bash") for words in _commands(block)]
    assert len(commands) > 40  # the docs show many; a broken extractor would find few
    wrong = []
    for doc, words in commands:
        if "..." in words or "--help" in words:  # abridged: every option it names must be one of its verb's
            known = _subparser(words)._option_string_actions
            unknown = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in known]
            if unknown:
                wrong.append(f"{doc.name}: mmfaith {' '.join(words)}: unknown {unknown}")
            continue
        try:
            parser().parse_args(words)
        except SystemExit:
            wrong.append(f"{doc.name}: mmfaith {' '.join(words)}")
    assert not wrong, "\n".join(wrong)


def _filled(shown: Any, built: Any, where: str, differences: list[str]) -> Any:
    """`shown` with what it abridges ("...") taken from `built`; every shown value that differs is listed."""
    if isinstance(shown, dict) and isinstance(built, dict):
        keys = [k for k in shown if k != "..."]
        if "..." not in shown and set(keys) != set(built):
            differences.append(f"{where}: the doc shows keys {sorted(keys)}, the build writes {sorted(built)}")
        return {**(built if "..." in shown else {}),
                **{k: _filled(shown[k], built.get(k), f"{where}.{k}", differences) for k in keys}}
    if isinstance(shown, list) and isinstance(built, list) and len(shown) == len(built):
        return [_filled(s, b, f"{where}[{i}]", differences) for i, (s, b) in enumerate(zip(shown, built))]
    if shown != built:
        differences.append(f"{where}: the doc shows {shown!r}, the build writes {built!r}")
    return shown


def test_every_record_a_doc_shows_is_what_the_build_writes(mixed_build: Path) -> None:
    """The README's record is one of the quickstart's build (2 per tier, 4 multi, 2 controls, seed 0: mixed_build)."""
    built = {r["id"]: r for r in map(json.loads, (mixed_build / "records.jsonl").read_text().splitlines())}
    shown = [(doc, json.loads(block)) for doc, block in _blocks("json")]
    assert shown
    for doc, record in shown:
        kind = next(kind for prefix, kind in SCHEMA_OF_ID.items() if record["id"].startswith(prefix))
        assert record["id"] in built, f"{doc.name}: {record['id']} is not a record of the quickstart build"
        differences: list[str] = []
        filled = _filled(record, built[record["id"]], record["id"], differences)
        assert not differences, "\n".join(differences)
        assert schema_errors(kind, filled) == []


def test_the_readme_cheap_examples_run(tmp_path: Path) -> None:
    mmfaith = str(Path(sys.executable).parent / "mmfaith")
    families = subprocess.run([mmfaith, "families"], capture_output=True, text=True, check=True).stdout
    assert all(f"{name}:" in families for name in ("spd-faith", "vfaith", "crm", "mcot"))

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = next(b for _, b in _blocks("bash") if b.startswith("mmfaith build mcot --out out/mcot "))
    shown_score = re.search(r"^# (scored .*?), \.\.\.$", block, re.M).group(1)
    script = block.replace("8021", str(free_port())).replace("&\n", "& sleep 5\n") + "kill %1\n"
    assert "mmfaith build mcot" in readme
    done = subprocess.run(["bash", "-ec", f"export PATH={Path(mmfaith).parent}:$PATH\n{script}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert shown_score in done.stdout, done.stdout
