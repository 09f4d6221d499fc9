"""The packages' structure, checked on their source (docs/architecture.md, "Inside the packages" and "Layers").

Nothing here imports project code: ``tests/import_graph.py`` parses the files with ``ast``.
Each rule is a ``check_*`` function from modules to a list of violations (file, line, import);
a test asserts the project has none, and a synthetic case shows that the check can fail.
"""

from __future__ import annotations

import ast
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.import_graph import (
    FUNCTION,
    Module,
    chain,
    find_cycles,
    imports,
    in_project,
    parent_edges,
    reach,
    read_project,
)

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Group:
    """Runtime modules that may import each other freely. ``only``, when set, is the complete
    list of runtime groups the group may import (its own group included)."""

    name: str
    layer: int
    modules: tuple[str, ...]  # "runtime.rpc.*" is the package and everything in it
    only: tuple[str, ...] | None = None


# runtime, low to high: an import goes to a lower layer or stays within its group.
LAYERS = (
    Group("base", 0, ("runtime.errors", "runtime.env", "runtime.error_file")),
    # The sampling package's __init__ runs before any runtime.sampling.* module: docstring only.
    Group("sampling-package", 0, ("runtime.sampling",)),
    Group("rpc", 1, ("runtime.rpc.*",)),
    Group("store", 1, ("runtime.store.*",)),
    Group("kernels", 1, ("runtime.sampling.kernels",)),
    Group("draws", 1, ("runtime.sampling.draws",)),
    Group("server", 2, ("runtime.server.*",)),
    Group("block", 2, ("runtime.sampling.block", "runtime.sampling.graph")),
    Group("api", 3, ("runtime.context", "runtime.routing", "runtime.view", "runtime.dist_graph",
                     "runtime.structure", "runtime.tensor_store",
                     "runtime.dist_tensor", "runtime.embedding", "runtime.optim", "runtime.split",
                     "runtime.checkpoint", "runtime.sampling.neighbor", "runtime.batch_reads",
                     "runtime.trainer_device", "runtime.feature_cache")),
    Group("nn", 3, ("runtime.nn.*",), only=("nn", "block")),
    Group("loader", 4, ("runtime.loader.*",)),
    # The public facade names its exports as strings (loaded on first use): no runtime import.
    Group("facade", 5, ("runtime",), only=()),
)

# dglctl, low to high (the CLI on top; jobs use hosts, never the other way).
DGLCTL_LAYERS = (
    Group("base", 0, ("dglctl.errors", "dglctl.display")),
    Group("package", 0, ("dglctl",)),  # dglctl/__init__.py: the version
    # The program each host runs: apart from the launcher's side (AGENT_MAY_IMPORT says what
    # else it uses); the launcher's side reaches it through its protocol only (AGENT_PUBLIC).
    Group("agent", 1, ("dglctl.agent.*",), only=("agent", "package")),
    # How `ssh HOST` would reach a host (`ssh -G`): the config reads aliases through it.
    Group("ssh-config", 1, ("dglctl.hosts.ssh_config",)),
    Group("config", 2, ("dglctl.config",)),
    Group("hosts", 3, ("dglctl.hosts", "dglctl.hosts.transport", "dglctl.hosts.ssh_connect",
                       "dglctl.hosts.openssh", "dglctl.hosts.sent", "dglctl.hosts.netif",
                       "dglctl.hosts.group", "dglctl.hosts.agent_session",
                       "dglctl.hosts.agent_client", "dglctl.hosts.slurm_alloc",
                       "dglctl.hosts.slurm_transport", "dglctl.hosts.transports")),
    Group("jobs", 4, ("dglctl.jobs.*",)),
    Group("commands", 5, ("dglctl.commands.*",)),
    Group("cli", 6, ("dglctl.cli", "dglctl.__main__", "dglctl.demo")),
)

# What the agent may import besides the standard library and its own package: dglctl's
# version, and the leaves of the other packages that name what it handles on a host (the
# file checksum of the partition format; the names of a job's shared memory).
AGENT = "dglctl.agent.*"
AGENT_MAY_IMPORT = ("dglctl", AGENT, "partitioner.format", "runtime.store.shm")
# The one module of the agent that the launcher's side imports: the replies and constants.
AGENT_PUBLIC = "dglctl.agent.protocol"

