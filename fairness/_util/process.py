"""Defaults for a process this package owns (the CLI, the Action), set before numpy loads.

The audit's linear algebra is tiny (a few thousand cells), so OpenBLAS's worker threads
never speed it up; started at import and spinning after each call, they cost about 0.19 s
of CPU in a 1.2 s default run on a 2-core runner (numpy and scipy each load an OpenBLAS).
One BLAS thread unless the user chose otherwise. Torch (MKL/OpenMP) and llama.cpp keep
their own thread settings, so live generation is unaffected (`torch.get_num_threads()` is the
same with and without the variable).

At exit the interpreter runs the cyclic garbage collector over every object still alive: the
imported modules, pydantic's validators, the run's results. That walk is about 2% of a default
`run`'s instructions (65 M of 3.3 G, callgrind) and frees next to nothing: the objects go when
the modules are torn down, by reference count. `exit_process` freezes them first (`gc.freeze`),
so the walk skips them; atexit handlers, finalizers run by reference counting and the flushing
of stdout and stderr happen as before.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import NoReturn


def set_process_defaults() -> None:
    """Call before numpy is imported; a value the user set wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def exit_process(code: int) -> NoReturn:
    """End the process with `code` (`sys.exit`), its objects frozen so the shutdown does not walk them.

    For a process's own entry point only (the console script, `python -m fairness.cli`, the
    Action's entrypoint.py): a library caller of `main()` keeps its collector as it was."""
    gc.freeze()
    sys.exit(code)
