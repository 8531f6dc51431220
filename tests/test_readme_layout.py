"""README.md's "Layout of the code" names the tree as it is: every path the block names exists, and
every Python package, top-level module of python/storlab, Rust source file and module folder under
crates/*/src is named in it. A failure says which line to add, and where.

The block is the first fenced code block under the heading "## Layout of the code". Each line is a
path column, two or more spaces, and a description. The path column holds one path or several
separated by single spaces; a path ending in "/" is a folder, and a line naming one folder alone
opens it: the more indented lines below it are relative to it. Several names on one line share
the folder of the first (`src/run.rs control.rs`). A line whose first word is no path (no "/" and
no file extension) continues the description above it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEADING = "## Layout of the code"
_PATH = re.compile(r"[\w.\-]+(?:/[\w.\-]+)*/?")
_EXTENSIONS = (".py", ".pyi", ".rs", ".sh", ".toml", ".md", ".json")
NAME_COLUMN = 23   # where the descriptions of the block start


@dataclass(frozen=True)
class Named:
    path: str        # relative to the repository; folders end in "/"
    line: int        # line number in README.md
    text: str        # the line as written
    indent: int


def is_path(word: str) -> bool:
    return bool(_PATH.fullmatch(word)) and ("/" in word or word.endswith(_EXTENSIONS))


def layout_block(readme: str) -> tuple[int, list[str]]:
    """The first line number (1-based) and the lines of the fenced block under HEADING."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == HEADING), None)
    assert start is not None, f"README.md has no heading {HEADING!r}"
    fence = None
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## "):
            break
        if lines[i].startswith("```"):
            if fence is None:
                fence = i
            else:
                return fence + 2, lines[fence + 1:i]
    raise AssertionError(f"README.md: no fenced code block under {HEADING!r}")


def parse_layout(first_line: int, lines: list[str]) -> list[Named]:
    """Every path the block names, resolved against the folders that enclose it."""
    named: list[Named] = []
    open_folders: list[tuple[int, str]] = []      # (indent, folder) of the enclosing lines
    for n, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        column = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        words = column.split()
        if not is_path(words[0]):
            continue                               # the description of the line above, continued
        bad = [w for w in words if not is_path(w)]
        assert not bad, (f"README.md:{n}: {bad[0]!r} is no path; put two spaces between the paths "
                         f"and the description: {line!r}")
        while open_folders and open_folders[-1][0] >= indent:
            open_folders.pop()
        parent = open_folders[-1][1] if open_folders else ""
        shared = words[0].rpartition("/")[0] + "/" if "/" in words[0].rstrip("/") else ""
        for k, word in enumerate(words):
            path = parent + (word if k == 0 or "/" in word else shared + word)
            named.append(Named(path, n, line, indent))
        if len(words) == 1 and words[0].endswith("/"):
            open_folders.append((indent, parent + words[0]))
    return named


def required_paths(root: Path = REPO) -> list[str]:
    """What the block must name: every package and top-level module of python/storlab, every Rust
    source file and module folder under crates/*/src."""
    pkg = root / "python" / "storlab"
    need = [f"{p.parent.relative_to(root)}/" for p in sorted(pkg.rglob("__init__.py"))
            if "__pycache__" not in p.parts and p.parent != pkg]
    need += [str(p.relative_to(root)) for p in sorted(pkg.iterdir())
             if p.suffix in (".py", ".pyi") and p.name != "__init__.py"]
    for src in sorted(root.glob("crates/*/src")):
        need.append(f"{src.relative_to(root)}/")
        need += [f"{d.relative_to(root)}/" for d in sorted(src.rglob("*")) if d.is_dir()]
        need += [str(f.relative_to(root)) for f in sorted(src.rglob("*.rs"))]
    return need


def line_to_add(missing: str, named: list[Named]) -> str:
    """Where a missing path goes (under the deepest folder the block opens that holds it) and the
    line to write there."""
    folders = [x for x in named if x.path.endswith("/") and missing.startswith(x.path) and x.path != missing]
    home = max(folders, key=lambda x: len(x.path), default=None)
    relative = missing[len(home.path):] if home else missing
    indent = home.indent + 2 if home else 0
    what = "<what it holds, in one line>"
    new = " " * indent + relative + " " * max(2, NAME_COLUMN - indent - len(relative)) + what
    where = f"below README.md:{home.line} ({home.text.strip()!r}, or its last sub-line)" if home else \
        "at the top level of the block"
    return f"{missing} is not named; add {where}:\n{new}"


