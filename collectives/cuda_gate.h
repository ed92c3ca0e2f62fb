/* cuda_gate.h - a host-released gate on a stream: the GPU waits (bounded) until the host has
 * enqueued a whole batch of timed steps, so the steps then run back to back and their event
 * timings measure the GPU alone, never the host's launch speed. */
#ifndef BK_CUDA_GATE_H
#define BK_CUDA_GATE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runner/status.h"

typedef struct bk_cuda_gate {
    volatile uint32_t *host; /* host-mapped pinned words: [0] the host writes (the
                              * gate), [1] the device bumps on a time-out */
    uint32_t *dev;           /* the same words as the device sees them */
    uint32_t epoch;          /* the value the last enqueued gate waits for */
} bk_cuda_gate;

/* Allocate the mapped words (the current device must be set). */
bk_status bk_cuda_gate_init(bk_cuda_gate *g, bk_err *err);
void bk_cuda_gate_free(bk_cuda_gate *g);
/* Enqueue on `stream` one kernel that waits until the host calls bk_cuda_gate_open for this
 * gate, or `bound_s` passes (then it counts a time-out and lets the stream go on). Never
 * enqueue a gate before work that makes the host wait for the stream, or the host and
 * the GPU wait for each other until the bound. */
bk_status bk_cuda_gate_close(bk_cuda_gate *g, void *stream, double bound_s, bk_err *err);
/* Release the last enqueued gate. */
void bk_cuda_gate_open(bk_cuda_gate *g);
/* Gates that ran out of time since init (0 in a healthy run). */
int bk_cuda_gate_timeouts(const bk_cuda_gate *g);

#ifdef __cplusplus
}
#endif

#endif
