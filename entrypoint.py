#!/usr/bin/env python3
"""Entry point of the llm-fairness-check GitHub Action (composite) and of its container image.

Thin on purpose: inputs arrive as FAIRNESS_* environment variables (the composite action)
or INPUT_* (a container: `docker run -e INPUT_...`, see the Dockerfile), and all logic
lives in `fairness.action` (`_env` reads both spellings), where it is tested. Exits with
the gate's code (mapped per fail-on): 0 pass, 1 fail, 2 bad input, 3 illustrative,
4 undefined.
"""

import sys

from fairness.action._main import main

if __name__ == "__main__":
    sys.exit(main())
