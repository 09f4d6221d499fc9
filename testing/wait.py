"""Waiting for a condition: poll it until a deadline, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from testing.timeouts import TIMEOUT

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not hold by its deadline (an assertion: the test fails with it)."""


def wait_until(condition: Callable[[], T], what: str, timeout: float = TIMEOUT,
               interval: float = 0.05) -> T:
    """Poll ``condition`` every ``interval`` seconds until it returns a true value, and return
    that value; after ``timeout`` seconds raise :class:`WaitTimeout` naming ``what`` and the
    last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"not within {timeout:.1f} s: {what} (last seen: {value!r})")
        time.sleep(interval)
