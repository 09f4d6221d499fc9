"""Every module of ``bench`` imports (a broken import is seen without running a benchmark),
and so does every project name a benchmark imports inside a function (a module or function
of dglctl, runtime or the tests that moved); every Python file of bench/ compiles (also those
run elsewhere: in the DGL venv, or copied for dglctl), and none edits ``sys.path``: the
benchmarks run as ``python -m bench.NAME``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import bench

pytestmark = pytest.mark.unit

BENCH = Path(bench.__file__).parent
# Modules that need what `make test` does not install: they import only where it is.
NEEDS = {
    "bench._dgl_sampler": ("dgl", "runs in the DGL venv (bench/dgl_env.sh)"),
    "bench.figures_plot": ("matplotlib", "the bench extra: pip install -e '.[bench]'"),
}
MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__, "bench."))
SOURCES = sorted(BENCH.rglob("*.py"))


def test_the_package_lists_its_modules():
    assert {"bench.common", "bench.jobs", "bench.figures", "bench.partition_bench"} <= set(MODULES)
    assert set(NEEDS) <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    if name in NEEDS:
        dep, why = NEEDS[name]
        if importlib.util.find_spec(dep) is None:
            pytest.skip(f"needs {dep}: {why}")
    importlib.import_module(name)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(BENCH)))
def test_source_compiles_and_leaves_sys_path_alone(path):
    text = path.read_text()
    compile(text, str(path), "exec")
    lines = [i for i, line in enumerate(text.splitlines(), 1) if "sys.path" in line]
    assert not lines, f"{path}: sys.path at lines {lines} (run it as python -m bench.NAME)"


PROJECT = ("bench", "dglctl", "partitioner", "runtime", "tests")


def _project_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import of project code in ``path``, at the top or inside
    a function (most benchmarks import the project lazily, where importing the module does
    not reach)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PROJECT:
                found += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names
                      if a.name.split(".")[0] in PROJECT]
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(BENCH)))
def test_project_names_imported_inside_functions_exist(path):
    missing = []
    for line, module, name in _project_imports(path):
        if module in NEEDS and importlib.util.find_spec(NEEDS[module][0]) is None:
            continue  # test_module_imports says why it is not imported here
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            missing.append(f"line {line}: {module} ({e})")
            continue
        if name is not None and not hasattr(mod, name) \
                and importlib.util.find_spec(f"{module}.{name}") is None:
            missing.append(f"line {line}: {name} from {module}")
    assert not missing, f"{path}: " + "; ".join(missing)
