/* test_cuda_ipc.c - the cuda variants on real GPUs: 1, 2, 4 and 8 processes meeting through
 * CUDA IPC (rank modulo the GPUs: all on one GPU when only one exists) match the float64
 * reference for both fused variants, eager and graph, bitwise equal across ranks and modes;
 * their kernels wait for the kernel before them (programmatic dependent launch) before any
 * load; NCCL at world 1, and at worlds 2, 4 and 8 with each rank a host of its own (root
 * only); a lane of 16 with NCCL alone; a peer that never arrives ends in a time-out error,
 * not a hang; beside a peer played by hand from the host, late on purpose, the one-shot leaves
 * the half of peer memory its peer may still read alone and both variants wait for the
 * peer's rows and results. */

#ifndef BK_HAVE_CUDA
/* Built without the CUDA toolkit: nothing to run. */
#include <stdio.h>

int main(void)
{
    printf("SKIP: no CUDA device: this build has no CUDA (BK_CUDA=OFF or no toolkit)\n");
    return 77;
}
#else
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>

#include "lane_call.h"
#include "pdl_writer.h"
#include "test_filter.h"

static const int64_t k_shapes[][2] = {{1, 4096}, {5, 8}, {37, 6144}, {300, 1024}, {3, 16384}};
#define NSHAPES ((int)(sizeof(k_shapes) / sizeof(k_shapes[0])))
/* every bound of a lane: 20 s, or BK_TEST_TIMEOUT_S (scripts/gpu-run.sh's sanitize step,
 * where compute-sanitizer slows 8 processes on one GPU past 20 s) */
static double g_timeout_s = 20.0;
#define RTOL_FUSED 8e-3 /* one bf16 rounding of an fp32 result */
#define ATOL_FUSED 1e-3
#define RTOL_NCCL 2e-2  /* the NCCL sum is rounded to bf16 first */
#define ATOL_NCCL 2e-2

typedef struct lane_arg {
    const bk_variant *variants[2];
    int nvariants;
    double rtol, atol;
    int bf16_sum; /* NCCL's bf16 allreduce: lt_check allows its roundings */
} lane_arg;

static int rank_fail(lane_shm *shm, int rank, const bk_err *err)
{
    snprintf(shm->msg[rank], sizeof(shm->msg[rank]), "rank %d: %s [%s]", rank, err->msg,
             err->trail);
    return 1;
}

/* A rank's end: waits (bounded by wait_s) for the lane's other ranks, frees its tensors and
 * its side of the communicator, and says its failure unless it said one already; the
 * process's exit status. */
static int rank_end(lane_shm *shm, int rank, double wait_s, lane_tensors *lt,
                    bk_cuda_comm *comm, bk_status st, const bk_err *err)
{
    lane_wait_done(shm, rank, wait_s);
    lt_free(lt);
    bk_cuda_comm_destroy(comm);
    if (st != BK_OK && !shm->msg[rank][0])
        rank_fail(shm, rank, err);
    return st == BK_OK ? 0 : 1;
}

/* Every rank of the next lane on a host of its own (g_lane_hosts: NCCL joins them over
 * sockets on loopback); the test is skipped, with the reason, where that cannot be. Reset
 * g_lane_hosts after the lane. */
static void lane_hosts_begin(int world)
{
    char why[256];
    if (!lane_hosts_probe(why, sizeof(why))) {
        print_message("SKIPPED: NCCL at world %d needs a host per rank: %s\n", world, why);
        skip();
    }
    setenv("NCCL_SOCKET_IFNAME", "lo", 0); /* the hosts are one machine's namespaces */
    setenv("NCCL_IB_DISABLE", "1", 0);
    g_lane_hosts = 1;
}

/* One rank: comm up, then for every variant and shape: eager on inputs A,
 * eager on B, eager on A again (bitwise equal to the first), graph on A
 * (bitwise equal to eager), graph replay on B (matches the reference). */
static int variants_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const lane_arg *arg = argp;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    int check = 0;
    bk_err_clear(err);
    BK_TRY(lane_comm_up(shm, rank, world, lane_device(rank),
                        bk_ar_rmsnorm_cuda_peer_bytes(512, 16384), g_timeout_s, &comm, err));
    for (int vi = 0; vi < arg->nvariants; vi++) {
        const bk_variant *v = arg->variants[vi];
        for (int s = 0; s < NSHAPES; s++) {
            lane_tensors lt;
            uint64_t ha = 0, hb = 0, h = 0;
            char what[160];
            const uint64_t seed = 1000 + 10 * (uint64_t)s;
            snprintf(what, sizeof(what), "%s world %d", v->name, world);
            BK_TRY(lt_alloc(&lt, k_shapes[s][0], k_shapes[s][1], err));
            BK_TRY(lt_inputs(&lt, seed, rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, 0, 1, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, arg->bf16_sum, &ha, err));
            BK_TRY(lt_inputs(&lt, seed + 1, rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, 0, 1, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, arg->bf16_sum, &hb, err));
            BK_TRY(lt_inputs(&lt, seed, rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, 0, 1, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, arg->bf16_sum, &h, err));
            if (h != ha) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: eager rerun differs bitwise", what);
                goto out;
            }
            BK_TRY(lt_inputs(&lt, seed, rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, 1, 1, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, arg->bf16_sum, &h, err));
            if (h != ha) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: graph differs bitwise from eager at "
                             "%lld x %lld", what, (long long)lt.tokens, (long long)lt.hidden);
                goto out;
            }
            BK_TRY(lt_inputs(&lt, seed + 1, rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, 1, 1, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, arg->bf16_sum, &h, err));
            if (h != hb) {
                st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: graph replay on new inputs differs "
                             "from eager", what);
                goto out;
            }
            shm->hash[check++][rank] = ha;
            lt_free(&lt);
        }
    }
    shm->nhash = check;
