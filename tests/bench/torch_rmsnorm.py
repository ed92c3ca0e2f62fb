#!/usr/bin/env python3
"""torch_rmsnorm.py - residual + RMSNorm through torch.compile (Triton) and PyTorch eager,
timed exactly like tests/bench/bench_rmsnorm.cu (rotated input sets, CALLS launches
captured in one CUDA graph, median of REPLAYS replays / CALLS), so both sit side by side.

  python3 torch_rmsnorm.py [--ours bench_rmsnorm.csv] [--lib libbk_rmsnorm_shim.so]
                           [--csv FILE] [--step N | --tokens LIST] [--hidden LIST]
                           [--hot] [--nopdl]

Prints one table: our kernel, torch.compile, eager, each in us and as a share of the copy
kernel's bandwidth (the one bench_rmsnorm measured in the same run when --ours is given,
else torch's copy_). Our kernel's time comes from --lib when given: our default launch
(bk_residual_rmsnorm, through ctypes) captured and replayed on the very input tensors that
torch.compile gets, its outputs checked against eager PyTorch first, timed in alternation
with torch.compile (ours, compile, ours, compile: the median of both rounds' replays), so
that neither side gains from where its buffers sit in memory; the --ours CSV's time is then
printed beside it ("bench us"). Without --lib, "ours" is the CSV's time. --nopdl (with
--lib) also times our launch without programmatic dependent launch, which the default rule
turns on at most shapes, in the same alternation ("no-pdl us"). --tokens and --hidden take
comma-separated lists instead of the powers of --step and the four hidden sizes (as
bench_rmsnorm's).
"""
import argparse
import collections
import csv
import ctypes
import math

import torch

CALLS = 64
REPLAYS = 20
MAX_SETS = 32
EPS = 1e-6
HIDDENS = (4096, 6144, 7168, 8192)


def residual_rmsnorm(x, residual, gamma):
    """The target's math: the norm reads residual_out as stored (bf16)."""
    ro = (x.float() + residual.float()).to(torch.bfloat16)
    r = ro.float()
    out = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + EPS) * gamma.float()
    return ro, out.to(torch.bfloat16)


def cold_sets(t, h, l2):
    """Rotated sets enough that their inputs (x and residual, bf16) exceed three L2s."""
    return max(2, min(MAX_SETS, math.ceil(3 * l2 / (2 * t * h * 2))))


def make_sets(t, h, nsets, seed):
    """nsets (x, residual, gamma) input triples of t x h bf16 from one seeded generator,
    gamma shared by all."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    gamma = (torch.rand(h, device="cuda", generator=gen) + 0.5).to(torch.bfloat16)
    return [((torch.rand(t, h, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16),
             (torch.rand(t, h, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16),
             gamma) for _ in range(nsets)]


def time_graph(fn, sets):
    """Capture CALLS calls cycling through the sets in one graph; the REPLAYS replay
    times in us per call. The outputs of the last len(sets) calls are kept alive, so
    the graph's memory pool rotates output buffers with the inputs' period (as
    bench_rmsnorm does) instead of reusing one hot pair."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):  # warm-up outside capture (compilation, allocator)
            fn(*sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    keep = collections.deque(maxlen=len(sets))
    with torch.cuda.graph(graph):
        for i in range(CALLS):
            keep.append(fn(*sets[i % len(sets)]))
    graph.replay()
    times = []
    for _ in range(REPLAYS):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / CALLS)
    del graph, keep
    return times


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def load_ours(path, nopdl=False):
    """Our default launch through libbk_rmsnorm_shim.so: fn(x, residual, gamma, ro, out)
    on the current stream (inside a capture: captured); nopdl: the same launch without
    programmatic dependent launch."""
    lib = ctypes.CDLL(path)
    f = lib.bk_shim_residual_rmsnorm_nopdl if nopdl else lib.bk_shim_residual_rmsnorm
    f.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_float,
                                          ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    f.restype = ctypes.c_int
    msg = ctypes.create_string_buffer(1024)

    def run(x, residual, gamma, ro, out):
        if f(x.data_ptr(), residual.data_ptr(), gamma.data_ptr(), ro.data_ptr(), out.data_ptr(),
             x.shape[0], x.shape[1], EPS, torch.cuda.current_stream().cuda_stream, msg,
             len(msg)):
            raise RuntimeError(f"bk_residual_rmsnorm{' (no pdl)' if nopdl else ''}: "
                               f"{msg.value.decode()}")
        return ro, out
    return run


def check_ours(run, x, residual, gamma):
    """Our outputs on one set against eager PyTorch: residual_out bitwise (the same
    fp32 sum rounded once), out within bf16 rounding."""
    ro, out = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    run(x, residual, gamma, ro, out)
    want_ro, want_out = residual_rmsnorm(x, residual, gamma)
    torch.cuda.synchronize()
    if not torch.equal(ro, want_ro):
        raise SystemExit(f"ours: residual_out differs from eager at {tuple(x.shape)}")
    torch.testing.assert_close(out.float(), want_out.float(), rtol=1.6e-2, atol=1e-2,
                               msg=lambda m: f"ours: out off eager at {tuple(x.shape)}: {m}")


