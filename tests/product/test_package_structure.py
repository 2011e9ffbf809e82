"""The Python package's dependencies run one way: no import circle among popsnn's modules,
backends never import the model that picks them, and argument checks live in one module."""

import ast
from pathlib import Path

import popsnn

PACKAGE = Path(popsnn.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set:
    """popsnn modules imported anywhere in `path` (module level or inside functions)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rsplit(".", 1)[0]
            target = (
                (f"{base}.{node.module}" if node.module else base)
                if node.level
                else node.module or ""
            )
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    # The root package's __init__ only re-exports (a `from .. import _native` names the
    # compiled extension, not popsnn/__init__.py's contents).
    return {m for m in found if m in MODULES and m not in (name, "popsnn")}


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def test_no_import_circle():
    graph = {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}
    state = {}

    def visit(node, path):
        if state.get(node) == "done":
            return
        assert state.get(node) != "open", f"import circle: {' -> '.join(path + [node])}"
        state[node] = "open"
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        state[node] = "done"

    for node in sorted(graph):
        visit(node, [])


def test_backends_do_not_import_the_model_and_share_one_validation_module():
    for path in (PACKAGE / "backends").glob("*.py"):
        deps = imports_of(path)
        assert "popsnn.model" not in deps, path
        if path.name != "__init__.py":
            assert "popsnn.validation" in deps, path
