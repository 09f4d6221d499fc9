"""Jobs: the manifest on disk, the pure launch plan, the launcher that executes it, and stop.

``list_jobs`` and ``JobManifest`` are re-exported here, where scripts have imported them from.
"""

from .manifest import JobManifest, JobState, list_jobs

__all__ = ["JobManifest", "JobState", "list_jobs"]
