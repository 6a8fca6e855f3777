"""Importing the integration and building with heta-framework's own OpenAI-compatible
model reaches no address but the loopback test server: litellm, which that model imports
on its first request, would otherwise download its model cost map."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[3]

# Runs in a fresh interpreter (litellm not imported yet, the variable unset), with every
# connection and name lookup recorded and refused unless it is the loopback address.
SCRIPT = r"""
import asyncio, json, os, socket, sys, tempfile

attempts = []
_connect = socket.socket.connect
_getaddrinfo = socket.getaddrinfo
LOOPBACK = ("127.0.0.1", "::1", "localhost")

def connect(self, address):
    attempts.append(repr(address))
    if isinstance(address, tuple) and address[0] in LOOPBACK:
        return _connect(self, address)
    raise OSError(f"refused by the test: {address!r}")

def getaddrinfo(host, *args, **kwargs):
    attempts.append(f"lookup {host}")
    if host in LOOPBACK:
        return _getaddrinfo(host, *args, **kwargs)
    raise OSError(f"refused by the test: lookup {host}")

socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo

assert "LITELLM_LOCAL_MODEL_COST_MAP" not in os.environ
from relmerge.integrations.heta import DeduplicateRelations, DeduplicateRelationsConfig
from heta_framework.common.models.language.model import LanguageModel
from heta_framework.common.stores.object import LocalObjectStore
from tests.integrations.heta.data import ENTITY_MAPPING, GOLD, RECORDS
from tests.integrations.heta.support import build, put_relations
from relmerge.eval.gold_judge import GoldJudge
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer


async def main():
    store = LocalObjectStore(tempfile.mkdtemp())
    keys = await put_relations(store, RECORDS)
    with LLMServer(handler=gold_task_handler(GoldJudge(GOLD, records=RECORDS))) as server:
        model = LanguageModel(model_name="openai/gold", api_base=server.base_url, api_key="k")
        step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
        result = await build(
            step, store, {"relation_keys": keys, "entity_id_mapping": ENTITY_MAPPING}, model
        )
        requests = len(server.requests)
    hosts = sorted({a for a in attempts if "127.0.0.1" not in a and "localhost" not in a})
    print(json.dumps({
        "status": result.record.status,
        "requests": requests,
        "litellm_imported": "litellm" in sys.modules,
        "variable": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
        "elsewhere": hosts,
    }))

asyncio.run(main())
"""


def test_a_build_with_hetas_model_reaches_only_the_loopback_server() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["PYTHONPATH"] = str(REPO)
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
    assert report["status"] == "succeeded" and report["requests"] > 0
    assert report["litellm_imported"]  # the model's first request imported it
    assert report["variable"] == "True"
    assert report["elsewhere"] == []