def _block(readme: Path = REPO / "README.md") -> list[Named]:
    return parse_layout(*layout_block(readme.read_text()))


def test_every_path_the_block_names_exists():
    named = _block()
    assert len(named) > 20, "the layout block came out (nearly) empty: is the parse right?"
    gone = [f"README.md:{x.line}: {x.path} does not exist ({x.text.strip()!r})"
            for x in named if not ((REPO / x.path).is_dir() if x.path.endswith("/") else (REPO / x.path).is_file())]
    assert gone == [], "\n".join(gone)


def test_every_package_and_rust_module_is_named():
    named = _block()
    paths = {x.path for x in named}
    missing = [line_to_add(p, named) for p in required_paths() if p not in paths]
    assert missing == [], "README.md's layout block misses:\n" + "\n".join(missing)


def test_the_parse_reads_folders_groups_and_continuations(tmp_path):
    readme = "\n".join([
        "# x", "", HEADING, "", "text", "", "```",
        "crates/",
        "  core/src/            the engine",
        "    lib.rs             api",
        "    run.rs control.rs  threads",
        "    engine/            backends",
        "      mod.rs null.rs   trait",
        "  core/tests/x.rs      a test",
        "python/storlab/        the package",
        "  errors.py units.py   foundations, described",
        "                       over two lines (units.py here is text)",
        "  jobs/                tables",
        "    fio/               fio",
        "scripts/test.sh        tests",
        "```", "", "## Next", "```", "not/this.rs  x", "```"])
    named = parse_layout(*layout_block(readme))
    assert [x.path for x in named] == [
        "crates/", "crates/core/src/", "crates/core/src/lib.rs", "crates/core/src/run.rs",
        "crates/core/src/control.rs", "crates/core/src/engine/", "crates/core/src/engine/mod.rs",
        "crates/core/src/engine/null.rs", "crates/core/tests/x.rs", "python/storlab/",
        "python/storlab/errors.py", "python/storlab/units.py", "python/storlab/jobs/",
        "python/storlab/jobs/fio/", "scripts/test.sh"]
    assert named[0].line == 8
    # a new package gets its line under the folder that holds it, with the line to write
    advice = line_to_add("python/storlab/jobs/dlio/", named)
    assert "below README.md:18 ('jobs/                tables'" in advice
    assert advice.endswith("\n    dlio/              <what it holds, in one line>")
    advice = line_to_add("crates/core/src/engine/aio.rs", named)
    assert "below README.md:12" in advice and advice.endswith("\n      aio.rs           <what it holds, in one line>")


def test_a_description_glued_to_the_paths_is_named(tmp_path):
    readme = "\n".join([HEADING, "```", "python/storlab/ the package", "```"])
    try:
        parse_layout(*layout_block(readme))
    except AssertionError as e:
        assert "'the' is no path; put two spaces" in str(e)
    else:
        raise AssertionError("a line without two spaces before its description was accepted")


def test_required_paths_see_packages_modules_and_rust_files(tmp_path):
    (tmp_path / "python" / "storlab" / "jobs" / "fio").mkdir(parents=True)
    for f in ("__init__.py", "errors.py", "_core.pyi", "jobs/__init__.py", "jobs/fio/__init__.py", "jobs/options.py"):
        (tmp_path / "python" / "storlab" / f).write_text("")
    (tmp_path / "crates" / "core" / "src" / "meta").mkdir(parents=True)
    for f in ("lib.rs", "meta/mod.rs"):
        (tmp_path / "crates" / "core" / "src" / f).write_text("")
    assert required_paths(tmp_path) == [
        "python/storlab/jobs/", "python/storlab/jobs/fio/", "python/storlab/_core.pyi",
        "python/storlab/errors.py", "crates/core/src/", "crates/core/src/meta/",
        "crates/core/src/lib.rs", "crates/core/src/meta/mod.rs"]
