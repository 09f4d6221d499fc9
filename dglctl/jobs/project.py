"""The project a job runs: the working folder shipped to every host (``launch --workdir``,
by default SCRIPT's folder), so a script that imports a sibling module runs there as here.

Which files: everything under the folder except what ``.dglctlignore`` (gitignore syntax, via
``pathspec``, the matcher black and others use) and the built-in ignores exclude: version
control, caches, virtual environments. Each file is listed with its size and xxh3-128, so a
launch copies only what changed, as it does for the shards. Pure: reads local files only.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

IGNORE_FILE = ".dglctlignore"
# What no training run needs on the hosts, and what is often huge: always left out.
BUILTIN_IGNORES = (".git/", ".hg/", ".svn/", "__pycache__/", "*.pyc", ".venv/", "venv/",
                   ".mypy_cache/", ".pytest_cache/", ".ruff_cache/", ".ipynb_checkpoints/",
                   IGNORE_FILE)
WARN_BYTES = 100 << 20  # a project larger than this is probably shipping data by mistake


@dataclass(frozen=True)
class ProjectFile:
    """One file of the project: its path relative to the project folder, size, checksum."""

    rel: str
    size: int
    xxh3_128: str


@dataclass(frozen=True)
class Project:
    """The shipped folder: where it is here, its files, and its folder name on the hosts."""

    root: Path
    files: tuple[ProjectFile, ...]

    @property
    def bytes(self) -> int:
        """Total size of the files."""
        return sum(f.size for f in self.files)

    @property
    def host_dir(self) -> str:
        """Its folder in a host's workspace: ``work/NAME-HASH`` (the hash of its path here,
        so two projects with one name do not share a copy; launches of one project do, and
        so copy only what changed)."""
        tag = hashlib.sha1(str(self.root).encode()).hexdigest()[:8]
        return f"work/{self.root.name or 'root'}-{tag}"

    @property
    def shipped_record(self) -> str:
        """The file in a host's workspace that lists what the last launch shipped into
        :attr:`host_dir` (outside it: the script sees only the project there). A later launch
        removes from the copy only files listed there, never what a job wrote."""
        return f"shipped/{self.host_dir.rsplit('/', 1)[-1]}.json"


def _spec(root: Path):
    import pathspec

    lines = list(BUILTIN_IGNORES)
    ignore = root / IGNORE_FILE
    if ignore.is_file():
        lines += ignore.read_text().splitlines()
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError as e:  # pathspec's message names the pattern
        raise ConfigError(f"{ignore}: {e}") from None


def own_output() -> set[tuple[int, int]]:
    """(device, inode) of this process's stdout and stderr where they are regular files
    (``dglctl launch ... > run.log``): the launcher never ships the log it is writing."""
    out = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.add((st.st_dev, st.st_ino))
    return out


def collect_project(root: Path, exclude: Iterable[Path] = (),
                    exclude_files: Iterable[tuple[int, int]] = ()) -> Project:
    """The project under ``root``: every file not ignored, with sizes and checksums. A link
    to a file ships as the file it points to (as the script would read it here); linked
    folders are not followed (a link to / would ship the machine). Folders in ``exclude``
    (the partition, the hosts' workspaces, the job records, the shared-memory folder: shipped
    otherwise or not at all) are left out wherever they lie inside it, and so are the files
    whose (device, inode) is in ``exclude_files`` (the launcher's own output, see
    ``own_output``). A file deleted while it is listed is left out."""
    from partitioner.format import file_checksum

    root = root.resolve()
    if not root.is_dir():
        raise ConfigError(f"--workdir {root}: no such folder")
    spec = _spec(root)
    skip = {p.resolve() for p in exclude}
    skip_files = set(exclude_files)
    files = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        rel_dir = here.relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirs[:] = sorted(d for d in dirs if not spec.match_file(prefix + d + "/")
                         and (here / d).resolve() not in skip)
        for name in sorted(names):
            rel = prefix + name
            path = here / name
            if spec.match_file(rel):
                continue
            try:
                st = path.stat()
                if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in skip_files:
                    continue
                files.append(ProjectFile(rel, st.st_size, file_checksum(path)))
            except FileNotFoundError:
                continue  # deleted meanwhile (a temporary file of a running program)
    return Project(root, tuple(files))


def entry_in(project: Project, opts) -> str | None:
    """SCRIPT's path inside the project, or None for ``-m MODULE`` (checked: the module's
    file or package ``__main__`` is shipped)."""
    if opts.module is None:
        return script_in(project, opts.script)
    base = opts.module.replace(".", "/")
    shipped = {f.rel for f in project.files}
    if not {f"{base}.py", f"{base}/__main__.py"} & shipped:
        raise ConfigError(f"-m {opts.module}: neither {base}.py nor {base}/__main__.py is in "
                          f"the project {project.root}",
                          hint="run from the folder that holds the package, or pass --workdir")
    return None


def script_in(project: Project, script: Path) -> str:
    """SCRIPT's path inside the project (what the hosts run), or an error naming both."""
    try:
        # The link itself, not its target: the script is shipped under its own name.
        rel = (script.parent.resolve() / script.name).relative_to(project.root).as_posix()
    except ValueError:
        raise ConfigError(f"training script {script} is not inside --workdir {project.root}",
                          hint="leave --workdir out (SCRIPT's folder is shipped), or pass "
                               "the folder that holds SCRIPT") from None
    if rel not in {f.rel for f in project.files}:
        raise ConfigError(f"training script {script} is excluded by {IGNORE_FILE} in "
                          f"{project.root}")
    return rel
