/* run_setup.c - rank 0's set-up for `bracket run`: the plan checked, then lanes, transport,
 * run id, output folder and the coordinator's endpoints, before any arm starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/catalog.h"
#include "runner/cli.h"
#include "runner/digest.h"
#include "runner/memory.h"
#include "runner/orchestrate.h"
#include "runner/outdir.h"
#include "runner/run_setup.h"
#include "runner/transport.h"
#include "topology/topology.h"

/* The folders of --out that mkdir_p made: path[0..len[k]) is the k-th, each under the one
 * before it ("a/./b" and "a/b/.." name folders it did not make: their prefixes are kept, not
 * the path cut at its slashes). */
typedef struct made_dirs {
    char path[512];
    int n;
    size_t len[256]; /* a path of 511 bytes has at most 256 components */
} made_dirs;

/* The output folder and any folder above it that is missing; *made: the ones it made, so
 * that a run refused before its first record takes them back (unmake_dirs). */
static bk_status mkdir_p(const char *path, made_dirs *made, bk_err *err)
{
    char *tmp = made->path;
    struct stat sb;
    made->n = 0;
    made->path[0] = '\0';
    if (!path[0])
        return BK_FAIL(err, BK_ERR_INPUT, "--out: an empty path; name the output folder");
    if (bk_strlcpy(tmp, path, sizeof made->path) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "--out: path too long (%zu bytes at most)",
                       sizeof made->path - 1);
    for (char *p = tmp + 1;; p++) {
        if (*p && *p != '/')
            continue;
        const char end = *p;
        *p = '\0';
        if (mkdir(tmp, 0755) == 0) {
            if (made->n < (int)(sizeof made->len / sizeof made->len[0]))
                made->len[made->n++] = (size_t)(p - tmp);
        } else if (errno != EEXIST)
            return BK_FAIL(err, BK_ERR_INPUT, "cannot create output folder %s: %s", tmp,
                           strerror(errno));
        *p = end;
        if (!end)
            break;
    }
    if (stat(tmp, &sb) != 0) {
        int e = errno;
        if (lstat(tmp, &sb) == 0 && S_ISLNK(sb.st_mode))
            return BK_FAIL(err, BK_ERR_INPUT, "--out: %s is a symbolic link to a folder that "
                           "does not exist (%s)", tmp, strerror(e));
        return BK_FAIL(err, BK_ERR_INPUT, "--out: %s: %s", tmp, strerror(e));
    }
    if (!S_ISDIR(sb.st_mode))
        return BK_FAIL(err, BK_ERR_INPUT, "--out: %s exists and is not a directory", tmp);
    if (access(tmp, W_OK | X_OK) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "output folder %s is not writable: %s", tmp,
                       strerror(errno));
    return BK_OK;
}

/* Take back the folders mkdir_p made, the deepest first, each only when empty. */
static void unmake_dirs(made_dirs *made)
{
    for (int k = made->n - 1; k >= 0; k--) {
        made->path[made->len[k]] = '\0';
        if (rmdir(made->path) != 0)
            return;
    }
    made->n = 0;
}

static void make_run_id(const bk_plan *p, char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    unsigned rnd = (unsigned)(bk_now_ns() ^ ((uint64_t)getpid() << 16));
    rnd = rnd * 2654435761u;
    char name[48];
    bk_strlcpy(name, p->name, sizeof name);
    snprintf(out, len, "%04d%02d%02dT%02d%02d%02dZ-%s-%06x", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, name, rnd & 0xFFFFFF);
}

/* 1 when variant `ref` serves some shape of the plan with a variant that needs peer access
 * (CUDA IPC): the engine would call it on the lane whatever the lane can do. */
static int serves_with_p2p(const bk_plan *p, const bk_variant_ref *ref, bk_backend backend)
{
    char why[256];
    for (int i = 0; i < p->workload.nshapes; i++) {
        const bk_variant *with = bk_catalog_served_by(p, ref, i, backend, 1, why, sizeof why);
        if (with && with != bk_catalog_served_by(p, ref, i, backend, 0, why, sizeof why))
            return 1;
    }
    return 0;
}

/* A variant that needs peer access on a lane whose GPUs the topology KNOWS cannot reach each
 * other (cudaDeviceCanAccessPeer 0 at probe time: PCIe across sockets, P2P off in the BIOS or
 * IOMMU, ...) would fail in its engine after B had run (NO_DECISION): refused here, before
 * any engine starts. Unknown access (no CUDA at probe time, GPUs the prober could not see) is
 * left to the engines, which report it. */