out:
    lane_wait_done(shm, rank, 3 * g_timeout_s);
    bk_cuda_comm_destroy(comm);
    return st == BK_OK ? 0 : rank_fail(shm, rank, err);
}

/* A lane of `world` ranks running fn, bounded by timeout_s: every rank's message printed,
 * none may fail. The caller reads the lane's results and unmaps it. */
static lane_shm *lane_ok(int world, lane_fn fn, void *arg, double timeout_s)
{
    lane_shm *shm = lane_map();
    assert_non_null(shm);
    int failed = lane_run(shm, world, fn, arg, timeout_s);
    for (int r = 0; r < world; r++)
        if (shm->msg[r][0])
            print_message("%s\n", shm->msg[r]);
    assert_int_equal(failed, 0);
    return shm;
}

/* A lane of `world` ranks running fn: every rank succeeds with `checks` digests, each equal
 * across ranks. */
static void lane_checks(int world, lane_fn fn, lane_arg *arg, int checks)
{
    lane_shm *shm = lane_ok(world, fn, arg, 12 * g_timeout_s);
    assert_int_equal(shm->nhash, checks);
    for (int c = 0; c < shm->nhash; c++)
        for (int r = 1; r < world; r++)
            if (shm->hash[c][r] != shm->hash[c][0])
                fail_msg("check %d: rank %d's outputs differ bitwise from rank 0's", c, r);
    munmap(shm, sizeof(*shm));
}

static void run_lane(int world, lane_arg *arg)
{
    lane_checks(world, variants_rank, arg, arg->nvariants * NSHAPES);
}

static lane_arg fused_arg(void)
{
    lane_arg a = {.variants = {&bk_variant_ipc_oneshot_fused, &bk_variant_ipc_twoshot_fused},
                  .nvariants = 2, .rtol = RTOL_FUSED, .atol = ATOL_FUSED};
    return a;
}

static void test_fused_world1(void **state)
{
    (void)state;
    lane_arg a = fused_arg();
    run_lane(1, &a);
}

static void test_fused_world2(void **state)
{
    (void)state;
    lane_arg a = fused_arg();
    run_lane(2, &a);
}

static void test_fused_world4(void **state)
{
    (void)state;
    lane_arg a = fused_arg();
    run_lane(4, &a);
}

static void test_fused_world8(void **state)
{
    (void)state;
    lane_arg a = fused_arg();
    run_lane(8, &a);
}

static void test_nccl_world1(void **state)
{
    (void)state;
    lane_arg a = {.variants = {&bk_variant_nccl_then_rmsnorm}, .nvariants = 1,
                  .rtol = RTOL_NCCL, .atol = ATOL_NCCL, .bf16_sum = 1};
    run_lane(1, &a);
}

/* NCCL at worlds 2, 4 and 8 on the one GPU: each rank on a host of its own (g_lane_hosts), so
 * NCCL joins them over sockets; nccl_then_rmsnorm must match the float64 reference, eager and
 * graph, bitwise equal across ranks and between eager and graph, as the fused variants. */
static void nccl_hosts(int world)
{
    lane_arg a = {.variants = {&bk_variant_nccl_then_rmsnorm}, .nvariants = 1,
                  .rtol = RTOL_NCCL, .atol = ATOL_NCCL, .bf16_sum = 1};
    lane_hosts_begin(world);
    run_lane(world, &a);
    g_lane_hosts = 0;
}

static void test_nccl_hosts_world2(void **state)
{
    (void)state;
    nccl_hosts(2);
}

static void test_nccl_hosts_world4(void **state)
{
    (void)state;
    nccl_hosts(4);
}

static void test_nccl_hosts_world8(void **state)
{
    (void)state;
    nccl_hosts(8);
}

/* What the kernel before the variant copies over x, residual and gamma. */
typedef struct pdl_inputs {
    void *saved[3];
    size_t bytes[3];
} pdl_inputs;

static bk_status pdl_pre(lane_tensors *lt, void *argp, bk_err *err)
{
    pdl_inputs *p = argp;
    void *const dst[3] = {lt->t[0].data, lt->t[1].data, lt->t[2].data};
    LT_CUDA((cudaError_t)bk_test_pdl_writer((const void *const *)p->saved, dst, p->bytes,
                                            PDL_WRITER_NS, lt->stream), "pdl writer launch");
    return BK_OK;
}

/* LT_CUDA for a rank function: the failure goes to out (the lane's end, the message). */
#define RANK_CUDA(call, what)                                                              \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            st = BK_FAIL(err, BK_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e_));      \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

static const int64_t k_pdl_shapes[][2] = {{37, 6144}, {3, 16384}};
#define NPDL ((int)(sizeof(k_pdl_shapes) / sizeof(k_pdl_shapes[0])))

