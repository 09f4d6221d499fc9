"""``dglctl partition --distributed``: ranks on this machine, on a local cluster's hosts, and
over real SSH (the test sshd on 127.0.0.2-3, Open MPI starting its daemons through it); the
files are the single-machine command's for the same assignment; rank 0's phases show, every
rank's output has its log; a rank killed mid-run or a Ctrl-C ends every rank, names the cause
and leaves nothing; preflight names a host that cannot run a rank; options a distributed run
cannot take are refused before anything starts."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from partitioner.format import read_config
from partitioner.generate import generate_graph
from partitioner.readers import write_chunked, write_npz
from testing.cli import run_cli
from testing.timeouts import TIMEOUT
from testing.wait import WaitTimeout, wait_until

REPO = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A small npz and a heterogeneous chunked input (3 chunks), and a saved assignment."""
    root = tmp_path_factory.mktemp("dist-in")
    write_npz(generate_graph(600, avg_degree=6, seed=3), root / "g.npz")
    write_chunked(generate_graph(600, avg_degree=6, seed=3, hetero=True), root / "het", "g", 3)
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A graph whose ParMETIS phase takes seconds here: long enough to act during it."""
    path = tmp_path_factory.mktemp("dist-big") / "big.npz"
    write_npz(generate_graph(200_000, avg_degree=10, seed=1), path)
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix != ".json"}


def _dglctl(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    if argv[0] == "partition":
        argv = (*argv, "--graph-name", "g")
    return subprocess.run([sys.executable, "-m", "dglctl", *argv], capture_output=True,
                          text=True, timeout=12 * TIMEOUT, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _processes(marker: str, *, ranks_only: bool = True) -> list[int]:
    """The ranks (and, unless ``ranks_only``, mpiexec and its agent wrapper) of a run whose
    argv holds ``marker``."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            cmd = b" ".join(argv).decode(errors="replace")
            rank = argv[1:3] == [b"-m", b"partitioner.distributed"]
            if marker in cmd and "partitioner.distributed" in cmd and (rank or not ranks_only):
                found.append(int(d.name))
    return found


def _kill_run(out: Path) -> list[int]:
    """SIGKILL what is left of a run into ``out`` (mpiexec, its wrapper, the ranks, held or
    not); the PIDs it found."""
    left = _processes(str(out), ranks_only=False)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def _no_process_left(out: Path) -> None:
    """No process of a run into ``out`` runs within the timeout (what is left is killed)."""
    with contextlib.suppress(WaitTimeout):  # what is left is killed and named below
        wait_until(lambda: not _processes(str(out), ranks_only=False),
                   "no process of the run", interval=0.1)
    left = _kill_run(out)
    assert not left, left


def _nothing_left(out: Path) -> None:
    """No rank of a run into ``out`` still runs; no output, no temporary folder."""
    _no_process_left(out)
    assert not out.exists()
    assert [p.name for p in out.parent.glob(f".{out.name}.tmp-*")] == []


@pytest.mark.multiprocess
@pytest.mark.parametrize(("source", "ranks"), [("g.npz", 2), ("het", 3)], ids=["npz", "chunked"])
def test_ranks_write_what_one_machine_writes(inputs, tmp_path, source, ranks):
    inp = inputs / source
    assign = tmp_path / "a.npy"
    one = _dglctl("partition", "--input", str(inp), "--num-parts", "3", "--out",
                  str(tmp_path / "metis"), "--method", "metis", "--save-assignment", str(assign))
    assert one.returncode == 0, one.stderr
    single = _dglctl("partition", "--input", str(inp), "--num-parts", "3", "--out",
                     str(tmp_path / "single"), "--assignment", str(assign))
    assert single.returncode == 0, single.stderr
    dist = _dglctl("partition", "--input", str(inp), "--num-parts", "3", "--out",
                   str(tmp_path / "dist"), "--assignment", str(assign), "--distributed",
                   "--ranks", str(ranks))
    assert dist.returncode == 0, dist.stderr
    assert _files(tmp_path / "dist") == _files(tmp_path / "single")
    doc = json.loads((tmp_path / "dist" / "g.json").read_text())
    assert doc["quality"]["ranks"] == ranks and doc["part_method"] == "assignment"
    logs = tmp_path / "dist.logs"
    assert (logs / "rank-0.log").exists() and f"on {ranks} ranks" in dist.stdout
    assert "[1/6] assign: assignment: 3 parts on" in dist.stderr
    assert "[6/6] ids" in dist.stderr and "ids done in" in dist.stderr