static bk_status check_lane_p2p(const bk_run *run, const bk_topo *topo,
                                const bk_rank_place *places, bk_err *err)
{
    const bk_plan *p = &run->plan;
    if (run->backend != BK_BACKEND_CUDA || !topo || !places)
        return BK_OK;
    const int inc = serves_with_p2p(p, &p->incumbent, run->backend);
    const int cand = serves_with_p2p(p, &p->candidate, run->backend);
    for (int k = 0; k < 2; k++) {
        const int *lane = k ? run->candidate : run->baseline;
        int a = -1, b = -1;
        char why[BK_WHY_LEN];
        if (!(inc || (k && cand)) || bk_lane_p2p_ok(topo, places, lane, run->lane_size, &a, &b,
                                                    why, sizeof why))
            continue;
        return BK_FAIL(err, BK_ERR_UNSUPPORTED,
                       "%s: the %s lane cannot use %s %s, which needs CUDA peer access: %s. "
                       "Use a lane whose GPUs reach each other (nvidia-smi topo -p2p r), or a "
                       "candidate without peer memory", p->path, k ? "candidate" : "baseline",
                       inc ? "the incumbent" : "the candidate",
                       inc ? p->incumbent.name : p->candidate.name, why);
    }
    return BK_OK;
}

/* Where a lane's members may be. Peer memory is one host's: the cpu engines of a lane share
 * POSIX memory, and a cuda variant that needs CUDA peer access maps its peers' memory, so
 * such a lane stays on one host. A cuda lane whose variants need no peer memory (the NCCL
 * incumbent, the MoE variants) may span hosts: NCCL joins them over the network, and the
 * lane barrier is an NCCL allreduce there (bk_cuda_comm_barrier). A host is what the
 * topology tells apart (hostname + boot id, places[].host), not the hostname alone: two
 * containers or cloned nodes with one hostname are two hosts (their engines could neither
 * share memory nor meet on an ipc:// endpoint). *remote: 1 when a member of either lane is
 * on another host than rank 0 (the coordinator is then reached over tcp with CURVE); *span:
 * 1 when a lane spans hosts. */
static bk_status lanes_hosts(const bk_run *run, const bk_rank_place *places, int *remote,
                             int *span, bk_err *err)
{
    const bk_plan *p = &run->plan;
    const int L = run->lane_size;
    const int cuda = run->backend == BK_BACKEND_CUDA;
    const bk_variant_ref *needs = NULL; /* a variant that would map peer memory */
    if (cuda && serves_with_p2p(p, &p->incumbent, run->backend))
        needs = &p->incumbent;
    else if (cuda && serves_with_p2p(p, &p->candidate, run->backend))
        needs = &p->candidate;
    *remote = *span = 0;
    for (int k = 0; k < 2; k++) {
        const int *lane = k ? run->candidate : run->baseline;
        int a = -1, b = -1;
        const int spans = !bk_lane_one_host(places, lane, L, &a, &b);
        if (spans && (!cuda || needs)) {
            char why[BK_WHY_LEN];
            if (cuda)
                snprintf(why, sizeof why, "the %s %s needs CUDA peer memory, which is one "
                         "host's", needs == &p->incumbent ? "incumbent" : "candidate",
                         needs->name);
            else
                bk_strlcpy(why, "the cpu engines of a lane share memory, which is one host's",
                           sizeof why);
            return BK_FAIL(err, BK_ERR_UNSUPPORTED,
                           "the %s lane spans hosts (MPI rank %d on %s, rank %d on %s%s): %s, "
                           "so place each lane's %d ranks on one host (e.g. srun "
                           "--ntasks-per-node=%d)", k ? "candidate" : "baseline", a,
                           run->hosts[a], b, run->hosts[b],
                           strcmp(run->hosts[a], run->hosts[b]) ? ""
                                                                : ", another host of that name",
                           why, L, L);
        }
        *span |= spans;
        for (int i = 0; i < L; i++)
            if (places[lane[i]].host != places[0].host)
                *remote = 1;
    }
    return BK_OK;
}

