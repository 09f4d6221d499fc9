"""The one display layer: phase lines and messages on stderr, results and JSON on stdout.
Colour only through :func:`style`: on a terminal, and never with NO_COLOR set."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, TextIO

import click


def human_bytes(n: float) -> str:
    """``n`` bytes for people: ``512 B``, ``2.8 MB``, ``1.20 GB`` (powers of 1000)."""
    for unit, scale, digits in (("GB", 1e9, 2), ("MB", 1e6, 1), ("kB", 1e3, 0)):
        if abs(n) >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n:.0f} B"


def use_colour(stream: TextIO) -> bool:
    """Whether text for ``stream`` may carry colour: only on a terminal, and never while
    ``NO_COLOR`` is set to anything but "" (https://no-color.org) or ``TERM`` is "dumb"."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False


def style(text: str, stream: TextIO, **how: Any) -> str:
    """``text`` styled as ``click.style(**how)`` would, only where :func:`use_colour` allows:
    every colour dglctl prints goes through here (today: "error:" and "hint:")."""
    return click.style(text, **how) if use_colour(stream) else text


class Progress:
    """A one-line byte counter redrawn in place on a terminal (``label: 34.2 / 120.0 MB
    (28%), 12 files``), at most 10 times a second; thread-safe (hosts copy in parallel).
    Off a terminal it draws nothing: logs and CI output get the summary lines only."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream)
        self.total = self.done = self.files = 0
        self._drawn = 0.0
        self._lock = threading.Lock()

    def add_total(self, n: int) -> None:
        """``n`` more bytes are to come."""
        with self._lock:
            self.total += n
            self._draw(False)

    def advance(self, n: int) -> None:
        """A file of ``n`` bytes has arrived."""
        with self._lock:
            self.done += n
            self.files += 1
            self._draw(False)

    def finish(self) -> None:
        """The last state, and the line ended (only if anything was drawn)."""
        with self._lock:
            if self._drawn:
                self._draw(True)
                self.stream.write("\n")
                self.stream.flush()

    def _draw(self, force: bool) -> None:
        now = time.monotonic()
        if not self.enabled or not self.total or (not force and now - self._drawn < 0.1):
            return
        self._drawn = now
        pct = 100 * self.done / self.total
        self.stream.write(f"\r      {self.label}: {human_bytes(self.done)} / "
                          f"{human_bytes(self.total)} ({pct:.0f}%), {self.files} files\x1b[K")
        self.stream.flush()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


class Display:
    """Renders progress, results and errors; ``json_mode`` keeps stdout machine-readable."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet

    def info(self, message: str) -> None:
        """A line for people (stderr), silenced by --quiet."""
        if not self.quiet:
            click.echo(message, err=True)

    def result(self, text: str) -> None:
        """The command's human-readable result (stdout); not printed in JSON mode."""
        if not self.json_mode:
            click.echo(text)

    def progress(self, label: str) -> Progress:
        """A byte counter for long copies (drawn on a terminal only, never with --quiet)."""
        p = Progress(label)
        p.enabled = p.enabled and not self.quiet
        return p

    def line(self, text: str) -> None:
        """A streamed output line (process logs): stdout, even in quiet mode."""
        if not self.json_mode:
            click.echo(text)

    def json_line(self, payload: Any) -> None:
        """One record of a machine-readable stream (stdout, JSON mode only): compact JSON on
        one line, so that a reader can take each line as it comes."""
        if self.json_mode:
            click.echo(json.dumps(payload, separators=(",", ":"), default=str))

    def json(self, payload: Any) -> None:
        """The command's machine-readable result (stdout), printed only in JSON mode."""
        if self.json_mode:
            click.echo(json.dumps(payload, indent=1, default=str))

    def error(self, message: str, hint: str | None = None) -> None:
        """An error and its hint (stderr), printed even in quiet and JSON modes."""
        click.echo(style("error: ", sys.stderr, fg="red", bold=True) + message, err=True)
        if hint:
            click.echo(style("hint: ", sys.stderr, fg="yellow") + hint, err=True)


class PhaseProgress:
    """Turns the partitioner's phase callbacks into numbered lines: ``[2/4] assign: ... 6.5s``."""

    def __init__(self, display: Display, total: int) -> None:
        self.display = display
        self.total = total
        self.index = 0

    def phase_start(self, name: str, detail: str) -> None:
        """A phase began: print its numbered line."""
        self.index += 1
        text = f"[{self.index}/{self.total}] {name}" + (f": {detail}" if detail else "")
        if not self.display.quiet:
            click.echo(text + " ...", err=True, nl=not sys.stderr.isatty())

    def note(self, text: str) -> None:
        """A line of its own between phases (e.g. the memory plan)."""
        if not self.display.quiet:
            click.echo(text, err=True)

    def phase_end(self, name: str, seconds: float, rate: str = "") -> None:
        """A phase ended: print how long it took (and its rate, when given)."""
        if self.display.quiet:
            return
        rate = f" ({rate})" if rate else ""
        if sys.stderr.isatty():
            click.echo(f" {seconds:.2f}s{rate}", err=True)
        else:
            click.echo(f"      {name} done in {seconds:.2f}s{rate}", err=True)
