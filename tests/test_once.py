"""gpuwise.once: worked out on the first read only, then read from the instance (frozen
dataclasses included), not shared between instances; equality and replace see only the fields."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuwise.once import once

calls: list[int] = []


@dataclass(frozen=True)
class Box:
    n: int

    @once
    def doubled(self) -> int:
        """Twice n."""
        calls.append(self.n)
        return 2 * self.n


def test_worked_out_once_per_instance() -> None:
    calls.clear()
    a, b = Box(3), Box(3)
    assert (a.doubled, a.doubled, b.doubled) == (6, 6, 6)
    assert calls == [3, 3]
    assert a == b and hash(a) == hash(b)
    c = dataclasses.replace(a, n=5)
    assert c.doubled == 10 and calls == [3, 3, 5]


def test_the_class_attribute_is_the_descriptor_with_its_doc() -> None:
    assert isinstance(Box.__dict__["doubled"], once)
    assert Box.__dict__["doubled"].__doc__ == "Twice n."