/* Lanes from the gathered topology (topology/topology.h): a baseline lane and a
 * disjoint candidate lane of equal signature, or both the same ranks under
 * lanes.policy shared, on hosts as lanes_hosts allows; lanes on another host than rank 0
 * meet it over tcp with CURVE (*remote). */
bk_status bk__pick_lanes(bk_run *run, const bk_topo *topo, const bk_rank_place *places,
                         int *remote, bk_err *err)
{
    const bk_plan *p = &run->plan;
    int L = p->arena.tp * p->arena.ep;
    run->lane_size = L;
    if (L > BK_LANE_MAX)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: arena.tp x arena.ep = %d exceeds %d ranks a lane",
                       p->path, L, BK_LANE_MAX);
    int shared = p->lane_policy == BK_LANES_SHARED;
    int need = shared ? L : 2 * L;
    if (run->world_size < need)
        return BK_FAIL(err, BK_ERR_INPUT,
                       "%s: lanes.policy %s with tp %d x ep %d needs %d ranks, the job has %d "
                       "(mpirun -np %d or srun -n %d%s)", p->path, shared ? "shared" : "disjoint",
                       p->arena.tp, p->arena.ep, need, run->world_size, need, need,
                       shared ? "" : ", or lanes.policy=shared for a one-GPU rehearsal");
    bk_lane_pick *pick = calloc(1, sizeof *pick);
    if (!pick)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    bk_status st = bk_lanes_choose(topo, L, run->world_size, places, p->lane_policy, pick, err);
    if (st != BK_OK) {
        free(pick);
        return st;
    }
    for (int i = 0; i < L; i++) {
        run->baseline[i] = pick->baseline[i];
        run->candidate[i] = pick->candidate[i];
    }
    run->shared_lanes = pick->shared;
    bk_strlcpy(run->lane_signature, pick->baseline_sig, sizeof run->lane_signature);
    bk_strlcpy(run->lane_note, pick->shared
                   ? "shared lanes: B and C ran on the same ranks (a rehearsal, not a bracket)"
                   : pick->why, sizeof run->lane_note);
    free(pick);
    int span = 0;
    if ((st = lanes_hosts(run, places, remote, &span, err)) != BK_OK)
        return st;
    if (span) { /* the finder's why says how many hosts a lane has */
        size_t n = strlen(run->lane_note);
        snprintf(run->lane_note + n, sizeof run->lane_note - n, "; each lane spans hosts: "
                 "NCCL between them, tcp with CURVE to rank 0");
    } else if (*remote) {
        bk_strlcpy(run->lane_note, "disjoint lanes on two hosts (tcp with CURVE)",
                   sizeof run->lane_note);
    }
    /* two ranks of a lane on one GPU (only lanes.policy shared allows it): cuda engines'
     * kernels there take turns */
    run->lane_gpu_shared = 0;
    for (int k = 0; k < 2 && places && run->backend == BK_BACKEND_CUDA; k++) {
        const int *lane = k ? run->candidate : run->baseline;
        for (int i = 0; i < L; i++)
            for (int j = 0; j < i; j++) {
                const bk_rank_place *a = &places[lane[i]], *b = &places[lane[j]];
                if (a->gpu >= 0 && a->host == b->host && a->gpu == b->gpu)
                    run->lane_gpu_shared = 1;
            }
    }
    if (run->lane_gpu_shared) {
        size_t n = strlen(run->lane_note);
        snprintf(run->lane_note + n, sizeof run->lane_note - n, "; ranks of a lane share a GPU, "
                 "whose kernels take turns: a rank's own times are its turns, and no "
                 "straggler is named");
    }
    return check_lane_p2p(run, topo, places, err);
}

/* Rank 0's first set-up step: the plan, its backend and its catalog check.
 * On failure the message is in err and the exit status returned. */
