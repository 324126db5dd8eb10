"""The main job: replay a suite's recordings, audit them and write every output atomically."""

from fairness.pipeline._options import RunOptions
from fairness.pipeline._run import OUTPUTS, RunOutputs, run_audit

__all__ = ["OUTPUTS", "RunOptions", "RunOutputs", "run_audit"]
