"""One error model: exit codes, GroupError from the host fan-out, and how ``main`` renders
every error that carries message, hint and exit_code (dglctl's, the runtime's, the
partitioner's)."""

from __future__ import annotations

import signal
import threading
import time

import click
import pytest

from dglctl.cli import cli, main
from dglctl.config import parse_cluster_config
from dglctl.errors import (
    ConfigError,
    DglctlError,
    GroupError,
    HostFailure,
    HostUnreachable,
    IntegrityError,
    Interrupted,
    JobFailed,
    PreflightError,
    RemoteCommandFailed,
)
from dglctl.hosts.group import fan_out
from partitioner.errors import PartitionFormatError
from runtime.errors import DistError, IpConfigError

pytestmark = pytest.mark.unit


def test_exit_codes():
    assert DglctlError("x").exit_code == ConfigError("x").exit_code == 2
    assert PreflightError(["a", "b"]).exit_code == 2
    assert JobFailed("x").exit_code == HostUnreachable("x").exit_code == 1
    assert IntegrityError("x").exit_code == 3
    assert Interrupted("x").exit_code == 130
    assert Interrupted("x", signum=signal.SIGTERM).exit_code == 143
    assert Interrupted("x", signum=signal.SIGHUP).exit_code == 129
    e = DglctlError("the message", hint="the hint")
    assert (e.message, e.hint, str(e)) == ("the message", "the hint", "the message")


def test_group_error_lists_every_host_and_takes_the_worst_code():
    failures = [HostFailure.of("a", HostUnreachable("host a: cannot connect", hint="check a")),
                HostFailure.of("b", IntegrityError("1 copied file(s) fail their checksum")),
                HostFailure.of("c", ConfigError("bad\nsecond line"))]
    e = GroupError(failures, total=4)
    assert e.exit_code == 3 and e.hosts == ["a", "b", "c"]
    assert e.message == ("3 of 4 hosts failed:\n"
                         "  host a: cannot connect\n"
                         "    hint: check a\n"
                         "  host b: 1 copied file(s) fail their checksum\n"
                         "  host c: bad\n"
                         "    second line")
    assert e.hint is None
    one = GroupError(failures[:1])
    assert (one.message, one.hint, one.exit_code) == ("host a: cannot connect", "check a", 1)
    same = GroupError([HostFailure.of(h, RemoteCommandFailed("gone", hint="h")) for h in "xy"])
    assert same.hint == "h" and "hint" not in same.message
    with pytest.raises(ValueError):
        GroupError([])


def test_failures_that_are_not_dglctls():
    assert HostFailure.of("a", OSError("broken pipe")).exit_code == 1
    bug = HostFailure.of("a", KeyError("workspace"))
    assert bug.exit_code == 70 and bug.message == "host a: internal error: KeyError: 'workspace'"
    dist = HostFailure.of("a", DistError("server 0 of machine 1 did not answer"))
    assert dist.exit_code == 1 and dist.message.startswith("host a: server 0")
    assert HostFailure.of("a", PartitionFormatError("bad")).exit_code == 2


class _Member:
    def __init__(self, name: str) -> None:
        self.host = parse_cluster_config({"hosts": [name]}).hosts[0]


def test_fan_out_waits_for_every_host():
    members = [_Member(f"127.0.0.{i}") for i in range(1, 5)]
    finished = []
    lock = threading.Lock()

    def fn(i, m):
        if i == 0:
            raise HostUnreachable(f"host {m.host.name}: down")
        time.sleep(0.05 * i)
        with lock:
            finished.append(i)
        if i == 2:
            raise IntegrityError("bad copy")
        return i * 10

    with pytest.raises(GroupError) as e:
        fan_out(members, fn)
    assert sorted(finished) == [1, 2, 3], "a failure does not abandon the other hosts"
    assert e.value.hosts == ["127.0.0.1", "127.0.0.3"] and e.value.exit_code == 3
    assert fan_out(members, lambda i, m: i * 10) == [0, 10, 20, 30]
    assert fan_out([], lambda i, m: i) == []


@pytest.fixture
def command(monkeypatch):
    """Adds a ``boom`` command that raises what the test puts in ``raised[0]``."""
    raised: list[BaseException] = []

    @click.command()
    def boom():
        raise raised[0]

    monkeypatch.setitem(cli.commands, "boom", boom)
    return raised


@pytest.mark.parametrize(("error", "code"), [
    (ConfigError("bad key 'x'", hint="did you mean 'y'?"), 2),
    (IntegrityError("part1/a.npy fails its checksum"), 3),
    (Interrupted("stopped on SIGTERM", signum=signal.SIGTERM), 143),
    (PartitionFormatError("g.json: not a partition config", hint="run partition"), 2),
    (IpConfigError("ip_config.txt:2: bad line"), 2),
    (DistError("server 0 of machine 1 did not answer", hint="see its log"), 1),
    (GroupError([HostFailure.of("a", HostUnreachable("host a: down")),
                 HostFailure.of("b", IntegrityError("host b: bad copy"))]), 3),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v))
def test_main_renders_every_error_with_its_code(command, capsys, error, code):
    command.append(error)
    assert main(["boom"]) == code
    err = capsys.readouterr().err
    assert err.startswith("error: " + error.message.splitlines()[0])
    assert err.count("error: ") == 1 and "Traceback" not in err
    if error.hint:
        assert f"hint: {error.hint}" in err


def test_an_unexpected_exception_is_an_internal_error(command, capsys):
    command.append(ZeroDivisionError("division by zero"))
    assert main(["boom"]) == 70
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: division by zero" in err and "--debug" in err
    assert "Traceback" not in err
    assert main(["--debug", "boom"]) == 70
    assert "Traceback" in capsys.readouterr().err


def test_debug_shows_each_hosts_traceback(command, capsys):
    try:
        raise OSError("connection reset")
    except OSError as e:
        failure = HostFailure.of("far", e)
    command.append(GroupError([failure]))
    assert main(["--debug", "boom"]) == 1
    err = capsys.readouterr().err
    assert "--- host far:" in err and "OSError: connection reset" in err


def test_keyboard_interrupt_is_130(command, capsys):
    command.append(KeyboardInterrupt())
    assert main(["boom"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_a_bad_ip_config_names_its_line(tmp_path, capsys):
    ip = tmp_path / "ip_config.txt"
    ip.write_text("127.0.0.1 30050\nnot-an-address\n")
    code = main(["launch", "--ip-config", str(ip), "--part-config", "p.json",
                 "--dry-run", "x.py"])
    err = capsys.readouterr().err
    assert code == 2 and "ip_config.txt" in err and "Traceback" not in err
