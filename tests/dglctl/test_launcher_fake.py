"""The launcher's logic against FakeTransport (no processes): preflight and port choice, the
copy step's checks, the root cause of a failure, stop's shared-memory folder."""

from __future__ import annotations

import json
import re

import pytest

from dglctl.agent import __main__ as agent
from dglctl.config import load_cluster_config
from dglctl.display import Display
from dglctl.errors import (
    EXIT_INTEGRITY,
    GroupError,
    Interrupted,
    JobFailed,
    PreflightError,
    RemoteCommandFailed,
)
from dglctl.hosts.agent_client import AgentClient, ProcState, ProcStatus, probe_hosts
from dglctl.hosts.slurm_transport import SlurmTransport
from dglctl.hosts.transport import LocalTransport, SSHTransport, Transport
from dglctl.jobs.launcher import Launcher, LaunchOptions
from dglctl.jobs.manifest import JobManifest, JobState
from dglctl.jobs.observe import root_cause
from dglctl.jobs.stop import stop_job
from tests.dglctl import SCRIPTS
from tests.dglctl.fakes import FakeTransport, agent_calls, fake_factory

pytestmark = pytest.mark.unit


def _public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_the_fake_has_exactly_the_real_transports_methods():
    real = _public_methods(Transport)
    assert {"run", "write_file", "agent", "put", "put_bytes", "path", "python", "close"} <= real
    assert _public_methods(LocalTransport) == real
    assert _public_methods(SSHTransport) == real
    assert _public_methods(FakeTransport) == real
    assert _public_methods(SlurmTransport) == real | {"srun"}  # its command line, tested


def launcher(parts, full_local_cluster, *, explicit_port=False, env=None, part=2):
    cluster = load_cluster_config(full_local_cluster)
    if env:
        from dataclasses import replace

        cluster = replace(cluster, env={**cluster.env, **env})
    fakes: list[FakeTransport] = []
    opts = LaunchOptions(SCRIPTS / "trainer.py", ("ok",), parts[part],
                         port_base_explicit=explicit_port)
    la = Launcher(cluster, opts, Display(quiet=False), transport_factory=fake_factory(fakes))
    return la, fakes


def test_preflight_takes_the_configured_ports_when_free(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)
    la.preflight()
    base = la.cluster.port_base
    assert la.plan.port_base == base and la.plan.master_port == base + 1
    assert [t.workspace for t in la.transports] == ["/fake/m0", "/fake/m1"]
    (call,) = agent_calls(fakes[1], "preflight")
    assert call["bind"] == "127.0.0.2" and str(base) in call["ports"].split(",")
    assert all(not f.files for f in fakes), "preflight writes nothing"


def test_preflight_skips_a_busy_block(parts, home, full_local_cluster, capsys):
    la, fakes = launcher(parts, full_local_cluster)
    base = la.cluster.port_base
    fakes[1].busy_ports = {base + 1}  # the first block's MASTER_PORT, on one host
    la.preflight()
    assert la.plan.port_base == base + 2 and la.plan.master_port == base + 3
    assert [s.port for s in la.plan.servers] == [base + 2, base + 2]
    assert f"ports {base}.. are in use; using {base + 2}" in capsys.readouterr().err


def test_a_busy_explicit_port_base_is_a_preflight_error(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster, explicit_port=True)
    base = la.cluster.port_base
    fakes[1].busy_ports = {base}
    with pytest.raises(PreflightError) as e:
        la.preflight()
    assert e.value.exit_code == 2 and f"host m1: port(s) {base} in use" in e.value.message
    assert la.plan is None


def test_preflight_reports_every_problem(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)
    fakes[0].answers["preflight"] = lambda o: {**fakes[0]._preflight(o), "dglctl": "0.0.1"}
    fakes[1].answers["preflight"] = lambda o: {**fakes[1]._preflight(o), "disk_free": 10}
    with pytest.raises(PreflightError) as e:
        la.preflight()
    assert "host m0: dglctl 0.0.1" in e.value.message
    assert "host m1: 10 B free" in e.value.message and len(e.value.problems) == 2


