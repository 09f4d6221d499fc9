"""Reaching the job's hosts: transports (local, SSH), fan-out over hosts, the typed agent client."""
