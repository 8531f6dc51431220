"""The package layout of python/storlab holds (docs/architecture.md, "Layers"): lower layers never
import higher ones, no file imports itself back through others, and no module uses another
module's private (`_name`) names. Read from the source with `ast`, function-level imports included,
so a new upward or private import fails here instead of in a review."""
from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "python" / "storlab"

# Lowest first. A module may import its own package and any package of a lower layer, nothing else.
# Foundations import nothing of storlab but the package itself (its version), the extension and
# the error classes. The order is the pipeline's: options and job files, then measurement (which
# uses the model for its predictions), then the store, then output, then the CLI.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"_core"}),                       # the engine (Rust)
    frozenset({"storlab"}),                     # the package itself: its version, from the engine
    frozenset({"errors"}),
    frozenset({"units", "signals", "document", "schemas"}),
    frozenset({"devices"}),
    frozenset({"jobs"}),                        # option tables and job files
    frozenset({"model"}),                       # the stack model
    frozenset({"measure", "planner", "doctor"}),  # measurement; layouts; the host's stack
    frozenset({"measure.mpi"}),                 # the MPI orchestrator over measure's benchmarks
    frozenset({"suites"}),                      # io500, training, replay: workloads over the benchmarks
    frozenset({"diagnose"}),                    # layer-by-layer probes: measure + doctor + model
    frozenset({"store"}),                       # the results store (keeps documents)
    frozenset({"output"}),                      # exporters, renderers, reports (read documents)
    frozenset({"cli"}),
    frozenset({"__main__"}),                    # python -m storlab
)
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

# Modules inside measure/, lowest first: the benchmark protocol below both kinds, the kinds below
# what drives them. (measure/mpi/ is a layer of its own above.)
MEASURE_ORDER = (
    {"launch", "stats", "cpu", "cache", "checks", "passes", "environment", "aggregate", "prediction", "opmix",
     "steady", "ranks", "scratch"},
    {"benchmark", "net"},          # net: the fabric probe (storlab net), on the rank interface
    {"meta"},
    {"runner"},
    {"sweep"},
)

# Private names still imported across modules, each with the change that removes it; the test
# fails when a new one appears, or when one listed here is gone (shrink this set, never grow it).
# Empty: the last two (cli/sweep.py and cli/scale.py using cli/run.py's JSON writer) now use
# output/json.py:write_json.
KNOWN_PRIVATE: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT.parent / rel).with_suffix(".py").exists() or (ROOT.parent / rel / "__init__.py").exists() \
        or name == "storlab._core"