/* The IPC kernels' programmatic dependent launch (bk_cuda_pdl, on unless BK_CUDA_PDL=0): every
 * rank calls the variant once plainly, then twice (eager, then captured in a graph) right
 * after a kernel that lets it be scheduled at once and only 200 us later writes x, residual
 * and gamma over their NaN-poisoned buffers. A kernel that loads an input (or sends a row to
 * its peers) before its bk__pdl_wait reads NaN: the results must match the plain call's
 * bitwise and the float64 reference. */
static int pdl_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const lane_arg *arg = argp;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    lane_tensors lt;
    pdl_inputs p = {{NULL, NULL, NULL}, {0, 0, 0}};
    int check = 0;
    memset(&lt, 0, sizeof(lt));
    bk_err_clear(err);
    if (!bk_cuda_pdl()) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "programmatic dependent launch is off (BK_CUDA_PDL?)");
        goto out;
    }
    BK_TRY(lane_comm_up(shm, rank, world, lane_device(rank),
                        bk_ar_rmsnorm_cuda_peer_bytes(64, 16384), g_timeout_s, &comm, err));
    for (int vi = 0; vi < arg->nvariants; vi++) {
        const bk_variant *v = arg->variants[vi];
        for (int s = 0; s < NPDL; s++) {
            uint64_t h0 = 0, h = 0;
            char what[160];
            const uint64_t seed = 5000 + 10 * (uint64_t)s;
            BK_TRY(lt_alloc(&lt, k_pdl_shapes[s][0], k_pdl_shapes[s][1], err));
            snprintf(what, sizeof(what), "%s world %d without a writer", v->name, world);
            BK_TRY(lt_inputs(&lt, seed, rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, 0, 1, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, 0, &h0, err));
            for (int k = 0; k < 3; k++) {
                p.bytes[k] = lt.t[k].elems * 2;
                RANK_CUDA(cudaMalloc(&p.saved[k], p.bytes[k]), "cudaMalloc");
                RANK_CUDA(cudaMemcpy(p.saved[k], lt.t[k].data, p.bytes[k],
                                   cudaMemcpyDeviceToDevice), "save inputs");
            }
            for (int graph = 0; graph < 2; graph++) {
                snprintf(what, sizeof(what), "%s world %d, pdl %s after a late writer",
                         v->name, world, graph ? "graph" : "eager");
                for (int k = 0; k < 5; k++)
                    RANK_CUDA(cudaMemset(lt.t[k].data, 0xFF, lt.t[k].elems * 2), "poison");
                RANK_CUDA(cudaDeviceSynchronize(), "sync");
                BK_TRY(lt_call_pre(&lt, v, comm, graph, 1, g_timeout_s, pdl_pre, &p, err));
                BK_TRY(lt_check(&lt, what, arg->rtol, arg->atol, 0, &h, err));
                if (h != h0) {
                    st = BK_FAIL(err, BK_ERR_INTERNAL, "%s: differs bitwise from the call "
                                 "without it at %lld x %lld", what, (long long)lt.tokens,
                                 (long long)lt.hidden);
                    goto out;
                }
            }
            shm->hash[check++][rank] = h0;
            for (int k = 0; k < 3; k++) {
                cudaFree(p.saved[k]);
                p.saved[k] = NULL;
            }
            lt_free(&lt);
            memset(&lt, 0, sizeof(lt));
        }
    }
    shm->nhash = check;
out:
    lane_wait_done(shm, rank, 3 * g_timeout_s);
    for (int k = 0; k < 3; k++)
        if (p.saved[k])
            cudaFree(p.saved[k]);
    lt_free(&lt);
    bk_cuda_comm_destroy(comm);
    return st == BK_OK ? 0 : rank_fail(shm, rank, err);
}

static void pdl_lane(int world)
{
    lane_arg a = fused_arg();
    lane_checks(world, pdl_rank, &a, a.nvariants * NPDL);
}

static void test_pdl_world1(void **state)
{
    (void)state;
    pdl_lane(1);
}

static void test_pdl_world2(void **state)
{
    (void)state;
    pdl_lane(2);
}

/* A lane of 8 x 4096 tensors on rank 0 alone (the others only map the lane): the hang and
 * arm's-end tests' set-up. */
static bk_status small_lane(lane_shm *shm, int rank, int world, bk_cuda_comm **comm,
                            lane_tensors *lt, bk_err *err)
{
    bk_status st = BK_OK;
    BK_TRY(lane_comm_up(shm, rank, world, lane_device(rank),
                        bk_ar_rmsnorm_cuda_peer_bytes(8, 4096), g_timeout_s, comm, err));
    if (rank == 0) {
        BK_TRY(lt_alloc(lt, 8, 4096, err));
        BK_TRY(lt_inputs(lt, 7, rank, world, err));
    }
out:
    return st;
}

/* Whether msg names the barrier of a block below `grid` (the slot half of the fault word):
 * the variants' own barriers are their blocks', never the lane barrier's slot. */
static int on_block(const char *msg, int grid)
{
    const char *at = strstr(msg, " at the barrier on block ");
    int block = -1;
    return at && sscanf(at, " at the barrier on block %d", &block) == 1 && block >= 0 &&
           block < grid;
}

/* Rank 1 maps the lane and stays alive but never calls: rank 0 must fail
 * with a time-out naming rank 1, within the bound, for each fused variant. */
