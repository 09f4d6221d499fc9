"""The agent's view of one process, at the moment its wrapper finishes: the wrapper writes the
exit status, then exits; a probe that read "no status yet" and then found no process must
read the status again rather than call the process missing (a clean job was once reported
"disappeared (killed together with its wrapper)")."""

from __future__ import annotations

import json
import time

import pytest

from dglctl.agent import processes as agent

pytestmark = pytest.mark.unit


def test_status_written_between_the_two_looks_is_an_exit(tmp_path, monkeypatch):
    def wrapper_finishes_now(pgid: int) -> bool:
        (tmp_path / "trainer-0-0.rc").write_text(json.dumps({"code": 0, "time": time.time()}))
        return False  # ... and its process group is gone

    monkeypatch.setattr(agent, "alive", wrapper_finishes_now)
    state = agent._state(tmp_path, "trainer-0-0", 4242)
    assert state["state"] == "exited" and state["code"] == 0


def test_no_status_and_no_process_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(agent, "alive", lambda pgid: False)
    assert agent._state(tmp_path, "trainer-0-0", 4242)["state"] == "missing"


def test_a_signal_is_reported_as_killed(tmp_path, monkeypatch):
    (tmp_path / "server-0-0.rc").write_text(json.dumps({"code": -9, "time": 1.0}))
    monkeypatch.setattr(agent, "alive", lambda pgid: False)
    state = agent._state(tmp_path, "server-0-0", 4242)
    assert (state["state"], state["signal"], state["code"]) == ("killed", 9, None)
