/* topo_gather.c - the cluster topology over MPI: one probe per node, rank 0
 * assembles hosts (told apart by hostname + boot id) and where each rank sits. */
#include "topology/topology.h"

#include <hwloc.h>
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* What every rank reports about itself. */
typedef struct {
    char hostname[128];
    char boot_id[64];
    char bus_id[32];
    int cpu;   /* the CPU it runs on now, -1 unknown */
    int local; /* 1 for the rank that probed its node */
} rank_rec;

static bk_status mpi_fail(bk_err *err, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        bk_strlcpy(msg, "unknown MPI error", sizeof msg);
    return BK_FAIL(err, BK_ERR_SYSTEM, "%s: %s", what, msg);
}

#define MPI_TRY(call)                                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            st = mpi_fail(err, rc_, #call);                                                        \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

bk_status bk_topo_gpu_group(const void *comm, const char *key, int *group_rank,
                            int *group_size, int *node_size, bk_err *err)
{
    enum { STRIDE = BK_VISIBLE_KEY_MAX };
    bk_status st = BK_OK;
    MPI_Comm node = MPI_COMM_NULL;
    char mine[STRIDE], *keys = NULL;
    int rank, me, n;
    memset(mine, 0, sizeof mine);
    bk_strlcpy(mine, key, sizeof mine);
    MPI_TRY(MPI_Comm_rank(*(const MPI_Comm *)comm, &rank));
    MPI_TRY(MPI_Comm_split_type(*(const MPI_Comm *)comm, MPI_COMM_TYPE_SHARED, rank,
                                MPI_INFO_NULL, &node));
    MPI_TRY(MPI_Comm_rank(node, &me));
    MPI_TRY(MPI_Comm_size(node, &n));
    keys = malloc((size_t)n * STRIDE);
    int have = keys != NULL, all = 0; /* every rank of the node goes on, or none */
    MPI_TRY(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, node));
    if (!all) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "GPU groups: out of memory for %d keys on a rank", n);
        goto out;
    }
    MPI_TRY(MPI_Allgather(mine, STRIDE, MPI_CHAR, keys, STRIDE, MPI_CHAR, node));
    bk_bind_group(keys, STRIDE, n, me, group_rank, group_size);
    *node_size = n;
out:
    free(keys);
    if (node != MPI_COMM_NULL)
        MPI_Comm_free(&node);
    return st;
}

bk_status bk_topo_local_rank(const void *comm, int *local_rank, int *local_size, bk_err *err)
{
    int node_size = 0; /* one key for all: the group is the node */
    return bk_topo_gpu_group(comm, "", local_rank, local_size, &node_size, err);
}

/* NUMA index (into h->numa) whose cpus hold `cpu`, or -1. */
static int numa_of_cpu(const bk_topo_host *h, int cpu)
{
    int found = -1;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set || cpu < 0)
        goto out;
    for (int i = 0; i < h->nnuma && found < 0; i++)
        if (hwloc_bitmap_list_sscanf(set, bk_topo_numa_cpus(h, i)) == 0 &&
            hwloc_bitmap_isset(set, (unsigned)cpu))
            found = i;
out:
    hwloc_bitmap_free(set);
    return found;
}

