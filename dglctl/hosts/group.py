"""Fan-out over hosts: run one function for every host at once, wait for all of them, and
raise one ``GroupError`` that lists each host's failure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from ..config import Host
from ..errors import GroupError, HostFailure

T = TypeVar("T")
H = TypeVar("H", bound="HasHost")


class HasHost(Protocol):
    """Anything that names its host (a transport, an agent client)."""

    # A read-only property, so that both a plain attribute (a transport) and a property (an
    # agent client) satisfy it.
    @property
    def host(self) -> Host:
        """The host this member works on."""
        ...


def fan_out(members: Sequence[H], fn: Callable[[int, H], T]) -> list[T]:
    """``fn(i, member)`` for every member at once, in threads; the results in member order.

    Waits for every host, even after one failed (a half-done step is never left running), then
    raises one :class:`GroupError` naming each host that failed; its exit code is the worst.
    """
    with ThreadPoolExecutor(max(1, len(members))) as pool:
        futures = [pool.submit(fn, i, m) for i, m in enumerate(members)]
    results: list[T] = []
    failures: list[HostFailure] = []
    for m, f in zip(members, futures, strict=True):
        error = f.exception()
        if error is None:
            results.append(f.result())
        else:
            failures.append(HostFailure.of(m.host.name, error))
    if failures:
        raise GroupError(failures, total=len(members))
    return results
