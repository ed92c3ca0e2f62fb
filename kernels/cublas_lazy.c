/* cublas_lazy.c - cuBLAS through dlopen on first use (see cublas_lazy.h). */
#ifdef BK_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cublas_lazy.h"

static bk_cublas g_blas;
static char g_why[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* dlsym into *slot; the sizeof checks the slot's type against the header's own
 * declaration at compile time (the name is not evaluated, so nothing links to it). */
#define RESOLVE(slot, sym)                                                                 \
    do {                                                                                   \
        (void)sizeof((g_blas.slot = sym) != NULL);                                         \
        void *p_ = dlsym(lib, #sym);                                                       \
        if (!p_) {                                                                         \
            snprintf(g_why, sizeof g_why, "cuBLAS (%s) has no %s: %s", from, #sym,         \
                     dlerror());                                                           \
            return;                                                                        \
        }                                                                                  \
        memcpy(&g_blas.slot, &p_, sizeof p_);                                              \
    } while (0)

static void load(void)
{
    const char *tries[] = { BK_CUBLAS_PATH, BK_CUBLAS_SONAME };
    const char *from = NULL;
    void *lib = NULL;
    char first[256] = "";
    for (size_t i = 0; i < sizeof tries / sizeof tries[0] && !lib; i++) {
        if (!tries[i][0])
            continue;
        lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        from = tries[i];
        if (!lib && !first[0])
            snprintf(first, sizeof first, "%s", dlerror());
    }
    if (!lib) {
        snprintf(g_why, sizeof g_why, "cannot load cuBLAS (%s, then %s): %s", BK_CUBLAS_PATH,
                 BK_CUBLAS_SONAME, first[0] ? first : "no library named");
        return;
    }
    RESOLVE(create, cublasCreate_v2);
    RESOLVE(destroy, cublasDestroy_v2);
    RESOLVE(set_workspace, cublasSetWorkspace_v2);
    RESOLVE(set_stream, cublasSetStream_v2);
    RESOLVE(gemm_ex, cublasGemmEx);
    RESOLVE(status_string, cublasGetStatusString);
    /* the library stays loaded for the life of the process */
}

bk_status bk_cublas_get(const bk_cublas **out, bk_err *err)
{
    pthread_once(&g_once, load);
    if (g_why[0])
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "%s", g_why);
    *out = &g_blas;
    return BK_OK;
}

#endif
