"""Every shell command of the README and the guides, run as a reader runs it.

The ```bash / ```sh / ```shell blocks (and the ``$ `` lines of ```console blocks) of the
pages in ``PAGES`` are extracted and run, page by page, in the order they are written, each
page in a fresh folder of its own that holds the bundled sample data under the names the
pages use (``SAMPLE_FILES`` and ``prepare``): later commands of a page read what earlier
ones wrote, as they do for a reader who follows the page. ``relmerge`` is this checkout's
(the interpreter's ``bin`` folder comes first on PATH).

What a page cannot give is set here, in explicit tables:

- ``SUBSTITUTE``: documented placeholders replaced before a command runs (the LLM endpoint
  becomes a real OpenAI-compatible server on 127.0.0.1 that answers from the sample's
  labels; a batch id the docs show as an example becomes the one the store holds);
- ``PRELUDE``: what a page takes as already there (a run's OUT), made first;
- ``STATUS``: the exit status a page documents, where it is not 0;
- ``SERVES``: commands that serve a page until Ctrl-C: the page is fetched, then SIGINT;
- ``SKIP``: commands that cannot run here, each with its reason.

A command in no table is run and must exit 0, so a new command in the docs is run as soon
as it is written; an entry of a table that names no command of the docs fails the test.
S3 commands run against a moto S3 server on 127.0.0.1 (as tests/stores do).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from relmerge.data import sample_dir
from relmerge.eval.gold_judge import GoldJudge
from relmerge.integrations.lightrag.folder import entity_id as lightrag_entity_id
from tests.adapters.fixtures import entity, relationship, write_graphml, write_graphrag
from tests.support.gold_judge import gold_task_handler
from tests.support.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
PAGES = (
    "README.md",
    "docs/index.md",
    "docs/getting-started.md",
    *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs" / "guides").glob("*.md")),
)
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
COMMAND_TIMEOUT = 300

# Placeholders the pages use, and what runs in their place. A value is a string or a
# function of the page's folder (called just before the command runs).
DOC_LLM_URL = "http://127.0.0.1:8000/v1"
EXAMPLE_LOAD_BATCH = "load-3f2a9c0d11b2e4f7"

# The commands a page takes as already run, by page: made, in its folder, before its own.
PRELUDE: dict[str, list[str]] = {
    # "seed it with what you have": a deduplicated first batch
    "README.md": [
        "relmerge run batch0.jsonl --entity-mapping entity_id_mapping.json "
        "--entities entities.jsonl --output dedup0/ -q"
    ],
    # the Commands list loads "out/", a run's OUT
    "docs/guides/graph-store.md": [
        "relmerge run relations.jsonl --entity-mapping entity_id_mapping.json "
        "--entities entities.jsonl --output out -q"
    ],
    # "relmerge report out" / "relmerge review out": a run's OUT
    "docs/guides/report.md": [
        "relmerge run relations.jsonl --entity-mapping entity_id_mapping.json "
        "--entities entities.jsonl --output out -q"
    ],
    "docs/guides/review.md": [
        "relmerge run relations.jsonl --entity-mapping entity_id_mapping.json "
        "--entities entities.jsonl --output out -q"
    ],
}

# (page, command) -> documented exit status other than 0. Commands are written as
# ``command_key`` gives them: shell words joined by one space, comments dropped.
STATUS: dict[tuple[str, str], int] = {
    # "A store's first batches are never merged by a model before it is measured": too few
    # canaries yet, the batch is applied without the model's merges, exit 3.
    (
        "docs/guides/growing-graph.md",
        "relmerge merge-into sqlite:///graph.db new-batch.jsonl --output merge-2024-06-01/ "
        "--llm-base-url http://127.0.0.1:8000/v1 --llm-model qwen2.5-7b-instruct",
    ): 3,
}

# Pages with a command that needs an optional package (a dev dependency): skipped without it.
NEEDS = {"docs/guides/scale-out.md": "ray", "docs/guides/object-stores.md": "s3fs"}

# (page, command) -> the path to fetch: the command serves a page on 127.0.0.1 until Ctrl-C.
SERVES: dict[tuple[str, str], str] = {
    ("docs/guides/review.md", "relmerge review out --web"): "/",
}

PIP = "installs from PyPI (network); the test runs this checkout's relmerge instead"
SCRIPTS = "makes .venv and installs into it (network); scripts/test.sh runs the whole suite"
GRAPH_STORE, SCALE_OUT = "docs/guides/graph-store.md", "docs/guides/scale-out.md"
RAY_RUN = "relmerge run relations.jsonl -o out/ --engine ray"
GRAPHITI = "docs/guides/graphiti.md"
GRAPHITI_OUT = "--group-id support-chats --output support-chats-relmerge"
GRAPHITI_SERVER = (
    "needs a Graphiti graph on a FalkorDB server; tests/integrations/graphiti/"
    "test_commands.py runs these commands on one"
)
SKIP: dict[tuple[str, str], str] = {
    ("README.md", "pip install relmerge"): PIP,
    ("docs/index.md", "pip install relmerge"): PIP,
    ("docs/getting-started.md", "pip install relmerge"): PIP,
    ("docs/guides/heta.md", "pip install relmerge[heta]"): PIP,
    ("docs/guides/lightrag.md", "pip install relmerge[lightrag]"): PIP,
    ("docs/guides/graphiti.md", "pip install relmerge[graphiti]"): PIP,
    (SCALE_OUT, "pip install relmerge[ray]"): PIP,
    ("README.md", "bash scripts/demo.sh"): SCRIPTS,
    ("README.md", "bash scripts/test.sh"): SCRIPTS,
    ("docs/getting-started.md", "bash scripts/demo.sh"): SCRIPTS,
    ("docs/getting-started.md", "bash scripts/test.sh"): SCRIPTS,
    (GRAPH_STORE, ".venv/bin/python bench/store_lookup.py"): (
        "a benchmark: fills stores of 10k and 1M relations (minutes)"
    ),
    (GRAPH_STORE, ".venv/bin/python bench/store_lookup.py --postgres postgresql:///bench"): (
        "a benchmark, on a PostgreSQL server's database 'bench'"
    ),
    (SCALE_OUT, "ray start --head"): "starts a Ray head node that outlives the command",
    (SCALE_OUT, f"{RAY_RUN} --ray-address auto"): "needs the cluster 'ray start --head' starts",
    (SCALE_OUT, f"{RAY_RUN} --ray-address ray://HEAD:10001"): "needs a remote Ray cluster",
    # A synopsis, not a command ("[--document …]" is no argument); the section is being
    # written: drop this entry once the line is a command that runs (the test says so).
    (
        "docs/guides/growing-graph.md",
        "relmerge store retract sqlite:///graph.db --document doc_17 [--document …] "
        "[--chunk c_9 …]",
    ): "a synopsis with optional parts in [ ], not a runnable command",
    **{
        (GRAPHITI, command): GRAPHITI_SERVER
        for command in (
            f"relmerge graphiti dedupe falkordb://127.0.0.1:6379 {GRAPHITI_OUT}",
            "relmerge review support-chats-relmerge",
            "relmerge graphiti undo falkordb://127.0.0.1:6379 support-chats-relmerge",
        )
    },
    (
        GRAPHITI,
        "relmerge graphiti dedupe kuzu:///srv/graphiti/graph.kuzu "
        f"{GRAPHITI_OUT} --graph-embedding-base-url http://127.0.0.1:8001/v1 "
        "--graph-embedding-model bge-m3 --graph-embedding-api-key-env EMBEDDINGS_KEY",
    ): "needs a Graphiti graph in Kuzu and its embeddings server; "
    "tests/integrations/graphiti/test_commands.py runs this command on one",
    (
        "docs/guides/writing-a-provider.md",
        "relmerge run relations.jsonl -o out/ --llm acme --llm-model acme-2 --embedding acme",
    ): "needs the guide's example plugin relmerge_acme installed (an entry point)",
}


# ---------------------------------------------------------------------------------------
# Extraction


@dataclass(frozen=True)
class Command:
    page: str
    line: int  # 1-based, of the command's first line
    text: str  # as written (continuation lines joined by the shell's own rule)

    @property
    def key(self) -> str:
        return command_key(self.text)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def command_key(text: str) -> str:
    """The command's shell words (quotes resolved, comments dropped), one space apart."""
    return " ".join(shlex.split(text, comments=True))


