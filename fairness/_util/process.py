"""Defaults for a process this package owns (the CLI, the Action), set before numpy loads.

The audit's linear algebra is tiny (a few thousand cells), so OpenBLAS's worker threads
never speed it up; started at import and spinning after each call, they cost about 0.19 s
of CPU in a 1.2 s default run on a 2-core runner (numpy and scipy each load an OpenBLAS).
One BLAS thread unless the user chose otherwise. Torch (MKL/OpenMP) and llama.cpp keep
their own thread settings, so live generation is unaffected.
"""

from __future__ import annotations

import os


def set_process_defaults() -> None:
    """Call before numpy is imported; a value the user set wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
