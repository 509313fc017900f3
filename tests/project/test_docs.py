"""The documentation stays true to the repository.

README.md and docs/*.md are checked against the real things they name: every relative
link reaches a file of this repository (and a heading, when it names one); every shell
command in a fenced shell block runs something that exists (a Makefile target, a
`lakehouse` command line the CLI's own parser accepts, an importable `python -m` module,
a spark-submit script); and the README and the docs pages stay within their size
budgets. Fast: nothing is run, no Spark session starts, no dbt command runs.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = (README, *sorted((REPO / "docs").glob("*.md")))
README_MAX_BYTES = 15 * 1024
# Issue 48 item 5: the pages a newcomer reads stay readable; repetition is cut, not facts.
DOCS_PAGES_MAX_BYTES = 150_000
PERFORMANCE_PAGE = REPO / "docs" / "performance.md"
PERFORMANCE_PAGE_MAX_BYTES = 20_000

# Fenced blocks whose lines are shell commands; other fences (trees, SQL, YAML) are not.
SHELL_FENCES = frozenset({"bash", "sh", "shell", "console", "zsh"})

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_PLACEHOLDER = re.compile(r"<[^<>\n]+>")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(3(\.\d+)*)?$")
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;"})
# spark-submit options that take no value.
_SPARK_SUBMIT_FLAGS = frozenset({"--verbose", "-v", "--supervise", "--help", "-h", "--version"})
_MAKE_TARGET = re.compile(r"^([A-Za-z0-9][^:=#\s$]*(?:[ \t]+[^:=#\s$]+)*)[ \t]*::?(?!=)")


@dataclass(frozen=True)
class Command:
    doc: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def _blank(match: re.Match[str]) -> str:
    """The match replaced by spaces, newlines kept: offsets and line numbers stay right."""
    return re.sub(r"[^\n]", " ", match.group(0))


def _fenced(text: str) -> Iterator[tuple[int, str, bool, str | None]]:
    """Each line as (number, line, inside a fence, the fence's language for a line of its
    content); the fence markers count as inside, with no language."""
    fence: str | None = None  # the closing marker of the fence we are in
    language = ""
    for number, line in enumerate(text.split("\n"), start=1):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence, language = opening.group(1)[0] * 3, opening.group(2).lower()
            yield number, line, True, None
        elif fence is not None and line.strip().startswith(fence):
            fence = None
            yield number, line, True, None
        else:
            yield number, line, fence is not None, language if fence is not None else None


def _outside_fences(text: str) -> str:
    """The text with its fenced blocks emptied (their lines kept, blank)."""
    return "\n".join("" if fenced else line for _, line, fenced, _ in _fenced(text))


def _prose(text: str) -> str:
    """The text with fenced blocks and inline code blanked out."""
    return _INLINE_CODE.sub(_blank, _outside_fences(text))


def shell_commands(doc: Path, text: str | None = None) -> Iterator[Command]:
    """Each logical line (backslash continuations joined) of the doc's shell fences."""
    pending: list[str] = []
    start = 0
    text = doc.read_text(encoding="utf-8") if text is None else text
    for number, line, _, language in _fenced(text):
        if language not in SHELL_FENCES:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        command = " ".join(part.strip() for part in pending).strip()
        pending = []
        if command.startswith("$ "):
            command = command[2:]
        if command and not command.startswith("#"):
            yield Command(doc, start, command)


def _strip_comment(text: str) -> str:
    """Cut a shell comment: `#` at the start of a word, outside quotes."""
    quote: str | None = None
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index]
    return text


