"""The layering checks of ``tests/test_layers.py`` can fail: small synthetic projects with one
fault each, and each check must report it."""

from __future__ import annotations

import pytest

from tests.import_graph import MODULE, Import, Module, imports, modules_from_sources
from tests.test_layers import (
    CHECKS,
    check_agent_imports,
    check_cycles,
    check_environ,
    check_facade,
    check_layer_table,
    check_layers,
    check_local_imports,
    check_module_sizes,
    check_package_direction,
    check_package_inits,
    check_private_reads,
    check_server_torch,
    group_of,
)

pytestmark = pytest.mark.unit


# -- the checks can fail: small synthetic projects with one fault each -----------------------

BASE = {
    "runtime/__init__.py": '"""facade"""\n_EXPORTS = {"Thing": "runtime.dist_graph"}\n',
    "runtime/errors.py": "class DistError(Exception): ...\n",
    "runtime/env.py": "import os\nfrom .errors import DistError\nX = os.environ.get('X')\n",
    "runtime/rpc/__init__.py": '"""rpc"""\n',
    "runtime/rpc/client.py": "from ..errors import DistError\n",
    "runtime/dist_graph.py": "from .rpc.client import DistError\nclass Thing: ...\n",
    "runtime/loader/__init__.py": '"""loaders"""\n',
    "runtime/loader/dataloader.py": "from ..dist_graph import Thing\n",
}


def synthetic(**changes: str) -> dict[str, Module]:
    """BASE with files replaced or added: ``rpc__client="..."`` is runtime/rpc/client.py,
    ``store__init`` runtime/store/__init__.py, ``init`` runtime/__init__.py."""
    files = dict(BASE)
    for key, source in changes.items():
        parts = ["__init__" if p == "init" else p for p in key.split("__")]
        files["runtime/" + "/".join(parts) + ".py"] = source
    return modules_from_sources(files)


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_synthetic_base_is_clean(check):
    assert check(synthetic()) == []


def test_a_cycle_is_reported_with_its_modules():
    found = check_cycles(synthetic(
        rpc__client="from ..errors import DistError\ndef f():\n    from ..loader import dataloader\n"))
    assert len(found) == 1
    assert ("among runtime.dist_graph, runtime.loader.dataloader, runtime.rpc.client; one of them: "
            "runtime.dist_graph -> runtime.rpc.client -> runtime.loader.dataloader "
            "-> runtime.dist_graph") in found[0]
    assert "runtime/rpc/client.py:3: `from ..loader import dataloader` (in f)" in found[0]


def test_type_checking_imports_make_no_cycle():
    code = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..loader import dataloader\n"
    mods = synthetic(rpc__client=code)
    assert check_cycles(mods) == []
    assert "layer 1 (rpc) may not import layer 4 (loader)" in check_layers(mods)[0]


def test_an_upward_import_is_reported():
    found = check_layers(synthetic(errors="from .rpc import client\n"))
    assert found == ["runtime/errors.py:1: `from .rpc import client`: runtime.errors -> "
                     "runtime.rpc.client: layer 0 (base) may not import layer 1 (rpc)"]


def test_same_layer_imports_need_a_listed_reason():
    mods = synthetic(store__init='"""store"""\n', store__local="from ..rpc import client\n")
    assert "store may not import rpc, of the same layer 1" in check_layers(mods)[0]
    mods = synthetic(store__init='"""s"""\n', sampling__init='"""s"""\n', sampling__kernels="",
                     store__local="from ..sampling import kernels\n")
    assert check_layers(mods) == []


def test_nn_may_import_only_blocks():
    mods = synthetic(nn__init='"""nn"""\n', nn__sage="from runtime.dist_graph import Thing\n")
    assert "nn may import only nn, block" in check_layers(mods)[0]


def test_unplaced_module_and_package_direction_are_reported():
    mods = synthetic(misc="import dglctl.cli\n")
    assert check_layer_table(mods) == [
        "runtime/misc.py: runtime.misc is in 0 groups of LAYERS (none); put it in exactly one"]
    assert check_package_direction(mods) == [
        "runtime/misc.py:1: `import dglctl.cli`: runtime must not import dglctl"]


def test_torch_reached_from_a_server_is_reported():
    mods = synthetic(server__init='"""server"""\n',
                     server__graph_server="from ..rpc.client import DistError\n",
                     rpc__client="import torch\n")
    found = check_server_torch(mods)
    assert len(found) == 1 and "runtime/rpc/client.py:1: `import torch`" in found[0]
    assert "runtime.server.graph_server\n    -> runtime.rpc.client" in found[0]
    # The packages above a loaded module run too.
    found = check_server_torch(synthetic(server__main="", init='"""f"""\nimport torch\n'))
    assert "runtime/__init__.py:2: `import torch`" in found[0]
    # A trainer-only function may import torch, as long as nothing the server loads calls it.
    env = "def torch_rank_world():\n    import torch\n"
    assert check_server_torch(synthetic(server__main="from .. import env\n", env=env)) == []
    called = synthetic(server__main="from ..env import torch_rank_world\ntorch_rank_world()\n",
                       env=env)
    assert "runtime/server/main.py names runtime.env.torch_rank_world" in check_server_torch(
        called)[0]


