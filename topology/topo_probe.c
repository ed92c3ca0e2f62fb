/* topo_probe.c - the hwloc probe: packages, NUMA nodes, cores, PCI GPUs and NICs,
 * and the PCIe path class between devices (PIX, PXB, PHB, NODE, SYS). */
#include "topology/topology.h"

#include <errno.h>
#include <hwloc.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define PCI_VENDOR_NVIDIA 0x10de

void bk_host_identity(char *hostname, size_t hn, char *boot_id, size_t bn)
{
    if (gethostname(hostname, hn) != 0)
        bk_strlcpy(hostname, "unknown", hn);
    hostname[hn - 1] = '\0';
    boot_id[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(boot_id, (int)bn, f))
            boot_id[strcspn(boot_id, "\r\n")] = '\0';
        fclose(f);
    }
}

static int is_gpu(hwloc_obj_t o)
{
    unsigned cls = o->attr->pcidev.class_id;
    return o->attr->pcidev.vendor_id == PCI_VENDOR_NVIDIA && (cls == 0x0300 || cls == 0x0302);
}

static int is_nic(hwloc_obj_t o)
{
    unsigned cls = o->attr->pcidev.class_id;
    return cls == 0x0200 || cls == 0x0207;
}

/* 1 to max hex digits at *p into *v, *p past them; -1 when there are none or more. */
static int hex_run(const char **p, size_t max, unsigned long *v)
{
    const size_t k = strspn(*p, "0123456789abcdefABCDEF");
    if (k == 0 || k > max)
        return -1;
    *v = strtoul(*p, NULL, 16);
    *p += k;
    return 0;
}

int bk_pci_bus_norm(const char *in, char *out, size_t n)
{
    unsigned long d, b, dev, f;
    const char *p = in;
    if (hex_run(&p, 8, &d) || *p++ != ':' || hex_run(&p, 2, &b) || *p++ != ':' ||
        hex_run(&p, 2, &dev) || *p++ != '.' || hex_run(&p, 1, &f) || *p || dev > 0x1f || f > 7)
        return -1;
    snprintf(out, n, "%04lx:%02lx:%02lx.%lx", d, b, dev, f);
    return 0;
}

static void bus_id(hwloc_obj_t o, char *buf, size_t n)
{
    snprintf(buf, n, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus,
             o->attr->pcidev.dev, o->attr->pcidev.func);
}

/* Index in h->numa of the single NUMA node near an I/O object, or -1. */
static int numa_near(hwloc_topology_t topo, hwloc_obj_t o, const bk_topo_host *h)
{
    hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(topo, o);
    if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) != 1)
        return -1;
    int os = hwloc_bitmap_first(a->nodeset);
    for (int i = 0; i < h->nnuma; i++)
        if (h->numa[i].os_index == os)
            return i;
    return -1;
}

static int is_pci_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

/* The path class between two PCI devices, the way nvidia-smi and NCCL name it:
 * a PCIe switch (upstream port and its downstream ports) counts as one bridge. */
static bk_link_class pci_class(hwloc_obj_t a, hwloc_obj_t b)
{
    hwloc_obj_t up[128];
    int n = 0;
    for (hwloc_obj_t x = a; x && n < 128; x = x->parent)
        up[n++] = x;
    hwloc_obj_t common = NULL;
    int db = 0; /* PCI bridges from b up to the common ancestor */
    for (hwloc_obj_t y = b; y && !common; y = y->parent) {
        for (int i = 0; i < n; i++)
            if (up[i] == y) {
                common = y;
                break;
            }
        if (!common && y != b && is_pci_bridge(y))
            db++;
    }
    if (!common)
        return BK_LINK_SYS;
    int da = 0;
    for (hwloc_obj_t x = a->parent; x && x != common; x = x->parent)
        da += is_pci_bridge(x);
    if (is_pci_bridge(common))
        return (da <= 1 && db <= 1) ? BK_LINK_PIX : BK_LINK_PXB;
    if (common->type == HWLOC_OBJ_BRIDGE)
        return BK_LINK_PHB;
    if (common->nodeset && hwloc_bitmap_weight(common->nodeset) <= 1)
        return BK_LINK_NODE;
    return BK_LINK_SYS;
}

