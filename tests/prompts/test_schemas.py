"""Answer schemas a structured-output grammar can follow.

llama.cpp (and llama-cpp-python) turn the schema sent with ``json_object`` into a grammar
the model must follow; vLLM and OpenAI compile ``json_schema`` likewise. An object that
declares properties and also allows others (``additionalProperties: true``) becomes, in
llama-cpp-python's converter, a grammar that forces invalid JSON. So: every object with
properties is closed; a map (``mapping_table``, ``Attr``) declares no properties and types
its values; only keywords those converters accept. The real-server check is
``bench/real_llm/pipeline.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from relmerge.prompts import cluster_many, cluster_relations, judge_pair, merge_relations

SCHEMAS = {
    "relation_cluster": cluster_relations.SCHEMA,
    "relation_cluster_many": cluster_many.SCHEMA,
    "relation_judge": judge_pair.SCHEMA,
    "relation_merge": merge_relations.SCHEMA,
}
# Keywords that llama.cpp's, vLLM's (outlines / xgrammar) and OpenAI's converters accept.
KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
    "$ref", "$defs", "description", "title", "default",
}  # fmt: skip
EXAMPLES = {
    "relation_cluster": [
        {
            "relation_list": [
                {
                    "relation_id": "r1",
                    "Node1": "A",
                    "Node2": "B",
                    "Relation": "capital of",
                    "Type": "spatial",
                    "Description": "A is the capital of B.",
                    "Attr": {"since": "1949"},
                    "merge_tag": True,
                }
            ],
            "mapping_table": {"r1": ["r1", "r2"], "A||B": ["r3"]},
            "unsure": [["r4", "r5"]],
        },
        {"mapping_table": {}},
    ],
    "relation_cluster_many": [
        {
            "blocks": [
                {
                    "block": "b1",
                    "relation_list": [
                        {
                            "relation_id": "r1",
                            "Node1": "A",
                            "Node2": "B",
                            "Relation": "capital of",
                            "Type": "spatial",
                            "Description": "A is the capital of B.",
                            "Attr": {},
                        }
                    ],
                    "mapping_table": {"r1": ["r1", "r2"]},
                    "unsure": [["r4", "r5"]],
                },
                {"block": "b2", "mapping_table": {}},
            ]
        },
        {"blocks": []},
    ],
    "relation_judge": [
        {"verdict": "merge", "reason": "Same fact.", "duplicate_of": "existing_1"},
        {"verdict": "keep_both", "reason": "Two periods.", "duplicate_of": None},
    ],
    "relation_merge": [
        {"relation": {"type": "t", "name": "n", "description": "d", "attributes": {"k": "v"}}},
        {
            "relations": [
                {
                    "type": "t",
                    "name": "n",
                    "description": "d",
                    "attributes": {},
                    "relation_ids": ["a"],
                }
            ]
        },
    ],
}


def objects(node: Any, where: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, child in value.items():
                    yield from objects(child, f"{where}.{key}.{name}")
            elif isinstance(value, (dict, list)):
                yield from objects(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from objects(child, f"{where}[{index}]")


@pytest.mark.parametrize("task", SCHEMAS)
def test_every_object_with_properties_is_closed_and_every_map_typed(task: str) -> None:
    for where, node in objects(SCHEMAS[task]):
        if node.get("type") != "object":
            continue
        if "properties" in node:
            assert node.get("additionalProperties") is False, where
        else:
            extra = node.get("additionalProperties")
            assert isinstance(extra, dict) and "type" in extra, where


@pytest.mark.parametrize("task", SCHEMAS)
def test_only_keywords_the_converters_accept(task: str) -> None:
    for where, node in objects(SCHEMAS[task]):
        if "type" in node or "$ref" in node or "anyOf" in node:
            assert set(node) <= KEYWORDS, (where, set(node) - KEYWORDS)


@pytest.mark.parametrize("task", SCHEMAS)
def test_a_valid_answer_fits_the_schema(task: str) -> None:
    for example in EXAMPLES[task]:
        jsonschema.validate(example, SCHEMAS[task])


def test_the_schema_refuses_what_no_answer_may_hold() -> None:
    with pytest.raises(jsonschema.ValidationError):  # an unknown key
        jsonschema.validate({"mapping_table": {}, "note": "x"}, SCHEMAS["relation_cluster"])
    with pytest.raises(jsonschema.ValidationError):  # attribute values are strings
        jsonschema.validate(
            {"relation": {"type": "t", "name": "n", "description": "d", "attributes": {"k": 1}}},
            SCHEMAS["relation_merge"],
        )