def simple_commands(text: str) -> list[list[str]]:
    """The words of each simple command in a line, placeholders (`<bucket>`) made concrete
    and leading `NAME=value` assignments dropped."""
    concrete = _PLACEHOLDER.sub("placeholder", _strip_comment(text))
    lexer = shlex.shlex(concrete, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in _OPERATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    for words in commands:
        while words and _ASSIGNMENT.match(words[0]):
            words.pop(0)
    return [words for words in commands if words]


def makefile_targets() -> set[str]:
    targets: set[str] = set()
    for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines():
        match = _MAKE_TARGET.match(line)
        if match:
            targets.update(match.group(1).split())
    return targets


def _cli_parse_error(arguments: list[str]) -> str | None:
    """What the real `lakehouse` parser says about these arguments; None when it accepts them."""
    from streaming.cli import build_parser

    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(arguments)
    except SystemExit as exc:
        if exc.code not in (0, None):  # 0: --help
            message = errors.getvalue().strip()
            return message.splitlines()[-1] if message else f"exit {exc.code}"
    return None


def _spark_submit_script(arguments: list[str]) -> str | None:
    words = iter(arguments)
    for word in words:
        if word.startswith("-"):
            if word not in _SPARK_SUBMIT_FLAGS and "=" not in word:
                next(words, None)
            continue
        return word
    return None


def command_problems(command: Command, targets: set[str]) -> list[str]:
    """Why the command does not match the repository; empty when it does."""
    problems = []
    for words in simple_commands(command.text):
        program, arguments = os.path.basename(words[0]), words[1:]
        if program == "make":
            for target in (word for word in arguments if not word.startswith("-") and "=" not in word):
                if target not in targets:
                    problems.append(f"`make {target}`: the Makefile has no target {target!r}")
        elif program == "lakehouse":
            error = _cli_parse_error(arguments)
            if error is not None:
                problems.append(f"`lakehouse {' '.join(arguments)}`: the CLI parser refuses it: {error}")
        elif _PYTHON.match(program) and arguments[:1] == ["-m"]:
            module = arguments[1] if len(arguments) > 1 else ""
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                problems.append(f"`python -m {module}`: no importable module {module!r}")
        elif program == "spark-submit":
            script = _spark_submit_script(arguments)
            if script is not None and not (REPO / script).is_file():
                problems.append(f"`spark-submit ... {script}`: no file {script} in the repository")
    return problems


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings, `-1`, `-2`... added to repeated ones as GitHub does."""
    found: set[str] = set()
    for line in _outside_fences(text).split("\n"):
        match = _HEADING.match(line)
        if match:
            slug = anchor = _slug(match.group(1))
            number = 0
            while anchor in found:
                number += 1
                anchor = f"{slug}-{number}"
            found.add(anchor)
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link and image of a page, in order; links inside inline
    code or fenced blocks are examples, not links."""
    prose = _prose(text)
    found = sorted([*_LINK.finditer(prose), *_REFERENCE_LINK.finditer(prose)], key=lambda match: match.start(1))
    return [(prose.count("\n", 0, match.start(1)) + 1, match.group(1)) for match in found]


def link_problems(doc: Path, text: str | None = None) -> list[str]:
    """Relative links that do not reach a file of this repository (or a heading in it)."""
    text = doc.read_text(encoding="utf-8") if text is None else text
    problems = []
    for line, target in links(text):
        where = f"{doc.relative_to(REPO)}:{line}: link {target!r}"
        if _SCHEME.match(target) or target.startswith("//"):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (doc.parent / path_part).resolve() if path_part else doc
        if not resolved.is_relative_to(REPO):
            problems.append(f"{where} leaves the repository (a fresh clone has no {resolved})")
        elif path_part and not resolved.exists():
            problems.append(f"{where} points to {resolved.relative_to(REPO)}, which does not exist")
        elif anchor and resolved.suffix == ".md":
            page = text if not path_part else resolved.read_text(encoding="utf-8")
            if anchor not in anchors(page):
                problems.append(f"{where}: {resolved.relative_to(REPO)} has no heading with anchor #{anchor}")
    return problems


def _doc_id(doc: Path) -> str:
    return str(doc.relative_to(REPO))


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_relative_links_reach_files_of_the_repository(doc: Path) -> None:
    problems = link_problems(doc)
    assert not problems, "broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_shell_commands_in_the_docs_exist(doc: Path) -> None:
    targets = makefile_targets()
    problems = [f"{command.where()}: {problem}"
                for command in shell_commands(doc) for problem in command_problems(command, targets)]
    assert not problems, "commands that do not match the repository:\n" + "\n".join(problems)


def test_readme_stays_short() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, (
        f"README.md: {size:,} bytes, more than {README_MAX_BYTES:,}; move detail into a page under docs/ and link it"
    )


def docs_budget_problems(sizes: dict[str, int]) -> list[str]:
    """What breaks the size budgets of the docs pages (name -> bytes, `docs/<page>.md`)."""
    problems = []
    total = sum(sizes.values())
    if total > DOCS_PAGES_MAX_BYTES:
        largest = sorted(sizes.items(), key=lambda item: item[1], reverse=True)[:4]
        problems.append(
            f"docs/*.md: {total:,} bytes together, more than {DOCS_PAGES_MAX_BYTES:,}; the largest pages: "
            + ", ".join(f"{name} {size:,}" for name, size in largest)
            + "; cut repetition (link the page that owns the topic), not facts")
    performance = sizes.get(str(PERFORMANCE_PAGE.relative_to(REPO)), 0)
    if performance > PERFORMANCE_PAGE_MAX_BYTES:
        problems.append(f"docs/performance.md: {performance:,} bytes, more than {PERFORMANCE_PAGE_MAX_BYTES:,}; "
                        "dated runs go to docs/performance-history.md")
    return problems


def test_the_docs_pages_stay_within_their_size_budget() -> None:
    sizes = {_doc_id(doc): doc.stat().st_size for doc in DOCS[1:]}
    assert str(PERFORMANCE_PAGE.relative_to(REPO)) in sizes
    problems = docs_budget_problems(sizes)
    assert not problems, "\n".join(problems)


def test_the_budget_check_names_the_largest_pages() -> None:
    within = {"docs/performance.md": 20_000, "docs/a.md": 130_000}
    assert docs_budget_problems(within) == []

    over = {"docs/performance.md": 20_001, "docs/a.md": 90_000, "docs/b.md": 40_000, "docs/c.md": 5}
    total, performance = docs_budget_problems(over)
    assert total.startswith("docs/*.md: 150,006 bytes together, more than 150,000; the largest pages: "
                            "docs/a.md 90,000, docs/b.md 40,000, docs/performance.md 20,001, docs/c.md 5;")
    assert performance.startswith("docs/performance.md: 20,001 bytes, more than 20,000;")


def test_the_readme_links_every_docs_page() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve()
              for _, target in links(README.read_text(encoding="utf-8"))}
    unlinked = [_doc_id(doc) for doc in DOCS[1:] if doc.resolve() not in linked]
    assert not unlinked, f"README.md: no link to {unlinked} (add them to 'Where to read on')"


