"""Bad input through the real CLI, on a real disk (issue 5, item 4).

Every case ends one of two ways: the run goes on and the record is set aside in
``OUT/rejected.jsonl`` with a specific reason, counted in the result, while every valid input
id is still in the mapping; or the run stops with exit 2 and one clear line. Never a
traceback, never a silent drop.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.cli import main
from relmerge.errors import InputError, RelmergeError
from relmerge.io.load import read_input
from relmerge.providers.base import NoLanguageModel
from relmerge.run.pipeline import run_pipeline
from relmerge.stores import MemoryStore
from tests.factories import record, step_log
from tests.support.llm_server import LLMServer, Reply, json_reply, request_records

RESULT = "deduplicate_relations_result.json"
GOOD = [
    record("good_1"),
    record("good_2", source_entity_id="e_lin", source_entity_name="Lin Holdings"),
]
GOOD_IDS = {"good_1", "good_2"}


def _without(relation_id: str, field: str) -> dict[str, Any]:
    item = record(relation_id)
    del item[field]
    return item


def _lines(items: Sequence[dict[str, Any] | bytes]) -> list[bytes]:
    return [item if isinstance(item, bytes) else orjson.dumps(item) for item in items]


def write_jsonl(path: Path, items: Sequence[dict[str, Any] | bytes]) -> Path:
    path.write_bytes(b"\n".join(_lines(items)) + b"\n")
    return path


def cli(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(arg) for arg in args])


def run(input_path: Path, out: Path, *extra: str | Path) -> Result:
    """``relmerge run`` with the model-free embedder, no LLM and no progress output."""
    return cli("run", input_path, "--output", out, "--embedding", "hash", "-q", *extra)


def no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )


def assert_exit_2(result: Result, *fragments: str) -> str:
    """Exit 2 with exactly one line ``error: …`` that holds every fragment."""
    no_traceback(result)
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def assert_set_aside(
    result: Result, out: Path, valid_ids: set[str], reasons: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Exit 0; exactly ``reasons`` (origin -> reason fragment) rejected and counted; every
    valid id mapped. Returns the rejected lines by origin."""
    no_traceback(result)
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in (out / "rejected.jsonl").read_bytes().splitlines()]
    by_origin = {line["origin"]: line for line in lines}
    assert len(by_origin) == len(lines)
    assert sorted(by_origin) == sorted(reasons)
    for origin, fragment in reasons.items():
        assert fragment in by_origin[origin]["reason"], (origin, by_origin[origin]["reason"])
    summary = orjson.loads((out / RESULT).read_bytes())
    assert summary["rejected_count"] == len(reasons)
    assert summary["input_relation_count"] == len(valid_ids)
    assert summary["input_record_count"] == len(valid_ids) + len(reasons)
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    assert set(mapping) == valid_ids
    return by_origin