# Imports between different groups of one layer, each one that the code needs. store.local
# samples and gathers with the kernels and draws, as the server and a co-located trainer do;
# draws are the keyed draws written on the kernels. rpc stays apart from all three.
SAME_LAYER_IMPORTS = {("store", "kernels"), ("store", "draws"), ("draws", "kernels")}

# Package direction: which packages each one may import (docs/architecture.md: dglctl -> runtime -> partitioner).
PACKAGES_MAY_IMPORT = {
    "partitioner": {"partitioner"},
    "runtime": {"runtime", "partitioner"},
    "dglctl": {"dglctl", "runtime", "partitioner"},
}

# Function-local project imports in runtime (importer.function -> target), each for a reason.
LOCAL_IMPORTS_ALLOWED = {
    # Role dispatch: only a server process loads the server module.
    ("runtime.context.initialize", "runtime.server.graph_server"),
}

# Functions of server-reachable modules that import torch when called, and that no module a
# server loads ever names (the test checks it): torch stays out of a server process.
TRAINER_ONLY_TORCH = {"runtime.env.torch_rank_world"}

SERVER_ROOTS = "runtime.server.*"
# A module holds one concept, whatever its length (torch elastic's agent/server/api.py is ~960
# lines): far above this a module is reported as a warning, never a failure.
MAX_LINES = 900
ENV_MODULE = "runtime.env"
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}

REPO = Path(__file__).resolve().parents[1]


