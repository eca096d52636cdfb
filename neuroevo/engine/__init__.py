"""The pipelined population evaluator (imports policies and env pools, never optimizers)."""

from neuroevo.engine.pipeline import PipelinedEvaluator

__all__ = ["PipelinedEvaluator"]
