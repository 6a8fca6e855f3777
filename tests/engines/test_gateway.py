"""Provider errors cross the worker/driver boundary (``engines.gateway``) as plain tuples,
and come back as the error the local run would have seen."""

from __future__ import annotations

import pickle

import pytest

from relmerge.engines.gateway import provider_failure, raise_failure
from relmerge.errors import BudgetExhaustedError, ProviderError


@pytest.mark.parametrize("timed_out", [True, False])
def test_a_provider_error_keeps_its_fields_across_the_boundary(timed_out: bool) -> None:
    error = ProviderError("slow", retryable=True, attempts=3, transport=True, timed_out=timed_out)
    outcome = pickle.loads(pickle.dumps(provider_failure(error)))
    with pytest.raises(ProviderError) as caught:
        raise_failure(outcome)
    back = caught.value
    assert (str(back), back.retryable, back.attempts, back.transport, back.timed_out) == (
        "slow",
        True,
        3,
        True,
        timed_out,
    )


def test_a_spent_budget_comes_back_as_one() -> None:
    with pytest.raises(BudgetExhaustedError):
        raise_failure(provider_failure(BudgetExhaustedError("spent")))
