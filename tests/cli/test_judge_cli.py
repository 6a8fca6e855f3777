from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from click.testing import CliRunner

from relmerge.cli import main
from tests.support.llm_server import LLMServer, Reply, json_reply

DEV = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "dev"


def judge(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["judge", "--embedding", "hash", *args])
    return result.exit_code, result.output


def test_plain_text_duplicate_merges_by_the_rules() -> None:
    code, text = judge(
        "--candidate",
        "ally in the quest",
        "--existing",
        "Ally in the quest.",
        "--source-name",
        "Felix",
        "--target-name",
        "Iselde",
        "--json",
    )
    assert code == 0, text
    verdict = orjson.loads(text)
    assert set(verdict) >= {"decision", "tier", "scores", "matched_relation_id", "reason"}
    assert (verdict["decision"], verdict["tier"]) == ("merge", "fuzzy_high")
    assert verdict["matched_relation_id"] == "existing_1"


def test_llm_sees_the_profiles_from_the_entities_file(tmp_path: Path) -> None:
    entities = tmp_path / "entities.jsonl"
    entities.write_text(
        '{"entity_id": "char_felix", "name": "Felix", "profile": "A young cartographer."}\n'
        '{"entity_id": "char_iselde", "name": "Iselde", "profile": "Heir of the marshes."}\n'
    )
    mapping = tmp_path / "mapping.json"
    mapping.write_text('{"char_felix_fr": "char_felix"}')
    candidate = {
        "source_entity_id": "char_felix_fr",
        "target_entity_id": "char_iselde",
        "name": "allié dans la quête",
        "description": "Félix accompagne Iselde dans la quête.",
    }
    existing = [
        {
            "relation_id": "r_old",
            "source_entity_id": "char_felix",
            "target_entity_id": "char_iselde",
            "name": "companion of",
            "description": "Felix travels with Iselde on the road north.",
        }
    ]
    with LLMServer(
        handler=lambda body: json_reply(
            {"verdict": "merge", "reason": "same journey", "duplicate_of": "r_old"}
        )
    ) as server:
        code, text = judge(
            "--candidate",
            orjson.dumps(candidate).decode(),
            "--existing",
            orjson.dumps(existing).decode(),
            "--entities",
            str(entities),
            "--entity-mapping",
            str(mapping),
            "--llm-base-url",
            server.base_url,
            "--llm-model",
            "m",
            "--json",
        )
        asked = server.group_requests
        prompt = asked[0]["messages"][1]["content"] if asked else ""
        checked = server.preflight_count
    assert code == 0, text
    verdict = orjson.loads(text)
    assert verdict["preflight_requests"] == checked == 1
    assert (verdict["decision"], verdict["tier"], verdict["matched_relation_id"]) == (
        "merge",
        "llm",
        "r_old",
    )
    assert "A young cartographer." in prompt and "Heir of the marshes." in prompt


def test_human_readable_output_and_bad_input_exit_2() -> None:
    code, text = judge("--candidate", "messenger", "--existing", "weaver of the order")
    assert code == 0 and "keep_both" in text and "tier" in text
    code, text = judge("--candidate", '{"name": ', "--existing", "x")
    assert code == 2 and "not valid" in text
    code, text = judge("--candidate", "x")
    assert code == 2 and "--existing" in text


def test_an_llm_that_fails_during_the_check_exits_3_and_says_so(tmp_path: Path) -> None:
    config = tmp_path / "relmerge.toml"
    config.write_text("[llm]\nmax_retries = 0\n")
    with LLMServer(handler=lambda body: Reply(status=503)) as server:  # up, then failing
        result = subprocess.run(
            [
                *(sys.executable, "-m", "relmerge", "judge", "--embedding", "hash", "--json"),
                *("--candidate", "ally forged through shared battle"),
                *("--existing", "companion met during the Council"),
                *("--llm-base-url", server.base_url, "--llm-model", "m"),
                *("--config", str(config)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        asked = len(server.group_requests)
    assert result.returncode == 3, result.stderr
    verdict = orjson.loads(result.stdout)
    assert (verdict["tier"], verdict["llm_outcome"]) == ("policy", "unavailable")
    assert verdict["reason"].startswith("LLM unavailable: ") and "unsure" not in verdict["reason"]
    assert verdict["llm_requests"] == asked == 3
    assert result.stderr.strip() == (
        "decided without the LLM: it stopped answering — check the endpoint and run the "
        "same command again"
    )


def _judged_by_the_llm(server: LLMServer, *extra: str) -> tuple[int, str]:
    return judge(
        *("--candidate", "ally forged through shared battle"),
        *("--existing", "companion met during the Council"),
        *("--llm-base-url", server.base_url, "--llm-model", "m"),
        *extra,
    )


def _answer(body: dict[str, object]) -> Reply:
    verdict = {"verdict": "keep_both", "reason": "two aspects", "duplicate_of": None}
    return json_reply(verdict, prompt_tokens=1200, completion_tokens=30)


def test_the_tokens_the_llm_spent_and_their_price_are_in_the_json() -> None:
    with LLMServer(handler=_answer) as server:
        code, text = _judged_by_the_llm(
            server, "--llm-price-in", "2", "--llm-price-out", "10", "--json"
        )
        asked = len(server.group_requests)
    assert code == 0, text
    shown = orjson.loads(text)
    assert (shown["tier"], shown["llm_requests"]) == ("llm", asked) == ("llm", 1)
    # The server's usage of the question; the endpoint check is counted apart.
    assert shown["tokens"] == {"prompt": 1200, "completion": 30, "total": 1230}
    cost = shown["cost"]
    assert cost["measured"] == "usage"
    assert cost["tasks"]["relation_judge"]["requests"] == 1
    assert cost["usd"] == (1200 * 2 + 30 * 10) / 1_000_000
    assert (cost["price_in_usd_per_million"], cost["price_out_usd_per_million"]) == (2, 10)


def test_the_summary_says_the_tokens_and_the_money_only_when_priced() -> None:
    with LLMServer(handler=_answer) as server:
        code, priced = _judged_by_the_llm(server, "--llm-price-in", "2", "--llm-price-out", "10")
        assert code == 0, priced
        code, unpriced = _judged_by_the_llm(server)
        assert code == 0, unpriced
    assert "tokens: 1230" in priced and "tokens: 1230" in unpriced
    assert "relation_judge: prompt / completion tokens: 1 request, 1,200 / 30" in priced
    assert "cost, USD at 2 / 10 per million: 0.0027" in priced
    assert "USD" not in unpriced


def test_a_check_the_rules_decide_spends_no_tokens() -> None:
    code, text = judge(
        *("--candidate", "ally in the quest", "--existing", "Ally in the quest.", "--json")
    )
    assert code == 0, text
    shown = orjson.loads(text)
    assert shown["tier"] == "fuzzy_high"
    assert shown["tokens"]["total"] == 0 and shown["cost"]["measured"] == "none"
