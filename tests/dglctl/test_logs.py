"""dglctl logs (whole logs, --tail, --since, --role, --host, -f, --json), stop --json and
NO_COLOR: real jobs on the local default cluster, and the agent's log reading on files."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from dglctl.agent.logs import MARK, read_log, since_start, tail_lines, tail_start, utf8_cut
from dglctl.display import use_colour
from dglctl.jobs.manifest import JobManifest
from testing.cli import run_cli as run
from testing.clusters import local_cluster as local_cluster_yaml
from testing.jobs import detached_job
from testing.procs import leftovers
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until
from tests.dglctl import SCRIPTS

CHATTY = str(SCRIPTS / "chatty.py")
LINE = re.compile(r"\[(\S+) (\w+) (\d+)\] (.*)")


def chatty_line(rank: int, i: int) -> str:
    """What scripts/chatty.py prints as line ``i`` of ``rank`` (kept equal to its ``line``)."""
    return f"rank {rank} line {i:07d} héllo wörld 漢字 {'x' * (i % 97)}"


def by_log(out: str) -> dict[str, list[str]]:
    """Printed lines grouped by their ``[host role rank]`` prefix, in order."""
    logs: dict[str, list[str]] = {}
    for text in out.split("\n")[:-1]:
        m = LINE.fullmatch(text)
        assert m, f"a line without its prefix: {text[:200]!r}"
        logs.setdefault(f"{m[1]} {m[2]} {m[3]}", []).append(m[4])
    return logs


def expected_big(rank: int, lines: list[str]) -> list[str]:
    """Every line trainer ``rank`` of 'chatty.py big' printed, from the count in its last."""
    n = int(re.fullmatch(rf"rank {rank} wrote (\d+) lines; no newline after this",
                         lines[-1])[1])
    want = [chatty_line(rank, i) for i in range(n)]
    if rank == 0:
        want.insert(1000, "long " + "é" * (3 * 2**19) + " end")
    return [*want, lines[-1]]


def launch(parts, cluster, capsys, *args: str) -> str:
    """A detached job of chatty.py trainers on ``cluster``; its id."""
    code, out, err = run(["launch", CHATTY, "--cluster", str(cluster), "--part-config",
                          str(parts[2]), "--detach", "--", *args], capsys)
    assert code == 0, err
    m = re.search(r"job (\d{4}-[0-9a-f]{6})", out)
    assert m, out
    return m[1]


def wait_for(job: str, capsys, text: str, count: int = 4) -> str:
    """``dglctl logs JOB`` once ``text`` is in it ``count`` times (within 6 timeouts)."""
    seen = ""

    def logs() -> str | None:
        nonlocal seen
        code, seen, err = run(["logs", job, "--role", "trainer"], capsys)
        assert code == 0, err
        return seen if seen.count(text) >= count else None

    try:
        return wait_until(logs, f"{text!r} {count} times in the trainers' logs",
                          timeout=6 * TIMEOUT, interval=0.5)
    except WaitTimeout as e:
        raise AssertionError(f"{e}; the logs:\n{seen[-3000:]}") from None


def dglctl(*args: str, blocked: bool = False) -> subprocess.Popen:
    """``python -m dglctl ARGS`` (``blocked``: started with SIGINT blocked, as a program's
    pool thread that blocked it would start it)."""
    # PYTHONFAULTHANDLER: a hung one dumps every thread's stack on SIGABRT (see stacks_of).
    return subprocess.Popen([sys.executable, "-m", "dglctl", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                            preexec_fn=(lambda: signal.pthread_sigmask(
                                signal.SIG_BLOCK, {signal.SIGINT})) if blocked else None)


def stacks_of(proc: subprocess.Popen) -> str:
    """What a process from :func:`dglctl` that does not end was doing: every thread's stack
    (SIGABRT makes faulthandler print them), with the rest of its stderr."""
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "(no stacks: it did not end on SIGABRT either)"
    return err[-20000:]


@pytest.mark.multiprocess
def test_whole_logs_of_several_mib_every_line_once_in_order(parts, home, full_local_cluster,
                                                          capsys):
    job = launch(parts, full_local_cluster, capsys, "big", "3")
    try:
        # -f follows across hosts and ends by itself once every process has ended.
        follow = dglctl("logs", job, "-f")
        out, err = follow.communicate(timeout=9 * TIMEOUT)
        assert follow.returncode == 0, err
        logs = by_log(out)
        for rank, host in enumerate(["m0", "m0", "m1", "m1"]):
            got = logs[f"{host} trainer {rank}"]
            assert got == expected_big(rank, got), f"trainer {rank}"
        m = JobManifest.load(job)
        sizes = [Path(p.log).stat().st_size for p in m.procs if p.role == "trainer"]
        assert min(sizes) > 3 * 2**20, sizes  # several reads of 1 MiB each
        # Without -f: the same lines, each log whole and in turn.
        code, out, err = run(["logs", job, "--role", "trainer"], capsys)
        assert code == 0, err
        assert by_log(out) == {k: v for k, v in logs.items() if " trainer " in k}
        labels = [LINE.fullmatch(t).groups()[:3] for t in out.split("\n")[:-1]]
        assert [lab for i, lab in enumerate(labels) if i == 0 or labels[i - 1] != lab] == [
            ("m0", "trainer", "0"), ("m0", "trainer", "1"), ("m1", "trainer", "2"),
            ("m1", "trainer", "3")]
        # --json: one object per line.
        code, out, err = run(["logs", job, "--host", "m1", "--role", "trainer", "--json"],
                             capsys)
        assert code == 0, err
        records = [json.loads(t) for t in out.split("\n")[:-1]]
        assert set(records[0]) == {"host", "role", "rank", "line"}
        got = [r["line"] for r in records if r["rank"] == 3]
        assert got == logs["m1 trainer 3"] and {r["host"] for r in records} == {"m1"}
        # --tail N: the last N lines of each log, the unterminated one included.
        code, out, err = run(["logs", job, "--tail", "3", "--host", "m0", "--role", "trainer"],
                             capsys)
        assert code == 0, err
        assert by_log(out) == {f"m0 trainer {r}": logs[f"m0 trainer {r}"][-3:] for r in (0, 1)}
        code, out, _ = run(["logs", job, "--tail", "0"], capsys)
        assert out == ""
        # Samplers and unknown hosts: said so, naming the job.
        code, _, err = run(["logs", job, "--role", "sampler"], capsys)
        assert code == 2 and "sampler processes have no log of their own" in err, err
        assert f"dglctl logs {job} --role trainer" in err
        code, _, err = run(["logs", job, "--host", "m9"], capsys)
        assert code == 2 and f"job {job} has no host 'm9'; its hosts: m0, m1" in err, err
    finally:
        code, out, err = run(["stop", job], capsys)
    assert code == 0, err
    assert leftovers(job) == ([], [])


@pytest.mark.multiprocess
def test_since_follow_to_the_stop_and_stop_json(parts, home, local_cluster, tmp_path, capsys):
    trigger = tmp_path / "go"
    job = launch(parts, local_cluster, capsys, "marks", str(trigger))
    try:
        wait_for(job, capsys, "early done", 2)
        time.sleep(1.1)  # one time mark a second: this read notes where "early" ends
        assert run(["logs", job, "--role", "trainer"], capsys)[0] == 0
        since = time.time()
        follow = dglctl("logs", job, "-f", "--role", "trainer", "--since", "1h")
        time.sleep(0.1)
        trigger.touch()
        wait_for(job, capsys, "late done", 2)
        at = datetime.fromtimestamp(since).isoformat()
        code, out, err = run(["logs", job, "--role", "trainer", "--since", at], capsys)
        assert code == 0, err
        assert "early" not in out and out.count(" late ") == 2 * 51, out
        # Placed by the mark of the read above: the note (a start more than 2 s before
        # --since) appears only when that read took longer, as on a busy machine (CI with
        # two busy loops took 2.5 s); what it says is checked, not whether it appears.
        assert err == "" or ("lines carry no time" in err and "before --since" in err), err
        code, out, err = run(["logs", job, "--role", "trainer", "--since", "1h"], capsys)
        assert out.count(" early ") == 2 * 51 and out.count(" late ") == 2 * 51
        assert err == "", "the job began after --since: all of it, exactly"
        code, out, err = run(["logs", job, "--since", "2h", "--tail", "2", "--role", "trainer"],
                             capsys)
        assert [t.split("] ")[1] for t in out.split("\n")[:-1]] == [
            f"rank {r} {w}" for r in (0, 1) for w in ("late 49", "late done")]
        future = datetime.fromtimestamp(time.time() + 3600).isoformat()
        assert run(["logs", job, "--since", future], capsys)[1] == ""
        code, _, err = run(["logs", job, "--since", "soon"], capsys)
        assert code == 2 and "--since 'soon': not a duration or an ISO time" in err
        # stop --json: what was signalled, per host; then -f ends by itself.
        code, out, err = run(["stop", job, "--json"], capsys)
        assert code == 0, err
        [record] = json.loads(out)
        names = {p.name for p in JobManifest.load(job).procs}
        assert record["job"] == job and record["state"] == "stopped"
        assert set(record["terminated"]) == names and record["survivors"] == []
        assert [h["host"] for h in record["hosts"]] == ["m0", "m1"]
        assert record["signalled"] >= len(names)
        out, err = follow.communicate(timeout=6 * TIMEOUT)
        assert follow.returncode == 0, err
        assert out.count(" early ") == 2 * 51 and out.count(" late ") == 2 * 51
    finally:
        code, out, err = run(["stop", job], capsys)
    assert code == 0, err
    assert leftovers(job) == ([], [])


@pytest.fixture(scope="module")
def waiting_job(parts, tmp_path_factory):
    """One detached job of chatty.py trainers (one per host) that print their early lines,
    then wait for a file that never comes: the tests that only follow its logs share it (it
    is stopped, and proven gone, after the module)."""
    root = tmp_path_factory.mktemp("waiting-job")
    cluster = local_cluster_yaml(root / "local.yaml", root / "ws", trainers_per_host=1)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DGLCTL_HOME", str(root / "home"))  # for the in-process dglctl calls
        with detached_job(root / "home", [CHATTY, "--cluster", str(cluster), "--part-config",
                                          str(parts[2]), "--", "marks",
                                          str(root / "never")]) as job:
            yield job


@pytest.mark.multiprocess
@pytest.mark.parametrize("blocked", [False, True], ids=["plain", "inherited-blocked"])
def test_ctrl_c_ends_following_with_130(waiting_job, capsys, blocked):
    job = waiting_job
    follow = None
    try:
        wait_for(job, capsys, "early done", 2)
        follow = dglctl("logs", job, "-f", blocked=blocked)
        seen, deadline = "", time.monotonic() + 6 * TIMEOUT
        while seen.count("early done") < 2 and time.monotonic() < deadline:
            if select.select([follow.stdout], [], [], 0.2)[0]:
                seen += os.read(follow.stdout.fileno(), 1 << 16).decode(errors="replace")
        assert seen.count("early done") == 2, seen
        follow.send_signal(signal.SIGINT)
        try:
            _, err = follow.communicate(timeout=3 * TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail("logs -f still ran after Ctrl-C; its threads:\n" + stacks_of(follow))
        assert follow.returncode == 130, err
        assert "Traceback" not in err and "interrupted" in err
        # Ctrl-C ended the follower, not the job.
        code, out, err = run(["status", job, "--json"], capsys)
        assert code == 0 and json.loads(out)["state"] == "running", (out, err)
    finally:
        if follow is not None and follow.poll() is None:
            follow.kill()
            follow.wait()


@pytest.mark.multiprocess
@pytest.mark.parametrize("no_color", ["1", None])
def test_no_color_on_a_terminal(home, no_color):
    """An error on a terminal is coloured, unless NO_COLOR is set (https://no-color.org)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    if no_color:
        env["NO_COLOR"] = no_color
    parent, child = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "dglctl", "logs", "0000-000000"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=child, env=env)
        os.close(child)
        err = b""
        deadline = time.monotonic() + 6 * TIMEOUT
        while time.monotonic() < deadline:
            if select.select([parent], [], [], 0.2)[0]:
                try:
                    data = os.read(parent, 4096)
                except OSError:  # the terminal's other end closed
                    break
                if not data:
                    break
                err += data
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=TIMEOUT) == 2, err
    finally:
        os.close(parent)
    assert b"error: " in err and b"0000-000000" in err, err
    assert (b"\x1b[" in err) == (no_color is None), err


