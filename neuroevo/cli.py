"""The ``neuroevo`` command line. Library code never prints; this edge module does.

Errors a user can cause (``NeuroevoError``) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import secrets
import signal
import sys
import time

import neuroevo
from neuroevo.errors import NeuroevoError
from neuroevo.optim import ALGORITHMS


class Stopped(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP: the run stops at once and keeps its last checkpoint."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Signals:
    """SIGINT, SIGTERM and SIGHUP stop a run; while a checkpoint and the files derived from
    it are being written, a signal waits for them, so the files on disk always agree."""

    NAMES = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.critical, self.deferred = 0, None
        self.received: int | None = None  # the last stop signal; libraries (Ray's get and
        # wait) may turn our exception into a plain KeyboardInterrupt on its way up

    def __enter__(self):
        self.received = None
        self.previous = {s: signal.signal(s, self._handle) for s in self.NAMES}
        return self

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def _handle(self, signum, frame):
        self.received = signum
        if self.critical:
            self.deferred = signum
            return
        raise Stopped(signum)

    @contextlib.contextmanager
    def protect(self):
        self.critical += 1
        try:
            yield
        finally:
            self.critical -= 1
            if not self.critical and self.deferred is not None:
                signum, self.deferred = self.deferred, None
                raise Stopped(signum)


_signals = _Signals()


def _train(built, run_dir, budget, totals, history, progress: bool) -> None:
    """``run`` and ``resume``: the training driver with a checkpoint, TensorBoard and the
    live line after every generation."""
    from neuroevo.checkpoint import Checkpoints
    from neuroevo.loop import Tests, generations
    from neuroevo.report import Progress, TensorBoard, summary
    from neuroevo.video import default_format

    started = time.perf_counter()

    def report(status: str) -> None:
        print("\n" + summary(status, built.config, history, totals, run_dir.path,
                             time.perf_counter() - started, default_format(),
                             run_dir.has_checkpoint()), flush=True)

    callbacks = [Checkpoints(run_dir, built),
                 TensorBoard(run_dir.folder("tensorboard"),
                             history[-1]["frames"] if history else 0),
                 Progress(sys.stdout, progress, budget, totals, history)]
    try:
        generations(built.optimizer, built.evaluator, budget, totals, history, callbacks,
                    guard=_signals.protect, tests=Tests.of(built.config),
                    obs_norm=built.obs_norm)
    except KeyboardInterrupt:
        kept = (f"after generation {totals.generation - 1}" if run_dir.has_checkpoint()
                else "(none yet)")
        print(f"\nneuroevo: stopped; the last checkpoint is kept {kept}: continue with "
              f"'neuroevo resume {run_dir.path}'", file=sys.stderr, flush=True)
        report("stopped")
        raise
    else:
        report("finished")
    finally:
        built.evaluator.close()
        run_dir.unlock()


def _check_budget_flags(generations, frames) -> None:
    from neuroevo.errors import check_range

    for flag, value in (("--generations", generations), ("--frames", frames)):
        check_range(flag, value, value is None or value >= 0, ">= 0 (0: no limit)")


def _default_run_dir(cfg) -> str:
    """``runs/<algo>-<env>-s<seed>-<time>-<random>``: parallel launches never collide."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    env = cfg.env.id or cfg.env.game
    return os.path.join("runs", f"{cfg.algo.name}-{env}-s{cfg.seed}-{stamp}-"
                                f"{secrets.token_hex(3)}")


def _run(args) -> int:
    from neuroevo.build import build_run
    from neuroevo.checkpoint import RunDir
    from neuroevo.config import Config, apply_sets, load, override
    from neuroevo.loop import Budget, Totals

    cfg = load(args.config) if args.config else Config()
    for key, value in (("algo.name", args.algo), ("env.game", args.game), ("env.id", args.env),
                       ("seed", args.seed),
                       ("algo.population", args.population), ("net.name", args.net),
                       ("budget.generations", args.generations), ("budget.frames", args.frames),
                       ("engine.device", args.device), ("env.episode_cap", args.episode_cap),
                       ("engine.backend", args.backend), ("engine.ray_address", args.ray_address),
                       ("engine.ray_actors", args.ray_actors), ("env.sim", args.sim)):
        if value is not None:
            override(cfg, key, value)
    apply_sets(cfg, args.set or ())
    run_dir = RunDir(args.run_dir or _default_run_dir(cfg))
    existing = run_dir.holds_run()
    if existing and (args.resume or args.force):
        run_dir.lock()  # a second writer stops here, before anything is built or removed
    if args.resume and existing and run_dir.has_checkpoint():
        return _continue(run_dir, args.generations, args.frames, args.no_progress, given=cfg)
    # --resume on a run stopped before its first checkpoint: nothing to keep, start it again
    force = args.force or (args.resume and existing)
    run_dir.ensure_free(force)
    built = build_run(cfg)  # validates names and values before anything is written
    cfg = built.config  # resolved: config.yaml says what runs
    try:
        run_dir.create(cfg, force=force)
        run_dir.record_layout(built.layout(), 0)
    except BaseException:
        built.evaluator.close()
        raise
    env = cfg.env.id or cfg.env.game
    print(f"neuroevo {neuroevo.__version__}: {cfg.algo.name} on {env}, "
          f"{built.policy.spec.num_params:,} parameters"
          f"{f', rank {cfg.algo.rank}' if cfg.algo.rank else ''}, population "
          f"{cfg.algo.population}, {_device_line(built)}, run dir {run_dir.path}", flush=True)
    _train(built, run_dir, Budget.of(cfg), Totals(), [],
           sys.stdout.isatty() and not args.no_progress)
    return 0


