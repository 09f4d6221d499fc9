"""The one setting every wait of the tests and benchmark smoke runs derives from.

``DGLCTL_TEST_TIMEOUT`` seconds (default 10) is what a process may take to answer or to exit;
longer waits (a script's whole run) are multiples of it, and so is the per-test limit. Raise
it on a slow or busy machine.
"""

from __future__ import annotations

import os

TIMEOUT = float(os.environ.get("DGLCTL_TEST_TIMEOUT", "10"))
# The runtime's own peer timeout (RuntimeEnv.timeout) in test jobs: short, so that the tests of
# a dead or silent peer end quickly.
PEER_TIMEOUT = 0.3 * TIMEOUT
# A test's servers that are to leave on their own once their clients have gone wait this long
# (DGLCTL_IDLE_GRACE), not the three job timeouts a paused trainer in production may need.
IDLE_GRACE = 0.1 * TIMEOUT
# The longest wait inside a test: a whole launch's, script's or smoke run's run.
RUN_TIMEOUT = 30 * TIMEOUT
# pytest-timeout's per-test limit (tests/conftest.py sets it unless --timeout or PYTEST_TIMEOUT
# does): above RUN_TIMEOUT, so that a test's own wait fails first and names what it waited
# for; the limit catches only what has no wait of its own. About twice what the slowest test
# takes beside two busy loops.
TEST_LIMIT = 36 * TIMEOUT
