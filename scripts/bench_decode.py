"""Genome decoding cost: a child of a cached parent vs a replay of the whole seed chain.

Run: python scripts/bench_decode.py [--num-params 4052658] [--generations 100] [--json FILE]
Both decodes run side by side in one process on the same chain; the ratio is what matters.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from neuroevo import NoiseTable, SeedChain
from neuroevo.genomes import ChainDecoder
from neuroevo.noise import default_size


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-params", type=int, default=4_052_658, help="D (default: large net)")
    ap.add_argument("--generations", type=int, default=100, help="mutations in the chain")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    noise = NoiseTable.shared(size=default_size(args.num_params))
    rng = np.random.default_rng(0)
    parent = SeedChain(int(rng.integers(2**32)))
    for _ in range(args.generations - 1):
        parent = parent.mutate(int(rng.integers(2**32)), 0.002)
    dec = ChainDecoder(noise, args.num_params, init_std=0.05, device=args.device)
    dec.decode(parent.mutate(0, 0.002))  # fills the cache with the parent
    seeds = iter(range(1, 10**9))

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()  # sync: time the kernels, not their launch

    def cached():
        dec.decode(parent.mutate(next(seeds), 0.002))
        sync()

    def replay():
        dec.replay(parent.mutate(next(seeds), 0.002))
        sync()

    t_cached, t_replay = best_of(cached, args.repeats), best_of(replay, args.repeats)
    child = parent.mutate(1, 0.002)
    out = {"num_params": args.num_params, "generations": args.generations,
           "device": args.device, "cached_child_s": t_cached, "replay_s": t_replay,
           "speedup": t_replay / t_cached,
           "cached_GBps": 3 * 4 * args.num_params / t_cached / 1e9,  # read 2, write 1 vector
           "genome_json_bytes": len(child.to_json()),
           "params_bytes": 4 * args.num_params}
    print(f"D={args.num_params:,}  chain={args.generations}  device={args.device}")
    print(f"  child of cached parent : {t_cached * 1e3:8.2f} ms  ({out['cached_GBps']:.1f} GB/s)")
    print(f"  replay from init       : {t_replay * 1e3:8.2f} ms")
    print(f"  speedup                : {out['speedup']:8.1f} x")
    print(f"  genome as JSON         : {out['genome_json_bytes']:,} bytes "
          f"(parameters: {out['params_bytes']:,} bytes)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