@pytest.mark.multiprocess
def test_a_local_cluster_runs_one_rank_per_host(inputs, tmp_path, local_cluster):
    r = _dglctl("partition", "--input", str(inputs / "g.npz"), "--num-parts", "2", "--out",
                str(tmp_path / "out"), "--distributed", "--cluster", str(local_cluster),
                "--json", "--logs", str(tmp_path / "logs"), "--balance-edges")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["quality"]["ranks"] == 2 and doc["part_method"] == "parmetis"
    # The ranks were asked for in-degree; PT-Scotch balances the first weight only, and says
    # (rank 0's note: on stderr without --json, in its log always).
    said = (tmp_path / "logs" / "rank-0.log").read_text()
    assert "ptscotch balances nodes only" in said and "train, in-degree" in said, said
    assert doc["balance"] == ["nodes"]
    assert doc["_logs"] == str(tmp_path / "logs")
    assert (tmp_path / "logs" / "rank-0.log").exists()


@pytest.mark.multiprocess
@pytest.mark.parametrize("where", ["ranks", "local-cluster"])
def test_a_python_without_mpi4py_is_refused_before_any_rank(inputs, tmp_path, home,
                                                           local_cluster, where):
    # A real stand-in for a missing package: the ranks' Python finds it and cannot import it.
    stand_in = tmp_path / "site" / "mpi4py"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text('raise ImportError("No module named mpi4py")\n')
    out = tmp_path / "out"
    ranks = ["--ranks", "2"] if where == "ranks" else ["--cluster", str(local_cluster)]
    r = _dglctl("partition", "--input", str(inputs / "g.npz"), "--num-parts", "2", "--out",
                str(out), "--distributed", *ranks,
                env={"PYTHONPATH": f"{stand_in.parent}{os.pathsep}{REPO}"})
    assert r.returncode == 2, r.stderr
    assert (f"this machine: mpi4py does not load with {sys.executable}: ImportError: No module "
            "named mpi4py (pip install 'dglctl[mpi]' into that Python)") in r.stderr, r.stderr
    assert "apt-get install openmpi-bin libopenmpi-dev libptscotch-dev" in r.stderr  # the hint
    assert r.stderr.count("error:") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "<stderr>" not in r.stderr and "rank" not in r.stderr, r.stderr
    # No rank started: mpiexec never ran (no job recorded), and no logs folder or output.
    from dglctl.jobs.manifest import list_jobs

    assert list_jobs() == []
    assert not (tmp_path / "out.logs").exists()
    _nothing_left(out)


@pytest.mark.unit
@pytest.mark.parametrize(("extra", "said"), [
    (["--method", "parmetis"], "--method parmetis is for a partition on MPI ranks"),
    (["--ranks", "2"], "--ranks is for a partition on MPI ranks"),
    (["--distributed", "--method", "metis"], "parmetis or random, not metis"),
    (["--distributed", "--halo-hops", "2"], "halos of 0 or 1 hop"),
    (["--distributed", "--balance-ntypes", "label"], "does not take --balance-ntypes"),
    (["--distributed", "--regime", "lean", "--objtype", "vol"],
     "does not take --objtype, --regime"),
])
def test_what_it_cannot_do_is_refused_before_any_rank(inputs, tmp_path, capsys, extra, said):
    code, _, err = run_cli(["partition", "--input", str(inputs / "g.npz"), "--num-parts", "2",
                            "--out", str(tmp_path / "out"), *extra], capsys)
    assert code == 2 and said in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.logs").exists()


@pytest.mark.unit
def test_text_input_is_refused_with_what_to_do(tmp_path, capsys):
    edges = tmp_path / "g.csv"
    edges.write_text("0,1\n1,2\n")
    code, _, err = run_cli(["partition", "--input", str(edges), "--num-parts", "2", "--out",
                            str(tmp_path / "out"), "--distributed"], capsys)
    assert code == 2 and "reads npz or chunked input" in err and "not text" in err, err


