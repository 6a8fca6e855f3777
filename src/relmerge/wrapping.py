"""A component and the layers it wraps.

A run's language model is a stack: the provider, wrapped by rate limit, progress,
circuit breaker, budget, cache and accounting (``relmerge.providers.stack``); an embedder
is one too. A wrapper says what it wraps as ``inner`` (:class:`Wrapping`); what a run
needs from one particular layer is a protocol of that capability (``providers.base``,
``cputime``), found by walking the stack with :func:`layers`, never by probing attribute
names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable


@runtime_checkable
class Wrapping(Protocol):
    """A layer that wraps another model or embedder (``inner``)."""

    @property
    def inner(self) -> object: ...


def layers(component: object) -> Iterator[object]:
    """``component`` and every layer it wraps, outermost first (stacks are a few deep;
    a wrapper that wraps itself is not followed for ever). Nothing for ``None``."""
    current: object | None = component
    for _ in range(32):
        if current is None:
            return
        yield current
        current = current.inner if isinstance(current, Wrapping) else None
