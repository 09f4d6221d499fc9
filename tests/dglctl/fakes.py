"""A fake host transport for unit tests: exactly the real transport's public methods, no
processes and no network. It records every call, keeps written files in memory, and answers
agent commands from canned data (``answers``: a value, an exception to raise, or a function
of the command's options)."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash

from dglctl import __version__
from dglctl.config import ClusterConfig, Host
from dglctl.errors import RemoteCommandFailed
from dglctl.hosts.sent import Sent
from dglctl.hosts.transport import Stream

Answer = Any  # a JSON-able value, an exception, or a function of the options -> either
_PGIDS = itertools.count(50_000)


def parse_options(args: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["--job", "x", "--sizes-only"]`` -> ``{"job": "x", "sizes_only": True}``."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        key = args[i].lstrip("-").replace("-", "_")
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[key] = args[i + 1]
            i += 2
        else:
            out[key] = True
            i += 1
    return out


class FakeTransport:
    """A host that exists only in memory. Attributes tests set or read:

    ``calls``: every call, as tuples (method, ...); ``files``: host path -> bytes written;
    ``busy_ports``: ports preflight reports in use; ``states``: process name -> the agent's
    probe entry (default: running); ``logs``: process name -> its log text; ``answers``:
    agent command -> canned answer (overrides the defaults above).
    """

    def __init__(self, host: Host, cluster: ClusterConfig,
                 answers: dict[str, Answer] | None = None) -> None:
        self.host = host
        self.cluster = cluster
        self.workspace = f"/fake/{host.name}"
        self.calls: list[tuple[Any, ...]] = []
        self.files: dict[str, bytes] = {}
        self.busy_ports: set[int] = set()
        self.states: dict[str, dict[str, Any]] = {}
        self.logs: dict[str, str] = {}
        self.closed = False
        self.answers: dict[str, Answer] = {
            "preflight": self._preflight, "checksums": self._checksums, "start": self._start,
            "probe": self._probe, "stop": self._stop, "logs": self._logs, "tail": self._tail,
            "renew": {"renewed": 0.0}, "prune": self._prune, "reserve": {"taken": {}},
            "release": {"released": []}, **(answers or {})}

    def __enter__(self) -> FakeTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the real transport's public methods --------------------------------------------------------
    def run(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        self.calls.append(("run", tuple(argv), timeout))
        if list(argv[1:3]) == ["-m", "dglctl.agent"]:
            try:
                return 0, json.dumps(self._answer(argv[3], argv[4:])), ""
            except RemoteCommandFailed as e:
                return 1, "", e.message
        return 0, "", ""

    def write_file(self, path: str, data: bytes | None, source: Path | None, mode: int) -> Sent:
        self.calls.append(("write_file", path, mode))
        self.files[path] = source.read_bytes() if source is not None else (data or b"")
        return Sent.of(self.files[path])

    def python(self) -> str:
        return "/fake/bin/python3"

    def close(self) -> None:
        self.closed = True

    def resolved(self) -> None:
        return None  # not reached over SSH

    processes_need_session = False  # a command's processes outlive it, as over SSH

    def shares_workspace(self) -> bool:
        self.calls.append(("shares_workspace",))
        return False  # its files are its own: copied to it

    def open_stream(self, argv: list[str]) -> Stream:
        """An in-memory ``agent serve``: each request line is answered by ``agent``."""
        self.calls.append(("open_stream", tuple(argv)))
        replies: list[bytes | Exception] = []

        def send(data: bytes) -> None:
            for line in data.splitlines():
                try:
                    reply = {"ok": True, "result": self.agent(*json.loads(line))}
                    replies.append(json.dumps(reply).encode() + b"\n")
                except Exception as e:  # noqa: BLE001 - raised to the caller, as without it
                    replies.append(e)

        def recv(timeout: float) -> bytes | None:
            if not replies:
                return None
            reply = replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

        return Stream(send, recv, lambda: None)

    def agent(self, *args: str, timeout: float = 60.0) -> Any:
        self.calls.append(("agent", args, timeout))
        return self._answer(args[0], args[1:])

    def path(self, rel: str) -> str:
        return f"{self.workspace.rstrip('/')}/{rel}"

    def put(self, source: Path, rel: str, mode: int = 0o644) -> Sent:
        return self.write_file(self.path(rel), None, source, mode)

    def put_bytes(self, data: bytes, rel: str, mode: int = 0o644) -> Sent:
        return self.write_file(self.path(rel), data, None, mode)

    # canned agent ---------------------------------------------------------------------------------
    def _answer(self, cmd: str, rest: list[str] | tuple[str, ...]) -> Any:
        answer = self.answers[cmd]
        if callable(answer) and not isinstance(answer, BaseException):
            answer = answer(parse_options(list(rest)))
        if isinstance(answer, BaseException):
            raise answer
        return json.loads(json.dumps(answer))  # what crosses is JSON, nothing else

    def _prune(self, o: dict[str, Any]) -> dict[str, Any]:
        root, keep = o["root"].rstrip("/") + "/", set(json.loads(o["keep"]))
        shipped = set(json.loads(self.files.get(o["record"], b"[]")))
        gone = [p for p in self.files if p.startswith(root) and p[len(root):] in shipped - keep]
        for p in gone:
            del self.files[p]
        self.files[o["record"]] = json.dumps(sorted(keep)).encode()
        return {"removed": sorted(p[len(root):] for p in gone)}

    def _preflight(self, o: dict[str, Any]) -> dict[str, Any]:
        asked = {int(p) for p in o.get("ports", "").split(",") if p}
        return {"python": sys.version.split()[0], "executable": self.python(),
                "dglctl": __version__, "ports_busy": sorted(asked & self.busy_ports),
                "disk_free": 1 << 40, "workspace": o["workspace"], "workspace_writable": True,
                "hostname": self.host.name}

    def _checksums(self, o: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rel in json.loads(o["files"]):
            data = self.files.get(f"{o['root']}/{rel}")
            if data is None:
                out[rel] = None
            elif o.get("sizes_only"):
                out[rel] = {"size": len(data)}
            else:
                out[rel] = {"size": len(data), "xxh3_128": xxhash.xxh3_128(data).hexdigest()}
        return out

    def _start(self, o: dict[str, Any]) -> dict[str, Any]:
        return {"pgid": next(_PGIDS), "log": f"{o['workspace']}/jobs/{o['job']}/{o['name']}.log"}

    def _probe(self, o: dict[str, Any]) -> dict[str, Any]:
        procs = json.loads(o["procs"])
        return {n: {"name": n, "pgid": g, **self.states.get(n, {"state": "running"})}
                for n, g in procs.items()}

    def _stop(self, o: dict[str, Any]) -> dict[str, Any]:
        return {"terminated": sorted(json.loads(o["procs"])), "killed": [], "shm_removed": 0,
                "survivors": [], "states": {}}

    def _logs(self, o: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, offset in json.loads(o["offsets"]).items():
            data = self.logs.get(name, "").encode()[int(offset):]
            out[name] = {"offset": int(offset) + len(data), "text": data.decode()}
        return out

    def _tail(self, o: dict[str, Any]) -> dict[str, Any]:
        n = int(o.get("lines", 20))
        return {name: self.logs.get(name, "").splitlines()[-n:]
                for name in json.loads(o["names"])}


def agent_calls(fake: FakeTransport, cmd: str) -> list[dict[str, Any]]:
    """The options of each agent call ``cmd`` the fake received, in order."""
    return [parse_options(list(c[1][1:])) for c in fake.calls
            if c[0] == "agent" and c[1][0] == cmd]


def fake_factory(fakes: list[FakeTransport]) -> Callable[[Host, ClusterConfig], FakeTransport]:
    """A transport factory that makes FakeTransports and appends each to ``fakes``."""
    def make(host: Host, cluster: ClusterConfig) -> FakeTransport:
        fake = FakeTransport(host, cluster)
        fakes.append(fake)
        return fake

    return make
