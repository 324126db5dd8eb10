"""The one YAML loader of the project: safe, fast, and strict about what it merges.

- the C loader (libyaml) when PyYAML has it: a 10 MiB file parses in well under a second;
- a duplicate key is an error naming the key and its line (a second `rules:` block must
  never silently replace the first);
- at most `MAX_ALIASES` alias references: a billion-laughs document is refused before it
  is constructed, whatever later walks it.

Used for suites, provider configs, prices and the rubric.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fairness._util.errors import FairnessError
from fairness._util.files import read_text_capped

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_ALIASES = 100
"""Alias references allowed in one document (real configs use a handful, if any)."""
MAX_EXPANDED_NODES = 1_000_000
"""Values a document may hold once its aliases are expanded (a billion-laughs file: 10^9)."""
_MERGE = "tag:yaml.org,2002:merge"


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int, first_line: int):
        super().__init__(key)
        self.key, self.line, self.first_line = key, line, first_line


class _StrictLoader(_Base):
    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True) if isinstance(key_node, yaml.ScalarNode) else None
                try:
                    hash(key)
                except TypeError:
                    continue
                if key is None and not isinstance(key_node, yaml.ScalarNode):
                    continue
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _DuplicateKey(key, line, seen[key])
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _check_aliases(root: Any, source: str) -> None:
    """Refuse a document with too many alias references, a recursive alias, or one that would
    expand past `MAX_EXPANDED_NODES` (sizes are computed on the node graph, never expanded)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    aliases = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_EXPANDED_NODES:
                raise FairnessError(
                    f"{source} expands to more than {MAX_EXPANDED_NODES:,} values through YAML aliases (`*name`)"
                )
            continue
        if key in on_path:
            raise FairnessError(f"{source} holds a recursive YAML alias")
        if key in size:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise FairnessError(
                    f"{source} uses more than {MAX_ALIASES} YAML aliases (`*name`); expand them in the file"
                )
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children))


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def loads_yaml(text: str, source: str) -> Any:
    """Parse one YAML document strictly; every failure is a `FairnessError` naming `source`."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_aliases(node, source)
        return loader.construct_document(node)
    except _DuplicateKey as dup:
        raise FairnessError(
            f"{source}: duplicate key `{dup.key}` at line {dup.line} (first at line {dup.first_line})"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        raise FairnessError(f"{source} is not valid YAML{where}{': ' + problem if problem else ''}") from None
    except RecursionError:
        raise FairnessError(f"{source} nests too deeply") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """A YAML file, size-capped, strict UTF-8 and strictly parsed."""
    return loads_yaml(read_text_capped(path, what=what), f"{what} `{path}`")
