"""Every evaluator implements ``neuroevo.evaluation.Evaluator``, with its very signatures: the
loop, the bench and ``play`` call nothing else."""

import inspect

import pytest

from neuroevo.dist.ray_backend import RayEvaluator
from neuroevo.engine.parallel import ParallelEvaluator
from neuroevo.engine.pipeline import PipelinedEvaluator
from neuroevo.evaluation import Evaluator


@pytest.mark.parametrize("cls", [PipelinedEvaluator, ParallelEvaluator, RayEvaluator])
@pytest.mark.parametrize("method", ["evaluate", "layout", "close"])
def test_an_evaluator_has_the_protocol_s_methods(cls, method):
    want = inspect.signature(getattr(Evaluator, method))
    got = inspect.signature(getattr(cls, method))
    assert list(got.parameters) == list(want.parameters), (cls.__name__, method)
    for name, p in want.parameters.items():
        assert (got.parameters[name].default is inspect.Parameter.empty) == \
            (p.default is inspect.Parameter.empty), (cls.__name__, method, name)


def test_the_loop_evaluates_through_the_protocol_alone():
    """No probing for other methods (``hasattr``/``getattr`` on an evaluator)."""
    import neuroevo.loop as loop

    source = inspect.getsource(loop)
    assert "hasattr" not in source and "getattr" not in source
    assert "evaluator.evaluate(" in source
