"""Your own sweep with the Python API and Ray Tune: ES on CartPole, Tune's random search
over sigma and the learning rate, ASHA stopping the worst trials early. Each trial is a
normal run directory, OUT/runs/trial-NNNNN.

    python experiments/sweeps/custom_sweep.py sweeps/custom
"""

import os
import sys

from ray import tune

from neuroevo.sweep import Trial, make_plan, run_name
from neuroevo.sweep.tuner import param_space

out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "sweeps/custom")
plan = make_plan("es", sets=["env.id=CartPole-v1", "net.hidden=16", "algo.population=20"],
                 ranges=["algo.sigma=log:0.005:0.2", "algo.lr=log:0.003:0.1"],
                 generations=20, samples=8)  # checks every key and value before Ray starts
tuner = tune.Tuner(
    tune.with_resources(tune.with_parameters(Trial(plan, out, cpus=1)), {"cpu": 1}),
    param_space=param_space(tune, plan),  # the ranges above, and the seeds
    tune_config=tune.TuneConfig(metric="center_score", mode="max", num_samples=8,
                                scheduler=tune.schedulers.ASHAScheduler(
                                    time_attr="generations", max_t=20, grace_period=2)),
    run_config=tune.RunConfig(name="tune", storage_path=out))
best = tuner.fit().get_best_result()
print(f"best centre score {best.metrics['center_score']:g} with sigma "
      f"{best.config['algo.sigma']:.4g}, lr {best.config['algo.lr']:.4g}: "
      f"{os.path.join(out, 'runs', run_name(best.metrics['trial_id']))}")
