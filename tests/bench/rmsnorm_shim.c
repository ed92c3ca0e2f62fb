/* rmsnorm_shim.c - the residual + RMSNorm kernel's default launch (bk_residual_rmsnorm) as
 * one plain C call, built as the shared library libbk_rmsnorm_shim.so, so that
 * tests/bench/torch_rmsnorm.py (ctypes) can time our kernel on the very tensors it gives
 * torch.compile: the same inputs at the same addresses, so neither side gains from where its
 * buffers happen to sit in memory. Returns 0, or nonzero with the error in msg.
 * bk_shim_residual_rmsnorm_nopdl: the same launch without programmatic dependent launch
 * (bk_rmsnorm_cfg.pdl 0: the default rule sets it at most shapes). */
#include <stdint.h>
#include <stdio.h>

#include "kernels/cuda_variants.h"

int bk_shim_residual_rmsnorm(const void *x, const void *residual, const void *gamma,
                             void *residual_out, void *out, int64_t tokens, int64_t hidden,
                             float eps, void *stream, char *msg, size_t msg_len)
{
    bk_err err;
    bk_err_clear(&err);
    bk_status st = bk_residual_rmsnorm(x, residual, gamma, residual_out, out, tokens, hidden,
                                       eps, stream, &err);
    if (st != BK_OK && msg && msg_len)
        snprintf(msg, msg_len, "%s", err.msg);
    return st != BK_OK;
}

int bk_shim_residual_rmsnorm_nopdl(const void *x, const void *residual, const void *gamma,
                                   void *residual_out, void *out, int64_t tokens,
                                   int64_t hidden, float eps, void *stream, char *msg,
                                   size_t msg_len)
{
    bk_err err;
    bk_rmsnorm_cfg cfg;
    bk_err_clear(&err);
    bk_rmsnorm_call_cfg(x, residual_out, out, tokens, hidden, &cfg);
    cfg.pdl = 0;
    bk_status st = bk_residual_rmsnorm_config(x, residual, gamma, residual_out, out, tokens,
                                              hidden, eps, &cfg, stream, &err);
    if (st != BK_OK && msg && msg_len)
        snprintf(msg, msg_len, "%s", err.msg);
    return st != BK_OK;
}
