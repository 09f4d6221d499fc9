"""Launch benchmark over real SSH on 3 loopback hosts (an sshd this script starts; needs root).

  1. copy throughput: the launcher's SFTP copy of a partition file against `scp` of the same
     file to the same host, in the same run (goal: >= 80% of scp);
  2. launch overhead: seconds from `dglctl launch` to the first training step with the shards
     already in place (second launch), and seconds for `dglctl stop` to leave nothing running.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FIRST_STEP = """
import runtime, numpy as np, time, sys
runtime.initialize()
g = runtime.DistGraph("bench")
g.ndata["feat"][np.arange(100)]
print("FIRST_STEP", flush=True)
if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=300_000)
    ap.add_argument("--feat-dim", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--copy-mb", type=int, default=256)
    args = ap.parse_args()
    from dglctl.cluster_config import load_cluster_config
    from dglctl.transport import SSHTransport
    from partitioner import partition_graph
    from partitioner.generate import generate_graph
    from tests.dglctl.sshd import ADDRESSES, start_sshd

    work = Path(tempfile.mkdtemp(prefix="dglctl-launch-bench-"))
    os.environ["DGLCTL_HOME"] = str(work / "home")
    sshd = start_sshd(work / "sshd")
    try:
        partition_graph(generate_graph(args.nodes, feat_dim=args.feat_dim, seed=0), "bench", 3,
                        work / "parts")
        cluster_file = work / "cluster.yaml"
        cluster_file.write_text(yaml.safe_dump({
            "transport": "ssh",
            "ssh": {"user": "root", "port": sshd.port, "key": str(sshd.client_key),
                    "known_hosts": str(sshd.known_hosts)},
            "hosts": [{"name": f"h{i}", "address": a, "workspace": str(work / f"ws{i}")}
                      for i, a in enumerate(ADDRESSES)],
            "python": sys.executable, "trainers_per_host": 1, "port_base": 31050}))
        cluster = load_cluster_config(cluster_file)

        # 1. copy throughput, the launcher's copy vs plain scp, same file, alternating
        # A file big enough that scp's own connection set-up (~0.1 s) does not dominate.
        big = work / "copy.bin"
        big.write_bytes(os.urandom(args.copy_mb << 20))
        size = big.stat().st_size
        t = SSHTransport(cluster.hosts[1], cluster)
        t.workspace = str(work / "ws1")
        sftp_t, scp_t = [], []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            t.put(big, f"copy-test/sftp{i}.npy")
            sftp_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(["scp", "-q", "-P", str(sshd.port), "-i", str(sshd.client_key),
                            "-o", f"UserKnownHostsFile={sshd.known_hosts}", str(big),
                            f"root@{ADDRESSES[1]}:{work / 'ws1' / f'scp{i}.npy'}"], check=True)
            scp_t.append(time.perf_counter() - t0)
        t.close()
        sftp_mbs = size / sorted(sftp_t)[len(sftp_t) // 2] / 1e6
        scp_mbs = size / sorted(scp_t)[len(scp_t) // 2] / 1e6
        print(f"copy {size / 1e6:.0f} MB: dglctl {sftp_mbs:.0f} MB/s, scp {scp_mbs:.0f} "
              f"MB/s, ratio {sftp_mbs / scp_mbs:.2f} (goal >= 0.80)")

        # 2. launch overhead with shards in place, and stop time
        script = work / "first_step.py"
        script.write_text(FIRST_STEP)
        base = [sys.executable, "-m", "dglctl", "launch", str(script), "--cluster",
                str(cluster_file), "--part-config", str(work / "parts" / "bench.json")]
        t0 = time.perf_counter()
        subprocess.run(base, check=True, capture_output=True)
        print(f"first launch (copies the shards): {time.perf_counter() - t0:.1f}s")
        overheads = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            proc = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True)
            first = None
            for line in proc.stdout:
                if "FIRST_STEP" in line and first is None:
                    first = time.perf_counter() - t0
            proc.wait()
            overheads.append(first)
        print(f"launch to first training step (shards present, 3 hosts): "
              f"{sorted(overheads)[len(overheads) // 2]:.1f}s (median of {overheads})")
        out = subprocess.run([*base, "--detach", "--", "600"], check=True, capture_output=True,
                             text=True).stdout
        job = out.split("job ", 1)[1].split()[0]
        time.sleep(8)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dglctl", "stop", job], check=True,
                       capture_output=True)
        print(f"dglctl stop until nothing runs: {time.perf_counter() - t0:.1f}s")
    finally:
        sshd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