def _resume(args) -> int:
    from neuroevo.checkpoint import RunDir

    return _continue(RunDir(args.run_dir), args.generations, args.frames, args.no_progress)


def _device_line(built) -> str:
    """Where the forward passes run and through what, e.g. ``cuda (triton, im2col)``, and
    the simulator when it is MuJoCo Warp's worlds."""
    line = f"{built.device} ({built.policy.kernels})"
    if built.config.env.sim == "warp":
        line += f", MuJoCo Warp ({built.evaluator.layout()['slots']:,} worlds)"
    return line


def _continue(run_dir, generations, frames, no_progress: bool, given=None) -> int:
    """Continue ``run_dir`` from its checkpoint with its own config (and a new budget);
    ``given``, a config from the command line, must define the same run."""
    _check_budget_flags(generations, frames)
    cfg = run_dir.load_config()
    run_dir.lock()
    try:
        return _resume_locked(run_dir, cfg, generations, frames, no_progress, given)
    finally:  # a refused resume lets the directory go too (in-process callers go on)
        run_dir.unlock()


def _resume_locked(run_dir, cfg, generations, frames, no_progress: bool, given) -> int:
    from neuroevo.build import build_run, resolve
    from neuroevo.loop import Budget

    run_dir.remove_temporaries()
    state = run_dir.load(cfg)  # refused if config.yaml was edited into another run
    if generations is not None or frames is not None:  # the budget is not the run's identity
        cfg.budget.generations, cfg.budget.frames = generations or 0, frames or 0
    cfg = resolve(cfg)  # as written already, unless an older neuroevo wrote it
    if given is not None:
        run_dir.check_identity(resolve(given), state["identity"])
    built = build_run(cfg)
    try:
        run_dir.restore(built, state)
        totals, history = state["totals"], state["history"]
        with _signals.protect():
            if generations is not None or frames is not None:
                run_dir.write_config(cfg)  # a later resume keeps the new budget
            run_dir.write_metrics(history)  # drop rows written after the checkpoint, if any
            run_dir.write_policy(built.optimizer, totals, built.policy, built.obs_norm,
                                 built.arch)
            run_dir.record_layout(built.layout(), totals.generation)
    except BaseException:
        built.evaluator.close()
        raise
    print(f"neuroevo {neuroevo.__version__}: resuming {run_dir.path} after generation "
          f"{totals.generation - 1} ({totals.frames:,} frames), {_device_line(built)}",
          flush=True)
    _train(built, run_dir, Budget.of(cfg), totals, history,
           sys.stdout.isatty() and not no_progress)
    return 0


