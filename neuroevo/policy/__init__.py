"""Policies: parameter specs, batched forward passes, observation normalisation."""

from neuroevo.policy.obsnorm import ObsNorm

__all__ = ["ObsNorm"]
