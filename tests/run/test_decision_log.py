"""Every line of decisions.jsonl names the final output relations of its members."""

from __future__ import annotations

from typing import Any

import orjson

from relmerge.eval.gold_judge import GoldJudge
from relmerge.providers.embedding import HashEmbedder
from tests.factories import record, run_step, step_log

SAME = "Ada Lind has been the chief executive of Norrbeck Systems since 2019."


def _records() -> list[dict[str, Any]]:
    """Two records the exact stage merges (same key, same words), a third the semantic
    stage joins to them (another name, the same fact), and a distinct fact kept apart."""
    return [
        record("r1", description=SAME),
        record("r2", description=SAME),
        record("r3", name="chief executive of", description=f"{SAME} She leads it."),
        record("r4", name="founded", type="founding", description="Ada Lind founded it in 2011."),
    ]


async def test_decisions_name_final_outputs_never_intermediate_ids() -> None:
    gold = {"r1": "ceo", "r2": "ceo", "r3": "ceo", "r4": "founding"}
    judge = GoldJudge(gold, records=_records())
    output, _, store = await run_step(_records(), judge, embedder=HashEmbedder())
    mapping = output.relation_id_mapping
    finals = set(mapping.values())
    assert len(finals) == 2 and mapping["r1"] == mapping["r3"]  # merged in two stages
    lines = [orjson.loads(line) for line in step_log(store, "decisions.jsonl").splitlines()]
    stages = {line["stage"] for line in lines}
    assert stages == {"exact", "semantic"}
    for line in lines:
        assert line["output_ids"] == list(dict.fromkeys(mapping[m] for m in line["member_ids"]))
    logged = {i for line in lines for i in (*line["member_ids"], *line["output_ids"])}
    assert logged <= set(mapping) | finals  # no id of an intermediate merge anywhere
