#!/usr/bin/env python3
"""Entry point of the llm-fairness-check GitHub Action (composite) and of its container image.

Thin on purpose: inputs arrive as FAIRNESS_* environment variables (the composite action)
or INPUT_* (a container: `docker run -e INPUT_...`, see the Dockerfile), and all logic
lives in `fairness.action` (`_env` reads both spellings), where it is tested. Exits with
the gate's code (mapped per fail-on; by default an inconclusive result is a warning and
exits 0): 0 pass, 1 fail, 3 inconclusive, 4 undefined; 2 for bad input or any error, with
the outputs `gate-status=error`, `passed=false`, `exit-code=2`.
"""

import os
import sys


def _broken_install(exc: BaseException) -> int:
    """The package itself failed to import: still honour action.yml's promise of outputs."""
    line = f"llm-fairness-check could not start ({type(exc).__name__}: {exc})".replace("\n", " ").replace("%", "%25")
    print(f"::error title=llm-fairness-check%3A internal error::{line}")
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("gate-status=error\npassed=false\nexit-code=2\n")
    return 2


if __name__ == "__main__":
    try:
        from fairness._util.process import exit_process
        from fairness.action._main import main
    except Exception as exc:  # noqa: BLE001 - nothing else can report it
        sys.exit(_broken_install(exc))
    exit_process(main())