static int hang_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const bk_variant *v = argp;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    lane_tensors lt;
    memset(&lt, 0, sizeof(lt));
    bk_err_clear(err);
    BK_TRY(small_lane(shm, rank, world, &comm, &lt, err));
    if (rank == 0) {
        const uint64_t t0 = bk_now_ns();
        /* no lane barrier first: the variant's own barrier must time out */
        bk_status got = lt_call(&lt, v, comm, 0, 0, 0.5, err);
        const double took = (double)(bk_now_ns() - t0) / 1e9;
        if (got != BK_ERR_TIMEOUT || !strstr(err->msg, "peer rank 1 never arrived") ||
            !on_block(err->msg, comm->grid) || took > 5.0) {
            snprintf(shm->msg[0], sizeof(shm->msg[0]), "%s: expected a time-out naming rank 1 "
                     "and a block of the kernel's %d within 5 s, got %s after %.2f s: %s",
                     v->name, comm->grid, bk_status_name(got), took, err->msg);
            st = BK_ERR_INTERNAL;
        }
        bk_err_clear(err);
    }
out:
    return rank_end(shm, rank, 3 * g_timeout_s, &lt, comm, st, err);
}

/* The arm's end (bk_cuda_comm_set_end) on a lane whose rank 1 maps the lane but never calls:
 * rank 0's wait ends there (1 s), not at the device's spin bound (g_timeout_s from each
 * wait's start) nor at its own (3 x g_timeout_s + 1); it names rank 1 and says the arm's time
 * ran out, and the stream has drained right after (every wait on the device was asked to
 * give up), so an engine reports before its agent's time-out. The old code said "the GPU
 * made no progress for 1.0 s", naming no peer, and its stream drained only at the spin
 * bound. At world 1 an end already past cuts nothing: the wait is on the GPU's own work, as
 * the shm side has no barrier there. */
static int end_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const bk_variant *v = argp;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    lane_tensors lt;
    memset(&lt, 0, sizeof(lt));
    bk_err_clear(err);
    BK_TRY(small_lane(shm, rank, world, &comm, &lt, err));
    if (rank == 0) {
        if (world == 1) {
            bk_cuda_comm_set_end(comm, bk_now_ns());
            for (int graph = 0; graph < 2 && st == BK_OK; graph++)
                if (lt_call(&lt, v, comm, graph, 1, g_timeout_s, err) != BK_OK) {
                    snprintf(shm->msg[0], sizeof(shm->msg[0]), "%s world 1 (%s): an end "
                             "already past cut a wait on the GPU's own work: %s", v->name,
                             graph ? "graph" : "eager", err->msg);
                    st = BK_ERR_INTERNAL;
                }
        } else {
            bk_cuda_comm_set_end(comm, bk_now_ns() + 1000000000ull);
            const uint64_t t0 = bk_now_ns();
            /* no lane barrier first: the variant's own barrier waits for rank 1 */
            bk_status got = lt_call(&lt, v, comm, 0, 0, g_timeout_s, err);
            const double took = (double)(bk_now_ns() - t0) / 1e9;
            const uint64_t t1 = bk_now_ns();
            const cudaError_t se = cudaStreamSynchronize(lt.stream);
            const double drained = (double)(bk_now_ns() - t1) / 1e9;
            if (got != BK_ERR_TIMEOUT || !strstr(err->msg, "peer rank 1 did not arrive") ||
                !on_block(err->msg, comm->grid) ||
                !strstr(err->msg, "the arm's time ran out") || took > 4.0 ||
                se != cudaSuccess || drained > 2.0) {
                snprintf(shm->msg[0], sizeof(shm->msg[0]), "%s: expected a failure naming "
                         "rank 1, a block of the kernel's and the arm's end within 4 s, then "
                         "the stream drained within 2 s; got %s after %.2f s (%s), drained "
                         "after %.2f s (%s)",
                         v->name, bk_status_name(got), took, err->msg, drained,
                         cudaGetErrorString(se));
                st = BK_ERR_INTERNAL;
            }
        }
        bk_cuda_comm_set_end(comm, 0);
        bk_err_clear(err);
    }
out:
    return rank_end(shm, rank, 3 * g_timeout_s, &lt, comm, st, err);
}

static void test_arm_end(void **state)
{
    (void)state;
    const bk_variant *vs[2] = {&bk_variant_ipc_oneshot_fused, &bk_variant_ipc_twoshot_fused};
    for (int world = 1; world <= 2; world++)
        for (int i = 0; i < 2; i++)
            munmap(lane_ok(world, end_rank, (void *)vs[i], 6 * g_timeout_s), sizeof(lane_shm));
}

/* ---- a peer played by hand ----
 * Rank 1 of a lane of 2 keeps the flags protocol of the IPC kernels from the host, with
 * cudaMemcpy on the mapped memory, late on purpose: it writes its rows and raises its flags
 * only after rank 0 has reached the barrier, and looks into rank 0's peer memory between
 * calls. On one GPU the two processes' kernels and copies take turns; the order below is the
 * protocol's, not a race, so a kernel that skips a wait or reuses memory a peer may still read
 * fails every time:
 *  - one-shot (one barrier a call, the half chosen by the epoch's parity): rank 0's call k+1
 *    must leave the half of call k as it was (its peer may still be reading it), and rank 0
 *    must not read rank 1's rows before rank 1's flag (its outputs would miss them);
 *  - two-shot (two barriers a call): rank 0 must wait for rank 1's x before it reduces its
 *    rows, write its rows' results into rank 1's planes, and wait for rank 1's results (from
 *    the float64 reference here) before it copies them out.
 * Rank 0 runs the real variant, eagerly and then in a graph replayed on new inputs; its
 * outputs must match the float64 reference. */
