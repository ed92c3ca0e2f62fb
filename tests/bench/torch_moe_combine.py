"""torch_moe_combine.py - the top-k weighted sum of moe.fused_experts_reduce through PyTorch
(eager and torch.compile), beside bench_moe's own kernel: out[t] = sum_k w[t,k] * y[t*K+k],
y [T*K, H] bf16, w [T, K] fp32, out [T, H] bf16. Bandwidth counts y read + out written,
against a device-to-device copy measured the same way.
usage: python3 torch_moe_combine.py [--no-compile]"""
import sys

import torch

K, H = 8, 6144
TOKENS = [256, 4096]


def bench(fn, iters=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / iters * 1e3  # us


def combine(y, w):
    t = w.shape[0]
    return (y.view(t, K, H).float() * w.unsqueeze(-1)).sum(dim=1).to(torch.bfloat16)


def main():
    compile_too = "--no-compile" not in sys.argv
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    copy_tbs = 2 * src.numel() * 2 / (bench(lambda: dst.copy_(src)) * 1e-6) / 1e12
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: copy {copy_tbs:.2f} TB/s")
    compiled = torch.compile(combine, dynamic=False) if compile_too else None
    print("| tokens | K | H | eager us | eager % copy | compile us | compile % copy |")
    print("|---|---|---|---|---|---|---|")
    for t in TOKENS:
        y = torch.randn(t * K, H, device="cuda").to(torch.bfloat16)
        w = torch.softmax(torch.randn(t, K, device="cuda"), dim=-1)
        nbytes = t * H * 2 * (K + 1)
        e = bench(lambda: combine(y, w))
        row = f"| {t} | {K} | {H} | {e:.1f} | {100 * nbytes / (e * 1e-6) / 1e12 / copy_tbs:.0f}% |"
        if compiled is not None:
            c = bench(lambda: compiled(y, w))
            row += f" {c:.1f} | {100 * nbytes / (c * 1e-6) / 1e12 / copy_tbs:.0f}% |"
        else:
            row += " - | - |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