# The checks themselves, on a page with known faults.

_PROBE = """# Probe

```bash
make test lint                                   # fine
make no-such-target
lakehouse stream --trigger never
python -m streaming.no_such_module
spark-submit --master yarn --conf a=b streaming/gone.py stream
lakehouse dbt build --select <model name> --vars '{a: 1}'   # dbt's arguments pass through
lakehouse reprocess --to <new data root>/raw_v2 \\
  --dry-run
```

```
make not-a-command-in-a-tree-block
```

[fine](architecture.md) [fine](../Makefile) [fine](#probe) `[not a link](nowhere.md)`
[missing](missing.md) [no heading](operations.md#no-such-heading) [outside](../../shared/x.md)
"""


def test_the_checks_find_what_is_wrong() -> None:
    probe = REPO / "docs" / "_probe.md"
    commands = list(shell_commands(probe, _PROBE))
    assert [command.line for command in commands] == [4, 5, 6, 7, 8, 9, 10]
    assert commands[-1].text == "lakehouse reprocess --to <new data root>/raw_v2 --dry-run"
    assert commands[0].where() == "docs/_probe.md:4"

    targets = makefile_targets()
    problems = {command.line: command_problems(command, targets) for command in commands}
    assert problems[4] == [] and problems[9] == [] and problems[10] == []
    assert problems[5] == ["`make no-such-target`: the Makefile has no target 'no-such-target'"]
    (refused,) = problems[6]
    assert refused.startswith("`lakehouse stream --trigger never`: the CLI parser refuses it: ")
    assert "invalid choice" in refused
    assert problems[7] == ["`python -m streaming.no_such_module`: no importable module 'streaming.no_such_module'"]
    assert problems[8] == ["`spark-submit ... streaming/gone.py`: no file streaming/gone.py in the repository"]

    links = link_problems(probe, _PROBE)
    assert len(links) == 3, links
    assert links[0].startswith("docs/_probe.md:19: link 'missing.md' points to docs/missing.md")
    assert links[1].startswith("docs/_probe.md:19: link 'operations.md#no-such-heading': docs/operations.md has no")
    assert links[2].startswith("docs/_probe.md:19: link '../../shared/x.md' leaves the repository")


def test_anchors_follow_github() -> None:
    page = "# The `lakehouse` command\n## Reprocessing (for example, after a fix)\n## Tests\n## Tests\n"
    assert anchors(page) == {"the-lakehouse-command", "reprocessing-for-example-after-a-fix", "tests", "tests-1"}