#define HAND_CALLS 4 /* calls per shape: 2 eager, then a graph captured once and replayed */
static const int64_t k_hand_shapes[][2] = {{37, 6144}, {300, 1024}};
#define NHAND ((int)(sizeof(k_hand_shapes) / sizeof(k_hand_shapes[0])))
#define HAND_LATE_NS 20000000ull /* how late rank 1 writes after rank 0 arrived */

static uint64_t hand_seed(int s, int k)
{
    return 9000 + 100 * (uint64_t)s + (uint64_t)k;
}

/* Rank 1 by hand: wait (bounded) until rank 0 has raised flag e on every slot of the grid in
 * our flag array, i.e. passed its writes before barrier e. */
static bk_status hand_wait(const bk_cuda_comm *c, uint32_t e, double timeout_s, bk_err *err)
{
    static uint32_t f[BK_IPC_SLOTS * BK_IPC_MAX_WORLD];
    const uint64_t deadline = bk_now_ns() + (uint64_t)(timeout_s * 1e9);
    for (;;) {
        LT_CUDA(cudaMemcpy(f, c->dev.flags[c->rank], sizeof(f), cudaMemcpyDeviceToHost),
                "read our flags");
        int s = 0;
        while (s < c->grid && (int32_t)(f[s * BK_IPC_MAX_WORLD + 0] - e) >= 0)
            s++;
        if (s == c->grid)
            return BK_OK;
        if (bk_now_ns() > deadline)
            return BK_FAIL(err, BK_ERR_TIMEOUT, "rank 0 never raised flag %u on slot %d (it "
                           "shows %u)", e, s, f[s * BK_IPC_MAX_WORLD + 0]);
        bk_sleep_ns(1000000);
    }
}

/* Rank 1 by hand: `bytes` of `src` to peer memory at `dst` (ours or rank 0's, mapped), then
 * flag e on every slot of the grid in rank 0's flag array, after the rows have landed. */
static bk_status hand_post(const bk_cuda_comm *c, void *dst, const void *src, size_t bytes,
                           uint32_t e, bk_err *err)
{
    uint32_t v[BK_IPC_MAX_BLOCKS];
    bk_sleep_ns(HAND_LATE_NS);
    if (bytes)
        LT_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "write rows");
    LT_CUDA(cudaDeviceSynchronize(), "sync");
    for (int s = 0; s < c->grid; s++)
        v[s] = e;
    LT_CUDA(cudaMemcpy2D(c->dev.flags[0] + c->rank, BK_IPC_MAX_WORLD * sizeof(uint32_t), v,
                         sizeof(uint32_t), sizeof(uint32_t), (size_t)c->grid,
                         cudaMemcpyHostToDevice), "raise flags");
    LT_CUDA(cudaDeviceSynchronize(), "sync");
    return BK_OK;
}

/* Rank 1 by hand: rank 0's peer memory at byte `off` must hold `want` (`bytes` of it). */
static bk_status hand_expect(const bk_cuda_comm *c, size_t off, const uint16_t *want,
                             uint16_t *got, size_t bytes, const char *what, bk_err *err)
{
    LT_CUDA(cudaMemcpy(got, (const char *)c->dev.data[0] + off, bytes, cudaMemcpyDeviceToHost),
            "read rank 0's peer memory");
    if (memcmp(got, want, bytes) != 0) {
        size_t i = 0;
        while (got[i] == want[i])
            i++;
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: element %zu is 0x%04x, not 0x%04x", what, i,
                       got[i], want[i]);
    }
    return BK_OK;
}

typedef struct hand_buf {
    uint16_t *x0, *x0_prev, *x1, *got, *ro, *out;
    double *ref_ro, *ref_out;
} hand_buf;

static void hand_free(hand_buf *b)
{
    free(b->x0);
    free(b->x0_prev);
    free(b->x1);
    free(b->got);
    free(b->ro);
    free(b->out);
    free(b->ref_ro);
    free(b->ref_out);
    memset(b, 0, sizeof(*b));
}

/* One-shot, rank 1 by hand, one shape: *ep counts the barriers passed on every slot. */
static bk_status hand_oneshot(const bk_cuda_comm *c, int s, hand_buf *b, uint32_t *ep,
                              bk_err *err)
{
    const int64_t tokens = k_hand_shapes[s][0], hidden = k_hand_shapes[s][1];
    const size_t n = (size_t)tokens * hidden, half = c->dev.bytes / 2 / 16 * 16;
    char what[192];
    for (int k = 0; k < HAND_CALLS; k++) {
        const uint64_t seed = hand_seed(s, k);
        const size_t base = (*ep & 1u) ? half : 0, prev = base ? 0 : half;
        lane_fill(b->x0, n, seed, 0, 0);
        lane_fill(b->x1, n, seed, 0, 1);
        bk_status st = hand_wait(c, *ep + 1, g_timeout_s, err);
        if (st != BK_OK)
            return st;
        snprintf(what, sizeof(what), "%lld x %lld call %d: rank 0's x in its half at the barrier",
                 (long long)tokens, (long long)hidden, k);
        if ((st = hand_expect(c, base, b->x0, b->got, n * 2, what, err)) != BK_OK)
            return st;
        if (k > 0) {
            snprintf(what, sizeof(what), "%lld x %lld call %d: the half of call %d, which its "
                     "peer may still read, changed", (long long)tokens, (long long)hidden, k,
                     k - 1);
            if ((st = hand_expect(c, prev, b->x0_prev, b->got, n * 2, what, err)) != BK_OK)
                return st;
        }
        if ((st = hand_post(c, (char *)c->dev.data[1] + base, b->x1, n * 2, *ep + 1, err)) !=
            BK_OK)
            return st;
        *ep += 1;
        memcpy(b->x0_prev, b->x0, n * 2);
    }
    return BK_OK;
}

