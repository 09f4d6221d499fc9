"""The one harness the tests and the benchmarks share; it imports neither.

- ``timeouts``: the one timeout setting (``DGLCTL_TEST_TIMEOUT``) every wait derives from.
- ``wait``: waiting for a condition by polling with a deadline, never a fixed sleep.
- ``graphs``: the small graphs built in-process.
- ``ports``: free port ranges, each pytest-xdist worker its own share.
- ``procs``: stopping process groups, and proving nothing of a job is left behind.
- ``servers``: real graph servers of a partition, one machine per loopback address.
- ``clusters``: cluster YAMLs for the local transport and for loopback SSH.
- ``sshd``, ``slurm``, ``netns``: a real OpenSSH server, a real Slurm cluster and network
  namespaces on this machine.
- ``cli``: ``dglctl`` run in this process, its output captured.
- ``jobs``: a detached job several tests share, stopped and proven gone after the last.
"""
