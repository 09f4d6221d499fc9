"""The project's one version number (from the installed distribution's metadata: pyproject.toml).

``partitioner``, ``runtime`` and ``dglctl`` all report this one; the agent's preflight and the
servers' handshake compare it across hosts.
"""

from __future__ import annotations

import os
import sys

DISTRIBUTION = "dglctl"


def installed_version(distribution: str, path: list[str] | None = None) -> str | None:
    """The ``Version`` of the first ``DISTRIBUTION-*.dist-info`` folder on ``path``
    (``sys.path``), searched in order as :func:`importlib.metadata.version` searches; None
    when there is none. Read directly because importing ``importlib.metadata`` (email
    parsing, zipfile, ...) was most of the start-up of each agent and ``dglctl`` command."""
    prefix = distribution + "-"
    for entry in sys.path if path is None else path:
        folder = entry or "."
        try:
            names = sorted(n for n in os.listdir(folder)
                           if n.startswith(prefix) and n.endswith(".dist-info"))
        except OSError:  # not a folder (a zip, a missing entry)
            continue
        for name in names:
            try:
                with open(os.path.join(folder, name, "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():  # the headers end: no Version in them
                            break
            except OSError:
                continue
    return None


def _version() -> str:
    found = installed_version(DISTRIBUTION)
    if found is not None:
        return found
    from importlib import metadata  # an .egg-info or another kind of install

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+source"


__version__ = _version()