# Bad JSONL lines, each category in one run after the two good records (lines 1 and 2).
JSONL_CASES: dict[str, list[tuple[dict[str, Any] | bytes, str]]] = {
    "malformed_json": [
        (b'{"relation_id": "broken", ', "malformed JSON: unexpected end of data"),
        (orjson.dumps(record("trailing")) + b" extra", "malformed JSON"),
        (b"{'single': 'quotes'}", "malformed JSON"),
    ],
    "not_an_object": [
        (b"[1, 2]", "a relation must be a JSON object, not an array"),
        (b"42", "a relation must be a JSON object, not a number"),
        (b'"text"', "a relation must be a JSON object, not a string"),
        (b"null", "a relation must be a JSON object, not null"),
    ],
    "missing_field": [
        (_without("m1", "description"), "missing field 'description'"),
        (_without("m2", "source_chunk_ids"), "missing field 'source_chunk_ids'"),
        (_without("m3", "relation_id"), "missing field 'relation_id'"),
    ],
    "wrong_type": [
        (record("w1", description=["a", "list"]), "description: must be a string, not an array"),
        (record("w2", source_chunk_ids="c1"), "source_chunk_ids: must be an array, not a string"),
        (
            record("w3", attributes=["not", "a", "dict"]),
            "attributes: must be an object of string keys to values, not an array",
        ),
        ({**record("w4"), "relation_id": 7}, "relation_id: must be a string, not a number"),
        (record("w5", name=True), "name: must be a string, not a boolean"),
        (record("w6", source_chunk_ids=[1]), "source_chunk_ids.0: must be a string, not a number"),
        (record("w7", attributes=None), "attributes: must be an object"),
        ({**record("w8"), "weight": 0.5}, "unknown field 'weight'"),
    ],
    "empty_strings": [
        (record("e1", name=""), "name: must be a non-empty string"),
        (record("e2", description=" \t\n "), "description: must be a non-empty string"),
        (record("   "), "relation_id: must be a non-empty string"),
        (record("e4", source_chunk_ids=["c", " "]), "every chunk id must be a non-empty string"),
        (record("e5", attributes={" ": "x"}), "attribute keys must be non-empty strings"),
    ],
    "source_equals_target": [
        (record("s1", target_entity_id="e_norrbeck"), "source_entity_id equals target_entity_id"),
        (record("s2", target_entity_id=" e_norrbeck "), "self-loop"),
    ],
    "non_utf8_line": [
        (
            orjson.dumps(record("u1")).replace(b"Description", b"Descr\xff\xfeiption"),
            "not UTF-8 text (invalid start byte at byte",
        ),
    ],
}


@pytest.mark.parametrize("case", sorted(JSONL_CASES))
def test_bad_jsonl_records_are_set_aside_with_their_reason(tmp_path: Path, case: str) -> None:
    bad = JSONL_CASES[case]
    path = write_jsonl(tmp_path / "in.jsonl", [*GOOD, *(item for item, _ in bad)])
    out = tmp_path / "out"
    rejected = assert_set_aside(
        run(path, out),
        out,
        GOOD_IDS,
        {f"in.jsonl:{number}": reason for number, (_, reason) in enumerate(bad, start=3)},
    )
    # The record itself is kept for a person to fix: parsed, or as text when unparsable.
    for number, line in enumerate(_lines([item for item, _ in bad]), start=3):
        kept = rejected[f"in.jsonl:{number}"]["record"]
        try:
            assert kept == orjson.loads(line)
        except orjson.JSONDecodeError:
            assert isinstance(kept, str) and kept[:5] == line[:5].decode()


def test_a_repeated_relation_id_rejects_the_later_record_and_keeps_the_first(
    tmp_path: Path,
) -> None:
    later = [record("good_1", description="A later copy."), record(" good_1 ")]
    path = write_jsonl(tmp_path / "in.jsonl", [*GOOD, *later])
    out = tmp_path / "out"
    rejected = assert_set_aside(
        run(path, out),
        out,
        GOOD_IDS,
        {
            "in.jsonl:3": "duplicate relation_id 'good_1' (an earlier record has it)",
            "in.jsonl:4": "duplicate relation_id 'good_1'",
        },
    )
    assert rejected["in.jsonl:3"]["record"]["description"] == "A later copy."
    stored = orjson.loads((out / "deduplicated_relations" / "good_1.json").read_bytes())
    assert stored["description"] == "Description of good_1."


def test_an_id_that_cannot_name_an_output_file_is_rejected_not_a_failed_run(
    tmp_path: Path,
) -> None:
    unsafe = ["../escape", "/etc/passwd", "a\\b", "a//b"]
    path = write_jsonl(
        tmp_path / "in.jsonl",
        [*GOOD, *(record(rid, source_entity_id=f"e_{i}") for i, rid in enumerate(unsafe))],
    )
    out = tmp_path / "out"
    assert_set_aside(
        run(path, out),
        out,
        GOOD_IDS,
        {f"in.jsonl:{n}": "cannot name its output file" for n in range(3, 3 + len(unsafe))},
    )
    assert not (tmp_path / "escape.json").exists()
    written = sorted(p.name for p in (out / "deduplicated_relations").rglob("*") if p.is_file())
    assert written == ["good_1.json", "good_2.json"]


