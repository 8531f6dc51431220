"""python/storlab/_core.pyi against the compiled bindings: the same names, kinds and parameters.

The stub is parsed with ast (never imported) and the module is introspected, so a binding added in
crates/storlab-py without a stub entry, or a stub entry left behind after a binding went, fails here.
"""
from __future__ import annotations

import ast
import inspect
import pathlib

import pytest
import storlab
from storlab import _core

STUB_PATH = pathlib.Path(storlab.__file__).with_name("_core.pyi")


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def _parse_stub() -> ast.Module:
    return ast.parse(STUB_PATH.read_text(encoding="utf-8"), filename=str(STUB_PATH))


def _documented(body: list[ast.stmt]) -> dict[str, tuple[ast.stmt, str | None]]:
    """Each name a stub body defines, with its node and docstring (for an annotated constant or
    attribute: the string statement right after it)."""
    out: dict[str, tuple[ast.stmt, str | None]] = {}
    for i, node in enumerate(body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = (node, ast.get_docstring(node))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            after = body[i + 1] if i + 1 < len(body) else None
            doc = (after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                   and isinstance(after.value.value, str) else None)
            out[node.target.id] = (node, doc)
    return out


STUB = _documented(_parse_stub().body)
STUB_CLASSES = {name: node for name, (node, _doc) in STUB.items() if isinstance(node, ast.ClassDef)}


def _is_property(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def _stub_params(node: ast.FunctionDef) -> list[str]:
    names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
    return names[1:] if names and names[0] == "self" else names


def _runtime_params(obj) -> list[str]:
    return [p for p in inspect.signature(obj).parameters if p != "self"]


def test_every_name_the_module_exports_has_a_stub_entry_and_every_entry_is_exported():
    exported = _public(dir(_core))
    stubbed = _public(STUB)
    assert exported - stubbed == set(), f"bindings without a stub entry in {STUB_PATH.name}"
    assert stubbed - exported == set(), "stub entries the compiled module does not have"
    assert set(_core.__all__) == exported


def test_stub_entries_have_the_kind_of_what_they_describe():
    for name, (node, _doc) in STUB.items():
        value = getattr(_core, name)
        if isinstance(node, ast.ClassDef):
            assert isinstance(value, type), f"{name}: a class in the stub, {type(value).__name__} in the module"
        elif isinstance(node, ast.FunctionDef):
            assert callable(value) and not isinstance(value, type), f"{name}: a function in the stub"
        else:
            annotation = ast.unparse(node.annotation)
            assert not callable(value), f"{name}: a constant in the stub, callable in the module"
            assert type(value).__name__ in annotation, f"{name}: {annotation} in the stub, {type(value).__name__} in the module"


def test_every_stub_entry_has_a_docstring():
    undocumented = [name for name, (_node, doc) in STUB.items() if not doc]
    for cls_name, cls in STUB_CLASSES.items():
        undocumented += [f"{cls_name}.{name}" for name, (_node, doc) in _documented(cls.body).items()
                         if not doc and not name.startswith("_")]
    assert undocumented == []


def test_function_parameters_match_the_bindings():
    for name, (node, _doc) in STUB.items():
        if isinstance(node, ast.FunctionDef):
            assert _stub_params(node) == _runtime_params(getattr(_core, name)), name


@pytest.mark.parametrize("class_name", sorted(STUB_CLASSES))
def test_class_members_methods_and_properties_match_the_bindings(class_name):
    cls = getattr(_core, class_name)
    members = _documented(STUB_CLASSES[class_name].body)
    runtime = _public(vars(cls))
    stubbed = _public(members)
    assert runtime - stubbed == set(), f"{class_name}: members without a stub entry"
    # A stub may also name what the class inherits (CoreError.args), but nothing it lacks.
    assert [m for m in stubbed if not hasattr(cls, m)] == [], f"{class_name}: stub members the class does not have"
    for name, (node, _doc) in members.items():
        if name == "__init__":
            assert _stub_params(node) == _runtime_params(cls), f"{class_name}()"
        elif isinstance(node, ast.FunctionDef) and name in runtime:
            attr = vars(cls)[name]
            if _is_property(node):
                assert inspect.isgetsetdescriptor(attr), f"{class_name}.{name}: a property in the stub"
            else:
                assert inspect.ismethoddescriptor(attr), f"{class_name}.{name}: a method in the stub"
                assert _stub_params(node) == _runtime_params(attr), f"{class_name}.{name}"
