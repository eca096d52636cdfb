"""ES on vector observations starts where OpenAI's MuJoCo code starts: normc initialisation."""

import numpy as np

from neuroevo.build import build
from neuroevo.config import Config, override
from neuroevo.noise import NoiseTable, default_size


def openai_normc(raw_in_out: np.ndarray, std: float) -> np.ndarray:
    """``normc_initializer`` of openai/evolution-strategies-starter (tf_util.py), on given
    draws of TensorFlow's ``[in, out]`` layout: each column scaled to norm ``std``."""
    return raw_in_out * std / np.sqrt(np.square(raw_in_out).sum(axis=0, keepdims=True))


def test_the_es_centre_is_normc_1_hidden_and_normc_001_output():
    cfg = Config()
    for key, value in {"algo.name": "es", "env.id": "Pendulum-v1", "net.hidden": "8,6",
                       "algo.population": 4, "engine.device": "cpu", "seed": 3}.items():
        override(cfg, key, value)
    built = build(cfg, local=False)
    spec, center = built.policy.spec, built.optimizer.center.numpy()
    raw = NoiseTable.shared(size=default_size(spec.num_params)).slice(3, spec.num_params)
    raw = raw.numpy().astype(np.float64)
    seen = []
    for e in spec:
        got = center[e.slice].reshape(e.shape)
        if e.name.endswith("bias"):
            assert not got.any()
            continue
        std = 0.01 if e.name.startswith("out") else 1.0
        expected = openai_normc(raw[e.slice].reshape(e.shape).T, std).T  # torch: [out, in]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8)
        seen.append((e.name, std))
    assert seen == [("hidden.0.weight", 1.0), ("hidden.1.weight", 1.0), ("out.weight", 0.01)]
