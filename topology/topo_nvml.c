/* topo_nvml.c - NVLink, NVSwitch, UUIDs and names from NVML, loaded at run time
 * (dlopen libnvidia-ml.so.1), so the program runs and probes without a driver.
 * Every NVML call is checked; a missing library, symbol or driver becomes a
 * note on the host ("what could not be seen"), never a failure. */
#include "topology/topology.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* The few NVML types used, with their documented ABI (nvml.h is not needed). */
typedef int nvml_ret;
typedef struct nvml_device_st *nvml_device;
typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info;
enum { NVML_OK = 0, NVML_LINK_TYPE_SWITCH = 2, NVML_MAX_LINKS = 18 };
/* nvmlGpuTopologyLevel_t */
enum { TOPO_INTERNAL = 0, TOPO_SINGLE = 10, TOPO_MULTIPLE = 20, TOPO_HOSTBRIDGE = 30,
       TOPO_NODE = 40, TOPO_SYSTEM = 50 };

typedef struct {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*count)(unsigned *);
    nvml_ret (*by_index)(unsigned, nvml_device *);
    nvml_ret (*by_bus)(const char *, nvml_device *);
    nvml_ret (*pci)(nvml_device, nvml_pci_info *);
    nvml_ret (*uuid)(nvml_device, char *, unsigned);
    nvml_ret (*name)(nvml_device, char *, unsigned);
    nvml_ret (*link_state)(nvml_device, unsigned, int *);
    nvml_ret (*link_remote_pci)(nvml_device, unsigned, nvml_pci_info *);
    nvml_ret (*link_remote_type)(nvml_device, unsigned, int *); /* optional (R460+) */
    nvml_ret (*common_ancestor)(nvml_device, nvml_device, int *);
} nvml_api;