static void nic_name(hwloc_obj_t pci, bk_topo_nic *k)
{
    int ib = pci->attr->pcidev.class_id == 0x0207;
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name)
            continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && ib)
            bk_strlcpy(k->name, c->name, sizeof k->name);
        else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && !k->name[0])
            bk_strlcpy(k->name, c->name, sizeof k->name);
    }
    if (!k->name[0]) {
        char bus[sizeof k->bus_id];
        memcpy(bus, k->bus_id, sizeof bus);
        snprintf(k->name, sizeof k->name, "nic-%s", bus);
    }
    bk_strlcpy(k->kind, ib ? "ib" : "eth", sizeof k->kind);
}

bk_status bk_topo_probe_hwloc(void *topo_ptr, bk_topo_host *h, bk_err *err)
{
    hwloc_topology_t topo = topo_ptr;
    hwloc_obj_t gpu_obj[BK_TOPO_MAX_GPUS], nic_obj[BK_TOPO_MAX_NICS];
    hwloc_obj_t o;
    int npci = 0, gpus_left = 0, nics_left = 0;
    h->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    h->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    h->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    if (h->packages < 0 || h->cores < 0 || h->pus < 0)
        return BK_FAIL(err, BK_ERR_INTERNAL, "hwloc: packages, cores or PUs are not at one depth");
    h->nnuma = 0;
    h->cpu_text_used = 0;
    for (o = NULL; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o));) {
        if (h->nnuma == BK_TOPO_MAX_NUMA) {
            bk_topo_note(h, "hwloc: more than %d NUMA nodes; the rest are left out",
                         BK_TOPO_MAX_NUMA);
            break;
        }
        bk_topo_numa *nu = &h->numa[h->nnuma++];
        nu->os_index = (int)o->os_index;
        nu->memory_bytes = o->attr ? o->attr->numanode.local_memory : 0;
        if (!o->cpuset)
            continue;
        /* the whole list, whatever its length (a cut one was written, then refused on load) */
        char *list = NULL;
        if (hwloc_bitmap_list_asprintf(&list, o->cpuset) < 0 || !list)
            return BK_FAIL(err, BK_ERR_INTERNAL, "hwloc: cannot print the cpuset of NUMA %u",
                           o->os_index);
        const int full = bk_topo_numa_set_cpus(h, h->nnuma - 1, list) != 0;
        const size_t len = strlen(list);
        free(list);
        if (full)
            return BK_FAIL(err, BK_ERR_UNSUPPORTED, "hwloc: the CPU list of NUMA %u (%zu "
                           "characters) does not fit in the %d bytes a host's NUMA CPU lists "
                           "share (BK_TOPO_CPU_TEXT)", o->os_index, len, BK_TOPO_CPU_TEXT);
    }
    h->ngpus = h->nnics = 0;
    for (o = NULL; (o = hwloc_get_next_pcidev(topo, o));) {
        npci++;
        if (is_gpu(o)) {
            if (h->ngpus == BK_TOPO_MAX_GPUS) {
                gpus_left++;
                continue;
            }
            bk_topo_gpu *g = &h->gpus[h->ngpus];
            memset(g, 0, sizeof *g);
            bus_id(o, g->bus_id, sizeof g->bus_id);
            const char *name = hwloc_obj_get_info_by_name(o, "PCIDevice");
            snprintf(g->name, sizeof g->name, "%s", name ? name : "NVIDIA GPU");
            g->numa = numa_near(topo, o, h);
            g->nic = -1;
            g->cuda_index = -1;
            gpu_obj[h->ngpus++] = o;
        } else if (is_nic(o) && h->nnics == BK_TOPO_MAX_NICS) {
            nics_left++;
        } else if (is_nic(o)) {
            bk_topo_nic *k = &h->nics[h->nnics];
            memset(k, 0, sizeof *k);
            bus_id(o, k->bus_id, sizeof k->bus_id);
            nic_name(o, k);
            k->numa = numa_near(topo, o, h);
            nic_obj[h->nnics++] = o;
        }
    }
    /* one note each, however many were left out */
    if (gpus_left)
        bk_topo_note(h, "%d GPUs; the %d past the first %d are left out", BK_TOPO_MAX_GPUS +
                     gpus_left, gpus_left, BK_TOPO_MAX_GPUS);
    if (nics_left)
        bk_topo_note(h, "%d NICs; the %d past the first %d are left out", BK_TOPO_MAX_NICS +
                     nics_left, nics_left, BK_TOPO_MAX_NICS);
    h->seen |= BK_SEEN_HWLOC;
    if (npci > 0)
        h->seen |= BK_SEEN_PCI;
    else
        bk_topo_note(h, "hwloc saw no PCI device (no I/O discovery here): no GPU or NIC paths");
    for (int i = 0; i < h->ngpus; i++)
        for (int j = 0; j < h->ngpus; j++) {
            h->links[i][j].cls = (uint8_t)(i == j ? BK_LINK_SELF : pci_class(gpu_obj[i], gpu_obj[j]));
            h->links[i][j].nvlinks = 0;
        }
    for (int i = 0; i < h->ngpus; i++)
        for (int k = 0; k < h->nnics; k++)
            h->gpu_nic[i][k] = (uint8_t)pci_class(gpu_obj[i], nic_obj[k]);
    bk_topo_host_nearest_nics(h);
    return BK_OK;
}

