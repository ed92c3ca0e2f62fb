/* pdl_writer.h - the late writer of the GPU tests' programmatic-dependent-launch checks
 * (tests/gpu/pdl_writer.cu): a kernel placed on the stream right before the one under test. */
#ifndef BK_PDL_WRITER_H
#define BK_PDL_WRITER_H

#include <stddef.h>
#include <stdint.h>

#define PDL_WRITER_NS 200000 /* the writer's head start: 200 us */

#ifdef __cplusplus
extern "C" {
#endif

/* Lets the next kernel on stream be scheduled at once, then after ns nanoseconds copies
 * bytes[k] (a multiple of 16) from src[k] to dst[k], k < 3; returns the launch's
 * cudaError_t. */
int bk_test_pdl_writer(const void *const src[3], void *const dst[3], const size_t bytes[3],
                       uint64_t ns, void *stream);

#ifdef __cplusplus
}
#endif

#endif
