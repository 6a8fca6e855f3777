"""The provider registry: relmerge's own providers and a third-party package's, found the
same way (entry points of the group ``relmerge.providers``), and used from the CLI.

The third-party package is real: a module and its ``*.dist-info`` (``METADATA``,
``entry_points.txt``) written into a folder put on ``PYTHONPATH``, as pip would install it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import orjson
import pytest

from relmerge.config import EmbeddingSettings, LLMSettings
from relmerge.data import sample_dir
from relmerge.errors import ConfigError
from relmerge.providers import get_embedder, get_llm
from relmerge.providers.base import NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, HashEmbedder
from relmerge.registry import GROUP, ProviderRegistry, provider_names, registry

PLUGIN = '''
"""acme-relmerge: a language model and an embedder for relmerge, from another package."""

import re

import numpy as np
import orjson

from relmerge.providers.base import LLMRequest, LLMResult

BLOCK = re.compile(r"```json\\n(.*?)\\n```", re.DOTALL)


def acme_block(block):
    ids = [record["relation_id"] for record in block["records"]]
    return {"block": block["block"], "mapping_table": {ids[0]: ids}}


class AcmeModel:
    """Merges whatever it is asked about (the relmerge rules still bind it)."""

    available = True

    def __init__(self, model):
        self.name = model or "acme-1"

    async def invoke(self, request: LLMRequest) -> LLMResult:
        user = next(m.content for m in request.messages if m.role == "user")
        records = orjson.loads(BLOCK.search(user).group(1))
        ids = [record.get("relation_id") for record in records]
        if request.task == "relation_judge":
            answer = {"verdict": "merge", "reason": "acme merges", "duplicate_of": ids[0]}
        elif request.task == "relation_cluster":
            answer = {"relation_list": [], "mapping_table": {ids[0]: ids}}
        elif request.task == "relation_cluster_many":  # records: the blocks of a pack
            answer = {"blocks": [acme_block(block) for block in records]}
        else:
            fields = ("type", "name", "description", "attributes")
            answer = {"relation": {key: records[0][key] for key in fields}}
        text = orjson.dumps(answer).decode()
        return LLMResult(text=text, parsed=answer, model=self.name)


class LetterEmbedder:
    """Letter counts, L2-normalised: crude, but an embedder."""

    name = "acme-letters"

    async def embed(self, texts):
        rows = np.zeros((len(texts), 27), dtype=np.float32)
        for row, text in enumerate(texts):
            rows[row, 26] = 1.0
            for char in text.lower():
                if "a" <= char <= "z":
                    rows[row, ord(char) - 97] += 1.0
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return rows


def register(registry):
    registry.add_llm("acme", lambda settings: AcmeModel(settings.model), "Acme's model")
    registry.add_embedder("acme", lambda settings: LetterEmbedder(), "Acme's letters")
'''


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A folder holding an installed third-party provider package."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "acme_relmerge.py").write_text(PLUGIN, encoding="utf-8")
    info = folder / "acme_relmerge-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-relmerge\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\nacme = acme_relmerge:register\n", encoding="utf-8"
    )
    return folder


@pytest.fixture
def installed(plugin_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin on this process's path, the registry read again (and again after)."""
    monkeypatch.syspath_prepend(str(plugin_path))
    registry.cache_clear()
    yield plugin_path
    registry.cache_clear()


def test_relmerge_registers_its_own_providers_as_a_plugin_would() -> None:
    assert provider_names("llm")[:2] == ("none", "openai")
    assert provider_names("embedding")[:3] == ("use", "hash", "openai")
    assert {p.plugin for p in registry().providers.values()} >= {"relmerge"}
    assert isinstance(get_llm(LLMSettings()), NoLanguageModel)
    embedder = get_embedder(EmbeddingSettings(provider="hash"))
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, HashEmbedder)


def test_an_installed_plugin_provides_names_the_settings_accept(installed: Path) -> None:
    assert "acme" in provider_names("llm") and "acme" in provider_names("embedding")
    model = get_llm(LLMSettings(provider="acme", model="acme-2"))
    assert (type(model).__name__, model.name) == ("AcmeModel", "acme-2")
    assert get_embedder(EmbeddingSettings(provider="acme")).name == "acme-letters"


def test_an_unknown_name_says_which_ones_exist() -> None:
    with pytest.raises(ConfigError, match=r'provider: expected one of "none", "openai"'):
        LLMSettings(provider="acne")
    with pytest.raises(ConfigError, match=r"unknown embedding provider 'acne': expected one"):
        registry().provider("embedding", "acne")


def broken(registry: ProviderRegistry) -> None:
    raise ImportError("No module named 'acme_sdk'")


def greedy(registry: ProviderRegistry) -> None:
    registry.add_llm("openai", lambda settings: NoLanguageModel())
    registry.add_llm("greedy", lambda settings: NoLanguageModel())


def test_a_broken_or_greedy_plugin_does_not_take_relmerge_down() -> None:
    found = ProviderRegistry()
    for name, hook in (
        ("relmerge", "relmerge.providers.builtin:register"),
        ("broken", f"{__name__}:broken"),
        ("greedy", f"{__name__}:greedy"),
    ):
        found.run_hook(EntryPoint(name, hook, GROUP))
    assert found.names("llm") == ("none", "openai", "greedy")
    assert found.provider("llm", "openai").plugin == "relmerge"  # the first one is kept
    with pytest.raises(ConfigError) as error:
        found.provider("llm", "acme")
    assert "plugin 'broken'" in str(error.value) and "acme_sdk" in str(error.value)
    assert "registers the LLM provider 'openai' again" in str(error.value)


def test_a_plugin_that_builds_no_model_is_refused_by_name(installed: Path) -> None:
    entry = registry().providers[("llm", "acme")]
    registry().providers[("llm", "acme")] = entry.__class__(
        "llm", "acme", lambda settings: object(), entry.description, entry.plugin
    )
    with pytest.raises(ConfigError, match=r"provider 'acme' \(plugin 'acme'\) built a object"):
        get_llm(LLMSettings(provider="acme"))


def _relmerge(plugin_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    source = Path(__file__).resolve().parents[1] / "src"
    path = [str(plugin_path), str(source), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    return subprocess.run(
        [sys.executable, "-m", "relmerge", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_cli_runs_with_a_third_party_provider(plugin_path: Path, tmp_path: Path) -> None:
    help_text = _relmerge(plugin_path, "run", "--help").stdout
    assert "--llm [none|openai|acme]" in help_text
    assert "--embedding [use|hash|openai|acme]" in help_text
    out = tmp_path / "out"
    sample = sample_dir()
    done = _relmerge(
        plugin_path,
        "run",
        str(sample / "relations.jsonl"),
        "--entity-mapping",
        str(sample / "entity_id_mapping.json"),
        "--output",
        str(out),
        "--llm",
        "acme",
        "--embedding",
        "acme",
        "-q",
    )
    assert done.returncode == 0, done.stderr
    result = orjson.loads((out / "deduplicate_relations_result.json").read_bytes())
    assert (result["llm_model"], result["embedding_model"]) == ("acme-1", "acme-letters")
    assert result["llm_requests"] > 0 and result["failed_group_count"] == 0
    lines = [orjson.loads(line) for line in (out / "decisions.jsonl").read_bytes().splitlines()]
    asked = [line for line in lines if line["tier"] == "llm"]
    assert asked and {line["model"] for line in asked} == {"acme-1"}
    prompts = {"relation_judge@2", "relation_cluster@2", "relation_cluster_many@2"}
    assert {line["prompt"] for line in asked} <= prompts