/* Load an hwloc topology of the given source and run the hwloc pass on it. */
static bk_status probe_source(const char *xml, const char *synthetic, bk_topo **out, bk_err *err)
{
    bk_status st = BK_OK;
    hwloc_topology_t topo = NULL;
    bk_topo *t = NULL;
    *out = NULL;
    if (hwloc_topology_init(&topo) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "hwloc: topology init failed");
    if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "hwloc: cannot keep I/O objects");
        goto out;
    }
    if (xml && hwloc_topology_set_xml(topo, xml) != 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: not a readable hwloc XML topology", xml);
        goto out;
    }
    if (synthetic && hwloc_topology_set_synthetic(topo, synthetic) != 0) {
        st = BK_FAIL(err, BK_ERR_INPUT, "hwloc synthetic topology \"%s\" is invalid", synthetic);
        goto out;
    }
    if (hwloc_topology_load(topo) != 0) {
        st = BK_FAIL(err, xml || synthetic ? BK_ERR_INPUT : BK_ERR_SYSTEM, "%s: hwloc load failed",
                     xml ? xml : synthetic ? synthetic : "this machine");
        goto out;
    }
    BK_TRY(bk_topo_new(1, &t, err));
    bk_topo_host *h = &t->hosts[0];
    if (xml || synthetic) {
        const char *hn = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "HostName");
        bk_strlcpy(h->hostname, hn ? hn : (xml ? "xml" : "synthetic"), sizeof h->hostname);
        bk_strlcpy(t->source, xml ? xml : synthetic, sizeof t->source);
    } else {
        bk_host_identity(h->hostname, sizeof h->hostname, h->boot_id, sizeof h->boot_id);
        bk_strlcpy(t->source, "probe", sizeof t->source);
    }
    BK_TRY(bk_topo_probe_hwloc(topo, h, err));
    *out = t; /* its digest is set by the callers' dump, once the topology is whole */
    t = NULL;
out:
    bk_topo_free(t);
    if (topo)
        hwloc_topology_destroy(topo);
    return st;
}

/* An hwloc XML file or a synthetic description comes from outside, and hwloc's importer can
 * crash on a malformed one (Debian 12's hwloc 2.9 dereferences the missing complete_cpuset
 * of an object that has a cpuset; hwloc rejects such files from its pull request 783 on).
 * So the import runs in a child process, which sends the host back as snapshot JSON through
 * a pipe ('O' then the text, or 'E', the status as 4 bytes and the message); a child that
 * crashes, is killed or answers nothing whole is an error naming the file, and bracket goes
 * on. The child never returns: it ends with _exit, running none of the parent's exit work. */
#define ISOLATED_S 60 /* how long an import may take (a valid one takes milliseconds) */

static void child_answer(int fd, const char *xml, const char *synthetic)
{
    /* a crash ends this process, whatever handler the parent had (a test framework's
     * would carry on running the parent's work in it) */
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL);
    bk_topo *t = NULL;
    bk_err e = { 0 };
    char *json = NULL;
    bk_status st = probe_source(xml, synthetic, &t, &e);
    if (st == BK_OK && !(json = bk_topo_dump(t)))
        st = BK_FAIL(&e, BK_ERR_SYSTEM, "out of memory");
    char head[5] = { 'O', 0, 0, 0, 0 };
    const char *body = json;
    size_t len = json ? strlen(json) : 0;
    if (st != BK_OK) {
        head[0] = 'E';
        const int32_t code = (int32_t)st;
        memcpy(head + 1, &code, 4);
        body = e.msg;
        len = strlen(e.msg);
    }
    int ok = write(fd, head, st == BK_OK ? 1 : 5) == (st == BK_OK ? 1 : 5);
    for (size_t at = 0; ok && at < len;) {
        ssize_t n = write(fd, body + at, len - at);
        if (n <= 0 && errno != EINTR)
            ok = 0;
        else if (n > 0)
            at += (size_t)n;
    }
    _exit(ok ? 0 : 1);
}