def _bench(args) -> int:
    from neuroevo.bench import BenchConfig, format_table, run_bench, write_json
    from neuroevo.errors import ConfigError

    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        raise ConfigError(f"--json {args.json}: its directory does not exist; create it first")

    cfg = BenchConfig(game=args.game, env=args.env, algo=args.algo, net=args.net,
                      population=args.population,
                      seconds=args.seconds, rounds=args.rounds, device=args.device,
                      subsets=args.subsets, slots=args.slots, env_threads=args.env_threads,
                      workers=args.workers, episode_cap=args.episode_cap, seed=args.seed,
                      sets=tuple(args.set or ()), sim=args.sim)
    result = run_bench(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_table(result))
    if args.json:
        write_json(result, args.json)
    return 0


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except ``None`` (flags whose help states the config's default)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def _play(args) -> int:
    from neuroevo.checkpoint import RunDir
    from neuroevo.play import play

    scores, recorded = play(RunDir(args.run_dir), args.episodes, args.video, args.genome,
                            args.episode_cap, args.member)
    print("scores: " + " ".join(f"{s:g}" for s in scores))
    print(f"mean {scores.mean():.1f}  std {scores.std():.1f}  min {scores.min():g}  "
          f"max {scores.max():g}  over {len(scores)} episodes")
    if args.video:
        print(f"wrote {args.video} (episode 1, score {recorded:g})")
    return 0


def _plot(args) -> int:
    from neuroevo.plot import plot_archives, plot_runs

    if args.archive:
        plot_archives(args.run_dirs, args.output)
    else:
        plot_runs(args.run_dirs, args.output, args.x,
                  warn=lambda m: print(f"neuroevo: warning: {m}", file=sys.stderr), y=args.y)
    print(f"wrote {args.output}")
    return 0


def _add_run(sub, fmt, d) -> None:
    """``neuroevo run``: its defaults are the config's (``d``)."""
    run = sub.add_parser("run", formatter_class=fmt, help="train a population on a game",
                         description="Train with one of: " + "; ".join(
                             f"{a.name}, {a.doc}" for a in ALGORITHMS.values()) +
                         ". Defaults are quick CPU settings.")
    run.add_argument("algo", help=" | ".join(ALGORITHMS))
    run.add_argument("--game", help=f"Atari ROM id, e.g. breakout, ms_pacman "
                                    f"(default: {d.env.game})")
    run.add_argument("--env", help="a gymnasium env id instead of a game, e.g. CartPole-v1, "
                                   "LunarLander-v3, ALE/Breakout-v5")
    run.add_argument("--net", help=f"large | small | mlp (default: {d.net.name}: small for "
                                   "Atari, mlp for vector observations)")
    run.add_argument("--population", type=int,
                     help=f"members per generation (default: {d.algo.population})")
    run.add_argument("--generations", type=int,
                     help="stop after N generations (default: 10 without --frames)")
    run.add_argument("--frames", type=int, help="stop after N emulator frames")
    run.add_argument("--episode-cap", type=int,
                     help=f"agent steps per training episode (default: {d.env.episode_cap})")
    run.add_argument("--seed", type=int, help=f"run seed (default: {d.seed})")
    run.add_argument("--device", help=f"auto | cpu | cuda (default: {d.engine.device})")
    run.add_argument("--sim", help="native | warp: MuJoCo C on CPU threads, or MuJoCo Warp on "
                     f"the device (the six v5 locomotion tasks; default: {d.env.sim})")
    run.add_argument("--config", metavar="FILE.yaml",
                     help="config overrides, e.g. experiments/configs/deep_ga_atari.yaml")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="any config key, e.g. --set algo.truncation=20 (repeatable)")
    run.add_argument("--backend",
                     help=f"where episodes run (default: {d.engine.backend}; ray: Ray actors)")
    run.add_argument("--ray-address", metavar="auto|HOST:PORT",
                     help="a Ray cluster to join (default: start Ray on this machine)")
    run.add_argument("--ray-actors", type=int, metavar="N",
                     help="Ray actors, each a pipelined evaluator (default: one per node)")
    run.add_argument("--run-dir", help="where to write the run (default: "
                                       "runs/<algo>-<game>-<time>)")
    run.add_argument("--force", action="store_true", help="overwrite a run dir in use")
    run.add_argument("--resume", action="store_true",
                     help="if --run-dir holds a run, continue it (its own config; the budget "
                          "flags apply) instead of refusing; one stopped before its first "
                          "checkpoint starts again")
    run.add_argument("--no-progress", action="store_true", help="no live progress line")
    run.set_defaults(handler=_run)


def _add_resume(sub, fmt) -> None:
    """``neuroevo resume``."""
    resume = sub.add_parser("resume", formatter_class=fmt,
                            help="continue a run from its last checkpoint",
                            description="Continue a run from its last checkpoint; the result "
                                        "equals a run that never stopped.")
    resume.add_argument("run_dir", help="the run directory that 'neuroevo run' printed")
    resume.add_argument("--generations", type=int,
                        help="new total generation budget (default: the run's own)")
    resume.add_argument("--frames", type=int,
                        help="new total frame budget (default: the run's own)")
    resume.add_argument("--no-progress", action="store_true", help="no live progress line")
    resume.set_defaults(handler=_resume)


def _add_play(sub, fmt) -> None:
    """``neuroevo play``."""
    play_ = sub.add_parser("play", formatter_class=fmt,
                           help="score a run's saved policy and record a video",
                           description="Evaluate the elite (GA/RS) or centre (ES) of a run's "
                                       "last checkpoint on fresh, reproducible episodes.")
    play_.add_argument("run_dir", help="a run directory")
    play_.add_argument("--episodes", type=int, default=10, help="episodes to play")
    play_.add_argument("--video", metavar="FILE.gif|FILE.mp4",
                       help="record the first episode (Atari, MuJoCo locomotion)")
    play_.add_argument("--genome", choices=("elite", "best"), default="elite",
                       help="the validated elite (ES: the centre), or the member with the "
                            "best single training episode (GA/RS)")
    play_.add_argument("--member", type=int, metavar="N",
                       help="an archive member instead: MAP-Elites' grid cell N, or centre "
                            "N of an NS-ES, NSR-ES or NSRA-ES run")
    play_.add_argument("--episode-cap", type=int, metavar="N",
                       help="agent steps per episode (default: the run's test cap, "
                            "env.test_episode_cap: the env's own limit unless set)")
    play_.set_defaults(handler=_play)