def test_attributes_are_coerced_in_the_stored_record(tmp_path: Path) -> None:
    attributes = {
        " since ": 2017,
        "active": True,
        "stake": 0.2,
        "tags": ["a", "b"],
        "place": {"城市": "上海", "n": None},
        "gone": None,
        "note": "  kept  ",
    }
    path = write_jsonl(tmp_path / "in.jsonl", [record("good_1", attributes=attributes)])
    out = tmp_path / "out"
    assert_set_aside(run(path, out), out, {"good_1"}, {})
    stored = orjson.loads((out / "deduplicated_relations" / "good_1.json").read_bytes())
    assert stored["attributes"] == {
        "since": "2017",
        "active": "true",
        "stake": "0.2",
        "tags": '["a","b"]',
        "place": '{"n":null,"城市":"上海"}',
        "note": "kept",
    }


def test_bad_files_in_a_directory_input_are_set_aside(tmp_path: Path) -> None:
    folder = tmp_path / "relations"
    folder.mkdir()
    for item in GOOD:
        (folder / f"{item['relation_id']}.json").write_bytes(orjson.dumps(item))
    (folder / "latin1.json").write_bytes(
        orjson.dumps(record("latin1")).replace(b"Description", "Descripción".encode("latin-1"))
    )
    (folder / "utf16.json").write_bytes(orjson.dumps(record("utf16")).decode().encode("utf-16"))
    (folder / "list.json").write_bytes(orjson.dumps([record("in_a_list")]))
    (folder / "notes.txt").write_text("not an input file")
    out = tmp_path / "out"
    rejected = assert_set_aside(
        run(folder, out),
        out,
        GOOD_IDS,
        {
            "latin1.json": "not UTF-8 text (invalid continuation byte at byte",
            "utf16.json": "UTF-16 text; relmerge reads UTF-8 JSON",
            "list.json": "a relation must be a JSON object, not an array",
        },
    )
    assert "Descripci\ufffdn" in rejected["latin1.json"]["record"]


def test_a_file_name_that_is_not_utf8_does_not_break_the_run(tmp_path: Path) -> None:
    folder = tmp_path / "relations"
    folder.mkdir()
    raw_folder = os.fsencode(folder)
    try:
        with open(os.path.join(raw_folder, b"\xff-good.json"), "wb") as handle:
            handle.write(orjson.dumps(GOOD[0]))
        with open(os.path.join(raw_folder, b"\xfe-bad.json"), "wb") as handle:
            handle.write(b"[]")
    except OSError:
        pytest.skip("this file system refuses file names that are not UTF-8")
    out = tmp_path / "out"
    assert_set_aside(
        run(folder, out),
        out,
        {"good_1"},
        {"\\udcfe-bad.json": "a relation must be a JSON object, not an array"},
    )


