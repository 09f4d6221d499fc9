"""The project's import graph, read from source with ``ast`` (no module is ever imported).

``read_project`` parses every ``.py`` file of the packages; ``modules_from_sources`` builds the
same from a dict of sources (the layering test's synthetic cases). ``imports`` resolves every
import statement, relative or absolute, at any depth, to the module it loads; the graph
helpers (``find_cycles``, ``reach``) work on that list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

PROJECT_PACKAGES = ("partitioner", "runtime", "dglctl")

MODULE, FUNCTION, TYPE_CHECKING = "module", "function", "type_checking"


@dataclass(frozen=True)
class Module:
    """One source file: its dotted name, its path relative to the repository, its text."""

    name: str
    path: str
    is_package: bool
    source: str

    @cached_property
    def tree(self) -> ast.Module:
        return ast.parse(self.source, self.path)

    @property
    def num_lines(self) -> int:
        return len(self.source.splitlines())


@dataclass(frozen=True)
class Import:
    """One module loaded by one import statement.

    ``scope`` is ``module`` (runs when the importer is imported: top level, class bodies,
    module-level ``try``/``if``), ``function`` (runs when ``function`` is called) or
    ``type_checking`` (under ``if TYPE_CHECKING:``, never runs). ``target`` is a project
    module's name, or an outside module's dotted name as written (``torch.nn``).
    """

    importer: str
    target: str
    path: str
    line: int
    scope: str
    function: str | None
    statement: str

    @property
    def executed(self) -> bool:
        return self.scope != TYPE_CHECKING

    @property
    def top(self) -> str:
        return self.target.split(".")[0]

    def where(self) -> str:
        inside = f" (in {self.function})" if self.function else ""
        return f"{self.path}:{self.line}: `{self.statement}`{inside}"


def _module(path: str, source: str) -> Module:
    parts = list(Path(path).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return Module(".".join(parts), path, is_package, source)


def read_project(root: Path, packages: Iterable[str] = PROJECT_PACKAGES) -> dict[str, Module]:
    """Every module of ``packages`` under ``root``, by dotted name. A folder without an
    ``__init__.py`` holds package data, not modules (``dglctl/data``: the demo's script)."""
    modules = {}
    for package in packages:
        for file in sorted((root / package).rglob("*.py")):
            rel = file.relative_to(root)
            if any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
                continue
            if not (file.parent / "__init__.py").exists():
                continue
            m = _module(rel.as_posix(), file.read_text(encoding="utf-8"))
            modules[m.name] = m
    return modules


def modules_from_sources(sources: dict[str, str]) -> dict[str, Module]:
    """Modules from ``{"pkg/__init__.py": source, "pkg/a.py": source, ...}``."""
    return {m.name: m for m in (_module(p, s) for p, s in sources.items())}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str, str | None]]:
    """Each import statement with its scope and enclosing function (``Class.method``)."""

    def walk(node: ast.AST, scope: str, names: tuple[str, ...], in_def: bool):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, scope, ".".join(names) if in_def else None
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            name = getattr(node, "name", "<lambda>")
            inner = scope if scope == TYPE_CHECKING else FUNCTION
            for child in ast.iter_child_nodes(node):
                yield from walk(child, inner, (*names, name), True)
            return
        if isinstance(node, ast.ClassDef):
            for child in ast.iter_child_nodes(node):
                yield from walk(child, scope, (*names, node.name), in_def)
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from walk(child, TYPE_CHECKING, names, in_def)
            for child in node.orelse:
                yield from walk(child, scope, names, in_def)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, scope, names, in_def)

    yield from walk(tree, MODULE, (), False)


def _targets(node: ast.Import | ast.ImportFrom, module: Module,
             modules: dict[str, Module]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.name.split(".")
        if not module.is_package:
            package.pop()
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    # `from pkg import name` loads pkg.name when that is a module, else pkg itself.
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
    if len(found) < len(node.names):
        found.append(base)
    return found


def imports(modules: dict[str, Module]) -> list[Import]:
    """Every import of every module, one entry per module loaded (self-imports dropped)."""
    out = []
    for m in modules.values():
        lines = m.source.splitlines()
        for node, scope, function in _statements(m.tree):
            text = " ".join(line.strip() for line in lines[node.lineno - 1:node.end_lineno])
            for target in dict.fromkeys(_targets(node, m, modules)):
                if target != m.name:
                    out.append(Import(m.name, target, m.path, node.lineno, scope, function, text))
    return out


def parent_edges(modules: dict[str, Module]) -> list[Import]:
    """The packages Python runs before each module (``a.b`` before ``a.b.c``), as imports."""
    out = []
    for m in modules.values():
        parts = m.name.split(".")
        for k in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:k])
            if parent in modules:
                out.append(Import(m.name, parent, m.path, 1, MODULE, None,
                                  f"(package {parent} runs first)"))
    return out


def in_project(name: str, packages: Iterable[str] = PROJECT_PACKAGES) -> bool:
    return name.split(".")[0] in tuple(packages)


def find_cycles(edges: list[Import]) -> list[tuple[list[str], list[Import]]]:
    """Each strongly connected component of more than one module (Tarjan's algorithm), with
    one cycle through it: the chain of imports of a shortest way from its first module back."""
    graph: dict[str, list[Import]] = {}
    for e in edges:
        graph.setdefault(e.importer, []).append(e)
        graph.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # recursive: the project's graph is a few hundred nodes
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            if e.target not in index:
                connect(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    cycles = []
    for component in components:
        members, start = set(component), component[0]
        way: dict[str, list[Import]] = {start: []}
        frontier, closing = [start], None
        while closing is None:  # breadth first: the shortest way back to start
            nxt = []
            for v in frontier:
                for e in graph[v]:
                    if e.target == start:
                        closing = closing or way[v] + [e]
                    elif e.target in members and e.target not in way:
                        way[e.target] = way[v] + [e]
                        nxt.append(e.target)
            frontier = nxt
        cycles.append((component, closing))
    return sorted(cycles)


def reach(roots: Iterable[str], edges: list[Import]) -> dict[str, list[Import]]:
    """Every module reachable from ``roots`` along ``edges``, with the chain that reaches it."""
    graph: dict[str, list[Import]] = {}
    for e in edges:
        graph.setdefault(e.importer, []).append(e)
    way: dict[str, list[Import]] = {r: [] for r in roots}
    frontier = list(way)
    while frontier:
        nxt = []
        for v in frontier:
            for e in graph.get(v, []):
                if e.target not in way:
                    way[e.target] = way[v] + [e]
                    nxt.append(e.target)
        frontier = nxt
    return way


def chain(steps: list[Import]) -> str:
    """``a -> b (file:line: `import`) -> c (...)`` for messages."""
    if not steps:
        return ""
    return steps[0].importer + "".join(f"\n    -> {e.target}  [{e.where()}]" for e in steps)
