"""The `vllm serve` options a vLLM wheel defines, read from its own source without installing it.

    python scripts/vllm_flags.py WHEEL > requirements/vllm-serve-flags.json

The wheel is the one requirements/vllm.lock pins (tests/test_locks.py downloads it, hash
checked, into the user cache). Its argument definitions are parsed with `ast`, never imported:

- every option string literal passed to an `add_argument(...)` call in the modules that build
  the `serve` parser (vllm/engine/arg_utils.py: the engine's options; vllm/entrypoints/openai/
  cli_args.py, or vllm/entrypoints/common/cli_args.py where newer vLLMs moved it: the server's;
  vllm/entrypoints/cli/serve.py: the subcommand);
- options generated from dataclass fields: a class whose `add_cli_args` registers
  `f"--{name}"` for each field of `get_kwargs(cls)` (vLLM's FrontendArgs: `--host`, `--port` …)
  contributes `--field-name` for every annotated field of itself and of its bases in those
  modules, when the server calls `ThatClass.add_cli_args(...)`.

Not listed: the `--no-X` forms argparse derives for boolean options. vLLM's parser also takes
`--field_name` for `--field-name`; `accepts()` normalises that. tests/standin_vllm.py refuses any
option outside the committed list, and tests/test_locks.py checks every flag the workflows, the
README and the GPU benchmark pass to `vllm serve` against it and re-parses the wheel (drift).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path, PurePosixPath

_MODULES = re.compile(r"vllm/(engine/arg_utils\.py|entrypoints/(openai|common)/cli_args\.py|entrypoints/cli/serve\.py)")


def _option_strings(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            and a.value.startswith("-")]


def _calls(tree: ast.AST, attr: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr]


def _generates_field_flags(method: ast.FunctionDef) -> bool:
    """`get_kwargs(cls)` and an `add_argument(..., f"--{...}", ...)`: one option per dataclass field."""
    uses_fields = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "get_kwargs"
                      and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "cls"
                      for n in ast.walk(method))
    f_option = any(isinstance(a, ast.JoinedStr) and a.values and isinstance(a.values[0], ast.Constant)
                   and a.values[0].value == "--"
                   for call in _calls(method, "add_argument") for a in call.args)
    return uses_fields and f_option


def parse_sources(sources: dict[str, str]) -> list[str]:
    """The sorted option strings that `vllm serve` defines, from the CLI modules' source text."""
    trees = {path: ast.parse(text, filename=path) for path, text in sources.items()}
    classes: dict[str, ast.ClassDef] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, node)

    def chain(name: str) -> list[ast.ClassDef]:
        out: list[ast.ClassDef] = []
        todo = [name]
        while todo:
            cls = classes.get(todo.pop(0))
            if cls is not None and cls not in out:
                out.append(cls)
                todo += [b.id for b in cls.bases if isinstance(b, ast.Name)]
        return out

    flags: set[str] = set()
    for tree in trees.values():
        for call in _calls(tree, "add_argument"):
            flags.update(_option_strings(call))
        for call in _calls(tree, "add_cli_args"):
            owner = call.func.value  # type: ignore[attr-defined]
            if not isinstance(owner, ast.Name):
                continue
            mro = chain(owner.id)
            methods = [m for c in mro for m in c.body if isinstance(m, ast.FunctionDef) and m.name == "add_cli_args"]
            if methods and _generates_field_flags(methods[0]):
                for cls in mro:
                    for stmt in cls.body:
                        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                                and not stmt.target.id.startswith("_") and "ClassVar" not in ast.unparse(stmt.annotation):
                            flags.add("--" + stmt.target.id.replace("_", "-"))
    return sorted(flags)


def from_wheel(wheel: Path) -> dict[str, object]:
    """{vllm, wheel, sha256, flags} for a vLLM wheel file."""
    with zipfile.ZipFile(wheel) as zf:
        sources = {n: zf.read(n).decode("utf-8") for n in zf.namelist() if _MODULES.fullmatch(n)}
        version = next(PurePosixPath(n).parent.name.removeprefix("vllm-").removesuffix(".dist-info")
                       for n in zf.namelist() if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n))
    if not sources:
        raise ValueError(f"{wheel.name}: no vLLM CLI modules found")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return {"vllm": version, "wheel": wheel.name, "sha256": digest, "generated_by": "python scripts/vllm_flags.py WHEEL",
            "modules": sorted(sources), "flags": parse_sources(sources)}


def accepts(flags: list[str] | set[str], arg: str) -> bool:
    """Whether an option as written on a command line (`--max_model_len=4096`) is a defined flag."""
    name = arg.split("=", 1)[0]
    return name in flags or ("--" + name[2:].replace("_", "-")) in flags


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python scripts/vllm_flags.py VLLM_WHEEL", file=sys.stderr)
        return 2
    try:
        data = from_wheel(Path(argv[0]))
    except (zipfile.BadZipFile, ValueError, StopIteration, SyntaxError) as exc:
        print(f"vllm_flags: {argv[0]}: {exc or 'no vllm-*.dist-info/METADATA'}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