/* Two-shot, rank 1 by hand, one shape. Peer memory (the half of the epoch's parity):
 * [x plane][residual_out plane][out plane]; rank 0 owns rows [0, seg), rank 1 the rest. */
static bk_status hand_twoshot(const bk_cuda_comm *c, int s, hand_buf *b, uint32_t *ep,
                              bk_err *err)
{
    const int64_t tokens = k_hand_shapes[s][0], hidden = k_hand_shapes[s][1];
    const size_t n = (size_t)tokens * hidden, half = c->dev.bytes / 2 / 16 * 16;
    const size_t plane = n * 2, seg = (size_t)(tokens + 1) / 2;
    const size_t mine = seg * (size_t)hidden, theirs = n - mine; /* elements */
    char what[192];
    for (int k = 0; k < HAND_CALLS; k++) {
        const uint64_t seed = hand_seed(s, k);
        const size_t base = (*ep & 1u) ? half : 0;
        char *ours = (char *)c->dev.data[1] + base, *peer0 = (char *)c->dev.data[0] + base;
        lane_fill(b->x0, n, seed, 0, 0);
        lane_fill(b->x1, n, seed, 0, 1);
        lane_reference(seed, 2, tokens, hidden, b->ref_ro, b->ref_out);
        for (size_t i = 0; i < n; i++) {
            b->ro[i] = f_to_bf16((float)b->ref_ro[i]);
            b->out[i] = f_to_bf16((float)b->ref_out[i]);
        }
        /* barrier 1: rank 0's x is in its x plane; ours goes into ours, late */
        bk_status st = hand_wait(c, *ep + 1, g_timeout_s, err);
        if (st != BK_OK)
            return st;
        snprintf(what, sizeof(what), "%lld x %lld call %d: rank 0's x plane at the first "
                 "barrier", (long long)tokens, (long long)hidden, k);
        if ((st = hand_expect(c, base, b->x0, b->got, plane, what, err)) != BK_OK)
            return st;
        if ((st = hand_post(c, ours, b->x1, plane, *ep + 1, err)) != BK_OK)
            return st;
        /* barrier 2: rank 0's rows' results are in our planes; ours go into its planes, late */
        if ((st = hand_wait(c, *ep + 2, g_timeout_s, err)) != BK_OK)
            return st;
        for (int pl = 1; pl <= 2; pl++) {
            LT_CUDA(cudaMemcpy(b->got, ours + pl * plane, mine * 2, cudaMemcpyDeviceToHost),
                    "read our planes");
            const double e = lane_err(b->got, pl == 1 ? b->ref_ro : b->ref_out, mine,
                                      RTOL_FUSED, ATOL_FUSED);
            if (e > 1.0)
                return BK_FAIL(err, BK_ERR_INTERNAL, "%lld x %lld call %d: the %s rank 0 wrote "
                               "into rank 1's plane for its rows is off the float64 reference "
                               "(worst error %.3g of tolerance)", (long long)tokens,
                               (long long)hidden, k, pl == 1 ? "residual_out" : "out", e);
        }
        LT_CUDA(cudaMemcpy(peer0 + plane + mine * 2, b->ro + mine, theirs * 2,
                           cudaMemcpyHostToDevice), "write residual_out rows");
        if ((st = hand_post(c, peer0 + 2 * plane + mine * 2, b->out + mine, theirs * 2,
                            *ep + 2, err)) != BK_OK)
            return st;
        *ep += 2;
    }
    return BK_OK;
}

/* Rank 0: the real variant HAND_CALLS times a shape (eager, eager, graph, graph replay), each
 * on fresh inputs, each matching the float64 reference. Rank 1: played by hand. */
