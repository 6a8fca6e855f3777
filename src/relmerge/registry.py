"""The provider registry: a provider's name → the factory that builds it.

The settings name the language model and the embedder a run uses (``--llm`` and
``--embedding``, ``provider`` under ``[llm]`` and ``[embedding]`` in a ``relmerge.toml``);
the registry says what each name builds. Every name is registered by a *hook*, a function
``register(registry)`` named by an entry point of the group ``relmerge.providers``::

    # a third-party package's pyproject.toml
    [project.entry-points."relmerge.providers"]
    acme = "relmerge_acme:register"

    # relmerge_acme/__init__.py
    def register(registry):
        registry.add_llm("acme", lambda settings: AcmeModel(settings.model), "Acme's API")

relmerge's own providers (language models ``none`` and ``openai``; embedders ``use``,
``hash`` and ``openai``) are registered the same way, by the hook
``relmerge.providers.builtin:register`` (declared in relmerge's own ``pyproject.toml``,
and loaded first even from a source checkout that has no installed metadata). A factory
takes the section's settings (``LLMSettings`` or ``EmbeddingSettings``) and returns the
provider: an object with the language-model or embedding protocol
(``relmerge.providers.base``, ``relmerge.providers.embedding``), which
``relmerge.providers.stack`` then wraps.

The hooks are loaded once per process, on the first look-up (:func:`registry`). A hook
that fails to load, or that registers a name already taken, does not stop relmerge: its
names are missing or the first one is kept, and the error for an unknown name says which
plugins failed and why. This module imports no provider: it is below them all, so that
the settings (``relmerge.config``) can check a provider's name.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

from pydantic_core import PydanticCustomError

from relmerge.errors import ConfigError

GROUP = "relmerge.providers"
BUILTIN = EntryPoint(name="relmerge", value="relmerge.providers.builtin:register", group=GROUP)

Kind = Literal["llm", "embedding"]
KIND_WORDS: dict[Kind, str] = {"llm": "LLM", "embedding": "embedding"}
# A factory takes the section's settings and returns the provider (checked by the caller:
# ``relmerge.providers.stack`` refuses an object without the protocol, naming the plugin).
Factory = Callable[[Any], object]
CHOICE_ERROR = "provider_choice"


@dataclass(frozen=True)
class Provider:
    """One registered provider: what builds it, a line for ``--help``, and the plugin
    (entry point name) that registered it."""

    kind: Kind
    name: str
    factory: Factory
    description: str = ""
    plugin: str = ""


@dataclass
class ProviderRegistry:
    """The providers by kind and name, in the order they were registered; ``problems``
    says what went wrong while the hooks ran."""

    providers: dict[tuple[Kind, str], Provider] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    plugin: str = ""  # the hook now registering

    def add_llm(self, name: str, factory: Factory, description: str = "") -> None:
        """Register a language model: ``factory(LLMSettings)`` returns it."""
        self._add("llm", name, factory, description)

    def add_embedder(self, name: str, factory: Factory, description: str = "") -> None:
        """Register an embedder: ``factory(EmbeddingSettings)`` returns it."""
        self._add("embedding", name, factory, description)

    def _add(self, kind: Kind, name: str, factory: Factory, description: str) -> None:
        first = self.providers.get((kind, name))
        if first is not None:
            self.problems.append(
                f"plugin {self.plugin!r} registers the {KIND_WORDS[kind]} provider {name!r} "
                f"again; the one of {first.plugin!r} is kept"
            )
            return
        self.providers[(kind, name)] = Provider(kind, name, factory, description, self.plugin)

    def names(self, kind: Kind) -> tuple[str, ...]:
        return tuple(name for (each, name) in self.providers if each == kind)

    def provider(self, kind: Kind, name: str) -> Provider:
        """The provider ``name`` of ``kind``, or a :class:`ConfigError` naming the known
        ones (and the plugins that failed to load)."""
        found = self.providers.get((kind, name))
        if found is None:
            raise ConfigError(
                f"unknown {KIND_WORDS[kind]} provider {name!r}: expected one of "
                f"{choices_text(self.names(kind))}{self.failures()}"
            )
        return found

    def failures(self) -> str:
        return f" (plugins: {'; '.join(self.problems)})" if self.problems else ""

    def run_hook(self, hook: EntryPoint) -> None:
        """Load the entry point ``hook`` and let it register its providers."""
        self.plugin = hook.name
        try:
            register = hook.load()
            register(self)
        except Exception as error:  # a broken plugin must not take relmerge down with it
            self.problems.append(
                f"plugin {hook.name!r} ({hook.value}) failed: {type(error).__name__}: {error}"
            )
        finally:
            self.plugin = ""


def hooks() -> list[EntryPoint]:
    """relmerge's own hook first, then every installed package's (each hook once)."""
    installed = [hook for hook in entry_points(group=GROUP) if hook.value != BUILTIN.value]
    return [BUILTIN, *installed]


@functools.cache
def registry() -> ProviderRegistry:
    """The registry of this process, its hooks run on first use."""
    found = ProviderRegistry()
    for hook in hooks():
        found.run_hook(hook)
    return found


def provider_names(kind: Kind) -> tuple[str, ...]:
    """The names ``--llm`` (``kind`` "llm") or ``--embedding`` ("embedding") accepts."""
    return registry().names(kind)


def choices_text(names: tuple[str, ...]) -> str:
    return ", ".join(json.dumps(name) for name in names)


@dataclass(frozen=True)
class ProviderChoice:
    """A settings field that takes a registered provider's name (``Annotated`` metadata
    read by ``relmerge.problems`` and ``relmerge.config_doc``; called, it validates)."""

    kind: Kind

    def names(self) -> tuple[str, ...]:
        return provider_names(self.kind)

    def __call__(self, value: str) -> str:
        names = self.names()
        if value not in names:
            raise PydanticCustomError(
                CHOICE_ERROR,
                "expected one of {choices}",
                {"choices": choices_text(names), "failures": registry().failures()},
            )
        return value
