"""A stand-in for the one ``tqdm`` call DGL's examples make, ``tqdm.tqdm(iterable)``.

tqdm is not a dependency of this project; the ported examples keep ``import tqdm`` unchanged
and find this module first (the test puts this folder on the trainers' PYTHONPATH). It
iterates without drawing a progress bar.
"""

from collections.abc import Iterable, Iterator
from typing import Any


class tqdm:  # noqa: N801 (tqdm's own name)
    """``tqdm.tqdm(iterable, ...)``: the iterable itself, no bar."""

    def __init__(self, iterable: Iterable[Any], *args: Any, **kwargs: Any) -> None:
        self.iterable = iterable

    def __iter__(self) -> Iterator[Any]:
        return iter(self.iterable)

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]
