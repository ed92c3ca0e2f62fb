/* topo_print.c - `bracket topo`: the GPU matrix with NIC columns, CPU and NUMA
 * affinity and a legend, laid out like `nvidia-smi topo -m`. */
#include "topology/topology.h"

#include <stdio.h>
#include <string.h>

static void seen_words(unsigned seen, char *buf, size_t n)
{
    static const char *const names[] = { "hwloc", "pci", "nvml", "cuda" };
    size_t off = 0;
    buf[0] = '\0';
    for (int b = 0; b < 4 && off < n; b++)
        if (seen & (1u << b))
            off += (size_t)snprintf(buf + off, n - off, "%s%s", off ? " " : "", names[b]);
    if (!buf[0])
        snprintf(buf, n, "nothing");
}

static void print_host(const bk_topo_host *h, FILE *f)
{
    char buf[64];
    seen_words(h->seen, buf, sizeof buf);
    fprintf(f, "host %s%s%.8s: %d package(s), %d cores, %d PUs, %d NUMA node(s), %d GPU(s), "
               "%d NIC(s)%s; seen: %s\n",
            h->hostname, h->boot_id[0] ? " boot " : "", h->boot_id, h->packages, h->cores, h->pus,
            h->nnuma, h->ngpus, h->nnics, h->nvswitch ? ", NVSwitch" : "", buf);
    if (h->ngpus > 0) {
        fprintf(f, "%-7s", "");
        for (int j = 0; j < h->ngpus; j++)
            fprintf(f, " %-5s", (snprintf(buf, sizeof buf, "GPU%d", j), buf));
        for (int k = 0; k < h->nnics; k++)
            fprintf(f, " %-5s", (snprintf(buf, sizeof buf, "NIC%d", k), buf));
        fprintf(f, " %-16s %s\n", "CPU Affinity", "NUMA Affinity");
        for (int i = 0; i < h->ngpus; i++) {
            fprintf(f, "%-7s", (snprintf(buf, sizeof buf, "GPU%d", i), buf));
            for (int j = 0; j < h->ngpus; j++)
                fprintf(f, " %-5s", bk_link_str(h->links[i][j], buf, sizeof buf));
            for (int k = 0; k < h->nnics; k++) {
                bk_link l = { h->gpu_nic[i][k], 0 };
                fprintf(f, " %-5s", bk_link_str(l, buf, sizeof buf));
            }
            int nu = h->gpus[i].numa;
            if (nu >= 0)
                fprintf(f, " %-16s %d\n", bk_topo_numa_cpus(h, nu), h->numa[nu].os_index);
            else
                fprintf(f, " %-16s %s\n", "N/A", "N/A");
        }
        fprintf(f, "\n");
        for (int i = 0; i < h->ngpus; i++) {
            const bk_topo_gpu *g = &h->gpus[i];
            fprintf(f, "  GPU%d: %s  %s%s%s", i, g->bus_id, g->name, g->uuid[0] ? "  " : "",
                    g->uuid);
            if (g->cuda_index >= 0)
                fprintf(f, "  cuda %d", g->cuda_index);
            if (g->nic >= 0)
                fprintf(f, "  nearest NIC%d (%s)", g->nic,
                        bk_link_class_name((bk_link_class)h->gpu_nic[i][g->nic]));
            fprintf(f, "\n");
        }
    }
    for (int k = 0; k < h->nnics; k++)
        fprintf(f, "  NIC%d: %s (%s, %s, NUMA %s)\n", k, h->nics[k].name, h->nics[k].kind,
                h->nics[k].bus_id,
                h->nics[k].numa >= 0 ? (snprintf(buf, sizeof buf, "%d",
                                                  h->numa[h->nics[k].numa].os_index), buf)
                                     : "N/A");
    for (int i = 0; i < h->nnuma; i++)
        fprintf(f, "  NUMA %d: cpus %s, %.1f GiB\n", h->numa[i].os_index, bk_topo_numa_cpus(h, i),
                (double)h->numa[i].memory_bytes / (1024.0 * 1024.0 * 1024.0));
    for (int i = 0; i < h->nnotes; i++)
        fprintf(f, "  note: %s\n", h->notes[i]);
}

/* 1 when two hosts have the same layout (GPUs, NICs, NUMA, every link class). */
static int same_layout(const bk_topo_host *a, const bk_topo_host *b)
{
    if (a->ngpus != b->ngpus || a->nnics != b->nnics || a->nnuma != b->nnuma ||
        a->nvswitch != b->nvswitch || a->packages != b->packages || a->cores != b->cores)
        return 0;
    for (int i = 0; i < a->ngpus; i++) {
        if (strcmp(a->gpus[i].bus_id, b->gpus[i].bus_id) || a->gpus[i].numa != b->gpus[i].numa ||
            strcmp(a->gpus[i].name, b->gpus[i].name) || a->gpus[i].nic != b->gpus[i].nic ||
            memcmp(a->links[i], b->links[i], (size_t)a->ngpus * sizeof(bk_link)) ||
            memcmp(a->gpu_nic[i], b->gpu_nic[i], (size_t)a->nnics))
            return 0;
    }
    for (int k = 0; k < a->nnics; k++)
        if (strcmp(a->nics[k].name, b->nics[k].name) || strcmp(a->nics[k].kind, b->nics[k].kind))
            return 0;
    for (int n = 0; n < a->nnuma; n++)
        if (strcmp(bk_topo_numa_cpus(a, n), bk_topo_numa_cpus(b, n)))
            return 0;
    return 1;
}

void bk_topo_print(const bk_topo *t, void *file)
{
    FILE *f = file;
    fprintf(f, "topology %s (%d host(s), %d GPU(s))%s%s\n\n", t->source, t->nhosts,
            bk_topo_ngpus(t), t->digest[0] ? " digest " : "", t->digest);
    for (int i = 0; i < t->nhosts; i++) {
        const bk_topo_host *h = &t->hosts[i];
        int j = 0;
        while (j < i && !same_layout(&t->hosts[j], h))
            j++;
        if (j < i) { /* a cluster of identical nodes prints one matrix */
            fprintf(f, "host %s%s%.8s: same layout as %s\n", h->hostname,
                    h->boot_id[0] ? " boot " : "", h->boot_id, t->hosts[j].hostname);
            for (int k = 0; k < h->nnotes; k++)
                fprintf(f, "  note: %s\n", h->notes[k]);
            continue;
        }
        print_host(h, f);
        fprintf(f, "\n");
    }
    fprintf(f, "Legend:\n\n"
               "  X    = Self\n"
               "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
               "nodes (e.g., QPI/UPI)\n"
               "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
               "Bridges within a NUMA node\n"
               "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the "
               "CPU)\n"
               "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
               "Host Bridge)\n"
               "  PIX  = Connection traversing at most a single PCIe bridge\n"
               "  NV#  = Connection traversing a bonded set of # NVLinks\n"
               "  NET  = Devices on different hosts (the network)\n");
}