def _add_plot(sub, fmt) -> None:
    """``neuroevo plot``."""
    plot = sub.add_parser("plot", formatter_class=fmt, help="draw learning curves of runs",
                          description="Elite, max and mean fitness of each run, one panel "
                                      "per run, against frames, generations or time.")
    plot.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    plot.add_argument("-o", "--output", required=True, metavar="FILE.png",
                      help="the image to write (.png, .pdf or .svg)")
    plot.add_argument("--x", choices=("frames", "generations", "time"), default="frames",
                      help="the x axis")
    plot.add_argument("--y", action="append", metavar="METRIC",
                      help="a metric to draw, e.g. test_score (repeatable; default: every "
                           "score the runs have)")
    plot.add_argument("--archive", action="store_true",
                      help="draw each run's behaviour archive instead (novelty search: its "
                           "points by generation; MAP-Elites: its grid's fitness)")
    plot.set_defaults(handler=_plot)


def _add_bench(sub, fmt) -> None:
    """``neuroevo bench``."""
    bench = sub.add_parser("bench", formatter_class=fmt,
                           help="measure the engine against its bounds and a naive loop")
    bench.add_argument("--game", default="breakout", help="Atari ROM id (Deep GA generations)")
    bench.add_argument("--env", default="", help="a gymnasium id, e.g. HalfCheetah-v5: "
                       "OpenAI-ES generations on it instead of --game (frames: env steps)")
    bench.add_argument("--algo", default="", help=f"{' | '.join(ALGORITHMS)}: whose "
                       "generations the engine runs (default: ga on a game, es on --env)")
    bench.add_argument("--net", default="", help="large | small | mlp (default: large for a "
                       "game; for --env the paper's mlp, 256-256, or --set net.hidden=...)")
    bench.add_argument("--population", type=int, default=64, help="members per generation")
    bench.add_argument("--seconds", type=float, default=20.0, help="per measurement and round")
    bench.add_argument("--rounds", type=int, default=2,
                       help="interleaved repetitions; each figure is its best round")
    bench.add_argument("--device", default="auto", help="auto | cpu | cuda")
    bench.add_argument("--subsets", type=int, help="subsets of slots (default: automatic)")
    bench.add_argument("--slots", type=int, help="slots per subset (default: automatic)")
    bench.add_argument("--env-threads", type=int, default=0, help="per subset; 0: ale-py's")
    bench.add_argument("--workers", type=int, default=0,
                       help="engine driver threads (default: as neuroevo run: 1 per core on "
                            "a CPU)")
    bench.add_argument("--episode-cap", type=int, default=1000,
                       help="agent steps per episode (short, so a generation fits the time)")
    bench.add_argument("--seed", type=int, default=0, help="seed of the population and envs")
    bench.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="any key of the run config measured, as for 'run', e.g. --set "
                            "algo.elite_candidates=0 (repeatable)")
    bench.add_argument("--sim", default="native", help="native | warp: warp measures MuJoCo "
                       "Warp too, side by side with native in the same rounds (--env: one of "
                       "the six v5 locomotion tasks)")
    bench.add_argument("--json", help="also write the figures to this file")
    bench.set_defaults(handler=_bench)


def build_parser() -> argparse.ArgumentParser:
    from neuroevo.config import Config

    fmt, d = _Formatter, Config()
    parser = argparse.ArgumentParser(
        prog="neuroevo", formatter_class=fmt,
        description="Pipelined CPU-GPU neuroevolution: Deep GA, OpenAI-ES and random search "
                    "on Atari, MuJoCo and gymnasium.")
    parser.add_argument("--version", action="version", version=f"neuroevo {neuroevo.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_run(sub, fmt, d)
    _add_resume(sub, fmt)
    _add_play(sub, fmt)
    _add_plot(sub, fmt)
    _add_bench(sub, fmt)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 done, 2 a bad input or a failed write (one line on stderr), 128 + the
    signal's number when stopped (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    with _signals:
        try:
            return args.handler(args)
        except NeuroevoError as e:
            print(f"neuroevo: error: {e}", file=sys.stderr)
            return 2
        except OSError as e:  # a write that did not go through atomic_write's message
            from neuroevo.files import storage_error

            where = e.filename or "a file"
            print(f"neuroevo: error: {storage_error('write', where, e)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            signum = _signals.received or signal.SIGINT
            print(f"neuroevo: stopped by {signal.Signals(signum).name}", file=sys.stderr)
            return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
