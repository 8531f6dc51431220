"""The package layout of python/storlab holds (docs/architecture.md, "Layers"): lower layers never
import higher ones, no file imports itself back through others, and no module uses another
module's private (`_name`) names. Read from the source with `ast`, function-level imports included,
so a new upward or private import fails here instead of in a review."""
from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "python" / "storlab"

# Lowest first. A module may import its own package and any package of a lower layer, nothing else.
# Foundations import nothing of storlab but the package itself (its version), the extension and
# the error classes. The order is the pipeline's: options and job files, then measurement (which
# uses the model for its predictions), then the store, then output, then the CLI.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"storlab", "_core"}),
    frozenset({"errors"}),
    frozenset({"units", "signals", "document", "schemas"}),
    frozenset({"devices"}),
    frozenset({"jobs"}),                        # option tables and job files
    frozenset({"model"}),                       # the stack model
    frozenset({"measure", "planner", "doctor"}),  # measurement; layouts; the host's stack
    frozenset({"measure.mpi"}),                 # the MPI orchestrator over measure's benchmarks
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
    {"launch", "stats", "cpu", "cache", "checks", "passes", "environment", "aggregate", "prediction", "steady"},
    {"benchmark"},
    {"meta"},
    {"runner"},
    {"sweep"},
)

# Private names still imported across modules, each with the change that removes it; the test
# fails when a new one appears (shrink this set as they go, never grow it).
KNOWN_PRIVATE: frozenset[tuple[str, str]] = frozenset({
    # cli/run.py's JSON writer becomes output.json.write_json (the cli helper's branch)
    ("storlab.cli.scale", "storlab.cli.run._write_json"),
    ("storlab.cli.sweep", "storlab.cli.run._write_json"),
})


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
    new = _private_uses() - KNOWN_PRIVATE
    assert new == set(), "make these public (or move them to the module that uses them)"


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