static int hand_rank(int rank, int world, lane_shm *shm, void *argp)
{
    const bk_variant *v = argp;
    const int twoshot = v == &bk_variant_ipc_twoshot_fused;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    lane_tensors lt;
    hand_buf b;
    uint32_t ep = 0;
    memset(&lt, 0, sizeof(lt));
    memset(&b, 0, sizeof(b));
    bk_err_clear(err);
    BK_TRY(lane_comm_up(shm, rank, world, lane_device(rank),
                        bk_ar_rmsnorm_cuda_peer_bytes(300, 6144), g_timeout_s, &comm, err));
    if (!comm->have_p2p) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "no peer memory: %s", comm->p2p_why);
        goto out;
    }
    for (int s = 0; s < NHAND; s++) {
        const int64_t tokens = k_hand_shapes[s][0], hidden = k_hand_shapes[s][1];
        const size_t n = (size_t)tokens * hidden;
        if (rank == 1) {
            b.x0 = malloc(n * 2), b.x0_prev = malloc(n * 2), b.x1 = malloc(n * 2);
            b.got = malloc(n * 2), b.ro = malloc(n * 2), b.out = malloc(n * 2);
            b.ref_ro = malloc(n * sizeof(double)), b.ref_out = malloc(n * sizeof(double));
            if (!b.x0 || !b.x0_prev || !b.x1 || !b.got || !b.ro || !b.out || !b.ref_ro ||
                !b.ref_out) {
                st = BK_FAIL(err, BK_ERR_SYSTEM, "out of host memory");
                goto out;
            }
            BK_TRY(twoshot ? hand_twoshot(comm, s, &b, &ep, err)
                           : hand_oneshot(comm, s, &b, &ep, err));
            hand_free(&b);
            continue;
        }
        BK_TRY(lt_alloc(&lt, tokens, hidden, err));
        for (int k = 0; k < HAND_CALLS; k++) {
            char what[160];
            uint64_t h = 0;
            snprintf(what, sizeof(what), "%s beside a peer played by hand, call %d (%s)",
                     v->name, k, k < 2 ? "eager" : "graph");
            BK_TRY(lt_inputs(&lt, hand_seed(s, k), rank, world, err));
            BK_TRY(lt_call(&lt, v, comm, k >= 2, 0, g_timeout_s, err));
            BK_TRY(lt_check(&lt, what, RTOL_FUSED, ATOL_FUSED, 0, &h, err));
        }
        lt_free(&lt);
        memset(&lt, 0, sizeof(lt));
    }
out:
    lane_wait_done(shm, rank, 3 * g_timeout_s);
    hand_free(&b);
    lt_free(&lt);
    bk_cuda_comm_destroy(comm);
    return st == BK_OK ? 0 : rank_fail(shm, rank, err);
}

static void hand_lane(const bk_variant *v)
{
    munmap(lane_ok(2, hand_rank, (void *)v, 12 * g_timeout_s), sizeof(lane_shm));
}

static void test_oneshot_peer_by_hand(void **state)
{
    (void)state;
    hand_lane(&bk_variant_ipc_oneshot_fused);
}

static void test_twoshot_peer_by_hand(void **state)
{
    (void)state;
    hand_lane(&bk_variant_ipc_twoshot_fused);
}

/* A lane of 16 (past the 8 whose peer memory is mapped; NCCL alone serves such a lane,
 * e.g. TP 16 over two 8-GPU hosts): every rank creates and connects its side without
 * opening a handle, says why it has no peer memory, and the IPC variants refuse it. Here
 * the 16 share this host's GPUs (rank modulo their count, 8 at most, so some two share
 * one), so NCCL is skipped too and the lane barrier says both
 * reasons; across hosts the barrier is NCCL's (tests/gpu/test_hosts_cuda.sh). */
static int wide_rank(int rank, int world, lane_shm *shm, void *argp)
{
    (void)argp;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    lane_tensors lt;
    memset(&lt, 0, sizeof(lt));
    bk_err_clear(err);
    BK_TRY(lane_comm_up(shm, rank, world, lane_device(rank),
                        bk_ar_rmsnorm_cuda_peer_bytes(8, 4096), g_timeout_s, &comm, err));
    char want[128];
    snprintf(want, sizeof(want), "a lane of %d ranks (peer memory is mapped for lanes of up "
             "to 8)", world);
    if (comm->have_p2p || strcmp(comm->p2p_why, want) != 0 || comm->nccl ||
        !strstr(comm->nccl_why, "share GPU")) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "have_p2p %d (%s), nccl %p (%s)", comm->have_p2p,
                     comm->p2p_why, comm->nccl, comm->nccl_why);
        goto out;
    }
    for (int r = 0; r < BK_IPC_MAX_WORLD; r++)
        if (comm->dev.data[r] || comm->dev.flags[r]) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "peer memory of rank %d mapped", r);
            goto out;
        }
    bk_status got = bk_cuda_comm_barrier(comm, NULL, 1.0, err);
    if (got != BK_ERR_UNSUPPORTED || !strstr(err->msg, want) || !strstr(err->msg, "share GPU")) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "barrier: %s: %s", bk_status_name(got), err->msg);
        goto out;
    }
    bk_err_clear(err);
    BK_TRY(lt_alloc(&lt, 8, 4096, err));
    BK_TRY(lt_inputs(&lt, 7, rank, world, err));
    got = lt_call(&lt, &bk_variant_ipc_oneshot_fused, comm, 0, 0, 1.0, err);
    if (got == BK_OK) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "ipc_oneshot_fused ran on a lane of %d", world);
        goto out;
    }
    bk_err_clear(err);
out:
    return rank_end(shm, rank, 3 * g_timeout_s, &lt, comm, st, err);
}

static void test_wide_lane_nccl_only(void **state)
{
    (void)state;
    munmap(lane_ok(16, wide_rank, NULL, 6 * g_timeout_s), sizeof(lane_shm));
}

/* ---- NCCL aborted while a graph holds its calls ----
 * A lane of 2 over two hosts (NCCL over sockets, g_lane_hosts): both ranks make one eager
 * call (NCCL connects), then rank 1 takes no further part. Rank 0 replays
 * nccl_then_rmsnorm's graph: its allreduce waits for rank 1 for ever, so the bounded wait
 * times out. A graph that captured an NCCL call holds a reference on the communicator, and
 * ncclCommAbort waits until every such graph is gone (NCCL's persistent plans, 2.26 on): an
 * abort inside the wait, with the graph alive, never returned (the engine then hung until
 * its agent killed it at arm_s, its reason lost). Deferred (bk_cuda_comm_defer_abort), the
 * wait marks the abort due; with the graph destroyed, the abort returns and the stream
 * drains, each within its bound. */