def test_store_keys_that_escape_or_are_not_strings_are_set_aside(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "relations").mkdir(parents=True)
    for item in GOOD:
        (store / "relations" / f"{item['relation_id']}.json").write_bytes(orjson.dumps(item))
    (tmp_path / "x.json").write_bytes(orjson.dumps(record("outside")))
    keys: list[Any] = [
        "relations/good_1.json",
        "../x.json",
        "relations/../../x.json",
        "/etc/passwd",
        5,
        None,
        ["relations/good_2.json"],
        "",
        "relations//good_2.json",
        "relations/missing.json",
        "relations/good_2.json",
    ]
    (store / "relation_keys.json").write_bytes(orjson.dumps(keys))
    out = tmp_path / "out"
    assert_set_aside(
        run(store, out),
        out,
        GOOD_IDS,
        {
            "../x.json": "may not contain '.' or '..' segments",
            "relations/../../x.json": "may not contain '.' or '..' segments",
            "/etc/passwd": "object key must be relative: '/etc/passwd'",
            "5": "object key must be a non-empty string, got 5",
            "None": "object key must be a non-empty string, got None",
            "['relations/good_2.json']": "object key must be a non-empty string",
            "": "object key must be a non-empty string, got ''",
            "relations//good_2.json": "object key has an empty segment",
            "relations/missing.json": "no object 'relations/missing.json'",
        },
    )


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (b'{"keys": []}', ["relation_keys.json must be a JSON array of object keys"]),
        (b'["relations/a.json", ', ["relation_keys.json is not valid JSON"]),
        (b'["relations/\xff.json"]', ["relation_keys.json is not UTF-8 text"]),
        (b"[]", ["no relation records in", "relation_keys.json is empty"]),
    ],
)
def test_an_unusable_relation_keys_file_is_one_line_exit_2(
    tmp_path: Path, content: bytes, fragments: list[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "relation_keys.json").write_bytes(content)
    out = tmp_path / "out"
    assert_exit_2(run(store, out), *fragments)
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        (b'["e_a", "e_b"]', ["must be a JSON object of id -> canonical id, not an array"]),
        (b'{"e_ada": 1}', ["entry 'e_ada' -> 1 does not"]),
        (b'{"e_ada": {"id": "e_lind"}}', ["entry 'e_ada' -> {'id': 'e_lind'} does not"]),
        (b'{"e_ada": "  "}', ["must map non-empty strings to non-empty strings"]),
        (b'{"": "e_lind"}', ["entry '' -> 'e_lind' does not"]),
        (b'{"e_ada": "e_lind"', ["is not valid JSON"]),
        (b'{"e_ada": "e_\xe9"}', ["is not UTF-8 text"]),
    ],
    ids=["list", "number_value", "object_value", "blank_value", "empty_key", "json", "utf8"],
)
def test_a_bad_entity_mapping_is_one_line_exit_2(
    tmp_path: Path, content: bytes, fragments: list[str]
) -> None:
    mapping = tmp_path / "mapping.json"
    mapping.write_bytes(content)
    out = tmp_path / "out"
    path = write_jsonl(tmp_path / "in.jsonl", GOOD)
    line = assert_exit_2(run(path, out, "--entity-mapping", mapping), *fragments)
    assert "entity" in line
    assert not out.exists()


def test_an_entity_mapping_file_holding_null_is_one_line_exit_2(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.json"
    mapping.write_bytes(b"null")
    path = write_jsonl(tmp_path / "in.jsonl", GOOD)
    assert_exit_2(run(path, tmp_path / "out", "--entity-mapping", mapping), "not null")


def _empty_file(tmp_path: Path) -> Path:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    return tmp_path / "empty.jsonl"


def _blank_file(tmp_path: Path) -> Path:
    (tmp_path / "blank.jsonl").write_bytes(b"\n  \n\t\n")
    return tmp_path / "blank.jsonl"


def _empty_dir(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def _dir_without_json(tmp_path: Path) -> Path:
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "notes.txt").write_text("{}")
    return tmp_path / "texts"


def _utf16_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "utf16.jsonl"
    path.write_bytes(orjson.dumps(GOOD[0]).decode().encode("utf-16"))
    return path


@pytest.mark.parametrize(
    ("make", "fragments"),
    [
        (_empty_file, ["no relation records in", "empty.jsonl: the file has no JSON lines"]),
        (_blank_file, ["no relation records in", "the file has no JSON lines"]),
        (_empty_dir, ["no relation records in", "it holds no .json files"]),
        (_dir_without_json, ["no relation records in", "it holds no .json files"]),
        (lambda tmp: tmp / "nope.jsonl", ["input not found:", "nope.jsonl"]),
        (_utf16_jsonl, ["utf16.jsonl is UTF-16 text; relmerge reads UTF-8 JSONL"]),
    ],
    ids=["empty_file", "blank_file", "empty_dir", "dir_without_json", "missing", "utf16"],
)
def test_an_input_with_nothing_to_read_is_one_line_exit_2(
    tmp_path: Path, make: Any, fragments: list[str]
) -> None:
    out = tmp_path / "out"
    assert_exit_2(run(make(tmp_path), out), *fragments)
    assert not out.exists()


def test_a_utf8_byte_order_mark_does_not_cost_the_first_record(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(_lines(GOOD)) + b"\n")
    out = tmp_path / "out"
    assert_set_aside(run(path, out), out, GOOD_IDS, {})


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_strict_fails_on_one_rejection_and_never_touches_out(tmp_path: Path) -> None:
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [*GOOD, record("loop", target_entity_id="e_norrbeck")]
    )
    fresh = tmp_path / "fresh"
    assert_exit_2(
        run(bad, fresh, "--strict"),
        "strict mode: 1 input record(s) rejected; first: bad.jsonl:3:",
        "self-loop",
    )
    assert not fresh.exists()

    # An earlier complete run in OUT stays exactly as it was.
    out = tmp_path / "out"
    good = write_jsonl(tmp_path / "good.jsonl", GOOD)
    assert_set_aside(run(good, out), out, GOOD_IDS, {})
    before = _snapshot(out)
    assert RESULT in before
    assert_exit_2(run(bad, out, "--strict"), "strict mode: 1 input record(s) rejected")
    assert _snapshot(out) == before

    # Without --strict the same input runs, with the record set aside.
    lenient = tmp_path / "lenient"
    assert_set_aside(run(bad, lenient), lenient, GOOD_IDS, {"bad.jsonl:3": "self-loop"})