def test_unreachable_hosts_are_one_group_error(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)
    for f in fakes:
        f.answers["preflight"] = RemoteCommandFailed(f"host {f.host.name}: gone", hint="check")
    with pytest.raises(GroupError) as e:
        la.preflight()
    assert e.value.hosts == ["m0", "m1"] and e.value.exit_code == 1
    assert "2 of 2 hosts failed" in e.value.message and e.value.hint == "check"


def test_copy_sends_once_and_verifies(parts, home, full_local_cluster, capsys):
    la, fakes = launcher(parts, full_local_cluster)
    la.preflight()
    la.copy()
    err = capsys.readouterr().err
    assert "up to date" not in err
    shards = [p for p in fakes[1].files if "/data/g/part1/" in p]
    assert shards and not [p for p in fakes[1].files if "/data/g/part0/" in p]
    assert "/fake/m1/data/g/g.json" in fakes[1].files
    # The script's folder is the job's project, shipped to work/NAME-HASH.
    assert any(re.fullmatch(r"/fake/m0/work/scripts-[0-9a-f]{8}/trainer\.py", p)
               for p in fakes[0].files), sorted(fakes[0].files)
    assert JobManifest.load(la.job_id).hosts[1].workspace == "/fake/m1"
    la.copy()  # everything is in place with the right checksums
    assert capsys.readouterr().err.count("up to date") == 2


def test_a_copied_file_with_a_bad_checksum_is_an_integrity_error(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)

    def damaged(o):
        files = json.loads(o["files"])
        return {r: None if o.get("sizes_only") else {"size": 1, "xxh3_128": "0" * 32}
                for r in files}

    fakes[1].answers["checksums"] = damaged
    la.preflight()
    with pytest.raises(GroupError) as e:
        la.copy()
    assert e.value.exit_code == EXIT_INTEGRITY == 3 and e.value.hosts == ["m1"]
    assert "host m1:" in e.value.message and "copied file(s) fail their checksum" in e.value.message


def _started(la):
    la.preflight()
    la._init_manifest(la.plan)
    for spec in la.plan.procs:
        la._start(spec)
    la.manifest.state = JobState.RUNNING
    la.manifest.save()


def test_the_earliest_failure_is_named_first(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)
    _started(la)
    assert [c["name"] for c in agent_calls(fakes[1], "start")] == [
        "server-1-0", "trainer-1-0", "trainer-1-1"]
    host_record = json.loads(fakes[1].files[f"/fake/m1/jobs/{la.job_id}/manifest.m1.json"])
    assert len(host_record["processes"]) == 3 and la.token not in json.dumps(host_record)
    fakes[1].states["trainer-1-0"] = {"state": "killed", "signal": 9, "ended": 200.0}
    fakes[0].states["trainer-0-1"] = {"state": "exited", "code": 3, "ended": 100.0}
    fakes[0].states["server-0-0"] = {"state": "missing"}
    fakes[0].logs["trainer-0-1"] = "step 1\nrank 1 giving up\n"
    with pytest.raises(JobFailed) as e:
        la._check_processes()
    rec = next(p for p in la.manifest.procs if p.name == "trainer-0-1")
    assert e.value.message.startswith(
        f"job {la.job_id} failed: [m0 trainer 1] (trainer-0-1, process group {rec.pgid}) "
        "exited with code 3. Also failed: trainer-1-0, server-0-0.")
    assert e.value.message.endswith("last lines of its log:\n    step 1\n    rank 1 giving up")
    assert e.value.exit_code == 1
    assert la.manifest.result == {"root_cause": "trainer-0-1", "how": "exited with code 3"}


def test_root_cause_order():
    s = [ProcState("a", 1, ProcStatus.MISSING), ProcState("b", 2, ProcStatus.KILLED, signal=9,
                                                           ended=5.0),
         ProcState("c", 3, ProcStatus.EXITED, code=1, ended=4.0)]
    assert root_cause(s).name == "c"
    assert root_cause(s[:2]).name == "b"
    assert root_cause(s[:1]).name == "a"
    assert not ProcState("s", 1, ProcStatus.EXITED, code=0).failed
    assert ProcState("s", 1, ProcStatus.KILLED, signal=15).failed


