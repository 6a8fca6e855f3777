"""The canary verdict: Wald's sequential test, its boundaries, its error rates, its words."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.sequential import SequentialTest, TestRule, verdict_line
from relmerge.errors import ConfigError

RULE = TestRule(good=0.9, bad=0.75, false_stop=0.01, false_trust=0.01)


def _run(
    answers: Sequence[bool | None], rule: TestRule = RULE, renews: bool = False
) -> SequentialTest:
    test = SequentialTest(rule, renews)
    test.extend(answers)
    return test


def test_the_boundaries_are_walds() -> None:
    assert RULE.trust_at == pytest.approx(math.log(0.99 / 0.01))
    assert RULE.stop_at == pytest.approx(math.log(0.01 / 0.99))
    assert RULE.step(True) == pytest.approx(math.log(0.9 / 0.75))
    assert RULE.step(False) == pytest.approx(math.log(0.1 / 0.25))
    # ln 99 / ln 1.2 = 25.2: 26 right answers in a row trust; ln 99 / ln 2.5 = 5.01: 6 wrong stop
    assert (RULE.fewest_to_trust, RULE.fewest_to_stop) == (26, 6)


def test_the_trust_boundary_is_crossed_by_the_fewest_right_answers() -> None:
    almost = _run([True] * (RULE.fewest_to_trust - 1))
    assert almost.verdict == "judging"
    crossed = _run([True] * RULE.fewest_to_trust)
    assert crossed.verdict == "trusted" and crossed.decided_after == (26, 26)


def test_the_stop_boundary_is_crossed_by_the_fewest_wrong_answers() -> None:
    assert _run([False] * (RULE.fewest_to_stop - 1)).verdict == "judging"
    stopped = _run([False] * RULE.fewest_to_stop)
    assert stopped.distrusted and stopped.decided_after == (6, 0)


def test_an_early_dip_does_not_stop_a_good_model() -> None:
    """The issue's case: 227 of 244 right (0.93), with three slips in the first ten. The
    point estimate checked after every answer stopped it; the sequential test trusts it."""
    answers: list[bool | None] = [False, True, False, True, True, False, True, True, True, True]
    answers += [True] * 217 + [False] * 14
    assert sum(a is True for a in answers) == 224  # close to the run, slips late
    test = _run(answers)
    assert test.verdict == "trusted"
    assert test.decided_after is not None and test.decided_after[0] < 60


def test_answers_after_a_final_verdict_change_nothing_but_the_counts() -> None:
    test = _run([True] * 30 + [False] * 40)
    assert test.verdict == "trusted" and test.answered == 70 and test.right == 30
    assert test.decided_after == (26, 26)
    stopped = _run([False] * 6 + [True] * 100)
    assert stopped.distrusted and stopped.right == 100


def test_a_renewing_test_starts_again_after_trusting_and_stops_a_model_that_changes() -> None:
    test = _run([True] * 26, renews=True)
    assert test.verdict == "trusted" and test.judging and test.since == 0
    test.extend([False] * 5)
    assert test.verdict == "trusted" and test.since == 5
    assert "5 of 5" not in test.reason() and "0 of 5 right since" in test.reason()
    test.add(False)
    assert test.distrusted and test.decided_after == (6, 0) and not test.judging


def test_an_unanswered_canary_is_asked_but_weighs_nothing() -> None:
    test = _run([None, None, False])
    assert (test.asked, test.answered, test.right) == (3, 1, 0)
    assert test.evidence == pytest.approx(RULE.step(False))


@given(st.lists(st.booleans(), max_size=60))
def test_the_evidence_is_the_sum_of_the_steps_until_a_boundary(answers: list[bool]) -> None:
    test = _run(list(answers))
    if test.verdict == "judging":
        right = sum(answers)
        expected = right * RULE.step(True) + (len(answers) - right) * RULE.step(False)
        assert test.evidence == pytest.approx(expected)
        assert RULE.stop_at < test.evidence < RULE.trust_at
    else:
        # decided at the first crossing: the prefix it was decided on is the whole story
        assert test.decided_after is not None
        n, k = test.decided_after
        prefix = _run(list(answers[:n]))
        assert prefix.verdict == test.verdict and prefix.right == k
        assert _run(list(answers[: n - 1])).verdict == "judging"


@pytest.mark.parametrize(
    ("agreement", "verdict", "at_most"),
    [
        (0.9, "distrusted", 0.012),
        (0.75, "trusted", 0.012),
        (0.95, "distrusted", 0.002),
        (0.5, "trusted", 0.0005),
    ],
)
def test_the_error_rates_hold_when_the_test_is_checked_after_every_answer(
    agreement: float, verdict: str, at_most: float
) -> None:
    """Seeded simulation: 10,000 models agreeing ``agreement`` of the time, each answering
    until the test decides. Wald's bounds: at most ~1% of models at 0.9 stopped and of
    models at 0.75 trusted; fewer beyond them."""
    rng = random.Random(0)
    wrong = 0
    runs = 10_000
    for _ in range(runs):
        test = SequentialTest(RULE)
        while test.verdict == "judging":
            test.add(rng.random() < agreement)
        wrong += test.verdict == verdict
    assert wrong / runs <= at_most


def test_the_reason_states_the_rule_and_the_figures_it_was_applied_to() -> None:
    stopped = _run([True, False, True, False, False, False, False, False])
    assert stopped.reason().startswith("the model answered 2 of 8 certain questions right")
    assert "stop boundary of Wald's sequential test" in stopped.reason()
    assert "agreeing 0.9 of the time against one agreeing 0.75" in stopped.reason()
    assert "at most 1% of the first stopped and 1% of the second trusted" in stopped.reason()
    short = _run([True] * 5 + [False])
    assert short.reason().startswith("not enough canaries to judge the model: 6 answered, 5 right")
    assert "26 or more right answers" in short.reason()
    assert short.figures()["verdict"] == "not_judged" and short.figures()["decided_after"] is None
    assert stopped.figures()["decided_after"] == {"answered": 8, "right": 2, "boundary": "stop"}


def test_the_verdict_line_never_quotes_a_tally_beside_a_rule_it_did_not_apply() -> None:
    test = _run([False] * 6 + [True] * 40)
    line = verdict_line({"asked": 47, "answered": 46, "right": 40, **test.figures()})
    assert line == (
        "40 of 46 right (1 unanswered): stopped by the sequential test (0.9 against 0.75) "
        "on its first 6 answers (0 right); its merges were not applied"
    )
    short = _run([True] * 3)
    assert verdict_line({"answered": 3, "right": 3, **short.figures()}).endswith(
        "not enough canaries to judge the model (0.9 against 0.75); its merges were applied"
    )


def test_the_rule_is_configured_and_checked() -> None:
    config = DeduplicateRelationsConfig(canary_good_agreement=0.85, canary_false_stop=0.005)
    assert TestRule.of(config) == TestRule(0.85, 0.62, 0.005, 0.01)
    with pytest.raises(ConfigError, match=r"canary_bad_agreement \(0\.9\) must be below"):
        DeduplicateRelationsConfig(canary_bad_agreement=0.9)
    with pytest.raises(ConfigError, match="canary_false_trust"):
        DeduplicateRelationsConfig(canary_false_trust=0.6)
    for removed in ("canary_min", "canary_agreement", "canary_confidence"):
        with pytest.raises(ConfigError, match=f"{removed}: removed"):
            DeduplicateRelationsConfig(**{removed: 0.8})
