#!/usr/bin/env python3
"""torch_rmsnorm_autotune.py - which launch configuration torch.compile's autotuner picks for
residual + RMSNorm (tests/bench/torch_rmsnorm.py's function) at small shapes, compiled afresh
N times per shape, each with its graph-replay time measured as torch_rmsnorm.py measures it.
It shows where torch.compile's run-to-run spread comes from.

  TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 python3 torch_rmsnorm_autotune.py [--reps N]
"""
import argparse
import os
import sys

import torch
from torch._inductor.codecache import PyCodeCache
from torch._inductor.runtime.triton_heuristics import CachingAutotuner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_rmsnorm as tr  # noqa: E402

seen = set()


def new_kernels():
    """The generated modules' autotuned kernels not seen before: (name, autotuner)."""
    mods = list(sys.modules.values())
    pm = getattr(PyCodeCache, "modules", [])
    mods += list(pm.values()) if isinstance(pm, dict) else list(pm)
    out = []
    for m in mods:
        try:
            items = list(vars(m).items())
        except TypeError:
            continue
        for k, v in items:
            if isinstance(v, CachingAutotuner) and id(v) not in seen:
                seen.add(id(v))
                out.append((k, v))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3, help="fresh compiles per shape")
    args = ap.parse_args()
    if os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES") != "1":
        print("note: without TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 a compile may reuse the "
              "cached pick instead of autotuning again")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for h in (4096, 6144, 8192):
        for t in (1, 4):
            for rep in range(args.reps):
                torch._dynamo.reset()
                fn = torch.compile(tr.residual_rmsnorm, dynamic=False)
                sets = tr.make_sets(t, h, tr.cold_sets(t, h, l2), t * 7 + h + rep)
                us = tr.median(tr.time_graph(fn, sets))
                picks = [f"{name}: " + "; ".join(f"{c.kwargs} warps {c.num_warps}"
                                                 for c in (lc.config for lc in k.launchers))
                         for name, k in new_kernels()]
                print(f"{h} x {t} compile {rep}: {us:.2f} us  {' | '.join(picks)}", flush=True)


if __name__ == "__main__":
    main()