static bk_status probe_isolated(const char *xml, const char *synthetic, bk_topo **out,
                                bk_err *err)
{
    const char *what = xml ? xml : synthetic;
    *out = NULL;
    /* a missing file said as such (hwloc only says it cannot load), a folder or a device
     * (/dev/zero: read without end until the 60 s ran out) refused before hwloc opens it; a
     * pipe is taken (-x <(ssh host lstopo --of xml)) */
    struct stat sb;
    if (xml && stat(xml, &sb) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", xml, strerror(errno));
    if (xml && !S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot read: %s", xml,
                       S_ISDIR(sb.st_mode) ? strerror(EISDIR) : "not a regular file or a pipe");
    int fd[2];
    if (pipe(fd) != 0)
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: pipe: %s", what, strerror(errno));
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: fork: %s", what, strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        child_answer(fd[1], xml, synthetic);
    }
    close(fd[1]);
    bk_status st = BK_OK;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int timed_out = 0;
    const uint64_t deadline = bk_now_ns() + (uint64_t)ISOLATED_S * 1000000000ull;
    for (;;) {
        struct pollfd p = { .fd = fd[0], .events = POLLIN };
        const uint64_t now = bk_now_ns();
        if (now >= deadline) {
            timed_out = 1;
            break;
        }
        const int r = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue; /* the deadline is checked above */
        if (len + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = 2 * cap + 8192);
            if (!nb) {
                st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory", what);
                break;
            }
            buf = nb;
        }
        const ssize_t n = read(fd[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the end, or an error: the child's status says which */
        len += (size_t)n;
    }
    close(fd[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
        ;
    if (st != BK_OK) {
        free(buf);
        return st;
    }
    if (timed_out) {
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: hwloc did not finish importing it in %d s",
                     what, ISOLATED_S);
    } else if (WIFSIGNALED(wst) || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0 || len < 1 ||
               (buf[0] != 'O' && (buf[0] != 'E' || len < 5))) {
        char how[64];
        if (WIFSIGNALED(wst))
            snprintf(how, sizeof how, "signal %d (%s)", WTERMSIG(wst), strsignal(WTERMSIG(wst)));
        else
            snprintf(how, sizeof how, "status %d", WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
        st = BK_FAIL(err, BK_ERR_INPUT, "%s: hwloc failed while importing it (its process "
                     "ended with %s): not a whole hwloc %s", what, how,
                     xml ? "XML export (lstopo --of xml writes one)" : "synthetic description");
    } else if (buf[0] == 'E') {
        int32_t code;
        memcpy(&code, buf + 1, 4);
        buf[len] = '\0';
        st = BK_FAIL(err, (bk_status)code, "%s", buf + 5);
    } else {
        buf[len] = '\0';
        bk_topo *t = NULL;
        st = bk_topo_parse(buf + 1, what, &t, err); /* sets source (what) and the digest */
        if (st == BK_OK)
            *out = t;
    }
    free(buf);
    return st;
}

bk_status bk_topo_probe_xml(const char *xml_path, bk_topo **out, bk_err *err)
{
    return probe_isolated(xml_path, NULL, out, err);
}

bk_status bk_topo_probe_synthetic(const char *desc, bk_topo **out, bk_err *err)
{
    return probe_isolated(NULL, desc, out, err);
}

bk_status bk_topo_probe(bk_topo **out, bk_err *err)
{
    bk_status st = BK_OK;
    bk_topo *t = NULL;
    BK_TRY(probe_source(NULL, NULL, &t, err));
    BK_TRY(bk_topo_probe_nvml(&t->hosts[0], err));
    BK_TRY(bk_topo_probe_cuda(&t->hosts[0], err));
    free(bk_topo_dump(t)); /* sets the digest */
    *out = t;
    t = NULL;
out:
    bk_topo_free(t);
    return st;
}
