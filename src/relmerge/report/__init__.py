"""``relmerge report``: one self-contained HTML page about the run in an output directory."""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from relmerge.errors import InputError

REPORT_FILE = "report.html"


def _version() -> str:
    try:
        return version("relmerge")
    except PackageNotFoundError:
        return "?"


def build_report(out: Path, input_path: Path | None = None, sample: int = 20) -> str:
    """The report page of the run in OUT; INPUT (the run's input) adds the members' text.
    (Imported here: matplotlib loads for a report only, not for the CLI's words of
    ``relmerge.report.words``.)"""
    from relmerge.report.data import gather
    from relmerge.report.html import render
    from relmerge.report.plots import all_plots

    data = gather(out, input_path, sample)
    return render(data, all_plots(data), _version())


def write_report(
    out: Path, target: Path | None = None, input_path: Path | None = None, sample: int = 20
) -> Path:
    """Write the page atomically (a reader never sees half a page); return its path."""
    target = target if target is not None else out / REPORT_FILE
    page = build_report(out, input_path, sample)
    if not target.parent.is_dir():
        raise InputError(f"cannot write {target}: {target.parent} is not a directory")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {target}: {error.strerror}") from None
    return target


__all__ = ["REPORT_FILE", "build_report", "write_report"]
