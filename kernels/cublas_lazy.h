/* cublas_lazy.h - cuBLAS loaded on first use (dlopen), not linked: libcublasLt's
 * start-up alone took 0.17 s and 210 MB in every process that linked it (each rank and
 * each engine, whatever its target), while only the cuda MoE variants call cuBLAS. */
#ifndef BK_CUBLAS_LAZY_H
#define BK_CUBLAS_LAZY_H
#ifdef BK_HAVE_CUDA

#include <cublas_v2.h>

#include "kernels/catalog.h"

/* The cuBLAS entry points bracket calls, typed as cublas_api.h declares them. */
typedef struct bk_cublas {
    cublasStatus_t (*create)(cublasHandle_t *handle);
    cublasStatus_t (*destroy)(cublasHandle_t handle);
    cublasStatus_t (*set_workspace)(cublasHandle_t handle, void *ws, size_t bytes);
    cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream);
    cublasStatus_t (*gemm_ex)(cublasHandle_t handle, cublasOperation_t ta,
                              cublasOperation_t tb, int m, int n, int k, const void *alpha,
                              const void *A, cudaDataType at, int lda, const void *B,
                              cudaDataType bt, int ldb, const void *beta, void *C,
                              cudaDataType ct, int ldc, cublasComputeType_t compute,
                              cublasGemmAlgo_t algo);
    const char *(*status_string)(cublasStatus_t status);
} bk_cublas;

/* Load cuBLAS once per process (the path it was built against, BK_CUBLAS_PATH, then its
 * soname BK_CUBLAS_SONAME through the loader's search) and resolve every entry point.
 * BK_ERR_UNSUPPORTED naming the library and dlerror() when it cannot be loaded or lacks
 * an entry point; the same answer on every later call. */
bk_status bk_cublas_get(const bk_cublas **out, bk_err *err);

#endif
#endif