def copy_bandwidth():
    src = torch.ones(1 << 30, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(20):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return 2 * src.numel() * 2 / (times[10] * 1e-3)


def int_list(lo, hi, mult):
    """argparse type: comma-separated integers in [lo, hi], multiples of mult."""
    def parse(text):
        try:
            vals = [int(v) for v in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: want comma-separated integers")
        bad = [v for v in vals if not (lo <= v <= hi and v % mult == 0)]
        if bad:
            raise argparse.ArgumentTypeError(
                f"{text!r}: {bad[0]} is not in {lo}..{hi}"
                + (f" or not a multiple of {mult}" if mult > 1 else ""))
        return vals
    return parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", help="bench_rmsnorm --csv output of the same run")
    ap.add_argument("--lib", help="libbk_rmsnorm_shim.so: time our kernel here, on the same "
                    "tensors as torch.compile")
    ap.add_argument("--csv", help="write our rows here")
    ap.add_argument("--step", type=int, help="token multiplier between rows (default 2)")
    ap.add_argument("--tokens", type=int_list(1, 16384, 1),
                    help="these token counts instead (comma-separated, 1 to 16384)")
    ap.add_argument("--hidden", type=int_list(8, 16384, 8),
                    help="these hidden sizes instead (comma-separated multiples of 8 up to "
                    "16384; default 4096,6144,7168,8192)")
    ap.add_argument("--hot", action="store_true",
                    help="one input set, L2-resident where it fits (bench_rmsnorm --hot)")
    ap.add_argument("--nopdl", action="store_true",
                    help="with --lib: also time our launch without programmatic dependent "
                    "launch (bk_rmsnorm_cfg.pdl 0), in the same alternation (column "
                    "'no-pdl us')")
    args = ap.parse_args()
    if args.nopdl and not args.lib:
        ap.error("--nopdl needs --lib")
    if args.step is not None and args.tokens:
        ap.error("--step and --tokens: give one of them")
    if args.step is None:
        args.step = 2
    if args.step < 2:
        ap.error(f"--step {args.step}: want 2 or more")
    torch._dynamo.config.cache_size_limit = 256
    compiled = torch.compile(residual_rmsnorm, dynamic=False)
    run_ours = load_ours(args.lib) if args.lib else None
    run_nopdl = load_ours(args.lib, nopdl=True) if args.nopdl else None
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    torch_copy = copy_bandwidth()
    ours = {}
    copy_bw = None
    if args.ours:
        with open(args.ours) as f:
            for row in csv.DictReader(f):
                ours[(int(row["hidden"]), int(row["tokens"]))] = float(row["us"])
                copy_bw = float(row["copy_gbps"]) * 1e9
    if copy_bw is None:
        copy_bw = torch_copy
    print(f"mode: {'hot (one input set)' if args.hot else 'cold (rotated sets over 3 x L2)'}; "
          f"ours: {'timed here on the same tensors, alternating with torch.compile' if run_ours else 'from ' + str(args.ours)}")
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
          f"torch copy_ {torch_copy / 1e9:.0f} GB/s, reference copy {copy_bw / 1e9:.0f} GB/s")
    rows = []
    hdr = f"{'hidden':>6} {'tokens':>6} {'ours us':>8} {'%copy':>6} {'compile us':>10} {'%copy':>6} {'eager us':>9} {'%copy':>6} {'ours/compile':>12}"
    if run_nopdl:
        hdr += f" {'no-pdl us':>9} {'no-pdl/compile':>14}"
    if run_ours and ours:
        hdr += f" {'bench us':>8}"
    print(hdr)
    token_list = args.tokens or [args.step ** k for k in range(15)
                                 if args.step ** k <= 16384]
    for h in args.hidden or HIDDENS:
        for t in token_list:
            sets = make_sets(t, h, 1 if args.hot else cold_sets(t, h, l2), t * 7 + h)
            nbytes = (4 * t * h + h) * 2
            us_b = ours.get((h, t), float("nan"))
            us_n = float("nan")
            if run_ours:
                check_ours(run_ours, *sets[0])
                if run_nopdl:
                    check_ours(run_nopdl, *sets[0])
                osets = [(x, r, g, torch.empty_like(x), torch.empty_like(x)) for x, r, g in sets]
                to, tn, tc = [], [], []
                for _ in range(2):
                    to += time_graph(run_ours, osets)
                    if run_nopdl:
                        tn += time_graph(run_nopdl, osets)
                    tc += time_graph(compiled, sets)
                us_o, us_c = median(to), median(tc)
                if run_nopdl:
                    us_n = median(tn)
                del osets
            else:
                us_o, us_c = us_b, median(time_graph(compiled, sets))
            us_e = median(time_graph(residual_rmsnorm, sets))
            share = lambda us: 100 * nbytes / (us * 1e-6) / copy_bw
            line = (f"{h:>6} {t:>6} {us_o:>8.2f} {share(us_o):>5.1f}% {us_c:>10.2f} {share(us_c):>5.1f}% "
                    f"{us_e:>9.2f} {share(us_e):>5.1f}% {us_c / us_o if us_o == us_o else float('nan'):>11.2f}x")
            if run_nopdl:
                line += f" {us_n:>9.2f} {us_c / us_n:>13.2f}x"
            if run_ours and ours:
                line += f" {us_b:>8.2f}"
            print(line, flush=True)
            rows.append((h, t, nbytes, us_o, us_c, us_e, us_n))
            del sets
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("hidden,tokens,bytes,ours_us,compile_us,eager_us,nopdl_us\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")
    slower = [(h, t) for h, t, _, o, c, _, _ in rows if not (o < c)]
    print(f"shapes where ours is not faster than torch.compile: {slower if slower else 'none'}")
    if run_nopdl:
        slower = [(h, t) for h, t, _, _, c, _, p in rows if not (p < c)]
        print(f"shapes where ours without pdl is not faster than torch.compile: "
              f"{slower if slower else 'none'}")


if __name__ == "__main__":
    main()
