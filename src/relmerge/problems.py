"""Settings problems in plain words: the key, what is wrong, what would do.

pydantic's own messages ("Input should be a valid number, unable to parse string as a
number") speak of its internals. A person fixing a ``relmerge.toml`` needs the key, the
value written, what is expected instead (the range, the choices) and, for a misspelt key,
the key they probably meant. Values read from TOML are checked strictly here
(:func:`toml_type_problems`): ``"0.7"`` is a string, not a number, and a string where a
number belongs is a mistake to point at, not to guess around.
"""

from __future__ import annotations

import datetime
import difflib
import json
import types
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from relmerge.registry import CHOICE_ERROR, ProviderChoice

Problem = tuple[str, str]  # (key path, "" for the settings as a whole; what is wrong)

# Bands that a TOML file (which has no null) turns off with the string "off" (or "none").
OFF_FIELDS = ("auto_merge_cosine", "auto_merge_description_cosine", "first_stage_merge_cosine")
OFF_WORDS = ("off", "none")
_TYPE_ERRORS = ("_type", "_parsing", "int_from_float")
_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_SHOWN_CHARS = 60


def shown(value: Any) -> str:
    """A value as its writer would recognise it: ``the string "0.7"``, ``2.5``, ``true``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing (None)"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return f"the string {text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + '…'}"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, datetime.date | datetime.time):
        return f"the date or time {value}"
    return f"a {type(value).__name__}"


def _number(value: float) -> str:
    return f"{value:g}"


def _kind(annotation: Any) -> str:
    """What a type annotation asks for, in words (its bounds aside)."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        kinds = [_kind(arg) for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(kinds)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(choice) for choice in get_args(annotation))
    if origin in (tuple, list):
        return "an array of strings"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        annotation, str(annotation)
    )


def choices(model: type[BaseModel], name: str) -> tuple[str, ...] | None:
    """The values field ``name`` takes, if it takes one of a few: a ``Literal``'s, or the
    registered providers' names (``relmerge.registry.ProviderChoice``)."""
    field = model.model_fields[name]
    for item in field.metadata:
        if isinstance(item, ProviderChoice):
            return item.names()
    if get_origin(field.annotation) is Literal:
        return tuple(str(choice) for choice in get_args(field.annotation))
    return None


def _field_kind(model: type[BaseModel], name: str) -> str:
    named = choices(model, name)
    if named is not None:
        return "one of " + ", ".join(json.dumps(choice) for choice in named)
    return _kind(model.model_fields[name].annotation)


def expected(model: type[BaseModel], name: str) -> str:
    """What field ``name`` of ``model`` accepts: ``an integer of at least 1``, ``a number
    between -1 and 1``, ``one of "keep_both", "merge"``."""
    field = model.model_fields[name]
    bounds = {
        key: getattr(item, key)
        for item in field.metadata
        for key in ("ge", "gt", "le", "lt")
        if getattr(item, key, None) is not None
    }
    low = (
        f"of at least {_number(bounds['ge'])}"
        if "ge" in bounds
        else (f"above {_number(bounds['gt'])}" if "gt" in bounds else None)
    )
    high = (
        f"at most {_number(bounds['le'])}"
        if "le" in bounds
        else (f"below {_number(bounds['lt'])}" if "lt" in bounds else None)
    )
    if "ge" in bounds and "le" in bounds:
        span = f"between {_number(bounds['ge'])} and {_number(bounds['le'])}"
    else:
        span = " and ".join(part for part in (low, high) if part)
    return " ".join(part for part in (_field_kind(model, name), span) if part)


def closest(key: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``key`` was most likely meant to be (difflib), if any is close."""
    matches = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_key(key: str, candidates: Mapping[str, str], listed: Iterable[str] = ()) -> str:
    """``unknown key; did you mean X?``. ``candidates`` maps each known key, as it could
    be misspelt, to the path to suggest (another section's ``llm.model`` included); the
    keys ``listed`` are named when none is close (a small section's)."""
    found = key if key in candidates else closest(key, candidates)
    if found is not None:
        return f"unknown key; did you mean {candidates[found]}?"
    names = sorted(listed)
    return f"unknown key (known keys: {', '.join(names)})" if names else "unknown key"


def _got(model: type[BaseModel], name: str, value: Any) -> str:
    hint = ' ("off" turns it off)' if name in OFF_FIELDS else ""
    return f"got {shown(value)}{hint}"


def describe(model: type[BaseModel], error: ValidationError) -> list[Problem]:
    """Each problem of ``error`` as ``(key path, plain text)``."""
    problems: list[Problem] = []
    for item in error.errors():
        loc = item["loc"]
        name = str(loc[0]) if loc else ""
        path = name + "".join(f"[{part}]" for part in loc[1:] if isinstance(part, int))
        kind, value = item["type"], item.get("input")
        message = item["msg"].removeprefix("Value error, ")
        if not name:
            problems.append(("", message))
        elif kind == "extra_forbidden":
            fields = {field: field for field in model.model_fields}
            problems.append((path, unknown_key(name, fields)))
        elif name not in model.model_fields:
            problems.append((path, f"{message}, got {shown(value)}"))
        elif len(loc) > 1 and kind.endswith(_TYPE_ERRORS):  # an item of an array
            problems.append((path, f"expected a string, got {shown(value)}"))
        elif kind in _RANGE_ERRORS or kind in ("literal_error", CHOICE_ERROR):
            text = f"expected {expected(model, name)}, {_got(model, name, value)}"
            failures = str((item.get("ctx") or {}).get("failures", ""))
            problems.append((path, text + _choice_hint(model, name, value) + failures))
        elif kind.endswith(_TYPE_ERRORS):
            kind_text = _field_kind(model, name)
            problems.append((path, f"expected {kind_text}, {_got(model, name, value)}"))
        else:
            problems.append((path, f"{message}, got {shown(value)}"))
    return problems


def _choice_hint(model: type[BaseModel], name: str, value: Any) -> str:
    annotation = model.model_fields[name].annotation
    named = choices(model, name)
    if named is None:
        named = (
            tuple(str(choice) for choice in get_args(annotation)) if get_origin(annotation) else ()
        )
    meant = closest(value, named) if isinstance(value, str) and named else None
    return f' (did you mean "{meant}"?)' if meant else ""


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether a TOML value is of the annotation's type, with no conversion."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(_accepts(arg, value) for arg in get_args(annotation))
    if origin is Literal:
        return isinstance(value, str) and value in get_args(annotation)
    if origin in (tuple, list):
        return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    return True  # a type this check does not know: the model decides


def toml_type_problems(model: type[BaseModel], values: Mapping[str, Any]) -> dict[str, str]:
    """Key path -> problem for each known key whose TOML value is not of the field's type
    (a string where a number belongs is not read as the number); an array's wrong item is
    named by its index (``symmetric_relations[1]``). Bounds are the model's to check."""
    problems: dict[str, str] = {}
    for name, value in values.items():
        field = model.model_fields.get(name)
        if field is None:
            continue
        if name in OFF_FIELDS and isinstance(value, str) and value.strip().lower() in OFF_WORDS:
            continue
        if _accepts(field.annotation, value):
            continue
        if get_origin(field.annotation) in (tuple, list) and isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, str):
                    problems[f"{name}[{index}]"] = f"expected a string, got {shown(item)}"
            continue
        text = f"expected {_field_kind(model, name)}, {_got(model, name, value)}"
        problems[name] = text + _choice_hint(model, name, value)
    return problems
