"""The pipelined population evaluator (imports policies and env pools, never optimizers)."""

from neuroevo.engine.pipeline import EvalResult, Evaluator

__all__ = ["EvalResult", "Evaluator"]