def test_a_2mb_description_is_stored_whole_and_cut_only_inside_the_prompt(
    tmp_path: Path,
) -> None:
    big_text = "Ada Lind became CEO of Norrbeck Systems in 2017." + " Background." * 180_000
    assert len(big_text) > 2_000_000
    items = [
        record("small", description="Ada Lind became CEO of Norrbeck Systems in 2019."),
        record("big", description=big_text),
        record("other", source_entity_id="e_lin", description=big_text),
    ]
    path = write_jsonl(tmp_path / "in.jsonl", items)
    config = tmp_path / "relmerge.toml"
    config.write_text("prompt_description_chars = 500\n")

    def split_every_record(body: dict[str, Any]) -> Reply:
        """Answer ``relation_merge`` by keeping each record apart (as sent)."""
        parts = [
            {key: item[key] for key in ("type", "name", "description", "attributes")}
            | {"relation_ids": [item["relation_id"]]}
            for item in request_records(body) or []
        ]
        return json_reply({"relations": parts})

    out = tmp_path / "out"
    with LLMServer(handler=split_every_record) as server:
        result = cli(
            "run",
            path,
            "--output",
            out,
            "--no-semantic",
            "-q",
            "--config",
            config,
            "--llm-base-url",
            server.base_url,
            "--llm-model",
            "scripted",
        )
        bodies = server.group_requests
    assert_set_aside(result, out, {"small", "big", "other"}, {})
    # One merge request for the exact-key group (small, big); "other" has its own key.
    assert len(bodies) == 1
    sent = {item["relation_id"]: item["description"] for item in request_records(bodies[0]) or []}
    assert sent["small"] == items[0]["description"]
    assert sent["big"] == big_text[:500] + " …[truncated]"
    assert len(orjson.dumps(bodies[0])) < 20_000
    for relation_id in ("big", "other"):
        stored = orjson.loads((out / "deduplicated_relations" / f"{relation_id}.json").read_bytes())
        assert stored["description"] == big_text


def test_megabyte_descriptions_go_through_the_semantic_stage_whole(tmp_path: Path) -> None:
    """Scores use the opening of a long text (the fuzzy ratio is quadratic); nothing is cut
    in the stored record."""
    big_text = "Ada Lind became CEO of Norrbeck Systems in 2017." + " Background." * 180_000
    items = [
        record("small", name="chief executive of", description="Ada Lind became CEO in 2017."),
        record("big", description=big_text),
        record("bigger", name="leads", description=big_text + " More."),
    ]
    out = tmp_path / "out"
    ids = {"small", "big", "bigger"}
    assert_set_aside(run(write_jsonl(tmp_path / "in.jsonl", items), out), out, ids, {})
    mapping = orjson.loads((out / "relation_id_mapping.json").read_bytes())
    for relation_id in mapping.values():
        stored = orjson.loads((out / "deduplicated_relations" / f"{relation_id}.json").read_bytes())
        if stored["name"] != "chief executive of":
            assert stored["description"].startswith(big_text)


