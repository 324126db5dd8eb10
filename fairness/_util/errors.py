"""One exception for every misuse a user can fix.

The CLI and the Action print a `FairnessError` as one line on stderr and exit 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError


class FairnessError(Exception):
    """Bad input: a suite, recording, rule or option the user can correct."""

    exit_code = 2


class LiveGenerationRefused(FairnessError):
    """Live generation was asked for without the explicit opt-in."""


def _fields_at(model: Any, loc: tuple) -> list[str]:
    """Field names of the model reached by following `loc` from `model` (list indices and
    dict keys step into the element type); [] when the path leaves the models."""
    ann: Any = model
    for part in loc:
        ann = _unwrap(ann, part)
        if ann is None:
            return []
    target = _find_model(ann)
    return list(target.model_fields) if target is not None else []


def _find_model(ann: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _unwrap(ann: Any, part: Any) -> Any:
    """The annotation one step down `loc`: a field of a model, or the element of a list/dict."""
    options = [ann, *typing.get_args(ann)] if typing.get_origin(ann) is not None else [ann]
    for opt in options:
        model = _find_model(opt) if isinstance(opt, type) else None
        if model is not None and isinstance(part, str) and part in model.model_fields:
            return model.model_fields[part].annotation
    for opt in options:
        if typing.get_origin(opt) in (list, tuple, dict, set):
            inner = typing.get_args(opt)
            return inner[-1] if inner else None
    return None


def _model_by_title(title: str) -> Any:
    """The one model class named `title` (a ValidationError knows its model's name only)."""
    found, stack, seen = [], list(BaseModel.__subclasses__()), set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__name__ == title:
            found.append(cls)
        stack.extend(cls.__subclasses__())
    return found[0] if len(found) == 1 else None


def validation_message(err: ValidationError, source: str = "", model: Any = None) -> str:
    """One line for a pydantic `ValidationError`, prefixed with `source`.

    The one formatter for every file, record and option model, so the same mistake reads the
    same everywhere: a validator's own message verbatim; an unknown key first (a typo also makes
    its intended key "missing") with the closest valid key, e.g. "unknown key `familes` (did you
    mean `families`?)"; `missing key `x``; or `` `loc`: msg``. `model` defaults to the class the
    error names.
    """
    if model is None:
        model = _model_by_title(err.title)
    errors = err.errors()
    extra = [e for e in errors if e["type"] == "extra_forbidden"]
    first = extra[0] if extra else errors[0]
    loc = tuple(first["loc"])
    where = ".".join(str(p) for p in loc)
    if first["type"] == "extra_forbidden":
        hint = ""
        if model is not None and loc:
            known = _fields_at(model, loc[:-1])
            import difflib  # only when a name is wrong, not at every start-up
            close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
            if close:
                hint = f" (did you mean `{close[0]}`?)"
            elif known:
                hint = f" (known keys: {', '.join(known)})"
        return _prefix(source, f"unknown key `{where}`{hint}")
    msg = first["msg"]
    if first["type"] == "missing":
        return _prefix(source, f"missing key `{where}`")
    if msg.startswith("Value error, "):
        return _prefix(source, f"{msg[len('Value error, '):]}")
    return _prefix(source, f"`{where}`: {msg}" if where else msg)


M = TypeVar("M", bound=BaseModel)


def jsonl_models(text: str, model: type[M], path: object) -> Iterator[tuple[int, M]]:
    """Each non-blank line of a JSONL file as `model`, with its line number; a bad line is one
    `FairnessError` naming the file and line (the shared shape of every JSONL store's reader)."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, model.model_validate_json(line)
        except ValidationError as err:
            raise FairnessError(validation_message(err, f"`{path}` line {lineno}", model)) from None


def _prefix(source: str, text: str) -> str:
    return f"{source}: {text}" if source else text