_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)")


def shell_commands(page: str) -> list[Command]:
    """The commands of a page's shell blocks, in order."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    commands: list[Command] = []
    fence: str | None = None
    language = ""
    pending: list[str] = []
    start = 0
    for number, line in enumerate(lines, 1):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, language = match["fence"], match["info"].lower()
            continue
        if match and match["fence"].startswith(fence) and not match["info"]:
            if pending:
                raise AssertionError(f"{page}:{start}: a continued line ends its block")
            fence = None
            continue
        if language not in SHELL_LANGUAGES:
            continue
        text = line.strip()
        if not pending:
            if language == "console":
                if not text.startswith("$ "):
                    continue  # output
                text = text[2:]
            if not text or text.startswith("#"):
                continue
            start = number
        if text.endswith("\\"):
            pending.append(text[:-1].rstrip())
            continue
        commands.append(Command(page, start, " ".join([*pending, text])))
        pending = []
    assert fence is None, f"{page}: a code block is not closed"
    return commands


# ---------------------------------------------------------------------------------------
# The sample data, under the names the pages use

SAMPLE = sample_dir()
SAMPLE_FILES = ("relations.jsonl", "entities.jsonl", "entity_id_mapping.json")
# Sample records (by position) that come later, as new batches; the rest are batch 0.
NEW, DAY1, DAY2 = (1, 5, 7, 10), (8, 13), (14,)
# Gold clusters of the sample, for the judge behind the LLM endpoint (same label = one fact).
GOLD = {
    "rel_sh_xh_1": "sh_xh", "rel_sh_xh_2": "sh_xh", "rel_sh_xh_3": "sh_xh",
    "rel_sh_js_1": "sh_js", "rel_hz_zj_1": "hz_zj", "rel_hz_zj_2": "hz_zj",
    "rel_ceo_1": "ceo_1998", "rel_ceo_2": "ceo_2017", "rel_ceo_3": "ceo_2017",
    "rel_stake_1": "stake_20", "rel_stake_2": "stake_35", "rel_acq_1": "acq",
    "rel_felix_iselde_1": "ally", "rel_felix_iselde_2": "companion",
    "rel_felix_iselde_3": "ally", "rel_bram_corvin_1": "enemy", "rel_alias_loop": "alias",
}  # fmt: skip


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _write_jsonl(path: Path, items: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in items))


RECORDS = _jsonl(SAMPLE / "relations.jsonl")
ENTITIES = {item["entity_id"]: item for item in _jsonl(SAMPLE / "entities.jsonl")}
MAPPING: dict[str, str] = orjson.loads((SAMPLE / "entity_id_mapping.json").read_bytes())


def _canonical(record: dict[str, Any]) -> dict[str, Any]:
    """The record with canonical entity ids and one name per entity."""
    out = dict(record)
    for side in ("source", "target"):
        eid = MAPPING.get(record[f"{side}_entity_id"], record[f"{side}_entity_id"])
        out[f"{side}_entity_id"] = eid
        out[f"{side}_entity_name"] = NAMES[eid]
    return out


def _names() -> dict[str, str]:
    names = {eid: item["name"] for eid, item in ENTITIES.items()}
    for record in RECORDS:
        for side in ("source", "target"):
            eid = MAPPING.get(record[f"{side}_entity_id"], record[f"{side}_entity_id"])
            names.setdefault(eid, record[f"{side}_entity_name"].strip())
    return names


NAMES = _names()
LATER = set(NEW) | set(DAY1) | set(DAY2)
BATCH0 = [record for number, record in enumerate(RECORDS) if number not in LATER]


def _as_lightrag(record: dict[str, Any]) -> dict[str, Any]:
    """A canonical record with the entity ids ``relmerge import lightrag`` gives."""
    out = _canonical(record)
    for side in ("source", "target"):
        out[f"{side}_entity_id"] = lightrag_entity_id(out[f"{side}_entity_name"])
    return out


def _graphrag_folder(folder: Path) -> None:
    """A GraphRAG output folder (parquet tables) holding the whole sample."""
    rows = [
        relationship(
            f"gr-{record['relation_id']}",
            record["source_entity_name"],
            record["target_entity_name"],
            record["description"],
            record["source_chunk_ids"],
            1.0,
        )
        for record in map(_canonical, RECORDS)
    ]
    entities = [
        entity(
            f"gr-{eid}",
            name,
            (ENTITIES.get(eid) or {}).get("type") or "",
            (ENTITIES.get(eid) or {}).get("profile") or name,
        )
        for eid, name in NAMES.items()
    ]
    documents = {record["chunk_id"]: record["document_id"] for record in RECORDS}
    write_graphrag(folder, rows, entities, documents)


def _lightrag_folder(folder: Path) -> None:
    """A LightRAG working folder holding batch 0: one edge per entity pair, its
    descriptions and chunks joined by <SEP>, as LightRAG keeps them."""
    edges: dict[tuple[str, str], tuple[str, list[str], list[str]]] = {}
    for record in map(_canonical, BATCH0):
        ends = (record["source_entity_name"], record["target_entity_name"])
        _, texts, cited = edges.setdefault(ends, (record["name"].strip(), [], []))
        texts.append(record["description"])
        cited.extend(c for c in record["source_chunk_ids"] if c not in cited)
    nodes = {
        NAMES[eid]: {
            "entity_type": (ENTITIES.get(eid) or {}).get("type") or "unknown",
            "description": (ENTITIES.get(eid) or {}).get("profile") or NAMES[eid],
            "source_id": "chunk_0",
        }
        for eid in sorted({MAPPING.get(e, e) for r in BATCH0 for e in _ends(r)})
    }
    write_graphml(
        folder / "graph_chunk_entity_relation.graphml",
        nodes,
        [
            (source, target, {
                "weight": "1.0", "description": "<SEP>".join(texts),
                "keywords": label, "source_id": "<SEP>".join(chunks),
            })
            for (source, target), (label, texts, chunks) in edges.items()
        ],
        edge_keys=("weight", "description", "keywords", "source_id"),
    )  # fmt: skip
    chunks = {
        record["chunk_id"]: {"content": "…", "full_doc_id": record["document_id"]}
        for record in RECORDS
    }
    (folder / "kv_store_text_chunks.json").write_bytes(orjson.dumps(chunks))


def _ends(record: dict[str, Any]) -> tuple[str, str]:
    return record["source_entity_id"], record["target_entity_id"]


def prepare(work: Path) -> None:
    """The files the pages name, made from the bundled sample:

    - ``relations.jsonl``, ``entities.jsonl``, ``entity_id_mapping.json``: the sample;
    - ``gold.jsonl``: its labels (``relmerge eval``);
    - ``batch0.jsonl``: the sample less its later batches; ``new.jsonl``: a later batch
      of it (canonical entity ids);
    - ``output/``: a GraphRAG output folder of the sample; ``rag_storage/``: a LightRAG
      working folder of batch 0; ``new-batch.jsonl``, ``day1.jsonl``, ``day2.jsonl``:
      later batches with the entity ids that ``relmerge import lightrag`` gives.
    """
    for name in SAMPLE_FILES:
        shutil.copyfile(SAMPLE / name, work / name)
    _write_jsonl(work / "gold.jsonl", [{"relation_id": r, "cluster": c} for r, c in GOLD.items()])
    _write_jsonl(work / "batch0.jsonl", BATCH0)
    _write_jsonl(work / "new.jsonl", [_canonical(RECORDS[n]) for n in (*NEW, *DAY1, *DAY2)])
    _write_jsonl(work / "new-batch.jsonl", [_as_lightrag(RECORDS[n]) for n in NEW])
    _write_jsonl(work / "day1.jsonl", [_as_lightrag(RECORDS[n]) for n in DAY1])
    _write_jsonl(work / "day2.jsonl", [_as_lightrag(RECORDS[n]) for n in DAY2])
    _graphrag_folder(work / "output")
    _lightrag_folder(work / "rag_storage")


# ---------------------------------------------------------------------------------------
# Running


def _store_load_batch(work: Path) -> str:
    """The newest load batch of the store at sqlite:///graph.db in ``work``."""
    done = subprocess.run(
        [_relmerge(), "store", "info", "sqlite:///graph.db", "--json", "--last", "50"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=True,
    )
    loads = [b for b in json.loads(done.stdout)["last_batches"] if b["kind"] == "load"]
    assert loads, done.stdout
    return str(loads[0]["batch_id"])


def _relmerge() -> str:
    found = shutil.which("relmerge", path=str(Path(sys.executable).parent))
    assert found, f"no relmerge beside {sys.executable}"
    return found


def _hear_ctrl_c() -> None:
    """Ctrl-C as a terminal delivers it, even where this suite runs in the background (a
    shell's ``&`` starts it with SIGINT ignored, which its children would inherit)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Session:
    """One page's folder, environment and placeholders."""

    page: str
    work: Path
    env: dict[str, str]
    substitute: dict[str, str | Callable[[Path], str]]

    def text(self, command: Command) -> str:
        text = command.text
        for placeholder, value in self.substitute.items():
            if placeholder in text:
                text = text.replace(
                    placeholder, value if isinstance(value, str) else value(self.work)
                )
        return text

    def run(self, command: Command) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", self.text(command)],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )

    def serve(self, command: Command, path: str) -> tuple[int, str]:
        """Start a command that serves a page, fetch it, Ctrl-C: (exit status, page)."""
        port = _free_port()
        words = shlex.split(self.text(command), comments=True)  # a comment may end the line
        text = shlex.join([*words, "--port", str(port)])
        process = subprocess.Popen(
            ["bash", "-c", f"exec {text}"],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_hear_ctrl_c,
        )
        page = ""
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                        page = r.read().decode("utf-8", "replace")
                        break
                except OSError:
                    time.sleep(0.2)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=COMMAND_TIMEOUT)
        assert "<html" in page.lower(), f"{command}: no page on port {port}\n{out}\n{err}"
        assert "Traceback" not in err, err
        return process.returncode, page


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def llm_url() -> Iterator[str]:
    """A real OpenAI-compatible server on 127.0.0.1 that answers from the sample's labels."""
    judge = GoldJudge(GOLD, records=RECORDS)
    with LLMServer(handler=gold_task_handler(judge)) as server:
        yield server.base_url
        assert not server.errors, server.errors


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server of its own on 127.0.0.1 (so the pages' bucket name can be used)."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


# Run with the page's environment (the moto endpoint): the bucket ``bucket`` with the sample
# as a prefix of relation objects with its ``relation_keys.json``, and as one JSONL object.
FILL_BUCKET = """
import json, fsspec
fs = fsspec.filesystem("s3")
fs.mkdir("bucket")
lines = [line for line in open("relations.jsonl", "rb").read().splitlines() if line.strip()]
keys = [f"relations/{number:03d}.json" for number in range(len(lines))]
for key, line in zip(keys, lines):
    fs.pipe_file("bucket/extracted/" + key, line)
fs.pipe_file("bucket/extracted/relation_keys.json", json.dumps(keys).encode())
fs.put_file("relations.jsonl", "bucket/batch/relations.jsonl")
"""


def _fill_bucket(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-c", FILL_BUCKET], env=env, cwd=env["PWD"], check=True)


def _environment(work: Path, s3: str | None) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "TZ", "CI")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["HOME"] = str(work / ".home")
    env["XDG_CACHE_HOME"] = str(work / ".cache")
    env["PWD"] = str(work)
    env["COLUMNS"] = "120"
    if s3:
        env.update(
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_ENDPOINT_URL=s3,
            AWS_CONFIG_FILE=str(work / ".no-aws-config"),
            AWS_SHARED_CREDENTIALS_FILE=str(work / ".no-aws-credentials"),
            AWS_EC2_METADATA_DISABLED="true",
        )
    return env


# ---------------------------------------------------------------------------------------
# The tests


ALL = {page: shell_commands(page) for page in PAGES}


def test_every_table_entry_names_a_command_of_the_docs() -> None:
    present = {(c.page, c.key) for commands in ALL.values() for c in commands}
    stale = [entry for table in (STATUS, SERVES, SKIP) for entry in table if entry not in present]
    assert not stale, f"entries naming no command of the docs (fix the key or drop it): {stale}"
    assert set(PRELUDE) <= set(PAGES)
    assert not set(SKIP) & (set(STATUS) | set(SERVES))


def test_the_docs_hold_shell_commands() -> None:
    assert sum(map(len, ALL.values())) >= 30  # the extraction still finds the blocks
    assert {"README.md", "docs/guides/growing-graph.md"} <= {p for p, c in ALL.items() if c}


@pytest.mark.parametrize("page", [page for page in PAGES if ALL[page]])
def test_the_commands_of_a_page_run_as_written(
    page: str, tmp_path: Path, llm_url: str, request: pytest.FixtureRequest
) -> None:
    commands = ALL[page]
    if page in NEEDS:
        pytest.importorskip(NEEDS[page])
    strangers = [
        str(command)
        for command in commands
        if (page, command.key) not in SKIP and command.key.split()[0] != "relmerge"
    ]
    assert not strangers, f"not a relmerge command: run it here, or add it to SKIP: {strangers}"
    s3 = None
    if any("s3://" in command.text for command in commands):
        s3 = request.getfixturevalue("s3_endpoint")
    work = tmp_path / "work"
    work.mkdir()
    prepare(work)
    env = _environment(work, s3)
    if s3:
        _fill_bucket(env)
    session = Session(
        page,
        work,
        env,
        {DOC_LLM_URL: llm_url, EXAMPLE_LOAD_BATCH: _store_load_batch},
    )
    for text in PRELUDE.get(page, []):
        done = session.run(Command(page, 0, text))
        assert done.returncode == 0, f"prelude {text}: {done.stderr}"

    failures: list[str] = []
    for command in commands:
        entry = (page, command.key)
        if entry in SKIP:
            continue
        expected = STATUS.get(entry, 0)
        started = time.monotonic()
        if entry in SERVES:
            status, _ = session.serve(command, SERVES[entry])
            output = ""
        else:
            done = session.run(command)
            status, output = done.returncode, done.stdout[-2000:] + done.stderr[-3000:]
            assert "Traceback" not in done.stderr, f"{command}\n{done.stderr}"
        print(f"{time.monotonic() - started:6.1f} s  exit {status}  {command}")
        if status != expected:
            failures.append(f"{command}\n  exit {status}, documented {expected}\n{output}")
            break  # later commands build on this one
    assert not failures, "\n\n".join(failures)
    for check in AFTER.get(page, []):
        check(session)


# ---------------------------------------------------------------------------------------
# What a page's commands must have done, beyond their exit status


def _store_info(session: Session) -> dict[str, Any]:
    done = session.run(Command(session.page, 0, "relmerge store info sqlite:///graph.db --json"))
    assert done.returncode == 0, done.stderr
    info: dict[str, Any] = json.loads(done.stdout)
    return info


def _store_has_profiles(session: Session) -> None:
    """The store holds the entity profiles the judge needs (the guide passes --entities)."""
    info = _store_info(session)
    assert info["relations"] > 0 and info["entities"] > 0, info


def _questions_show_profiles(session: Session) -> None:
    """The merge's questions for a person carry both entities' profiles from the store."""
    questions = _jsonl(session.work / "merge-2024-06-01" / "clarifications.jsonl")
    assert questions
    for question in questions:
        entities = question["context"]["entities"]
        assert len(entities) == 2 and all(e["profile"] for e in entities), question


AFTER: dict[str, list[Callable[[Session], None]]] = {
    "README.md": [_store_has_profiles],
    "docs/guides/growing-graph.md": [_store_has_profiles, _questions_show_profiles],
}
