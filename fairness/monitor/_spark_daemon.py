"""The Spark engine's Python daemon: PySpark's own, with the scoring code imported once before it forks.

Spark starts one daemon per session (`spark.python.daemon.module`) and forks a Python worker from
it for each task. PySpark's daemon forks bare and each worker then imports pyarrow, pandas, numpy
and the rubric itself (~75 MB of private heap per worker, measured). Imported here first, those
pages are the daemon's and every forked worker shares them copy-on-write: the process tree's
proportional memory (PSS) counts them once. `gc.freeze()` keeps the collector from writing to
the imported objects, which would copy their pages into each worker.

Each worker puts the session's SparkFiles directory on `sys.path` and, having changed it, calls
`importlib.invalidate_caches()`; on Python 3.11 every zipimporter (one per package PySpark imported
from its pyspark.zip) then reads the archive's whole directory again: ~14 MB of private heap in
every worker (tracemalloc). The session names that directory in the daemon's
environment (`FILES_DIR_ENV`) and the daemon puts it on `sys.path` before it forks, so a worker
finds it there and changes nothing. With `pyarrow.acero` (the workers' group-by) preloaded too, each
worker's PSS went ~77 → ~54 MB (1,000,000 rows).

PySpark imports the worker module after the fork because a thread started before a fork does not
exist in the child. Nothing imported here starts one: the session gives the daemon
OPENBLAS_NUM_THREADS=1 and no jemalloc background thread (`_spark.CONF`; numpy is already imported
with the `fairness` package, so setting them here would be too late), and pyarrow's pools start on
first use, in each worker.
"""

from __future__ import annotations

import gc
import os
import sys

FILES_DIR_ENV = "FAIRNESS_SPARK_FILES_DIR"
"""The session's SparkFiles directory, which `_spark.start_session` puts in the daemon's environment."""


def preload() -> None:
    """Import what every worker of a monitor scan imports, put the session's files directory on `sys.path`
    where a worker's `add_path` finds it, then freeze those objects out of the collector."""
    files_dir = os.environ.get(FILES_DIR_ENV)
    if files_dir and files_dir not in sys.path:
        sys.path.insert(1, files_dir)  # where PySpark's worker_util.add_path puts it
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401  (PySpark's Arrow UDF path imports it in every worker)
        import pyarrow
        import pyarrow.acero  # Table.group_by, in _spark._cells_in_batches
        import pyarrow.compute  # noqa: F401
        import pyspark.worker  # noqa: F401

        import fairness.monitor._engine  # noqa: F401
        from fairness.score._compiled import paper_rubric

        paper_rubric()
    except ImportError:  # a worker that needs the module says so itself, in the task's error
        pass
    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
