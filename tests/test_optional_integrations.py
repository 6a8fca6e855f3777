"""relmerge imports and works without heta-framework, and says what to install when its
integration is imported without it."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import orjson

import relmerge

REPO = Path(__file__).resolve().parents[1]

# heta-framework and litellm cannot be imported in this interpreter: as on a machine
# without the extra.
SCRIPT = r"""
import asyncio, importlib, json, pkgutil, sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("heta_framework", "litellm"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())

import relmerge
from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.providers.base import NoLanguageModel
from tests.factories import record, store_with

store, keys = store_with([record("r1"), record("r2", description="Description of r1.")])
context = DictContext(
    {"stores.objects": store, "models.language": NoLanguageModel()},
    {"relation_keys": keys, "entity_id_mapping": {}},
)
step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
output = asyncio.run(step.run(context))
try:
    import relmerge.integrations.heta
    message = None
except ModuleNotFoundError as error:
    message = str(error)
print(json.dumps({
    "mapping": output.relation_id_mapping,
    "message": message,
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("heta_framework", "litellm")),
}))
"""


def test_relmerge_works_without_heta_framework() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = orjson.loads(done.stdout.strip().splitlines()[-1])
    merged = report["mapping"]["r1"]  # identical descriptions: merged by the rules
    assert merged.startswith("relation_") and report["mapping"] == {"r1": merged, "r2": merged}
    assert report["loaded"] == []
    assert "pip install 'relmerge[heta]'" in report["message"]


def test_no_module_outside_the_integration_imports_heta_framework() -> None:
    """Import graph: only relmerge.integrations.heta names heta_framework."""
    root = Path(relmerge.__file__).parent
    offenders = []
    for info in pkgutil.walk_packages([str(root)], "relmerge."):
        if info.name.startswith("relmerge.integrations.heta"):
            continue
        path = root.joinpath(*info.name.split(".")[1:])
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        text = source.read_text(encoding="utf-8")
        if "heta_framework" in text or "litellm" in text.replace("LITELLM", ""):
            offenders.append(info.name)
    assert offenders == []


async def test_a_store_that_raises_file_not_found_rejects_the_record() -> None:
    """Another library's store (heta-framework's LocalObjectStore raises FileNotFoundError)
    passed straight to relmerge's own step: a missing key is a rejected record."""
    from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
    from relmerge.providers.base import NoLanguageModel
    from relmerge.stores import MemoryStore
    from tests.factories import record, store_with

    class ForeignStore(MemoryStore):
        async def get(self, key: str) -> bytes:
            if key not in self.objects:
                raise FileNotFoundError(key)
            return self.objects[key]

    memory, keys = store_with([record("r1"), record("r2", name="founded")])
    store = ForeignStore()
    store.objects.update(memory.objects)
    context = DictContext(
        {"stores.objects": store, "models.language": NoLanguageModel()},
        {"relation_keys": [*keys, "relations/gone.json"], "entity_id_mapping": {}},
    )
    output = await DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False)).run(
        context
    )
    assert output.relation_id_mapping == {"r1": "r1", "r2": "r2"}
    assert [(item.origin, item.reason) for item in output.rejected] == [
        ("relations/gone.json", "no object 'relations/gone.json' in the store")
    ]


LIGHTRAG_ABSENT = r"""
import json, sys
from pathlib import Path

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "lightrag":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())

from relmerge.integrations.lightrag.folder import import_lightrag
from tests.adapters.fixtures import write_graphml

folder = Path(sys.argv[1])
folder.mkdir()
write_graphml(
    folder / "graph_chunk_entity_relation.graphml",
    {"A": {"entity_type": "org"}, "B": {"entity_type": "org"}},
    [("A", "B", {"description": "A owns B<SEP>A has owned B", "source_id": "c1"})],
)
imported = import_lightrag(folder)
print(json.dumps({
    "records": len(imported.relations),
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "lightrag"),
}))
"""


def test_the_lightrag_folder_import_needs_no_lightrag(tmp_path: Path) -> None:
    """Reading a folder someone sent you works without lightrag-hku installed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", LIGHTRAG_ABSENT, str(tmp_path / "rag")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"records": 2, "loaded": []}