#define ABORT_BOUND_S 30.0

static int abort_graph_rank(int rank, int world, lane_shm *shm, void *argp)
{
    (void)argp;
    bk_err e, *err = &e;
    bk_status st = BK_OK;
    bk_cuda_comm *comm = NULL;
    lane_tensors lt;
    memset(&lt, 0, sizeof(lt));
    bk_err_clear(err);
    BK_TRY(lane_comm_up(shm, rank, world, lane_device(rank),
                        bk_ar_rmsnorm_cuda_peer_bytes(8, 4096), g_timeout_s, &comm, err));
    if (!comm->nccl) {
        st = BK_FAIL(err, BK_ERR_INTERNAL, "no NCCL on the lane: %s", comm->nccl_why);
        goto out;
    }
    BK_TRY(lt_alloc(&lt, 8, 4096, err));
    BK_TRY(lt_inputs(&lt, 7, rank, world, err));
    BK_TRY(lt_call(&lt, &bk_variant_nccl_then_rmsnorm, comm, 0, 1, g_timeout_s, err));
    if (rank == 0) {
        bk_cuda_comm_defer_abort(comm, 1);
        bk_status got = lt_call(&lt, &bk_variant_nccl_then_rmsnorm, comm, 1, 0, 0.5, err);
        if (got != BK_ERR_TIMEOUT || !comm->nccl || !comm->abort_due || !lt.exec) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "the graph's wait: expected a time-out with "
                         "NCCL's abort due and the graph kept, got %s (nccl %p, due %d): %s",
                         bk_status_name(got), comm->nccl, comm->abort_due, err->msg);
            goto out;
        }
        bk_err_clear(err);
        (void)cudaGraphExecDestroy(lt.exec); /* still running: freed when it completes */
        lt.exec = NULL;
        const uint64_t t0 = bk_now_ns();
        bk_cuda_comm_defer_abort(comm, 0);
        const double abort_s = (double)(bk_now_ns() - t0) / 1e9;
        if (comm->nccl || comm->abort_due || abort_s > ABORT_BOUND_S) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "the due abort: nccl %p, due %d after %.1f s",
                         comm->nccl, comm->abort_due, abort_s);
            goto out;
        }
        /* aborted, NCCL's kernel ends, and the stream drains */
        const uint64_t deadline = bk_now_ns() + (uint64_t)(ABORT_BOUND_S * 1e9);
        cudaError_t q;
        while ((q = cudaStreamQuery(lt.stream)) == cudaErrorNotReady && bk_now_ns() < deadline)
            bk_sleep_ns(1000000);
        if (q != cudaSuccess) {
            st = BK_FAIL(err, BK_ERR_INTERNAL, "the stream after the abort: %s",
                         cudaGetErrorString(q));
            goto out;
        }
        printf("rank 0: the graph's wait timed out; NCCL aborted in %.2f s once the graph "
               "was destroyed, the stream drained\n", abort_s);
    }
out:
    return rank_end(shm, rank, 3 * ABORT_BOUND_S, &lt, comm, st, err);
}

static void test_nccl_abort_with_graph(void **state)
{
    (void)state;
    lane_hosts_begin(2);
    munmap(lane_ok(2, abort_graph_rank, NULL, 6 * g_timeout_s + 4 * ABORT_BOUND_S),
           sizeof(lane_shm));
    g_lane_hosts = 0;
}

static void test_hang_times_out(void **state)
{
    (void)state;
    const bk_variant *vs[2] = {&bk_variant_ipc_oneshot_fused, &bk_variant_ipc_twoshot_fused};
    for (int i = 0; i < 2; i++)
        munmap(lane_ok(2, hang_rank, (void *)vs[i], 6 * g_timeout_s), sizeof(lane_shm));
}

int main(void)
{
    char why[256];
    if (!lane_probe(why, sizeof(why))) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    const char *env = getenv("BK_TEST_TIMEOUT_S");
    if (env && *env) {
        char *end = NULL;
        const double t = strtod(env, &end);
        if (*end || !(t >= 1 && t <= 3600)) {
            printf("BK_TEST_TIMEOUT_S=%s: want seconds from 1 to 3600\n", env);
            return 1;
        }
        g_timeout_s = t;
        printf("test_cuda_ipc: every lane bound %.0f s (BK_TEST_TIMEOUT_S)\n", t);
    }
    bk_test_filter("test_cuda_ipc");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_world1), cmocka_unit_test(test_fused_world2),
        cmocka_unit_test(test_fused_world4), cmocka_unit_test(test_fused_world8),
        cmocka_unit_test(test_pdl_world1),  cmocka_unit_test(test_pdl_world2),
        cmocka_unit_test(test_nccl_world1),  cmocka_unit_test(test_hang_times_out),
        cmocka_unit_test(test_arm_end),
        cmocka_unit_test(test_oneshot_peer_by_hand), cmocka_unit_test(test_twoshot_peer_by_hand),
        cmocka_unit_test(test_wide_lane_nccl_only), cmocka_unit_test(test_nccl_hosts_world2),
        cmocka_unit_test(test_nccl_hosts_world4), cmocka_unit_test(test_nccl_hosts_world8),
        cmocka_unit_test(test_nccl_abort_with_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif /* BK_HAVE_CUDA */
