"""Imports point down (README's layout section): a package imports only itself and the packages listed below it, no
module-level import cycle exists among curate's modules, and curate's own modules are imported inside a function only
by the CLI (which defers datatrove and the builders until a command runs). Read from the source with ast, so a lazy,
conditional or type-checking-only import is seen as well as a top-level one."""

from __future__ import annotations

import ast
from pathlib import Path

import curate

PACKAGE = Path(curate.__file__).resolve().parent
# README's layout, top to bottom; builders and handoff are one layer (each uses the other, neither is above), and
# review (the labels a user checks on their own corpus) sits beside them.
LAYERS = ("cli", "flows", ("builders", "handoff", "review"), "pipelines", "data_cards", "classifiers", "rewards", "puzzles")
RANK = {name: len(LAYERS) - i for i, layer in enumerate(LAYERS) for name in (layer if isinstance(layer, tuple) else (layer,))}


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


MODULES = module_names()


def rank(module: str) -> int:
    parts = module.split(".")
    return RANK.get(parts[1], 0) if len(parts) > 1 else 0  # 0: the core modules (behaviors, schema, errors, ...)


def curate_targets(node: ast.AST) -> list[str]:
    """The curate modules an import statement names (a name imported from a package counts as the package, unless it
    is a submodule)."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "curate":
        return [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module for a in node.names]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "curate"]
    return []


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def module_level(node: ast.AST):
    """The nodes under `node` that run when the module is imported or type-checked: inside `if TYPE_CHECKING:`,
    `try:` and class bodies too, not inside a function."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, FUNCTIONS):
            yield child
            yield from module_level(child)


def imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per module: what it imports at module level, `if TYPE_CHECKING:` blocks included (an import made for type
    checking only is still an edge of the layering, and a cycle through it is one a type checker must untangle), and
    what it imports inside functions."""
    top: dict[str, set[str]] = {m: set() for m in MODULES}
    inner: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in module_level(tree):
            top[module].update(curate_targets(node))
        for function in ast.walk(tree):
            if isinstance(function, FUNCTIONS):
                for node in ast.walk(function):
                    inner[module].update(curate_targets(node))
    return top, inner


TOP, INNER = imports()


def test_the_package_is_read():
    assert len(MODULES) > 80 and sum(map(len, TOP.values())) > 300


def test_imports_point_down():
    upward = sorted((m, t) for m, targets in TOP.items() for t in targets if rank(t) > rank(m))
    upward += sorted((m, t) for m, targets in INNER.items() for t in targets if rank(t) > rank(m))
    assert not upward, upward


def test_no_module_level_import_cycle():
    graph = {m: {t for t in targets if t in MODULES and t != m} for m, targets in TOP.items()}
    done: set[str] = set()

    def cycle_from(start: str) -> list[str] | None:
        # Iterative depth-first search; returns one cycle through the path it is on, if any.
        path, on_path, stack = [], set(), [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(path.pop())
                done.add(node)
            elif child in on_path:
                return path[path.index(child) :] + [child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
        return None

    for module in sorted(graph):
        if module not in done:
            assert (found := cycle_from(module)) is None, " -> ".join(found)


def test_only_the_cli_imports_curate_inside_functions():
    lazy = sorted((m, t) for m, targets in INNER.items() for t in targets if not m.startswith("curate.cli"))
    assert not lazy, lazy


def test_no_private_name_is_imported_from_another_module():
    private = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if curate_targets(node) and isinstance(node, ast.ImportFrom):
                private += [(module, f"{node.module}.{a.name}") for a in node.names if a.name.startswith("_")]
    assert not private, private