def test_a_job_stopped_from_elsewhere_is_an_interruption(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)
    _started(la)
    on_disk = JobManifest.load(la.job_id)
    on_disk.state = JobState.STOPPING
    on_disk.save()
    fakes[1].states["trainer-1-1"] = {"state": "killed", "signal": 15, "ended": 1.0}
    with pytest.raises(Interrupted) as e:
        la._check_processes()
    assert e.value.exit_code == 130 and "was stopped by 'dglctl stop'" in e.value.message


def test_logs_stream_whole_lines_with_prefixes(parts, home, full_local_cluster):
    la, fakes = launcher(parts, full_local_cluster)
    _started(la)
    fakes[1].logs["trainer-1-0"] = "first\nsecond, half"
    lines, _ = la.logs.poll()
    assert lines == ["[m1 trainer 2] first"]
    fakes[1].logs["trainer-1-0"] += " done\n"
    assert la.logs.poll()[0] == ["[m1 trainer 2] second, half done"]
    assert la.logs.poll()[0] == []


def test_stop_passes_the_jobs_shm_dir(parts, home, full_local_cluster, tmp_path):
    la, fakes = launcher(parts, full_local_cluster, env={"DGLCTL_SHM_DIR": str(tmp_path / "shm")})
    _started(la)
    assert la.manifest.shm_dir == str(tmp_path / "shm")
    outcome = stop_job(JobManifest.load(la.job_id), la.clients, grace=0.5)
    for i, f in enumerate(fakes):
        (call,) = agent_calls(f, "stop")
        assert call["shm_dir"] == str(tmp_path / "shm") and call["grace"] == "0.5"
        assert json.loads(call["procs"]) == la.manifest.procs_on(i)
    assert outcome.signalled == 6 and outcome.survivors == []
    assert JobManifest.load(la.job_id).state == JobState.STOPPED


def test_the_agent_removes_shared_memory_from_the_given_folder(tmp_path, capsys):
    shm = tmp_path / "shm"
    shm.mkdir()
    job = "0101-5eed00"
    mine = [shm / f"dglctl.{job}.m0.feat", shm / f"dglctl.{job}.m1.indptr"]
    other = shm / "dglctl.0101-0ther0.m0.feat"
    for f in [*mine, other]:
        f.write_bytes(b"x")
    args = ["stop", "--workspace", str(tmp_path / "ws"), "--job", job, "--procs", "{}",
            "--grace", "0"]
    assert agent.main(args) == 0
    assert json.loads(capsys.readouterr().out)["shm_removed"] == 0, "default: /dev/shm"
    assert all(f.exists() for f in mine)
    assert agent.main([*args, "--shm-dir", str(shm)]) == 0
    assert json.loads(capsys.readouterr().out)["shm_removed"] == 2
    assert not any(f.exists() for f in mine) and other.exists()


def test_agent_client_parses_the_agents_answers(full_local_cluster):
    cluster = load_cluster_config(full_local_cluster)
    fakes = [FakeTransport(h, cluster) for h in cluster.hosts]
    clients = [AgentClient(f) for f in fakes]
    fakes[0].states["a"] = {"state": "running", "pid": 7, "cpu_seconds": 1.5, "rss_bytes": 10,
                            "uptime": 3.0}
    states = probe_hosts(clients, "0101-000000", [{"a": 11}, {}])
    assert states == {"a": ProcState("a", 11, ProcStatus.RUNNING, pid=7, cpu_seconds=1.5,
                                     rss_bytes=10, uptime=3.0)}
    assert not agent_calls(fakes[1], "probe"), "a host without processes is not asked"
    # Through run(): the real Transport.agent's JSON path, on the fake's primitives.
    code, out, _ = fakes[0].run(["/fake/bin/python3", "-m", "dglctl.agent", "tail",
                                 "--workspace", "/w", "--job", "j", "--names", '["a"]'], 5)
    assert code == 0 and json.loads(out) == {"a": []}
    assert clients[0].start("j", "n", "/w", ["x"]).log == "/fake/m0/jobs/j/n.log"
