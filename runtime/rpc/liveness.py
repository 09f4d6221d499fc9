"""How long a peer may be silent: every heartbeat, ping and grace period of the transport.

All of them derive from the job's one ``timeout`` (the cluster YAML's ``timeout``, the env
contract's ``DGLCTL_TIMEOUT``), so a slow network or a machine that pauses (SIGSTOP, a VM
pause, a swap storm) is handled by changing one number:

- a stall shorter than ``timeout`` is survived: ZeroMQ keeps the connection for twice the
  timeout, so it never drops (and loses the messages queued on) a connection the
  application still waits on;
- a peer silent for longer than ``timeout`` (no reply, no answer to pings) is an error that
  names it and how long it was silent;
- a server leaves on "every client has gone" only after ``idle_grace`` (three timeouts unless
  the env contract's ``DGLCTL_IDLE_GRACE`` says otherwise) with nobody connected, so a trainer
  that was paused, or reconnects, finds its servers.
"""

from __future__ import annotations

from dataclasses import dataclass

import zmq


@dataclass(frozen=True)
class Liveness:
    """The transport's time limits for a job whose peers may be silent ``timeout`` seconds."""

    timeout: float
    grace: float = 0.0  # idle_grace in seconds; 0: three timeouts

    @property
    def ping_interval(self) -> float:
        """How long a client waits on a silent server before it pings it (five pings fit in
        one timeout, so a live server answers several before anyone gives up)."""
        return self.timeout / 5

    @property
    def idle_grace(self) -> float:
        """How long a server stays up with no client connected, once the job's trainers came."""
        return self.grace or 3 * self.timeout

    def configure(self, sock: zmq.Socket) -> None:
        """ZeroMQ heartbeats on ``sock``: sent every ping interval, the connection dropped
        only after two timeouts without traffic (after the application has given up)."""
        sock.setsockopt(zmq.HEARTBEAT_IVL, max(1, int(self.ping_interval * 1000)))
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, max(1, int(self.timeout * 2000)))

    def stalled(self, gap: float) -> bool:
        """Whether ``gap`` seconds between two turns of a wait loop that polls every
        fraction of a second mean this process itself was stopped (or starved): its peers'
        silence over that gap is then not theirs."""
        return gap > self.timeout / 2