def _import_source(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a `from X import ...` reads from, relative levels resolved."""
    if node.level:
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _imports() -> dict[str, list[tuple[str, str | None, int]]]:
    """module -> [(imported module, imported name or None, line)] for every storlab import."""
    out: dict[str, list[tuple[str, str | None, int]]] = collections.defaultdict(list)
    for path in ROOT.rglob("*.py"):
        mod = _module_name(path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                source = _import_source(node, package)
                if not source.startswith("storlab"):
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if _is_module(sub):
                        out[mod].append((sub, None, node.lineno))
                    else:
                        out[mod].append((source, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                out[mod].extend((a.name, None, node.lineno) for a in node.names if a.name.startswith("storlab"))
    return out


def _package(mod: str) -> str:
    parts = mod.split(".")
    if parts[1:3] == ["measure", "mpi"]:
        return "measure.mpi"
    return parts[1] if len(parts) > 1 else "storlab"


def test_every_package_has_a_layer():
    packages = {_package(m) for m in _imports()} | {_package(_module_name(p)) for p in ROOT.rglob("*.py")}
    assert packages <= set(RANK), f"give these a layer in LAYERS: {sorted(packages - set(RANK))}"


def test_lower_layers_never_import_higher_ones():
    upward = []
    for mod, imports in _imports().items():
        for target, _name, line in imports:
            a, b = _package(mod), _package(target)
            if a != b and RANK[b] >= RANK[a]:
                upward.append(f"{mod}:{line} imports {target} ({a} may import only layers below it)")
    assert upward == []


def test_measure_modules_keep_their_order():
    level = {name: i for i, names in enumerate(MEASURE_ORDER) for name in names}
    files = {p.stem for p in (ROOT / "measure").glob("*.py")} - {"__init__"}
    assert files <= set(level), f"give these a place in MEASURE_ORDER: {sorted(files - set(level))}"
    upward = []
    for mod, imports in _imports().items():
        if _package(mod) != "measure" or mod == "storlab.measure":
            continue
        for target, _name, line in imports:
            if _package(target) == "measure" and target != "storlab.measure":
                a, b = mod.rsplit(".", 1)[1], target.rsplit(".", 1)[1]
                if a != b and level[b] >= level[a] and not (level[b] == level[a] == 0):
                    upward.append(f"{mod}:{line} imports {target}")
    assert upward == []


def test_no_module_imports_itself_back():
    graph = {m: {t for t, _n, _l in imps if t != m} for m, imps in _imports().items()}
    seen: dict[str, int] = {}   # 1: on the current path, 2: done
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for t in sorted(graph.get(m, ())):
            if seen.get(t) == 1:
                cycles.append(path[path.index(t):] + [t] if t in path else [m, t])
            elif t not in seen:
                visit(t, path + [t])
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [m])
    # a package's __init__ importing its own modules is not a cycle of the layout
    real = [c for c in cycles if not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert real == []


def _private_uses() -> set[tuple[str, str]]:
    """(module, other module's private name) for `from X import _name` and `X._name`."""
    found = set()
    for path in ROOT.rglob("*.py"):
        mod = _module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}   # local name -> storlab module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
                source = _import_source(node, package)
                if not source.startswith("storlab"):
                    continue
                for a in node.names:
                    sub = f"{source}.{a.name}"
                    if _is_module(sub):
                        aliases[a.asname or a.name] = sub
                    elif a.name.startswith("_") and not a.name.startswith("__") and source != mod:
                        found.add((mod, f"{source}.{a.name}"))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("storlab"):
                        aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name or "storlab"
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__") and aliases[node.value.id] != "storlab._core"):
                found.add((mod, f"{aliases[node.value.id]}.{node.attr}"))
    return found


def test_no_module_uses_another_modules_private_names():
    found = _private_uses()
    assert found - KNOWN_PRIVATE == set(), "make these public (or move them to the module that uses them)"
    assert KNOWN_PRIVATE - found == set(), "these are gone: remove them from KNOWN_PRIVATE"


def test_the_private_name_check_sees_both_forms(tmp_path, monkeypatch):
    # the check itself must find `from .x import _y` and `x._y(...)`; a check that finds nothing
    # would pass every tree
    pkg = tmp_path / "storlab"
    (pkg / "a").mkdir(parents=True)
    for f in ("__init__.py", "a/__init__.py", "a/x.py"):
        (pkg / f).write_text("")
    (pkg / "a" / "y.py").write_text("from .x import _helper\nfrom . import x\nx._other()\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    assert _private_uses() == {("storlab.a.y", "storlab.a.x._helper"), ("storlab.a.y", "storlab.a.x._other")}


# -- MPI: one rank interface (issue 33) ----------------------------------------------------------
# The only modules that load mpi4py: the rank interface's MPI side. Everything else reaches the
# other ranks through measure/ranks.py's `Ranks`, or the session built on these two.
MPI4PY_MODULES = frozenset({"storlab.measure.mpi.comm", "storlab.measure.mpi.ranks"})


def _mpi4py_imports() -> list[str]:
    """module:line of every `import mpi4py...` and `from mpi4py... import`, function-level ones too."""
    found = []
    for path in ROOT.rglob("*.py"):
        mod = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(n == "mpi4py" or n.startswith("mpi4py.") for n in names):
                found.append(f"{mod}:{node.lineno}")
    return sorted(found)


def test_no_module_outside_the_rank_interface_imports_mpi4py():
    outside = [m for m in _mpi4py_imports() if m.rsplit(":", 1)[0] not in MPI4PY_MODULES]
    assert outside == [], "reach MPI through measure/ranks.py (Ranks) or measure/mpi/comm.py"


def test_the_mpi4py_check_sees_every_form(tmp_path, monkeypatch):
    # a check that finds nothing would pass every tree
    pkg = tmp_path / "storlab"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("import mpi4py\n")
    (pkg / "a" / "x.py").write_text("def f():\n    from mpi4py import MPI\n    import mpi4py.futures as fu\n"
                                    "from .mpi4py_notes import y\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    assert set(_mpi4py_imports()) == {"storlab.a:1", "storlab.a.x:2", "storlab.a.x:3"}


# -- Rust: no cycle between the modules (files) of a crate ---------------------------------------
CRATES = ROOT.parent.parent / "crates"
_TEST_ONLY_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")
# string literals (raw ones too), character literals and comments, in the order they appear
_LITERAL = re.compile(r'r(#*)"[\s\S]*?"\1|"(?:\\[\s\S]|[^"\\])*"|\'(?:\\[^\']+|[^\'\\])\'|//[^\n]*|/\*[\s\S]*?\*/')
_USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
_PATH = re.compile(r"\b(?:crate|super|self)(?:::\w+)+")


def _rust_code(text: str) -> tuple[str, set[str]]:
    """The code of a Rust file without comments, string literals and inline `#[cfg(test)]`
    modules (test code may use any module), and the names of its test-only `mod x;` files."""
    text = _LITERAL.sub(lambda m: "" if m.group(0).startswith("/") else '""', text)
    test_files = set()
    while m := _TEST_ONLY_MOD.search(text):
        if m.group(2) == ";":
            test_files.add(m.group(1))
            text = text[:m.start()] + text[m.end():]
            continue
        depth, end = 0, m.end() - 1
        for end in range(m.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        text = text[:m.start()] + text[end + 1:]
    return text, test_files


def _use_paths(tree: str, prefix: str = "") -> list[tuple[str, str]]:
    """`a::{b, c::{d as e}}` -> [(path, name it is known by)], braces expanded."""
    tree = " ".join(tree.split())
    if "{" not in tree:
        path, _, alias = tree.partition(" as ")
        path = prefix + path.strip()
        return [(path, alias.strip() or path.rsplit("::", 1)[-1])]
    head, _, body = tree.partition("{")
    body = body[:body.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for part in parts if part.strip() for p in _use_paths(part, prefix + head.strip())]


def _rust_module_graph(src: Path) -> dict[str, set[str]]:
    """file -> files it refers to (`use crate::/super::/self::`, a child module named in a `use`,
    and `crate::x::y` paths in the code), for the crate whose sources are in `src`. A name a module
    re-exports (`pub use`) is followed to the module that defines it; lib.rs and mod.rs are the
    modules of their folder; test-only modules and files are left out."""
    files: dict[tuple[str, ...], Path] = {}
    for f in sorted(src.rglob("*.rs")):
        parts = f.relative_to(src).with_suffix("").parts
        files[parts[:-1] if parts[-1] in ("lib", "main", "mod") else parts] = f
    code: dict[tuple[str, ...], str] = {}
    test_only: set[tuple[str, ...]] = set()
    for mod, f in files.items():
        code[mod], tests = _rust_code(f.read_text())
        test_only |= {mod + (t,) for t in tests}
    for mod in list(files):
        if any(mod[:len(t)] == t for t in test_only):
            del files[mod], code[mod]

    def resolve(mod: tuple[str, ...], path: str) -> tuple[tuple[str, ...], list[str]] | None:
        """The module a path starts in and the segments left after it (None: another crate)."""
        segs = path.split("::")
        if segs[0] == "crate":
            base, segs = (), segs[1:]
        elif segs[0] in ("self", "super"):
            base = mod
            while segs and segs[0] in ("self", "super"):
                base = base[:-1] if segs.pop(0) == "super" else base
        elif mod + (segs[0],) in files:
            base = mod          # a child module named without self:: (2018 paths)
        else:
            return None
        while segs and base + (segs[0],) in files:
            base, segs = base + (segs.pop(0),), segs
        return base, segs

    reexports: dict[tuple[str, ...], dict[str, tuple[str, list[str]]]] = collections.defaultdict(dict)
    for mod, text in code.items():
        for m in _USE.finditer(text):
            if m.group(1):
                for path, name in _use_paths(m.group(2)):
                    if name != "*":
                        reexports[mod][name] = (path, [])

    def target(mod: tuple[str, ...], path: str, seen: int = 0) -> tuple[str, ...] | None:
        found = resolve(mod, path)
        if found is None:
            return None
        base, rest = found
        if rest and rest[0] in reexports.get(base, {}) and seen < 8 and reexports[base][rest[0]][0] != path:
            via = target(base, reexports[base][rest[0]][0], seen + 1)
            return base if via is None else via
        return base

    def name(mod: tuple[str, ...]) -> str:
        return str(files[mod].relative_to(src))

    graph: dict[str, set[str]] = {name(m): set() for m in files}
    for mod, text in code.items():
        paths = [p for m in _USE.finditer(text) for p, _ in _use_paths(m.group(2))]
        paths += _PATH.findall(_USE.sub("", text))
        for p in paths:
            t = target(mod, p)
            if t is not None and t != mod and t in files:
                graph[name(mod)].add(name(t))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _explain(graph: dict[str, set[str]], group: list[str]) -> str:
    return "; ".join(f"{a} uses {', '.join(sorted(graph[a] & set(group)))}" for a in group)


def test_no_rust_module_uses_itself_back():
    found = []
    for src in sorted(CRATES.glob("*/src")):
        graph = _rust_module_graph(src)
        assert len(graph) > 1 and any(graph.values()), f"{src}: the module graph came out empty"
        found += [f"{src.parent.name}: {_explain(graph, g)}" for g in _cycles(graph)]
    assert found == [], "break these cycles (move what both use into a lower module)"


def test_the_rust_module_graph_sees_every_form(tmp_path):
    # the check must see `use crate::`, grouped `use`, `super::`, inline `crate::x::f()`, a child
    # named in mod.rs and a re-export, and leave test modules out; one that sees nothing passes all
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod a;\npub mod b;\npub mod c;\npub mod sub;\npub use b::Thing;\n")
    (src / "a.rs").write_text("use crate::{b::Thing, c};\n// use crate::sub::x;\n"
                              'fn f() { let s = "crate::sub::x::g"; }\n')
    (src / "b.rs").write_text("pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::*;\n}\n")
    (src / "c.rs").write_text("fn g() { crate::sub::x::h(); }\n")
    (src / "sub" / "mod.rs").write_text("pub mod x;\npub use x::h;\n#[cfg(test)]\nmod tests;\n")
    (src / "sub" / "x.rs").write_text("use super::super::a;\npub fn h() { let _ = crate::Thing; }\n")
    (src / "sub" / "tests.rs").write_text("use crate::c;\n")
    graph = _rust_module_graph(src)
    assert graph == {"lib.rs": {"b.rs"}, "a.rs": {"b.rs", "c.rs"}, "b.rs": set(), "c.rs": {"sub/x.rs"},
                     "sub/mod.rs": {"sub/x.rs"}, "sub/x.rs": {"a.rs", "b.rs"}}
    assert _cycles(graph) == [["a.rs", "c.rs", "sub/x.rs"]]