int bk__setup_plan(const bk__run_opts *o, bk_run *run, char **plan_text, bk_err *err)
{
    bk_status st;
    bk_strlcpy(run->version, BK_VERSION, sizeof run->version);
    if ((st = bk_plan_load(o->plan, o->sets, o->nsets, &run->plan, err)) != BK_OK)
        return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    run->backend = bk_resolve_backend(run->plan.backend);
    if ((st = bk_catalog_check_plan(&run->plan, run->backend, err)) != BK_OK) {
        bk_plan_name_set(run->plan.path, o->sets, o->nsets, err->msg, sizeof err->msg);
        return st == BK_ERR_INPUT || st == BK_ERR_UNSUPPORTED ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    *plan_text = bk_plan_dump(&run->plan);
    if (!*plan_text) {
        BK_FAIL(err, BK_ERR_INTERNAL, "cannot serialise the plan");
        return BK_EXIT_INTERNAL;
    }
    bk_sha256_hex(*plan_text, strlen(*plan_text), run->plan_digest);
    run->routing_share = bk_routing_share(&run->plan, run->backend, 1);
    run->cand_routed = bk_plan_routed(&run->plan, run->plan.candidate.name,
                                      run->plan.arena.tp * run->plan.arena.ep, run->backend);
    run->cand_routed_known = 1;
    (void)bk_catalog_bf16_sum_note(&run->plan, run->backend, run->sum_note, sizeof run->sum_note);
    const bk_target *tg = bk_catalog_target(run->plan.target);
    /* refused here, before any engine starts, rather than killed for memory mid-run */
    uint64_t need = bk_rank0_peak_bytes(&run->plan), have = 0;
    char from[256];
    if (bk_mem_available(&have, from, sizeof from) && need > have) {
        char big[1536];
        bk_rank0_too_big_text(&run->plan, have, from, big, sizeof big);
        BK_FAIL(err, BK_ERR_INPUT, "%s: %s", run->plan.path, big);
        return BK_EXIT_USAGE;
    }
    char audit[512]; /* refused here, not found missing after the timed arms have run */
    if (bk_audit_msg_too_big(&run->plan, run->plan.arena.tp * run->plan.arena.ep, audit,
                             sizeof audit) >= 0) {
        BK_FAIL(err, BK_ERR_INPUT, "%s: %s", run->plan.path, audit);
        return BK_EXIT_USAGE;
    }
    if (run->routing_share <= 0) { /* C would time the incumbent again: a verdict on nothing */
        char msg[1536];
        bk_plan_none_served_text(o->plan, &run->plan, run->backend, msg, sizeof msg);
        bk_plan_name_set(o->plan, o->sets, o->nsets, msg, sizeof msg);
        BK_FAIL(err, BK_ERR_INPUT, "%s", msg);
        return BK_EXIT_USAGE;
    }
    run->noutputs = 0;
    for (int t = 0; t < tg->ntensors; t++)
        if (tg->tensor_is_output[t] && run->noutputs < 16)
            run->output_names[run->noutputs++] = tg->tensor_names[t];
    return 0;
}

/* The interface tcp should use when lanes are on other hosts: of rank 0's host's
 * Ethernet NICs that carry an IPv4 address, the one nearest rank 0's GPU (by the PCI
 * path class, as `bracket topo` shows it). 0 when the topology names none: the
 * transport then takes the first interface that is up. */
static int topo_iface(const bk_topo *topo, const bk_rank_place *places, char *out, size_t len)
{
    if (!topo || !places || places[0].host < 0 || places[0].host >= topo->nhosts)
        return 0;
    const bk_topo_host *h = &topo->hosts[places[0].host];
    int best = -1, best_class = 1 << 30;
    for (int k = 0; k < h->nnics; k++) {
        char addr[64];
        bk_err e = { 0 };
        if (strcmp(h->nics[k].kind, "eth") != 0 ||
            bk_iface_addr(h->nics[k].name, addr, sizeof addr, NULL, 0, &e) != BK_OK)
            continue;
        int g = places[0].gpu;
        int cls = g >= 0 && g < h->ngpus ? h->gpu_nic[g][k] : 0;
        if (cls < best_class) {
            best = k;
            best_class = cls;
        }
    }
    if (best < 0)
        return 0;
    bk_strlcpy(out, h->nics[best].name, len);
    return 1;
}

/* Every lane rank on rank 0's host: an arm's engines (the cpu engines hold their tensors
 * there) and rank 0 share its memory, refused before any engine starts when they cannot
 * fit (an engine killed for memory reads "signal 9 (Killed)" and the arm is lost). */
static bk_status check_host_memory(const bk_run *run, bk_err *err)
{
    bk_verify_peak vp;
    const uint64_t need = bk_arm_host_bytes(&run->plan, run->backend == BK_BACKEND_CUDA, &vp);
    const uint64_t r0 = bk_rank0_peak_bytes(&run->plan);
    uint64_t have = 0;
    char from[256];
    if (vp.top_shape < 0 || !bk_mem_available(&have, from, sizeof from) || need <= have)
        return BK_OK;
    char n[32], r[32], e[32], h[32], where[48], lower[256];
    snprintf(where, sizeof where, "workload.shapes[%d], ", vp.top_shape);
    bk_lower_shape_text(&run->plan.workload.shapes[vp.top_shape], where, lower, sizeof lower);
    return BK_FAIL(err, BK_ERR_INPUT, "%s: this host would hold about %s while an arm runs "
                   "(rank 0's %s for the samples and audit outputs, and the arm's %d engine(s) "
                   "of about %s each) but %s has %s available; %s", run->plan.path,
                   bk_mem_text(need, n, sizeof n), bk_mem_text(r0, r, sizeof r),
                   run->lane_size, bk_mem_text(vp.engine, e, sizeof e),
                   from[0] ? from : "this host", bk_mem_text(have, h, sizeof h), lower);
}

/* Rank 0's second step: lanes, run id, output folder, endpoints. */
int bk__setup_run(const bk__run_opts *o, bk_run *run, const bk_topo *topo,
                  const bk_rank_place *places, bk_coord **coord, bk_transport *tr,
                  bk_err *err)
{
    bk_status st;
    int remote = 0;
    if ((st = bk__pick_lanes(run, topo, places, &remote, err)) != BK_OK)
        return st == BK_ERR_INPUT || st == BK_ERR_UNSUPPORTED ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    if (!remote && (st = check_host_memory(run, err)) != BK_OK)
        return BK_EXIT_USAGE;
    char nic[64] = "";
    const char *iface = o->iface;
    if (!iface && remote && topo_iface(topo, places, nic, sizeof nic))
        iface = nic;
    if ((st = bk_transport_pick(iface, o->port, remote, tr, err)) != BK_OK)
        return st == BK_ERR_INPUT || st == BK_ERR_UNSUPPORTED ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    if (topo)
        bk_strlcpy(run->topo_digest, topo->digest, sizeof run->topo_digest);
    make_run_id(&run->plan, run->run_id, sizeof run->run_id);
    bk_strlcpy(run->out_dir, o->out, sizeof run->out_dir);
    snprintf(run->run_dir, sizeof run->run_dir, "%s/%s", o->out, run->run_id);
    made_dirs made; /* folders of --out made here: taken back when the run is refused */
    if ((st = mkdir_p(o->out, &made, err)) != BK_OK) {
        unmake_dirs(&made);
        return BK_EXIT_USAGE;
    }
    if (mkdir(run->run_dir, 0755) != 0) {
        BK_FAIL(err, BK_ERR_INPUT, "cannot create %s: %s", run->run_dir, strerror(errno));
        unmake_dirs(&made);
        return BK_EXIT_USAGE;
    }
    /* room for every timed arm's samples (9 bytes each at most) and 1 MiB of JSON */
    int64_t need = (1 << 20) + 3 * (int64_t)run->lane_size * run->plan.workload.nshapes *
                                   run->plan.workload.iters * 9;
    if ((st = bk_outdir_probe(run->run_dir, o->out, need, err)) != BK_OK) {
        rmdir(run->run_dir);
        unmake_dirs(&made);
        return BK_EXIT_USAGE;
    }
    if ((st = bk_coord_open_ex(coord, run->run_id, run->plan.workload.nshapes,
                               run->plan.workload.iters, run->noutputs, tr, err)) != BK_OK) {
        rmdir(run->run_dir);
        unmake_dirs(&made);
        return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    if ((st = bk_coord_set_outputs(*coord, bk_catalog_target(run->plan.target),
                                   run->plan.workload.shapes, run->plan.arena.dtype, err)) !=
        BK_OK) {
        bk_coord_close(*coord);
        *coord = NULL;
        rmdir(run->run_dir);
        unmake_dirs(&made);
        return BK_EXIT_INTERNAL;
    }
    if (topo) {
        char path[800];
        bk_err terr = { 0 };
        snprintf(path, sizeof path, "%s/topology.json", run->run_dir);
        /* evidence; its digest is in the record, so the run goes on without the file */
        if (bk_topo_save((bk_topo *)topo, path, &terr) != BK_OK)
            fprintf(stderr, "bracket run: topology.json was not written: %s\n", terr.msg);
    }
    return 0;
}
