"""The transport's time limits, all from the job's one timeout (runtime/rpc/liveness.py)."""

from __future__ import annotations

import pytest

from runtime.env import RuntimeEnv
from runtime.errors import EnvError
from runtime.rpc.liveness import Liveness

pytestmark = pytest.mark.unit


def test_the_idle_grace_is_three_timeouts_unless_the_env_contract_sets_it():
    assert Liveness(4.0).idle_grace == 12.0
    assert Liveness(4.0, 1.5).idle_grace == 1.5
    env = RuntimeEnv.from_environ({"DGLCTL_ROLE": "server", "DGLCTL_JOB_ID": "j",
                                   "DGLCTL_TOKEN": "t", "DGLCTL_MACHINE_ID": "0",
                                   "DGLCTL_IP_CONFIG": "ip", "DGLCTL_PART_CONFIG": "p",
                                   "DGLCTL_IDLE_GRACE": "0.5"})
    assert env is not None and env.idle_grace == 0.5
    assert RuntimeEnv.from_environ(env.to_environ()) == env  # a child process gets it too
    with pytest.raises(EnvError, match="DGLCTL_IDLE_GRACE=-1.0: must be >= 0"):
        RuntimeEnv("server", "j", "t", 0, "ip", "p", idle_grace=-1.0)
