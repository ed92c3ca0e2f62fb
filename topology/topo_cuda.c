/* topo_cuda.c - CUDA runtime facts: device ordinals, peer access and the P2P
 * performance rank. Linked directly when built with BK_HAVE_CUDA, else the
 * runtime is loaded with dlopen; without either, or without a driver, the probe
 * notes what it could not see and goes on. */
#include "topology/topology.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef BK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#pragma GCC diagnostic ignored "-Wformat-truncation"

enum { P2P_ATTR_PERFORMANCE_RANK = 1 }; /* cudaDevP2PAttrPerformanceRank */

typedef struct {
    void *lib;
    int (*count)(int *);
    int (*bus_id)(char *, int, int);
    int (*can_access)(int *, int, int);
    int (*p2p_attr)(int *, int, int, int);
    const char *(*error_string)(int);
} cuda_api;

static int load_api(cuda_api *a)
{
    memset(a, 0, sizeof *a);
#ifdef BK_HAVE_CUDA
    a->count = (int (*)(int *))cudaGetDeviceCount;
    a->bus_id = (int (*)(char *, int, int))cudaDeviceGetPCIBusId;
    a->can_access = (int (*)(int *, int, int))cudaDeviceCanAccessPeer;
    a->p2p_attr = (int (*)(int *, int, int, int))cudaDeviceGetP2PAttribute;
    a->error_string = (const char *(*)(int))cudaGetErrorString;
    return 0;
#else
    static const char *const names[] = { "libcudart.so", "libcudart.so.13", "libcudart.so.12" };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !a->lib; i++)
        a->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!a->lib)
        return -1;
    *(void **)&a->count = dlsym(a->lib, "cudaGetDeviceCount");
    *(void **)&a->bus_id = dlsym(a->lib, "cudaDeviceGetPCIBusId");
    *(void **)&a->can_access = dlsym(a->lib, "cudaDeviceCanAccessPeer");
    *(void **)&a->p2p_attr = dlsym(a->lib, "cudaDeviceGetP2PAttribute");
    *(void **)&a->error_string = dlsym(a->lib, "cudaGetErrorString");
    if (!a->count || !a->bus_id || !a->can_access || !a->p2p_attr) {
        dlclose(a->lib);
        a->lib = NULL;
        return -1;
    }
    return 0;
#endif
}

static void unload_api(cuda_api *a)
{
    if (a->lib)
        dlclose(a->lib);
    a->lib = NULL;
}

static const char *cerr(const cuda_api *a, int r)
{
    const char *s = a->error_string ? a->error_string(r) : NULL;
    return s ? s : "unknown CUDA error";
}

/* Device `ordinal`'s PCI bus id, normalised, into bus: 0; else 1 (the CUDA call failed) or 2
 * (it answered in a form we do not know), with why saying so. */
static int bus_of(const cuda_api *a, int ordinal, char *bus, size_t n, char *why, size_t wn)
{
    char raw[64];
    const int r = a->bus_id(raw, (int)sizeof raw, ordinal);
    if (r != 0) {
        snprintf(why, wn, "cudaDeviceGetPCIBusId(%d): %s", ordinal, cerr(a, r));
        return 1;
    }
    if (bk_pci_bus_norm(raw, bus, n) != 0) {
        snprintf(why, wn, "cudaDeviceGetPCIBusId(%d): unexpected \"%.63s\"", ordinal, raw);
        return 2;
    }
    return 0;
}

int bk_cuda_device_count(void)
{
    /* asked of the runtime once a process: what it sees does not change while it runs
     * (CUDA_VISIBLE_DEVICES is read at its start), and verify asks once an engine rank */
    static int known = -2;
    if (known != -2)
        return known;
    cuda_api a;
    int n = -1;
    if (load_api(&a) == 0) {
        if (a.count(&n) != 0)
            n = -1;
        unload_api(&a);
    }
    return known = n;
}

void bk_cuda_visible_key(char *buf, size_t n)
{
    cuda_api a;
    int count = 0;
    size_t len = 0;
    if (n)
        buf[0] = '\0';
    if (!n || load_api(&a) != 0)
        return;
    if (a.count(&count) != 0)
        count = 0;
    for (int i = 0; i < count; i++) {
        char bus[64], why[160];
        if (bus_of(&a, i, bus, sizeof bus, why, sizeof why) != 0)
            snprintf(bus, sizeof bus, "?%d", i);
        int w = snprintf(buf + len, n - len, "%s%s", i ? "," : "", bus);
        if (w < 0 || (size_t)w >= n - len)
            break; /* cut: the buffer ends with what fitted */
        len += (size_t)w;
    }
    unload_api(&a);
}

bk_status bk_cuda_bus_id(int ordinal, char *buf, size_t n, bk_err *err)
{
    cuda_api a;
    char why[160];
    bk_status st = BK_OK;
    if (load_api(&a) != 0)
        return BK_FAIL(err, BK_ERR_UNSUPPORTED, "CUDA runtime not available: no bus id for "
                       "device %d", ordinal);
    const int r = bus_of(&a, ordinal, buf, n, why, sizeof why);
    if (r != 0)
        st = BK_FAIL(err, r == 1 ? BK_ERR_SYSTEM : BK_ERR_INTERNAL, "%s", why);
    unload_api(&a);
    return st;
}

bk_status bk_topo_probe_cuda(bk_topo_host *h, bk_err *err)
{
    (void)err;
    cuda_api a;
    int n = 0, ord_of[BK_TOPO_MAX_GPUS];
    if (load_api(&a) != 0) {
        bk_topo_note(h, "CUDA runtime not found: no peer-access data");
        return BK_OK;
    }
    int r = a.count(&n);
    if (r != 0) {
        bk_topo_note(h, "CUDA: no usable device (%s): no peer-access data", cerr(&a, r));
        goto out;
    }
    for (int g = 0; g < h->ngpus; g++)
        ord_of[g] = -1;
    for (int d = 0; d < n; d++) {
        char bus[32], why[160];
        if (bus_of(&a, d, bus, sizeof bus, why, sizeof why) != 0) {
            bk_topo_note(h, "CUDA: device %d: no bus id (%s)", d, why);
            continue;
        }
        for (int g = 0; g < h->ngpus; g++)
            if (!strcmp(h->gpus[g].bus_id, bus)) {
                h->gpus[g].cuda_index = d;
                ord_of[g] = d;
            }
    }
    for (int i = 0; i < h->ngpus; i++)
        for (int j = 0; j < h->ngpus; j++) {
            int acc = 0, rank = -1;
            if (i == j || ord_of[i] < 0 || ord_of[j] < 0) {
                h->p2p_access[i][j] = (int8_t)(i == j);
                h->p2p_rank[i][j] = -1;
                continue;
            }
            if (a.can_access(&acc, ord_of[i], ord_of[j]) != 0)
                acc = 0;
            if (acc && a.p2p_attr(&rank, P2P_ATTR_PERFORMANCE_RANK, ord_of[i], ord_of[j]) != 0)
                rank = -1;
            h->p2p_access[i][j] = (int8_t)(acc != 0);
            h->p2p_rank[i][j] = (int8_t)(rank > 127 ? 127 : rank);
        }
    h->p2p_known = h->ngpus > 0;
    h->seen |= BK_SEEN_CUDA;
    if (n < h->ngpus)
        bk_topo_note(h, "CUDA sees %d of %d GPUs (CUDA_VISIBLE_DEVICES?)", n, h->ngpus);
out:
    unload_api(&a);
    return BK_OK;
}
