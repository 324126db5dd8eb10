#!/usr/bin/env python3
"""Entry point of the llm-fairness-check GitHub Action (composite and Docker).

Thin on purpose: inputs arrive as FAIRNESS_* environment variables and all logic lives
in `fairness.action._main`, where it is tested. Exits with the gate's code (mapped per
fail-on; by default an inconclusive result is a warning and exits 0): 0 pass, 1 fail, 2 bad input,
3 inconclusive, 4 undefined.
"""

import sys

from fairness.action._main import main

if __name__ == "__main__":
    sys.exit(main())