def _step_context(keys: list[Any], mapping: Any) -> tuple[DictContext, MemoryStore]:
    store = MemoryStore()
    for item in GOOD:
        store.objects[f"relations/{item['relation_id']}.json"] = orjson.dumps(item)
    store.objects["relations/bad.json"] = b"\xff{"
    context = DictContext(
        components={"stores.objects": store, "models.language": NoLanguageModel()},
        artifacts={"relation_keys": keys, "entity_id_mapping": mapping},
    )
    return context, store


async def test_python_api_sets_bad_records_aside_and_raises_input_error_for_the_rest(
    tmp_path: Path,
) -> None:
    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
    keys = ["relations/good_1.json", "relations/good_2.json", "relations/bad.json", "../x", 3]
    context, store = _step_context(keys, {})
    output = await step.run(context)
    assert output.relation_id_mapping == {"good_1": "good_1", "good_2": "good_2"}
    assert {item.origin: item.reason for item in output.rejected} == {
        "relations/bad.json": "not UTF-8 text (invalid start byte at byte 0)",
        "../x": "object key may not contain '.' or '..' segments: '../x'",
        "3": "object key must be a non-empty string, got 3",
    }
    assert output.result["rejected_count"] == 3
    assert step_log(store, "rejected.jsonl").count(b"\n") == 3

    raised: list[BaseException] = []
    for bad_keys, mapping in [(keys[:2], ["e_ada", "e_lind"]), ([], {})]:
        with pytest.raises(InputError) as caught:
            await step.run(_step_context(bad_keys, mapping)[0])
        raised.append(caught.value)
    assert "must be a JSON object of id -> canonical id" in str(raised[0])
    assert "no relation records" in str(raised[1])

    strict = DeduplicateRelationsConfig(semantic_merge=False, strict=True)
    with pytest.raises(InputError, match="strict mode: 3 input record"):
        await DeduplicateRelations(strict).run(_step_context(keys, {})[0])

    (tmp_path / "empty").mkdir()
    with pytest.raises(RelmergeError, match="no relation records"):
        await run_pipeline(
            await read_input(tmp_path / "empty"),
            None,
            DeduplicateRelationsConfig(semantic_merge=False),
            NoLanguageModel(),
            MemoryStore(),
        )


def _missing_input(tmp: Path) -> list[str | Path]:
    return ["run", tmp / "missing.jsonl"]


def _mapping_is_a_list(tmp: Path) -> list[str | Path]:
    mapping = write_jsonl(tmp / "m.json", [b"[1]"])
    return ["run", write_jsonl(tmp / "in.jsonl", GOOD), "--entity-mapping", mapping]


@pytest.mark.parametrize(
    ("make_args", "fragment"),
    [
        (_missing_input, "error: input not found:"),
        (_mapping_is_a_list, "error: entity mapping "),
    ],
    ids=["missing_input", "mapping_list"],
)
def test_the_installed_command_prints_one_line_on_stderr(
    tmp_path: Path, make_args: Any, fragment: str
) -> None:
    args = [str(arg) for arg in make_args(tmp_path)]
    args += ["--output", str(tmp_path / "out"), "--embedding", "hash", "-q"]
    done = subprocess.run(
        [sys.executable, "-m", "relmerge", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(fragment), done.stderr
    assert "Traceback" not in done.stderr


def test_an_input_with_no_valid_record_is_one_line_exit_2(tmp_path: Path) -> None:
    """A wrong file (every line rejected) is an error, not an empty successful run."""
    path = write_jsonl(tmp_path / "in.jsonl", [b"not json", record("x", source_entity_id="e_ada")])
    line = assert_exit_2(run(path, tmp_path / "out"), "none of the 2 input records")
    assert "in.jsonl:1: malformed JSON" in line
    assert not (tmp_path / "out").exists()