/* Rank 0: hosts from the leaders' texts (or the snapshot), then each rank's place. */
static bk_status assemble(const bk_topo *snapshot, const rank_rec *recs, int size,
                          const char *texts, const int *lens, const int *displs, bk_topo **out,
                          bk_rank_place **places, bk_err *err)
{
    bk_status st = BK_OK;
    bk_topo *t = NULL;
    bk_rank_place *pl = calloc((size_t)size, sizeof *pl);
    if (!pl)
        return BK_FAIL(err, BK_ERR_SYSTEM, "gather: out of memory");
    if (snapshot) {
        BK_TRY(bk_topo_new(snapshot->nhosts, &t, err));
        memcpy(t->hosts, snapshot->hosts, (size_t)snapshot->nhosts * sizeof *t->hosts);
        bk_strlcpy(t->source, snapshot->source, sizeof t->source);
    } else {
        int leaders = 0;
        for (int r = 0; r < size; r++)
            leaders += lens[r] > 0;
        BK_TRY(bk_topo_new(leaders, &t, err));
        t->nhosts = 0;
        for (int r = 0; r < size; r++) {
            if (lens[r] <= 0)
                continue;
            char label[64], *text = malloc((size_t)lens[r] + 1);
            if (!text) {
                st = BK_FAIL(err, BK_ERR_SYSTEM, "gather: out of memory");
                goto out;
            }
            memcpy(text, texts + displs[r], (size_t)lens[r]);
            text[lens[r]] = '\0';
            snprintf(label, sizeof label, "probe of rank %d", r);
            bk_topo_host *h = &t->hosts[t->nhosts];
            st = bk_topo_host_parse(text, label, h, err);
            free(text);
            if (st != BK_OK)
                goto out;
            int dup = 0;
            for (int k = 0; k < t->nhosts && !dup; k++)
                dup = bk_topo_same_host(&t->hosts[k], h);
            if (!dup)
                t->nhosts++;
        }
        bk_strlcpy(t->source, "probe (gathered over MPI)", sizeof t->source);
    }
    for (int r = 0; r < size; r++) {
        const rank_rec *rc = &recs[r];
        /* the host of this hostname and boot; failing that, one of this hostname whose boot
         * the snapshot does not say (it was the first of either, wherever the exact one
         * stood) */
        int h = -1, any = -1;
        for (int k = 0; k < t->nhosts && h < 0; k++)
            if (!strcmp(t->hosts[k].hostname, rc->hostname)) {
                if (!strcmp(t->hosts[k].boot_id, rc->boot_id))
                    h = k;
                else if (!t->hosts[k].boot_id[0] && any < 0)
                    any = k;
            }
        if (h < 0)
            h = any;
        if (h < 0) {
            st = BK_FAIL(err, BK_ERR_INPUT, "rank %d runs on host %s (boot %s), which the %s does "
                         "not list", r, rc->hostname, rc->boot_id,
                         snapshot ? "snapshot" : "gathered topology");
            goto out;
        }
        pl[r].host = h;
        pl[r].gpu = -1;
        if (rc->bus_id[0]) {
            for (int g = 0; g < t->hosts[h].ngpus && pl[r].gpu < 0; g++)
                if (!strcmp(t->hosts[h].gpus[g].bus_id, rc->bus_id))
                    pl[r].gpu = g;
            if (pl[r].gpu < 0) {
                st = BK_FAIL(err, BK_ERR_INPUT, "rank %d is bound to GPU %s, which host %s does "
                             "not list", r, rc->bus_id, rc->hostname);
                goto out;
            }
        }
        pl[r].numa = numa_of_cpu(&t->hosts[h], rc->cpu);
    }
    free(bk_topo_dump(t)); /* digest */
    *out = t;
    *places = pl;
    t = NULL;
    pl = NULL;
out:
    bk_topo_free(t);
    free(pl);
    return st;
}

