"""Exports are written whole or not at all.

An export writes a complete copy of a folder into a temporary folder beside the
destination and renames it into place at the end. A failure at any point (a full disk, a
table that cannot be written, an interrupt) removes the temporary folder and leaves the
destination as it was, or absent. ``--overwrite`` replaces an existing destination the
same way: the old one is moved aside, the new one renamed in, the old one removed.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from relmerge.errors import ExportError, InputError, RelmergeError


def _contains(folder: Path, path: Path) -> bool:
    return path == folder or folder in path.parents


def check_destination(target: Path, overwrite: bool, original: Path, run: Path) -> None:
    """The destination is a folder to create or replace: never the original folder, a
    folder inside it or holding it, nor a folder holding the run or the working
    directory (replacing it would remove them)."""
    resolved, source = target.resolve(), original.resolve()
    if _contains(source, resolved):
        raise InputError(
            f"--to {target} is the original folder or inside it: export to another folder"
        )
    for what, path in (
        ("original folder", source),
        ("run", run.resolve()),
        ("working directory", Path.cwd().resolve()),
    ):
        if _contains(resolved, path):
            raise InputError(f"--to {target} holds the {what}: export to another folder")
    if target.exists() and not target.is_dir():
        raise InputError(f"--to {target} exists and is not a folder")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise InputError(f"--to {target} is not empty (use --overwrite to replace it)")


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A new empty folder beside ``target``; renamed to ``target`` when the block ends
    without error (replacing what was there), removed when it fails.

    An error that is not a :class:`RelmergeError` becomes an :class:`ExportError`, one
    line that says the destination was left as it was.
    """
    parent = target.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = parent / f".{target.name}.relmerge-{os.getpid()}-{secrets.token_hex(4)}"
        stage.mkdir()
    except OSError as error:
        raise ExportError(f"cannot create a folder beside {target}: {error.strerror}") from None
    try:
        yield stage
        _swap_in(stage, target)
    except BaseException as error:
        shutil.rmtree(stage, ignore_errors=True)
        if isinstance(error, RelmergeError) or not isinstance(error, Exception):
            raise
        state = "left as it was" if target.exists() else "not created"
        raise ExportError(
            f"export to {target} failed ({type(error).__name__}: {error}); {target} {state}"
        ) from error


def _swap_in(stage: Path, target: Path) -> None:
    if not target.exists():
        os.rename(stage, target)
        return
    old = stage.with_name(stage.name + "-old")
    os.rename(target, old)
    try:
        os.rename(stage, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)
