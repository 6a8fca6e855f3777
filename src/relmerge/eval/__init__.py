"""Evaluation of a run's id mapping against gold clusters."""

from relmerge.eval.metrics import EvalReport, evaluate

__all__ = ["EvalReport", "evaluate"]
