"""The step context protocol (components + artifacts) and a dict-backed implementation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class StepContext(Protocol):
    """What a pipeline runner hands to ``step.run``: components and named artifacts.

    ``get_artifact`` raises ``KeyError`` for an artifact that was never set.
    """

    def get_component(self, key: str) -> Any: ...

    def get_artifact(self, key: str) -> Any: ...

    def set_artifact(self, key: str, value: Any) -> None: ...


@dataclass
class DictContext:
    """A context over two dicts, for scripts, notebooks and tests.

    >>> from relmerge.stores import MemoryStore
    >>> ctx = DictContext(components={"stores.objects": MemoryStore()},
    ...                   artifacts={"relation_keys": [], "entity_id_mapping": {}})
    >>> ctx.get_artifact("relation_keys")
    []
    """

    components: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)

    def get_component(self, key: str) -> Any:
        return self.components.get(key)

    def get_artifact(self, key: str) -> Any:
        return self.artifacts[key]

    def set_artifact(self, key: str, value: Any) -> None:
        self.artifacts[key] = value