@pytest.mark.unit
def test_no_colour_off_a_terminal(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    with open(tmp_path / "f", "w") as f:
        assert not use_colour(f)


# --- the agent's reading of one log file (no processes) ------------------------------------------
@pytest.mark.unit
def test_reads_never_cut_a_character_and_join_up_exactly(tmp_path):
    text = "".join(f"{i} é漢😀 {'ü' * (i % 13)}\n" for i in range(3000)) + "tail é"
    log = tmp_path / "t.log"
    log.write_bytes(text.encode())
    for max_bytes in (4, 5, 7, 1000, 4096):
        got, offset = "", 0
        while True:
            chunk = read_log(log, offset, max_bytes)
            if chunk["offset"] == offset:
                break
            got += chunk["text"]
            offset = chunk["offset"]
        assert got == text and "\ufffd" not in got, max_bytes
    assert utf8_cut("é".encode()[:1]) == 0 and utf8_cut(b"ab\xe6\xbc") == 2


@pytest.mark.unit
def test_tail_start_counts_lines_from_the_end(tmp_path):
    log = tmp_path / "t.log"
    for body, lines, want in ((b"a\nb\nc\n", 1, b"c\n"), (b"a\nb\nc\n", 2, b"b\nc\n"),
                              (b"a\nb\nc", 1, b"c"), (b"a\nb\nc", 9, b"a\nb\nc"),
                              (b"", 3, b""), (b"a\n", 0, b"")):
        log.write_bytes(body)
        with open(log, "rb") as f:
            assert body[tail_start(f, len(body), lines):] == want, (body, lines)
    big = b"".join(b"%d\n" % i for i in range(100_000))  # more than one block back
    log.write_bytes(big)
    assert tail_lines(tmp_path, ["t"], 3) == {"t": ["99997", "99998", "99999"]}


@pytest.mark.unit
def test_since_starts_at_the_last_mark_before_it(tmp_path):
    log = tmp_path / "t.log"
    log.write_bytes(b"one\ntwo\nthree\nfour\n")
    (tmp_path / "t.leader.json").write_text("{}")
    os.utime(tmp_path / "t.leader.json", (1000.0, 1000.0))
    os.utime(log, (2000.0, 2000.0))
    # Marks at 1100 (4 bytes: "one\n") and 1500 (10: halfway through "three").
    (tmp_path / "t.logtimes").write_bytes(MARK.pack(1100.0, 4.0) + MARK.pack(1500.0, 10.0))
    with open(log, "rb") as f:
        size = len(log.read_bytes())
        assert since_start(log, f, size, 900.0) == (0, None)  # before the process began
        assert since_start(log, f, size, 1050.0) == (0, 1000.0)  # no mark: all, said so
        assert since_start(log, f, size, 1200.0) == (4, 1100.0)
        assert since_start(log, f, size, 1600.0) == (8, 1500.0)  # back to its line's start
        assert since_start(log, f, size, 2500.0) == (size, None)  # nothing written since
    assert read_log(log, 0, 100, since=1600.0)["text"] == "three\nfour\n"
    assert read_log(log, 0, 100, since=1600.0, tail=1)["text"] == "four\n"


@pytest.mark.unit
def test_marks_one_a_second_and_two_per_unchanged_size(tmp_path, monkeypatch):
    import dglctl.agent.logs as agent_logs

    log = tmp_path / "t.log"
    now = [100.0]
    monkeypatch.setattr(agent_logs.time, "time", lambda: now[0])

    def marks() -> list[tuple[float, float]]:
        return list(MARK.iter_unpack((tmp_path / "t.logtimes").read_bytes()))

    for t, size in ((100.0, 10), (100.5, 20), (101.0, 20), (102.0, 20), (103.0, 20),
                    (104.0, 30)):
        now[0] = t
        agent_logs.add_mark(log, size)
    # 100.5 is too soon; 20 bytes were seen first at 101 and last at 103.
    assert marks() == [(100.0, 10), (101.0, 20), (103.0, 20), (104.0, 30)]
    assert oct(os.stat(tmp_path / "t.logtimes").st_mode & 0o777) == "0o600"
