"""Defaults for a process this package owns (the CLI, the Action), set before numpy and pydantic load.

The audit's linear algebra is tiny (a few thousand cells), so OpenBLAS's worker threads
never speed it up; started at import and spinning after each call, they cost about 0.19 s
of CPU in a 1.2 s default run on a 2-core runner (numpy and scipy each load an OpenBLAS).
One BLAS thread unless the user chose otherwise. Torch (MKL/OpenMP) and llama.cpp keep
their own thread settings, so live generation is unaffected (`torch.get_num_threads()` is the
same with and without the variable).

The run's objects live until it ends: the classes, validators and schemas its imports build,
then its records, scores and results (~73,000 container objects in a default `run`, ~79,000
with every evaluator), holding few cycles. Each young collection walks every container made
since the last one, so under lower thresholds they are walked for nothing: measured with
`gc.callbacks` at a young threshold of 50,000, 20–45 ms of CPU in a default run (two
collections of ~35,000 and ~43,000 objects, ~650 freed), 3–5% of it. In a process the package
owns the young threshold is 200,000: a default run makes no collection, and a long one (the
monitor, live generation, `serve`) still collects every 200,000 net container allocations,
which bounds what cyclic garbage can hold. A young threshold already higher, or 0 (no
automatic collection), is kept.

pydantic looks for plugins when it builds its first model: the entry points of the `pydantic`
group, read from the metadata of every installed distribution (~17 ms of CPU with the 143
distributions of an environment with every extra, a few ms in the replay install). The
package's models are its own records, which no plugin is meant to observe, so a process it owns
loads none unless the user sets `PYDANTIC_DISABLE_PLUGINS` (an empty value loads them all).
Both variables are set in the environment, so the processes it starts (git, a vLLM server)
inherit them.

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

OWN_THRESHOLDS = (200_000, 20, 100)
"""The collector's thresholds in a process the package owns (young, middle, old generation)."""


def set_process_defaults() -> None:
    """Call before numpy is imported and any pydantic model is built; a value the user set wins (see the module docstring)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if 0 < gc.get_threshold()[0] < OWN_THRESHOLDS[0]:
        gc.set_threshold(*OWN_THRESHOLDS)


def exit_process(code: int) -> NoReturn:
    """End the process with `code` (`sys.exit`), its objects frozen so the shutdown does not walk them.

    For a process's own entry point only (the console script, `python -m fairness.cli`, the
    Action's entrypoint.py): a library caller of `main()` keeps its collector as it was."""
    gc.freeze()
    sys.exit(code)
