from __future__ import annotations

from pathlib import Path

from relmerge.cli.help_doc import render_cli_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render_cli_reference(), (
        "docs/cli.md is stale: run `python -m relmerge.cli.help_doc > docs/cli.md`"
    )