def _in_assign(big: Path, out: Path, parts: int) -> tuple[subprocess.Popen, str]:
    """``dglctl partition --distributed`` of ``big``, once its ranks are in ParMETIS; and what
    it printed so far."""
    proc = subprocess.Popen([sys.executable, "-m", "dglctl", "partition", "--input", str(big),
                             "--num-parts", str(parts), "--out", str(out), "--distributed"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stderr is not None
    seen = ""
    for line in proc.stderr:
        seen += line
        if "[1/6] assign" in line:
            break
    return proc, seen


def _hold(ranks: list[int], count: int, seen: str) -> None:
    """SIGSTOP the ranks: held where they are, they cannot finish before the test's stop on a
    busy machine (the stop's SIGKILL, after SIGTERM's grace, ends a stopped process)."""
    assert len(ranks) == count, (ranks, seen)
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)


def _record(rank: int, error: str, at: float, consequence: str | None = None) -> str:
    doc = {"error": error, "hint": None, "rank": rank, "host": f"h{rank}", "time": at,
           "consequence": consequence, "traceback": None}
    return f"[1,{rank}]<stderr>:{json.dumps(doc)}"


GONE = "its temporary output folder was gone"


@pytest.mark.unit
@pytest.mark.parametrize(("lines", "cause", "after"), [
    # The consequence came through mpiexec first; the cause came first in time.
    ([_record(2, "FileNotFoundError: part2/graph", 2.0, GONE),
      _record(1, "RuntimeError: injected failure", 1.0)], 1, [2]),
    # A consequence earlier in time (clocks of two hosts) does not win over a cause.
    ([_record(0, "Exception: MPI_ERR_OTHER", 1.0, "a collective failed"),
      _record(2, "RuntimeError: injected failure", 1.5)], 2, [0]),
    # Only consequences, and a rank ended by a signal: the signal is the cause.
    ([_record(0, "Exception: MPI_ERR_OTHER", 1.0, "a collective failed"),
      "mpiexec noticed that process rank 1 with PID 77 on node vm exited on signal 9 (Killed)."],
     1, [0]),
    # Only consequences, nothing else: the earliest still says what went wrong.
    ([_record(2, "Exception: late", 3.0, "a collective failed"),
      _record(0, "Exception: early", 1.0, "a collective failed")], 0, [2]),
], ids=["cause-after-consequence", "cause-over-earlier-consequence", "signal", "all-consequences"])
def test_the_root_cause_is_the_first_failure_that_follows_from_none(tmp_path, lines, cause,
                                                                     after):
    from dglctl.jobs.mpi import RankOutput, failure

    output = RankOutput(tmp_path / "logs", on_line=lambda doc: None)
    for line in lines:
        output.feed(line)
    run = output.finish(1)
    assert run.error is not None and run.error.rank == cause, run
    assert [c.rank for c in run.consequences] == after
    message = failure(run, tmp_path / "logs").message
    assert message.startswith(f"rank {cause} on "), message
    assert "as a consequence" in message, message


# Open MPI 4.1 tags each chunk it reads from a rank, not each line: a line a rank wrote in two
# writes comes in two pieces, other ranks' pieces between them (as mpiexec printed them).
_RESULT = '{"config": "/out/g.json", "quality": {"ranks": 2}}'
_PIECES = [
    "[1,0]<stdout>:" + _RESULT[:12] + "[1,1]<stderr>:[2/6] halo[1,0]<stdout>:" + _RESULT[12:],
    "[1,1]<stderr>: done",
    "[1,0]<stderr>:" + '{"phase": "ids"' + "[1,1]<stdout>:[1,0]<stderr>:" + "}",
    "[1,1]<stderr>:last words without a newline[1,0]<stdout>:",
]


@pytest.mark.unit
def test_a_line_in_pieces_between_other_ranks_pieces_is_one_line(tmp_path):
    from dglctl.jobs.mpi import RankOutput

    seen: list[dict] = []
    output = RankOutput(tmp_path / "logs", on_line=seen.append)
    for line in _PIECES:
        output.feed(line)
    run = output.finish(0)
    assert run.result == json.loads(_RESULT) and run.error is None, run
    assert seen == [{"phase": "ids"}]
    assert run.said == []  # no piece was taken for mpiexec's own words
    assert (tmp_path / "logs" / "rank-1.log").read_text().splitlines() == [
        "stderr: [2/6] halo done", "stdout: ", "stderr: last words without a newline"]
    assert (tmp_path / "logs" / "rank-0.log").read_text().splitlines() == [
        f"stdout: {_RESULT}", 'stderr: {"phase": "ids"}', "stdout: "]


@pytest.mark.multiprocess
def test_a_rank_killed_mid_run_is_named_and_nothing_is_left(big, tmp_path):
    out = tmp_path / "out"
    proc, seen = _in_assign(big, out, 3)
    try:
        ranks = _processes(str(out))
        assert len(ranks) == 3, (ranks, seen)
        os.kill(ranks[1], signal.SIGKILL)
        _, err = proc.communicate(timeout=6 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, seen + err
    assert "ended by signal 9 (SIGKILL)" in err and "error: rank " in err, err
    assert f"every rank's output is in {out}.logs" in err
    _nothing_left(out)


@pytest.mark.multiprocess
def test_ctrl_c_ends_every_rank_and_leaves_nothing(big, tmp_path, request):
    out = tmp_path / "out"
    request.addfinalizer(lambda: _kill_run(out))  # held processes never end alone
    proc, seen = _in_assign(big, out, 2)
    try:
        _hold(_processes(str(out)), 2, seen)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=6 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "stopped by SIGINT: every rank ended" in err, err
    _nothing_left(out)


@pytest.mark.multiprocess
def test_status_logs_and_stop_see_the_partition_as_a_job(big, tmp_path, home, request):
    out = tmp_path / "out"
    request.addfinalizer(lambda: _kill_run(out))  # held processes never end alone
    proc, seen = _in_assign(big, out, 2)
    try:
        _hold(_processes(str(out)), 2, seen)
        job = re.search(r"job (\d{4}-[0-9a-f]{6}) \(", seen).group(1)
        listed = json.loads(_dglctl("status", "--json").stdout)
        (mine,) = [j for j in listed if j["job"] == job]
        assert mine["state"] == "running" and mine["script"] == "dglctl partition --distributed"
        status = json.loads(_dglctl("status", job, "--json").stdout)
        (row,) = status["processes"]
        assert (row["role"], row["state"]) == ("partition", "running"), status
        logs = _dglctl("logs", job)
        assert logs.returncode == 0 and '[1,0]<stderr>:{"phase": "assign"' in logs.stdout, logs
        stopped = _dglctl("stop", job)
        assert stopped.returncode == 0, stopped.stderr
        _, err = proc.communicate(timeout=6 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"job {job} was stopped by 'dglctl stop': every rank ended" in err, err
    _nothing_left(out)
    status = json.loads(_dglctl("status", job, "--json").stdout)
    assert status["state"] == "stopped", status


@pytest.mark.multiprocess
def test_a_stop_after_the_ranks_wrote_the_partition_says_it_is_complete(big, tmp_path, home,
                                                                        request):
    out = tmp_path / "out"
    request.addfinalizer(lambda: _kill_run(out))  # held processes never end alone
    proc, seen = _in_assign(big, out, 2)
    try:
        # mpiexec held: the ranks write and put the partition in place, mpiexec cannot end.
        (mpiexec,) = [pid for pid in _processes(str(out), ranks_only=False)
                      if Path(f"/proc/{pid}/exe").resolve().name.startswith(("mpiexec",
                                                                            "orterun"))]
        os.kill(mpiexec, signal.SIGSTOP)
        wait_until(lambda: (out / "big.json").exists(), f"the partition in place ({seen})",
                   timeout=12 * TIMEOUT, interval=0.1)
        job = re.search(r"job (\d{4}-[0-9a-f]{6}) \(", seen).group(1)
        assert _dglctl("stop", job).returncode == 0
        out_text, err = proc.communicate(timeout=6 * TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "after the ranks had written" in err and "the partition is complete" in err, err
    assert "edge cut" in out_text and read_config(out / "big.json").num_parts == 2
    status = json.loads(_dglctl("status", job, "--json").stdout)
    assert status["state"] == "succeeded", status
    _no_process_left(out)


def _ssh_cluster(path: Path, sshd, pythons: tuple[str, str] = (sys.executable,) * 2,
                 port: int | None = None, **ssh: str) -> Path:
    data = {
        "transport": "ssh",
        "ssh": {"user": "root", "port": port or sshd.port, "key": str(sshd.client_key),
                "known_hosts": str(sshd.known_hosts), "connect_timeout": 3, **ssh},
        "hosts": [{"name": f"h{i}", "address": a, "workspace": str(path.parent / f"ws-h{i}"),
                   "python": py}
                  for i, (a, py) in enumerate(zip(("127.0.0.2", "127.0.0.3"), pythons,
                                                   strict=True))],
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.ssh
def test_ranks_over_ssh_write_what_one_machine_writes(inputs, sshd, tmp_path):
    assign = tmp_path / "a.npy"
    inp = inputs / "het"
    assert _dglctl("partition", "--input", str(inp), "--num-parts", "2", "--out",
                   str(tmp_path / "m"), "--method", "metis", "--save-assignment",
                   str(assign)).returncode == 0
    assert _dglctl("partition", "--input", str(inp), "--num-parts", "2", "--out",
                   str(tmp_path / "single"), "--assignment", str(assign)).returncode == 0
    cluster = _ssh_cluster(tmp_path / "ssh.yaml", sshd)
    r = _dglctl("partition", "--input", str(inp), "--num-parts", "2", "--out",
                str(tmp_path / "dist"), "--assignment", str(assign), "--distributed",
                "--cluster", str(cluster), env={"OMPI_MCA_plm_base_verbose": "5"})
    assert r.returncode == 0, r.stderr
    assert _files(tmp_path / "dist") == _files(tmp_path / "single")
    assert "on 2 hosts of" in r.stderr
    # mpiexec started its daemons on the hosts through ssh with the cluster's settings.
    said = (tmp_path / "dist.logs" / "mpiexec.log").read_text()
    assert "plm:rsh: final template argv" in said and "/ssh -F " in said, said[-3000:]
    config = (tmp_path / "dist.logs" / "ssh_config").read_text()
    assert f"Port {sshd.port}" in config and str(sshd.client_key) in config


@pytest.mark.ssh
def test_the_yaml_known_hosts_adds_to_the_files_mpiexecs_ssh_reads(inputs, sshd, tmp_path):
    """ssh.known_hosts adds a file to the known-hosts files ssh reads, for the ssh mpiexec
    starts its daemons with as for the launcher's connections: here the YAML's file knows
    only another host, and the hosts' key is in the file the user's ssh config names."""
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True)
    known = tmp_path / "yaml_known_hosts"
    known.write_text("elsewhere.invalid " + " ".join(
        (tmp_path / "other_host_key.pub").read_text().split()[:2]) + "\n")
    config = tmp_path / "user_ssh_config"
    config.write_text(f"Host *\n  UserKnownHostsFile {sshd.known_hosts}\n")
    cluster = _ssh_cluster(tmp_path / "ssh.yaml", sshd, known_hosts=str(known),
                           config=str(config))
    r = _dglctl("partition", "--input", str(inputs / "g.npz"), "--num-parts", "2", "--out",
                str(tmp_path / "out"), "--distributed", "--cluster", str(cluster),
                "--method", "random")
    assert r.returncode == 0, r.stderr  # preflight (paramiko) and mpiexec's daemons (ssh)
    assert read_config(tmp_path / "out" / "g.json").num_parts == 2
    _no_process_left(tmp_path / "out")


@pytest.mark.ssh
def test_preflight_names_a_host_that_cannot_run_a_rank(inputs, sshd, tmp_path):
    # h1's Python finds no ParMETIS library (named, and missing), h0 is fine.
    wrapper = tmp_path / "python-without-parmetis"
    wrapper.write_text(f"#!/bin/sh\nDGLCTL_PARMETIS_LIB={tmp_path / 'none.so'} "
                       f"exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    cluster = _ssh_cluster(tmp_path / "ssh.yaml", sshd, pythons=(sys.executable, str(wrapper)))
    r = _dglctl("partition", "--input", str(inputs / "g.npz"), "--num-parts", "2", "--out",
                str(tmp_path / "out"), "--distributed", "--cluster", str(cluster))
    assert r.returncode == 2, r.stderr
    assert "preflight found 1 problem(s)" in r.stderr
    assert "host h1: no ParMETIS-compatible library" in r.stderr and "none.so" in r.stderr
    assert "apt-get install" in r.stderr and not (tmp_path / "out").exists()
    # random needs no ParMETIS: the same hosts run it.
    r = _dglctl("partition", "--input", str(inputs / "g.npz"), "--num-parts", "2", "--out",
                str(tmp_path / "out"), "--distributed", "--cluster", str(cluster),
                "--method", "random")
    assert r.returncode == 0, r.stderr
    # A host SSH cannot reach: named, nothing started.
    cluster = _ssh_cluster(tmp_path / "bad.yaml", sshd, port=1)
    r = _dglctl("partition", "--input", str(inputs / "g.npz"), "--num-parts", "2", "--out",
                str(tmp_path / "out2"), "--distributed", "--cluster", str(cluster))
    assert r.returncode != 0 and "h0" in r.stderr and "h1" in r.stderr, r.stderr
    assert not (tmp_path / "out2").exists()
