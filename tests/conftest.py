"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.llm_server import LLMServer


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A started fake OpenAI-compatible server on 127.0.0.1; stopped after the test."""
    with LLMServer() as server:
        yield server