def test_facade_exports_must_exist():
    mods = synthetic(init='"""f"""\n_EXPORTS = {"Gone": "runtime.dist_graph", "X": "runtime.no"}\n')
    assert check_facade(mods) == [
        "runtime/__init__.py:2: 'Gone' is not defined in runtime/dist_graph.py",
        "runtime/__init__.py:2: 'X' -> 'runtime.no': no such module"]
    assert "facade may import no runtime module" in check_layers(
        synthetic(init='"""f"""\nfrom .dist_graph import Thing\n'))[0]


def test_local_imports_sizes_inits_and_environ_are_reported():
    mods = synthetic(dist_graph="import os\ndef f():\n    from . import env\n"
                                "    return os.getenv('A')\n" + "\n" * 900,
                     loader__init="")
    assert check_local_imports(mods) == [
        "runtime/dist_graph.py:3: `from . import env` (in f): function-local import of "
        "runtime.env; import it at the top of runtime/dist_graph.py (or add it to "
        "LOCAL_IMPORTS_ALLOWED with the reason)"]
    assert check_module_sizes(mods) == [
        "runtime/dist_graph.py: 904 lines (over 900): does it still hold one concept?"]
    assert check_package_inits(mods) == [
        "runtime/loader/__init__.py: no docstring (one line on what the package holds)"]
    assert check_environ(mods) == [
        "runtime/dist_graph.py:4: os.getenv: only runtime.env reads the environment "
        "(add the setting to RuntimeEnv)"]
    files = {p: s for p, s in BASE.items() if p != "runtime/rpc/__init__.py"}
    assert check_package_inits(modules_from_sources(files)) == ["runtime/rpc/: no __init__.py"]


def test_relative_imports_resolve_to_modules():
    mods = modules_from_sources({
        "p/__init__.py": "from . import a\nfrom .a import name\n",
        "p/a.py": "from . import name\nfrom .sub import b as c\nimport p.sub.b\n",
        "p/sub/__init__.py": "from .. import a\nfrom ..sub.b import x\n",
        "p/sub/b.py": "",
    })
    edges = {(e.importer, e.target, e.scope) for e in imports(mods)}
    assert edges == {
        ("p", "p.a", MODULE), ("p.a", "p", MODULE), ("p.a", "p.sub.b", MODULE),
        ("p.sub", "p.a", MODULE), ("p.sub", "p.sub.b", MODULE),
    }
    assert all(isinstance(e, Import) for e in imports(mods))


def test_group_patterns():
    # "runtime.rpc.*" is the package and its modules, not runtime.rpcx.
    assert group_of("runtime.rpc").name == group_of("runtime.rpc.wire").name == "rpc"
    assert group_of("runtime.rpcx") is None
    assert group_of("runtime").name == "facade"


def test_the_agents_boundary_is_checked_both_ways():
    """The agent importing what a host need not have (the launcher's hosts layer, torch), and
    the launcher's side importing an agent internal instead of its protocol."""
    files = {
        "dglctl/__init__.py": '"""dglctl"""\n__version__ = "1"\n',
        "dglctl/agent/__init__.py": '"""the agent"""\n',
        "dglctl/agent/protocol.py": "import json\nfrom dglctl import __version__\n",
        "dglctl/agent/logs.py": "from .protocol import json\nfrom partitioner.format import f\n",
        "dglctl/hosts/__init__.py": '"""hosts"""\n',
        "dglctl/hosts/agent_client.py": "from ..agent.protocol import json\n",
    }
    assert check_agent_imports(modules_from_sources(files)) == []
    files["dglctl/agent/processes.py"] = "import torch\nfrom ..hosts import agent_client\n"
    files["dglctl/hosts/transport.py"] = "from ..agent.logs import json\n"
    assert check_agent_imports(modules_from_sources(files)) == [
        "dglctl/agent/processes.py:1: `import torch`: the agent imports torch: it may import the standard "
        "library and dglctl, dglctl.agent.*, partitioner.format, runtime.store.shm "
        "(AGENT_MAY_IMPORT)",
        "dglctl/agent/processes.py:2: `from ..hosts import agent_client`: the agent imports "
        "dglctl.hosts.agent_client: it may import the standard library and dglctl, "
        "dglctl.agent.*, partitioner.format, runtime.store.shm (AGENT_MAY_IMPORT)",
        "dglctl/hosts/transport.py:1: `from ..agent.logs import json`: dglctl.hosts.transport "
        "imports dglctl.agent.logs: "
        "outside the agent, only dglctl.agent.protocol is imported (the request/reply types "
        "and constants both sides share)"]


def test_a_read_of_another_modules_private_is_reported():
    """``g._tensors`` of a graph another module made is reported; ``self._x``, a private the
    module sets itself, and a module's own private function are not."""
    mods = synthetic(rpc__client="from ..errors import DistError\n"
                                 "class Pool:\n    def __init__(self):\n        self._x = 1\n"
                                 "    def get(self, other):\n        return self._x + other._x\n"
                                 "def f(g):\n    return g._tensors + _helper()\n"
                                 "def _helper():\n    return 0\n")
    assert check_private_reads(mods) == [
        "runtime/rpc/client.py:8: reads g._tensors, a private attribute of another module's "
        "object: use (or add) its public API"]
    assert check_private_reads(mods, allowed={"runtime.rpc.client": {"_tensors"}}) == []
