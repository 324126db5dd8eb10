"""Stamp the release's repository, commit and tag into fairness/_release.py (release.yml, before the wheel is built).

    python scripts/stamp_release.py --repository OWNER/NAME --ref <40-hex sha> --tag v1.2.3 [--file PATH]

A commit cannot contain its own sha, so the tagged commit keeps `ACTION_REF = None` and only the
wheel built from this stamped copy knows the release it came from: `llm-fairness-check init` from
that wheel pins `OWNER/NAME@<sha> # v1.2.3` with no `--action-ref`. The tag must be `v` + the
package version (fairness/_version.py), so a wheel and its tag never disagree. Bad input: one line
on stderr, exit 2; nothing is written.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SHA = re.compile(r"[0-9a-f]{40}")
_TAG = re.compile(r"v\d+\.\d+\.\d+")
_LINES = {
    "ACTION_REPOSITORY": re.compile(r'(?m)^ACTION_REPOSITORY = "[^"\n]*"$'),
    "ACTION_REF": re.compile(r"(?m)^ACTION_REF: str \| None = .*$"),
    "ACTION_TAG": re.compile(r"(?m)^ACTION_TAG: str \| None = .*$"),
}


def package_version(root: Path = ROOT) -> str:
    match = re.search(r'(?m)^__version__ = "([^"]+)"$', (root / "fairness" / "_version.py").read_text(encoding="utf-8"))
    assert match, "fairness/_version.py has no __version__"
    return match.group(1)


def stamp(text: str, repository: str, ref: str, tag: str, version: str) -> str:
    """`text` (the module's source) with the three values set; ValueError names the bad one."""
    if not _REPO.fullmatch(repository):
        raise ValueError(f"--repository {repository!r} must be OWNER/NAME")
    if not _SHA.fullmatch(ref):
        raise ValueError(f"--ref {ref!r} must be a 40-hex commit sha")
    if not _TAG.fullmatch(tag):
        raise ValueError(f"--tag {tag!r} must look like v1.2.3")
    if tag != f"v{version}":
        raise ValueError(f"tag {tag} does not match the package version {version}: set the version to "
                         f"{tag[1:]} in pyproject.toml and fairness/_version.py, commit, and tag that commit")
    values = {"ACTION_REPOSITORY": f'ACTION_REPOSITORY = "{repository}"',
              "ACTION_REF": f'ACTION_REF: str | None = "{ref}"', "ACTION_TAG": f'ACTION_TAG: str | None = "{tag}"'}
    for name, pattern in _LINES.items():
        text, n = pattern.subn(values[name], text)
        if n != 1:
            raise ValueError(f"fairness/_release.py has {n} `{name}` lines, expected 1")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repository", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--file", type=Path, default=ROOT / "fairness" / "_release.py")
    args = parser.parse_args(argv)
    try:
        text = stamp(args.file.read_text(encoding="utf-8"), args.repository, args.ref, args.tag, package_version())
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.file.write_text(text, encoding="utf-8")
    print(f"stamped {args.file}: {args.repository}@{args.ref} ({args.tag})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