bk_status bk_topo_gather(const void *comm_ptr, const bk_topo *snapshot, const char *bus_id,
                         bk_topo **out, bk_rank_place **places, bk_err *err)
{
    bk_status st = BK_OK, local = BK_OK;
    MPI_Comm comm = *(const MPI_Comm *)comm_ptr;
    int rank = 0, size = 0, lrank = 0, lsize = 0, len = 0, worst = 0;
    char *text = NULL, *texts = NULL;
    int *lens = NULL, *displs = NULL;
    rank_rec me, *recs = NULL;
    bk_topo *probe = NULL;
    *out = NULL;
    *places = NULL;
    memset(&me, 0, sizeof me);
    MPI_TRY(MPI_Comm_rank(comm, &rank));
    MPI_TRY(MPI_Comm_size(comm, &size));
    /* rank 0's snapshot, if it has one, stands for every host: then no host probes (the
     * file is read where the run is started, not needed on every node) */
    int use_snapshot = rank == 0 && snapshot;
    MPI_TRY(MPI_Bcast(&use_snapshot, 1, MPI_INT, 0, comm));
    bk_host_identity(me.hostname, sizeof me.hostname, me.boot_id, sizeof me.boot_id);
    /* One prober per host, a host being a (hostname, boot id): not MPI's shared-memory
     * node, which can hold several hosts' worth of ranks (containers, UTS namespaces). */
    {
        char id[sizeof me.hostname + sizeof me.boot_id + 2];
        snprintf(id, sizeof id, "%s/%s", me.hostname, me.boot_id);
        int color = (int)(bk_fnv1a64(id, strlen(id)) & 0x7fffffff);
        MPI_Comm host = MPI_COMM_NULL;
        MPI_TRY(MPI_Comm_split(comm, color, rank, &host));
        int rc_r = MPI_Comm_rank(host, &lrank), rc_s = MPI_Comm_size(host, &lsize);
        MPI_Comm_free(&host);
        if (rc_r != MPI_SUCCESS || rc_s != MPI_SUCCESS) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "gather: cannot size the host communicator");
            goto out;
        }
    }
    bk_strlcpy(me.bus_id, bus_id ? bus_id : "", sizeof me.bus_id);
    me.cpu = sched_getcpu();
    me.local = lrank == 0;
    if (lrank == 0 && !use_snapshot) {
        local = bk_topo_probe(&probe, err);
        if (local == BK_OK) {
            text = bk_topo_host_dump(&probe->hosts[0]);
            if (!text)
                local = BK_FAIL(err, BK_ERR_INTERNAL, "gather: cannot encode this host");
            else
                len = (int)strlen(text);
        }
    }
    /* every rank learns whether some probe failed, so all return together */
    MPI_TRY(MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, comm));
    if (worst != BK_OK) {
        st = local != BK_OK ? local
                            : BK_FAIL(err, (bk_status)worst, "gather: the probe failed on another node");
        goto out;
    }
    /* rank 0 allocates; everyone learns whether that worked before sending */
    if (rank == 0) {
        recs = calloc((size_t)size, sizeof *recs);
        lens = calloc((size_t)size, sizeof *lens);
        displs = calloc((size_t)size, sizeof *displs);
        if (!recs || !lens || !displs)
            local = BK_FAIL(err, BK_ERR_SYSTEM, "gather: out of memory");
    }
    int ready = local;
    MPI_TRY(MPI_Bcast(&ready, 1, MPI_INT, 0, comm));
    if (ready != BK_OK) {
        st = rank == 0 ? local : BK_FAIL(err, (bk_status)ready, "gather: rank 0 ran out of memory");
        goto out;
    }
    MPI_TRY(MPI_Gather(&me, (int)sizeof me, MPI_BYTE, recs, (int)sizeof me, MPI_BYTE, 0, comm));
    MPI_TRY(MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, comm));
    int total = 0;
    for (int r = 0; rank == 0 && r < size; r++) {
        displs[r] = total;
        total += lens[r];
    }
    if (rank == 0 && !(texts = malloc((size_t)total + 1)))
        local = BK_FAIL(err, BK_ERR_SYSTEM, "gather: out of memory");
    ready = local;
    MPI_TRY(MPI_Bcast(&ready, 1, MPI_INT, 0, comm));
    if (ready != BK_OK) {
        st = rank == 0 ? local : BK_FAIL(err, (bk_status)ready, "gather: rank 0 ran out of memory");
        goto out;
    }
    MPI_TRY(MPI_Gatherv(text ? text : "", len, MPI_CHAR, texts, lens, displs, MPI_CHAR, 0, comm));
    if (rank == 0 && local == BK_OK)
        local = assemble(snapshot, recs, size, texts, lens, displs, out, places, err);
    int verdict = local;
    MPI_TRY(MPI_Bcast(&verdict, 1, MPI_INT, 0, comm));
    if (verdict != BK_OK)
        st = rank == 0 ? local : BK_FAIL(err, (bk_status)verdict, "gather: rank 0 could not "
                                         "assemble the topology (see its message)");
out:
    bk_topo_free(probe);
    free(text);
    free(texts);
    free(lens);
    free(displs);
    free(recs);
    return st;
}
