"""Progress reporting hooks: the pipeline calls them, the CLI draws them with rich."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, stage: str, total: int | None) -> None: ...

    def advance(self, stage: str, amount: int = 1) -> None: ...

    def finish(self, stage: str) -> None: ...


class NoProgress:
    """The default: report nothing."""

    def start(self, stage: str, total: int | None) -> None:
        pass

    def advance(self, stage: str, amount: int = 1) -> None:
        pass

    def finish(self, stage: str) -> None:
        pass