def _matches(name: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return name == pattern[:-2] or name.startswith(pattern[:-1])
    return name == pattern


def group_of(name: str, layers: tuple[Group, ...] = LAYERS) -> Group | None:
    for g in layers:
        if any(_matches(name, p) for p in g.modules):
            return g
    return None


def check_cycles(modules: dict[str, Module]) -> list[str]:
    edges = [e for e in imports(modules) if e.executed and in_project(e.target)]
    return [
        f"import cycle among {', '.join(members)}; one of them: "
        + " -> ".join([c[0].importer, *(e.target for e in c)]) + "\n  " + chain(c)
        for members, c in find_cycles(edges)
    ]


def check_package_direction(modules: dict[str, Module]) -> list[str]:
    return [
        f"{e.where()}: {e.importer.split('.')[0]} must not import {e.top}"
        for e in imports(modules)
        if in_project(e.target) and e.top not in PACKAGES_MAY_IMPORT[e.importer.split(".")[0]]
    ]


def check_layer_table(modules: dict[str, Module], layers: tuple[Group, ...] = LAYERS,
                      package: str = "runtime") -> list[str]:
    out = []
    for name, m in modules.items():
        if name.split(".")[0] != package:
            continue
        found = [g.name for g in layers if any(_matches(name, p) for p in g.modules)]
        if len(found) != 1:
            out.append(f"{m.path}: {name} is in {len(found)} groups of LAYERS "
                       f"({', '.join(found) or 'none'}); put it in exactly one")
    return out


def check_layers(modules: dict[str, Module], layers: tuple[Group, ...] = LAYERS,
                 same_layer: set[tuple[str, str]] = SAME_LAYER_IMPORTS,
                 package: str = "runtime") -> list[str]:
    out = []
    for e in imports(modules):
        if e.importer.split(".")[0] != package or e.top != package:
            continue
        a, b = group_of(e.importer, layers), group_of(e.target, layers)
        if a is None or b is None or a.name == b.name:
            continue  # unplaced modules: check_layer_table reports them
        if a.only is not None:
            ok = b.name in a.only
            why = (f"{a.name} may import only {', '.join(a.only)}" if a.only
                   else f"{a.name} may import no runtime module")
        elif b.layer == a.layer:
            ok = (a.name, b.name) in same_layer
            why = (f"{a.name} may not import {b.name}, of the same layer {a.layer} "
                   "(SAME_LAYER_IMPORTS lists the exceptions)")
        else:
            ok = b.layer < a.layer
            why = f"layer {a.layer} ({a.name}) may not import layer {b.layer} ({b.name})"
        if not ok:
            out.append(f"{e.where()}: {e.importer} -> {e.target}: {why}")
    return out


def _names_used(m: Module) -> set[str]:
    used = set()
    for node in ast.walk(m.tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.add(node.name.split(".")[-1])
    return used


def check_server_torch(modules: dict[str, Module],
                       trainer_only: set[str] = TRAINER_ONLY_TORCH) -> list[str]:
    edges = [e for e in imports(modules) if e.executed]
    roots = [n for n in modules if _matches(n, SERVER_ROOTS)]
    loaded = reach(roots, [e for e in edges if in_project(e.target)] + parent_edges(modules))
    out = []
    for e in edges:
        if e.importer not in loaded or e.top != "torch":
            continue
        fn = f"{e.importer}.{e.function}" if e.function else None
        if e.scope == FUNCTION and fn in trainer_only:
            name = e.function.split(".")[-1]
            for user in loaded:
                if user in modules and name in _names_used(modules[user]):
                    out.append(f"{modules[user].path} names {fn}, which imports torch "
                               f"({e.where()}); a server loads {user}:\n  "
                               f"{chain(loaded[user])}")
            continue
        out.append(f"a server process imports torch: {e.where()}, loaded as\n  "
                   f"{chain(loaded[e.importer])}")
    return out


def check_facade(modules: dict[str, Module]) -> list[str]:
    """runtime/__init__.py names each export by string; each string is a module that defines
    the name."""
    facade = modules["runtime"]
    out = []
    for node in ast.walk(facade.tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        names_modules = any(isinstance(t, ast.Name) and t.id == "_MODULES" for t in node.targets)
        for k, v in zip(node.value.keys, node.value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(v, ast.Constant)):
                continue
            target = modules.get(v.value)
            if target is None:
                out.append(f"{facade.path}:{v.lineno}: {k.value!r} -> {v.value!r}: no such module")
            elif names_modules:
                continue  # a module under another name (_MODULES): that it exists is enough
            elif k.value not in _defined(target):
                out.append(f"{facade.path}:{v.lineno}: {k.value!r} is not defined in {target.path}")
    return out


def _defined(m: Module) -> set[str]:
    names = set()
    for node in m.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def check_local_imports(modules: dict[str, Module],
                        allowed: set[tuple[str, str]] = LOCAL_IMPORTS_ALLOWED) -> list[str]:
    return [
        f"{e.where()}: function-local import of {e.target}; import it at the top of "
        f"{e.path} (or add it to LOCAL_IMPORTS_ALLOWED with the reason)"
        for e in imports(modules)
        if e.importer.split(".")[0] == "runtime" and e.scope == FUNCTION
        and in_project(e.target) and (f"{e.importer}.{e.function}", e.target) not in allowed
    ]


def check_package_inits(modules: dict[str, Module]) -> list[str]:
    """Every folder holding Python code in a package has an ``__init__.py`` with a docstring."""
    by_path = {m.path: m for m in modules.values()}
    folders = {str(Path(p).parent) for p in by_path if "/" in p}
    out = []
    for folder in sorted(folders):
        init = by_path.get(f"{folder}/__init__.py")
        if init is None:
            out.append(f"{folder}/: no __init__.py")
        elif not (ast.get_docstring(init.tree) or "").strip():
            out.append(f"{init.path}: no docstring (one line on what the package holds)")
    return out


def check_module_sizes(modules: dict[str, Module], limit: int = MAX_LINES) -> list[str]:
    return [f"{m.path}: {m.num_lines} lines (over {limit}): does it still hold one concept?"
            for m in sorted(modules.values(), key=lambda m: m.path) if m.num_lines > limit]


def check_agent_imports(modules: dict[str, Module],
                        may_import: tuple[str, ...] = AGENT_MAY_IMPORT) -> list[str]:
    """The agent (it runs on every host) imports the standard library, itself, and only what
    ``may_import`` lists; the launcher's side imports its protocol, never its internals."""
    out = []
    for e in imports(modules):
        inside = _matches(e.importer, AGENT)
        if inside and e.top not in sys.stdlib_module_names and not any(
                _matches(e.target, p) for p in may_import):
            out.append(f"{e.where()}: the agent imports {e.target}: it may import the "
                       f"standard library and {', '.join(may_import)} (AGENT_MAY_IMPORT)")
        elif (not inside and e.importer.split(".")[0] == "dglctl" and _matches(e.target, AGENT)
              and e.target != AGENT_PUBLIC):
            out.append(f"{e.where()}: {e.importer} imports {e.target}: outside the agent, "
                       f"only {AGENT_PUBLIC} is imported (the request/reply types and "
                       "constants both sides share)")
    return out


# Reads of another module's objects' private attributes that are there today, each to be
# replaced by a contract (issue 20: what DistGraph's satellites need passed to them, the
# partition book's public methods, Block's public fields). A read not listed here fails.
PRIVATE_READS_ALLOWED = {
    # The metis package's loaded library (it exposes no public handle to it).
    "partitioner.methods.metis": {"_dll"},
}


def _private_names_of(tree: ast.AST) -> set[str]:
    """The private names a module defines or sets itself: its functions, classes and
    variables, the attributes it assigns, its parameters and keywords."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)  # a dataclass field
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
    return {n for n in names if n.startswith("_")}


def check_private_reads(modules: dict[str, Module],
                        allowed: dict[str, set[str]] = PRIVATE_READS_ALLOWED) -> list[str]:
    """No module reads a private attribute (``x._name``) of an object another module made:
    it goes through that module's public API. Reads of ``self``/``cls``, of an imported
    module, and of names the module defines or sets itself are its own business."""
    out = []
    for name, m in sorted(modules.items()):
        own = _private_names_of(m.tree)
        imported = {(a.asname or a.name).split(".")[0] for node in ast.walk(m.tree)
                    if isinstance(node, ast.Import | ast.ImportFrom) for a in node.names}
        for node in ast.walk(m.tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            base = node.value
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in imported):
                continue
            if node.attr in own or node.attr in allowed.get(name, set()):
                continue
            out.append(f"{m.path}:{node.lineno}: reads {ast.unparse(node)}, a private attribute "
                       "of another module's object: use (or add) its public API")
    return out


def check_environ(modules: dict[str, Module]) -> list[str]:
    out = []
    for m in modules.values():
        if m.name.split(".")[0] != "runtime" or m.name == ENV_MODULE:
            continue
        os_names = {"os"}
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Import):
                os_names |= {a.asname or a.name for a in node.names if a.name == "os"}
        for node in ast.walk(m.tree):
            hit = None
            if (isinstance(node, ast.Attribute) and node.attr in ENV_NAMES
                    and isinstance(node.value, ast.Name) and node.value.id in os_names):
                hit = f"{node.value.id}.{node.attr}"
            elif isinstance(node, ast.ImportFrom) and node.module == "os":
                found = [a.name for a in node.names if a.name in ENV_NAMES]
                hit = f"from os import {', '.join(found)}" if found else None
            if hit:
                out.append(f"{m.path}:{node.lineno}: {hit}: only {ENV_MODULE} reads the "
                           "environment (add the setting to RuntimeEnv)")
    return out


CHECKS = {
    "cycles": check_cycles,
    "package direction": check_package_direction,
    "layer table": check_layer_table,
    "layers": check_layers,
    "server torch": check_server_torch,
    "facade": check_facade,
    "local imports": check_local_imports,
    "package inits": check_package_inits,
    "module sizes": check_module_sizes,
    "agent imports": check_agent_imports,
    "private reads": check_private_reads,
    "environ": check_environ,
}


@pytest.fixture(scope="module")
def project() -> dict[str, Module]:
    return read_project(REPO)


def _assert_none(violations: list[str], what: str) -> None:
    assert not violations, f"{len(violations)} {what}:\n" + "\n".join(violations)


def test_no_import_cycles(project):
    _assert_none(check_cycles(project), "import cycles (function-local imports count)")


def test_packages_import_one_way(project):
    _assert_none(check_package_direction(project), "imports against dglctl -> runtime -> partitioner")


def test_the_harness_imports_neither_tests_nor_bench():
    """The harness package ``testing`` is what tests and benchmarks share: it imports neither
    (bench reading the tests' conftest files is what it replaced)."""
    harness = read_project(REPO, ("testing",))
    assert "testing.servers" in harness  # the check reads the harness, not an empty list
    _assert_none([f"{e.where()}: the harness must not import {e.top}"
                  for e in imports(harness) if e.top in ("tests", "bench")],
                 "imports of tests or bench in the harness")


def test_every_runtime_module_has_a_layer(project):
    _assert_none(check_layer_table(project), "runtime modules outside the layer table")


def test_runtime_imports_go_down_the_layers(project):
    _assert_none(check_layers(project), "runtime imports that go up or sideways")


def test_every_dglctl_module_has_a_layer(project):
    _assert_none(check_layer_table(project, DGLCTL_LAYERS, "dglctl"),
                 "dglctl modules outside DGLCTL_LAYERS")


def test_no_module_reads_another_modules_privates(project):
    _assert_none(check_private_reads(project), "reads of other modules' private attributes")


def test_the_private_reads_allowed_are_all_still_there(project):
    """An entry of PRIVATE_READS_ALLOWED that no code needs any more is removed (so the list
    only shrinks as contracts replace the reads)."""
    needed = {(line.split(":")[0], line.split("reads ")[1].split(",")[0].rsplit(".", 1)[1])
              for line in check_private_reads(project, allowed={})}
    by_path = {name: m.path for name, m in project.items()}
    stale = [f"{name}: {attr}" for name, attrs in PRIVATE_READS_ALLOWED.items()
             for attr in sorted(attrs) if (by_path.get(name), attr) not in needed]
    _assert_none(stale, "PRIVATE_READS_ALLOWED entries no code needs")


def test_the_agent_stands_apart(project):
    _assert_none(check_agent_imports(project), "imports across the agent's boundary")


def test_dglctl_imports_go_down_the_layers(project):
    _assert_none(check_layers(project, DGLCTL_LAYERS, set(), "dglctl"),
                 "dglctl imports that go up or sideways")


def check_public_api_documented(modules: dict[str, Module], package: str) -> list[str]:
    """Each module of ``package`` has a docstring, and so has each public top-level function
    and class; public functions declare their return type."""
    out = []
    for name, m in modules.items():
        if name.split(".")[0] != package:
            continue
        if not ast.get_docstring(m.tree):
            out.append(f"{m.path}: no module docstring")
        for node in m.tree.body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef) or node.name.startswith("_"):
                continue
            if not ast.get_docstring(node):
                out.append(f"{m.path}:{node.lineno}: {node.name} has no docstring")
            if isinstance(node, ast.FunctionDef) and node.returns is None:
                out.append(f"{m.path}:{node.lineno}: {node.name} declares no return type")
    return out


@pytest.mark.parametrize("package", ["partitioner", "runtime", "dglctl"])
def test_public_api_is_documented(project, package):
    _assert_none(check_public_api_documented(project, package), f"undocumented {package} API")


def test_server_never_imports_torch(project):
    _assert_none(check_server_torch(project), "ways for torch into a server process")


def test_runtime_facade_is_lazy(project):
    _assert_none(check_facade(project), "broken facade exports")


def test_runtime_function_local_imports_are_listed(project):
    _assert_none(check_local_imports(project), "unlisted function-local imports in runtime")


def test_every_package_folder_has_a_documented_init(project):
    _assert_none(check_package_inits(project), "package folders without a documented __init__.py")


def test_long_modules_are_reported(project):
    """A warning, not a failure: modules are split where their concepts part, never to meet a
    line count."""
    for found in check_module_sizes(project):
        warnings.warn(found, stacklevel=1)


def test_only_env_reads_the_environment(project):
    _assert_none(check_environ(project), "environment reads outside runtime/env.py")


def test_allowlists_name_real_imports(project):
    """An entry left behind after its import is gone would hide the next one."""
    edges = imports(project)
    local = {(f"{e.importer}.{e.function}", e.target) for e in edges if e.scope == FUNCTION}
    torch = {f"{e.importer}.{e.function}" for e in edges if e.top == "torch" and e.function}
    stale = sorted(LOCAL_IMPORTS_ALLOWED - local) + sorted(TRAINER_ONLY_TORCH - torch)
    assert not stale, f"allowlist entries with no such import: {stale}"
