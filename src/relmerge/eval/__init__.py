"""Evaluation against gold clusters: a run's id mapping scored (``metrics``), gold labels
read (``gold``), and ``gold_judge.GoldJudge``, a model that answers from them (with noise)
so that routing, LLM cost and clustering can be measured without a paid model."""

from relmerge.eval.metrics import EvalReport, evaluate

__all__ = ["EvalReport", "evaluate"]