static const char *nerr(const nvml_api *a, nvml_ret r)
{
    const char *s = a->error_string ? a->error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

#define SYM(field, name, required)                                                                 \
    do {                                                                                           \
        *(void **)(&a->field) = dlsym(a->lib, name);                                               \
        if (!a->field && (required)) {                                                             \
            bk_topo_note(h, "NVML: symbol %s missing (driver too old?): no NVLink data", name);    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int load_api(nvml_api *a, bk_topo_host *h)
{
    const char *path = getenv("BK_NVML_LIBRARY"); /* another NVML (tests, odd installs) */
    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        /* not there (no driver: the usual case, said so), or there and not loadable (a wrong
         * BK_NVML_LIBRARY, a broken install: dlopen's reason, printable) */
        const char *why = dlerror();
        char said[160] = "";
        if (why && !strstr(why, "No such file or directory")) {
            snprintf(said, sizeof said, "%s", why);
            bk_text_clean(said);
        }
        if (said[0])
            bk_topo_note(h, "NVML: %s cannot be loaded (%s): no NVLink data", path, said);
        else
            bk_topo_note(h, "NVML: %s not found (no NVIDIA driver?): no NVLink data", path);
        return -1;
    }
    SYM(init, "nvmlInit_v2", 1);
    SYM(shutdown, "nvmlShutdown", 1);
    SYM(error_string, "nvmlErrorString", 0);
    SYM(count, "nvmlDeviceGetCount_v2", 1);
    SYM(by_index, "nvmlDeviceGetHandleByIndex_v2", 1);
    SYM(by_bus, "nvmlDeviceGetHandleByPciBusId_v2", 1);
    SYM(pci, "nvmlDeviceGetPciInfo_v3", 1);
    SYM(uuid, "nvmlDeviceGetUUID", 1);
    SYM(name, "nvmlDeviceGetName", 1);
    SYM(link_state, "nvmlDeviceGetNvLinkState", 1);
    SYM(link_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2", 1);
    SYM(link_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType", 0);
    SYM(common_ancestor, "nvmlDeviceGetTopologyCommonAncestor", 0);
    return 0;
}

static bk_link_class level_class(int level)
{
    switch (level) {
    case TOPO_INTERNAL:
    case TOPO_SINGLE: return BK_LINK_PIX;
    case TOPO_MULTIPLE: return BK_LINK_PXB;
    case TOPO_HOSTBRIDGE: return BK_LINK_PHB;
    case TOPO_NODE: return BK_LINK_NODE;
    default: return BK_LINK_SYS;
    }
}

/* GPUs NVML sees that hwloc did not (no PCI discovery in a container, say). */
static void add_missing_gpus(nvml_api *a, bk_topo_host *h, nvml_device *dev)
{
    unsigned n = 0;
    nvml_ret r = a->count(&n);
    if (r != NVML_OK) {
        bk_topo_note(h, "NVML: device count failed: %s", nerr(a, r));
        return;
    }
    int added = 0;
    for (unsigned i = 0; i < n && h->ngpus < BK_TOPO_MAX_GPUS; i++) {
        nvml_device d;
        nvml_pci_info pi;
        char bus[32];
        if (a->by_index(i, &d) != NVML_OK || a->pci(d, &pi) != NVML_OK ||
            bk_pci_bus_norm(pi.bus_id, bus, sizeof bus) != 0)
            continue;
        int known = 0;
        for (int g = 0; g < h->ngpus && !known; g++)
            known = !strcmp(h->gpus[g].bus_id, bus);
        if (known)
            continue;
        bk_topo_gpu *g = &h->gpus[h->ngpus];
        memset(g, 0, sizeof *g);
        bk_strlcpy(g->bus_id, bus, sizeof g->bus_id);
        g->numa = g->nic = g->cuda_index = -1;
        dev[h->ngpus++] = d;
        added++;
    }
    if (added) {
        bk_topo_note(h, "hwloc did not see %d GPU(s) NVML lists: their NUMA and NIC paths are "
                        "unknown", added);
        for (int i = 0; i < h->ngpus; i++)
            for (int j = 0; j < h->ngpus; j++) {
                int level = TOPO_SYSTEM;
                if (i == j) {
                    h->links[i][j].cls = BK_LINK_SELF;
                    continue;
                }
                if (h->links[i][j].cls != BK_LINK_NONE)
                    continue;
                /* a GPU hwloc saw that NVML has no handle for stays at SYS, not asked */
                if (dev[i] && dev[j] && a->common_ancestor &&
                    a->common_ancestor(dev[i], dev[j], &level) != NVML_OK)
                    level = TOPO_SYSTEM;
                h->links[i][j].cls = (uint8_t)level_class(level);
            }
    }
}

static void nvlinks(nvml_api *a, bk_topo_host *h, nvml_device *dev)
{
    int to_switch[BK_TOPO_MAX_GPUS] = { 0 };
    int direct[BK_TOPO_MAX_GPUS][BK_TOPO_MAX_GPUS];
    memset(direct, 0, sizeof direct);
    for (int i = 0; i < h->ngpus; i++) {
        if (!dev[i])
            continue;
        for (unsigned l = 0; l < NVML_MAX_LINKS; l++) {
            int on = 0, type = -1;
            nvml_pci_info pi;
            char bus[32];
            if (a->link_state(dev[i], l, &on) != NVML_OK || !on)
                continue; /* no such link, or down */
            if (a->link_remote_type && a->link_remote_type(dev[i], l, &type) == NVML_OK &&
                type == NVML_LINK_TYPE_SWITCH) {
                to_switch[i]++;
                continue;
            }
            if (a->link_remote_pci(dev[i], l, &pi) != NVML_OK ||
                bk_pci_bus_norm(pi.bus_id, bus, sizeof bus) != 0)
                continue;
            int j = 0;
            while (j < h->ngpus && strcmp(h->gpus[j].bus_id, bus))
                j++;
            if (j < h->ngpus)
                direct[i][j]++;
            else
                to_switch[i]++; /* the far end is no GPU of ours: an NVSwitch */
        }
        if (to_switch[i])
            h->nvswitch = 1;
    }
    for (int i = 0; i < h->ngpus; i++)
        for (int j = 0; j < h->ngpus; j++) {
            if (i == j)
                continue;
            int n = direct[i][j];
            if (to_switch[i] && to_switch[j])
                n += to_switch[i] < to_switch[j] ? to_switch[i] : to_switch[j];
            if (n > 0) {
                h->links[i][j].cls = BK_LINK_NV;
                h->links[i][j].nvlinks = (uint8_t)(n > 255 ? 255 : n);
            }
        }
}

bk_status bk_topo_probe_nvml(bk_topo_host *h, bk_err *err)
{
    (void)err;
    nvml_api a;
    nvml_device dev[BK_TOPO_MAX_GPUS] = { 0 };
    memset(&a, 0, sizeof a);
    if (load_api(&a, h) != 0)
        goto out;
    nvml_ret r = a.init();
    if (r != NVML_OK) {
        bk_topo_note(h, "NVML: init failed: %s (no NVLink data)", nerr(&a, r));
        goto out;
    }
    for (int i = 0; i < h->ngpus; i++) {
        r = a.by_bus(h->gpus[i].bus_id, &dev[i]);
        if (r != NVML_OK) {
            dev[i] = NULL;
            bk_topo_note(h, "NVML: GPU %s: %s", h->gpus[i].bus_id, nerr(&a, r));
        }
    }
    add_missing_gpus(&a, h, dev);
    for (int i = 0; i < h->ngpus; i++) {
        char buf[96];
        if (!dev[i])
            continue;
        if (a.uuid(dev[i], buf, sizeof buf) == NVML_OK)
            bk_strlcpy(h->gpus[i].uuid, buf, sizeof h->gpus[i].uuid);
        if (a.name(dev[i], buf, sizeof buf) == NVML_OK)
            bk_strlcpy(h->gpus[i].name, buf, sizeof h->gpus[i].name);
    }
    nvlinks(&a, h, dev);
    h->seen |= BK_SEEN_NVML;
    r = a.shutdown();
    if (r != NVML_OK)
        bk_topo_note(h, "NVML: shutdown failed: %s", nerr(&a, r));
out:
    if (a.lib)
        dlclose(a.lib);
    return BK_OK;
}
