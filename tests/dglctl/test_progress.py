"""The copy's progress line: redrawn in place on a terminal, absent elsewhere."""

from __future__ import annotations

import io
import threading

import pytest

from dglctl.display import Display, Progress

pytestmark = pytest.mark.unit


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_counts_bytes_and_files_from_threads(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    out = Terminal()
    p = Progress("copy", out)
    p.add_total(3_000_000)
    threads = [threading.Thread(target=p.advance, args=(1_000_000,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.finish()
    text = out.getvalue()
    assert text.startswith("\r      copy: ") and text.endswith("\n")
    assert "3.0 MB / 3.0 MB (100%), 3 files" in text.rsplit("\r", 1)[1]


def test_no_progress_off_a_terminal_or_when_quiet(monkeypatch):
    plain = io.StringIO()
    p = Progress("copy", plain)
    p.add_total(10)
    p.advance(10)
    p.finish()
    assert plain.getvalue() == ""
    monkeypatch.setattr("sys.stderr", Terminal())
    assert Display(quiet=True).progress("copy").enabled is False
    assert Display().progress("copy").enabled is True
