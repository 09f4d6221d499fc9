"""Shared fixtures and the session's rules (markers, xdist groups, signals, DGLCTL_HOME); the
helpers they build on are the harness package ``testing``."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import pytest

from partitioner.graph import Graph
from testing.graphs import community_graph, hetero_graph
from testing.timeouts import TEST_LIMIT


@pytest.fixture
def small_graph() -> Graph:
    return community_graph()


@pytest.fixture
def small_hetero() -> Graph:
    return hetero_graph()


# -- every test says what it needs: exactly one of these markers (pyproject.toml lists them) --

_HOME = pytest.StashKey[str]()

# A process started later inherits an ignored or a blocked signal through exec.
_WATCHED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.hookimpl(tryfirst=True)  # before pytest-timeout reads its setting
def pytest_configure(config):
    """The per-test limit is TEST_LIMIT, a multiple of DGLCTL_TEST_TIMEOUT like every wait
    inside the tests, unless ``--timeout`` or PYTEST_TIMEOUT says otherwise.

    A runner started in the background by a shell without job control (``cmd &`` in a
    script) has SIGINT ignored, and so would every process the tests start: a Python started
    that way installs no KeyboardInterrupt handler, and the tests of Ctrl-C would press it on
    deaf processes. The tests' processes get it as a terminal's foreground job does.

    Each xdist worker (and a run without xdist) gets its own DGLCTL_HOME, so that no test
    reads or writes the user's ``~/.dglctl`` or another worker's jobs."""
    if config.getoption("timeout", None) is None and "PYTEST_TIMEOUT" not in os.environ:
        config.option.timeout = TEST_LIMIT
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    config.stash[_HOME] = os.environ["DGLCTL_HOME"] = tempfile.mkdtemp(
        prefix=f"dglctl-test-home-{worker}-")


def pytest_unconfigure(config):
    if (home := config.stash.get(_HOME, None)) is not None:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(autouse=True)
def _signals_left_as_found():
    """Every test leaves the runner's handlers of SIGINT, SIGTERM and SIGHUP and its main
    thread's signal mask as it found them: a leak makes the processes of later tests deaf to
    Ctrl-C (a Python started with SIGINT ignored installs no KeyboardInterrupt handler). The
    test that changed them fails, and they are put back for the rest."""
    handlers = {s: signal.getsignal(s) for s in _WATCHED_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = [f"{signal.Signals(s).name}: {handlers[s]!r} -> {signal.getsignal(s)!r}"
               for s in _WATCHED_SIGNALS if signal.getsignal(s) != handlers[s]]
    now = signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if now != mask:
        changed.append(f"mask: {sorted(mask)} -> {sorted(now)}")
    for s, h in handlers.items():
        if h is not None:
            signal.signal(s, h)
    assert not changed, "the test left the runner's signals changed: " + "; ".join(changed)


KINDS = ("unit", "multiprocess", "ssh")
_UNMARKED = pytest.StashKey[list[str]]()
_UNMARKED_IDS = pytest.StashKey[set[int]]()  # id() of those items (xdist renames them)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Note each collected test without exactly one of KINDS (module ``pytestmark`` or its
    own decorator); the session then fails and lists them, after every test has run. Under
    xdist a worker's list never reaches the summary: there, each of them fails instead.

    Every test without an ``xdist_group`` of its own is grouped with its module, so that
    ``--dist loadgroup`` runs a module on one worker (its module-scoped servers, clusters
    and partitions start once) and the modules that share one thing that cannot be run twice
    at once (a named group such as "slurm") on one worker, one after another."""
    bad = {id(item): found for item in items
           if len(found := sorted({m.name for m in item.iter_markers() if m.name in KINDS})) != 1}
    config.stash[_UNMARKED] = [f"{item.nodeid}: {', '.join(bad[id(item)]) or 'no marker'}"
                               for item in items if id(item) in bad]
    config.stash[_UNMARKED_IDS] = set(bad)
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.hookimpl(optionalhook=True)  # an xdist hook, in the controller
def pytest_xdist_node_collection_finished(node, ids):
    """Stops the run before any test when the groups did not reach the scheduler.

    A worker tells the controller each test's group by appending ``@group`` to its node id
    (every test has one here: its module's, or a named one). pytest 9.2 made node ids
    structured and xdist 3.8's rename silently stopped taking effect
    (https://github.com/pytest-dev/pytest-xdist/issues/1386): each group was then dealt
    test by test to both workers, and two test Slurms with the same node names and job ids
    killed each other's steps. pyproject.toml keeps pytest below 9.2 until xdist follows;
    this names the cause if a newer pair breaks it again."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [nodeid for nodeid in ids if "@" not in nodeid]
    if lost:
        pytest.exit(f"pytest-xdist's --dist loadgroup does not group tests with pytest "
                    f"{pytest.__version__}: {len(lost)} of {len(ids)} tests reached the "
                    f"scheduler without their group (e.g. {lost[0]}). Install the versions "
                    "pyproject.toml names (make setup), or run with -n 0.", returncode=4)


def pytest_runtest_setup(item):
    if hasattr(item.config, "workerinput") and id(item) in item.config.stash.get(
            _UNMARKED_IDS, set()):
        pytest.fail(f"the test needs exactly one of {', '.join(KINDS)}: add `pytestmark = "
                    "pytest.mark.<kind>` to the module, or mark the test", pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    if session.config.stash.get(_UNMARKED, []) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    unmarked = config.stash.get(_UNMARKED, [])
    if unmarked:
        terminalreporter.section(f"{len(unmarked)} tests need exactly one of "
                                 f"{', '.join(KINDS)}", sep="!", red=True)
        terminalreporter.line("add `pytestmark = pytest.mark.<kind>` to the module, or mark "
                              "each test of a module that mixes kinds:")
        for line in unmarked:
            terminalreporter.line("  " + line)
