/* run.c - the arms of a bracket under MPI: rank 0 coordinates, every rank is an agent that
 * spawns its lane's engine, watches it with a bound and reports how it ended. Agents wait
 * with MPI_Test and short sleeps, never MPI's busy poll (the machine may be oversubscribed). */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/collectives.h"
#include "runner/janitor.h"
#include "runner/orchestrate.h"
#include "runner/straggler.h"
#include "runner/terminate.h"
#ifdef BK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define TAG_REPORT 101
#define TAG_CTRL 102
#define CTRL_END 1
#define CTRL_ABORT 2
#define CTRL_TIMEOUT 3 /* the lane is stopped because the arm ran out of timeouts.arm_s: every
                        * engine still running then has run as long as the one whose agent's
                        * clock fired first (they were spawned by one broadcast, a few ms
                        * apart), so each is killed and reported as timed out, whichever
                        * agent's deadline passed first */
#define POLL_NS 5000000ull /* agents' nap between MPI tests: 5 ms, far from the engines' hot path */
#define TERM_KILL_S 0.2      /* grace for an engine when the job is terminated */
#define TERM_WAIT_NS 10000000000ull /* after a termination signal, how long an agent waits
                                     * for rank 0 before it leaves on its own */

typedef struct arm_msg {
    int32_t kind; /* 1 run an arm (one round of it), 2 done */
    int32_t idx;
    char arm[BK_ARM_LEN]; /* the round's name (bk_arm_round_name) */
    int32_t audit;
    int32_t world;
    char variant[128];
    int32_t lane[BK_MAX_LANE];
} arm_msg;

typedef struct report_msg {
    int32_t lane_rank;
    int32_t pid;        /* the engine's, as spawned (known even if it never said hello) */
    int32_t exit_code;
    int32_t signal;
    int32_t timed_out;
    int32_t killed;
    int32_t spawned;
    int32_t agent_signal; /* the SIGTERM / SIGINT the agent itself got, if any */
    double spawn_s;
    char host[BK_HOST_LEN];
} report_msg;

/* Wait for a non-blocking request by testing and napping; after a termination
 * signal, for TERM_WAIT_NS at most (-1: gave up). */
static int wait_req(MPI_Request *req)
{
    int done = 0;
    uint64_t t_term = 0;
    while (!done) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        if (done)
            break;
        if (bk_terminate_signal()) {
            uint64_t now = bk_now_ns();
            if (!t_term)
                t_term = now;
            else if (now - t_term > TERM_WAIT_NS)
                return -1;
        }
        bk_sleep_ns(POLL_NS);
    }
    return 0;
}

static void build_argv(const bk_agent_env *env, const arm_msg *m, int lane_rank, char *buf[32],
                       char store[8][64])
{
    int n = 0;
    snprintf(store[0], 64, "%d", lane_rank);
    snprintf(store[1], 64, "%d", m->world);
    snprintf(store[2], 64, "%d", env->device);
    buf[n++] = (char *)env->exe;
    buf[n++] = "engine";
    buf[n++] = "--plan";
    buf[n++] = (char *)env->plan_path;
    buf[n++] = "--run";
    buf[n++] = (char *)env->run_id;
    buf[n++] = "--arm";
    buf[n++] = (char *)m->arm;
    buf[n++] = "--variant";
    buf[n++] = (char *)m->variant;
    buf[n++] = "--rendezvous";
    buf[n++] = (char *)env->ep_rv;
    buf[n++] = "--samples";
    buf[n++] = (char *)env->ep_samples;
    buf[n++] = "--rank";
    buf[n++] = store[0];
    buf[n++] = "--world";
    buf[n++] = store[1];
    buf[n++] = "--device";
    buf[n++] = store[2];
    buf[n++] = "--backend";
    buf[n++] = (char *)bk_backend_name(env->backend);
    if (m->audit) { /* the audit holds the variant to verify's contract: inputs unchanged */
        buf[n++] = "--audit";
        buf[n++] = "--check-inputs";
    }
    if (env->keys_path) {
        buf[n++] = "--keys-file";
        buf[n++] = (char *)env->keys_path;
    }
    buf[n] = NULL;
}

static void fill_report(report_msg *r, int lane_rank, const bk_proc *p, int spawned,
                        const char *host)
{
    memset(r, 0, sizeof *r);
    r->lane_rank = lane_rank;
    r->pid = (int32_t)p->pid;
    r->exit_code = p->exit_code;
    r->signal = p->signal;
    r->timed_out = p->timed_out;
    r->killed = p->killed;
    r->spawned = spawned;
    r->agent_signal = bk_terminate_signal();
    r->spawn_s = bk_proc_seconds(p);
    bk_strlcpy(r->host, host, sizeof r->host);
}

static int lane_index(const arm_msg *m, int mpi_rank)
{
    for (int i = 0; i < m->world; i++)
        if (m->lane[i] == mpi_rank)
            return i;
    return -1;
}

/* The cpu engine's shared-memory segment for this rank's janitor (janitor.h): an engine
 * killed in the window before it unlinks the segment itself (collectives/shm.c), together
 * with the agent that would have unlinked it (rank 0 killed: Open MPI ends the others), must
 * not leave it in /dev/shm. */
static void janitor_engine(const bk_agent_env *env, const char *arm, int lane_rank)
{
    if (env->backend == BK_BACKEND_CPU)
        bk_janitor_add_shm(env->run_id, arm, lane_rank);
}

/* An engine's arm is over: its segment unlinked when it failed (it may not have), and
 * taken back from the janitor once the engine has ended, so that the janitor's list stays
 * short over many rounds (janitor.h: 64 paths). */
static void engine_over(const bk_agent_env *env, const char *arm, int lane_rank,
                        const bk_proc *p)
{
    if (p->exit_code != 0)
        bk_cleanup_engine(env, arm, lane_rank);
    if (p->done && env->backend == BK_BACKEND_CPU)
        bk_janitor_withdraw_shm(env->run_id, arm, lane_rank);
}

/* ---- agents (every rank but 0) ---- */

static void agent_arm(const bk_agent_env *env, const arm_msg *m)
{
    int lr = lane_index(m, env->mpi_rank);
    if (lr < 0)
        return;
    char *argv[32];
    char store[8][64];
    build_argv(env, m, lr, argv, store);
    janitor_engine(env, m->arm, lr);
    bk_proc p;
    bk_err err = { 0 };
    int spawned = bk_proc_spawn(env->exe, argv, &p, &err) == BK_OK;
    if (!spawned) {
        fprintf(stderr, "bracket [%s rank %d]: %s\n", env->host, env->mpi_rank, err.msg);
        p.done = 1;
        p.exit_code = 127;
    }
    int32_t ctrl = 0;
    MPI_Request creq, rreq = MPI_REQUEST_NULL;
    MPI_Irecv(&ctrl, 1, MPI_INT32_T, 0, TAG_CTRL, MPI_COMM_WORLD, &creq);
    report_msg rep;
    int reported = 0, got_ctrl = 0;
    uint64_t deadline = bk_now_ns() + (uint64_t)(env->arm_s * 1e9), t_term = 0;
    while (!got_ctrl) {
        if (!p.done && bk_now_ns() > deadline)
            bk_proc_kill(&p, 2.0, 1);
        if (bk_terminate_signal()) {
            /* the job is being terminated: our engine goes now; rank 0 writes the
             * partial record and ends the job, or we leave after TERM_WAIT_NS */
            if (!p.done)
                bk_proc_kill(&p, TERM_KILL_S, 0);
            if (!t_term)
                t_term = bk_now_ns();
            else if (bk_now_ns() - t_term > TERM_WAIT_NS)
                break;
        }
        if (!reported && bk_proc_poll(&p)) {
            fill_report(&rep, lr, &p, spawned, env->host);
            MPI_Isend(&rep, sizeof rep, MPI_BYTE, 0, TAG_REPORT, MPI_COMM_WORLD, &rreq);
            reported = 1;
        }
        int flag = 0;
        MPI_Test(&creq, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            got_ctrl = 1;
            if (!p.done)
                bk_proc_kill(&p, 2.0, ctrl == CTRL_TIMEOUT);
            if (!reported) {
                fill_report(&rep, lr, &p, spawned, env->host);
                MPI_Isend(&rep, sizeof rep, MPI_BYTE, 0, TAG_REPORT, MPI_COMM_WORLD, &rreq);
                reported = 1;
            }
            break;
        }
        bk_sleep_ns(POLL_NS);
    }
    if (!bk_terminate_signal())
        wait_req(&rreq);
    engine_over(env, m->arm, lr, &p);
}

int bk_agent_loop(const bk_agent_env *env)
{
    for (;;) {
        arm_msg m;
        MPI_Request req;
        MPI_Ibcast(&m, sizeof m, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
        if (wait_req(&req) != 0)
            return bk_terminate_signal() ? 4 /* BK_EXIT_NO_DECISION */ : -1;
        if (m.kind != 1)
            return m.idx; /* the run's exit status, the same on every rank */
        agent_arm(env, &m);
    }
}

/* ---- rank 0: run one arm ---- */

static void progress(const bk_run *run, bk_coord *c, const bk_arm_run *a, uint64_t t0)
{
    int shape = 0;
    uint64_t got = bk_coord_progress(c, &shape);
    double el = (double)(bk_now_ns() - t0) / 1e9;
    if (a->audit)
        fprintf(stderr, "\r  arm %-2s  audit  elapsed %6.1f s   ", a->name, el);
    else
        fprintf(stderr, "\r  arm %-2s  shape %d/%d  iter %llu/%d  elapsed %6.1f s   ", a->name,
                shape + 1, run->plan.workload.nshapes,
                (unsigned long long)(got - (uint64_t)shape * (uint64_t)run->plan.workload.iters),
                run->plan.workload.iters, el);
}

/* Rank 0's own engine, ended, as its lane rank's report (what an agent's report gives for
 * the others); returns 1, for own_reported. */
static int report_own(bk_rank_data *d, const bk_proc *own)
{
    d->proc = *own;
    d->reported = 1;
    if (!d->pid)
        d->pid = own->pid;
    d->spawn_s = bk_proc_seconds(own);
    return 1;
}

/* An engine of the lane ended (rank 0's own, or one an agent reported): the first failure
 * sets *aborted to -1 (the lane is stopped in the caller's loop), with *stop CTRL_TIMEOUT
 * when that engine timed out. */
static void note_end(const bk_proc *p, int *aborted, int32_t *stop)
{
    if (p->exit_code == 0 || *aborted)
        return;
    *aborted = -1;
    if (p->timed_out)
        *stop = CTRL_TIMEOUT;
}

/* Every engine of the round that ended well (reported, exit 0) has pushed its status, which
 * an engine sends after its last samples. */
static int ended_well_status_in(const bk_arm_run *a)
{
    for (int i = 0; i < a->world; i++)
        if (a->r[i].reported && a->r[i].proc.exit_code == 0 && !a->r[i].status_seen)
            return 0;
    return 1;
}

/* One round of an arm: its engines spawned fresh on the lane, watched until they end,
 * judged. `a` is the round's own view of the arm (its name on the wire, its slice of the
 * arm's rank data). */
static bk_status run_round(bk_run *run, bk_coord *c, const bk_agent_env *env, int idx,
                           bk_arm_run *a, bk_err *err)
{
    bk_status st = BK_OK;
    arm_msg m;
    memset(&m, 0, sizeof m);
    m.kind = 1;
    m.idx = idx;
    bk_strlcpy(m.arm, a->name, sizeof m.arm);
    m.audit = a->audit;
    m.world = a->world;
    bk_strlcpy(m.variant, a->variant, sizeof m.variant);
    memcpy(m.lane, a->lane, sizeof(int32_t) * (size_t)a->world);
    BK_TRY(bk_coord_begin_arm(c, a, err));
    a->ran = 1;
    a->t_start_ns = bk_now_ns();

    MPI_Request breq;
    MPI_Ibcast(&m, sizeof m, MPI_BYTE, 0, MPI_COMM_WORLD, &breq);
    wait_req(&breq);

    int my = lane_index(&m, 0);
    bk_proc own;
    memset(&own, 0, sizeof own);
    int own_spawned = 0;
    if (my >= 0) {
        char *argv[32];
        char store[8][64];
        build_argv(env, &m, my, argv, store);
        janitor_engine(env, m.arm, my);
        bk_err serr = { 0 };
        own_spawned = bk_proc_spawn(env->exe, argv, &own, &serr) == BK_OK;
        if (!own_spawned) {
            own.done = 1;
            own.exit_code = 127;
            fprintf(stderr, "bracket: %s\n", serr.msg);
        }
    }
    /* one report per lane rank; rank 0's own is filled in place */
    int nrem = 0;
    MPI_Request *rq = calloc((size_t)a->world, sizeof *rq);
    report_msg *reps = calloc((size_t)a->world, sizeof *reps);
    if (!rq || !reps) {
        free(rq);
        free(reps);
        bk_coord_end_arm(c); /* `a` may be the caller's round view: no pointer to it stays */
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    }
    for (int i = 0; i < a->world; i++) {
        rq[i] = MPI_REQUEST_NULL;
        if (i == my)
            continue;
        MPI_Irecv(&reps[i], sizeof reps[i], MPI_BYTE, a->lane[i], TAG_REPORT, MPI_COMM_WORLD, &rq[i]);
        nrem++;
    }
    int own_reported = my < 0;
    int aborted = 0, all_in_since = 0;
    int32_t stop = CTRL_ABORT; /* how the lane is stopped: CTRL_TIMEOUT when an engine timed out */
    uint64_t t0 = bk_now_ns(), t_all_in = 0;
    uint64_t deadline = t0 + (uint64_t)(run->plan.timeouts.arm_s * 1e9);
    uint64_t hard = deadline + 15000000000ull; /* agents kill at arm_s; reports follow */
    int tty = isatty(2) && !env->quiet;
    uint64_t last_prog = 0, t_term = 0;
    for (;;) {
        bk_coord_poll(c, 2);
        uint64_t now = bk_now_ns();
        if (bk_terminate_signal() && !t_term) {
            t_term = now;
            if (!aborted)
                aborted = -1; /* stop the lane at once, as after a crash */
        }
        if (!own_reported) {
            if (!own.done && now > deadline)
                bk_proc_kill(&own, 2.0, 1);
            if (bk_proc_poll(&own)) {
                own_reported = report_own(&a->r[my], &own);
                note_end(&own, &aborted, &stop);
            }
        }
        for (int i = 0; i < a->world; i++) {
            if (rq[i] == MPI_REQUEST_NULL)
                continue;
            int flag = 0;
            MPI_Test(&rq[i], &flag, MPI_STATUS_IGNORE);
            if (!flag)
                continue;
            rq[i] = MPI_REQUEST_NULL;
            nrem--;
            bk_rank_data *d = &a->r[i];
            d->reported = 1;
            d->proc.done = 1;
            d->proc.exit_code = reps[i].exit_code;
            d->proc.signal = reps[i].signal;
            d->proc.timed_out = reps[i].timed_out;
            d->proc.killed = reps[i].killed;
            d->agent_signal = reps[i].agent_signal;
            d->spawn_s = reps[i].spawn_s;
            if (!d->pid)
                d->pid = reps[i].pid;
            note_end(&d->proc, &aborted, &stop);
        }
        if (aborted == -1 || (!aborted && now > hard)) {
            /* a crash or a hang: stop the whole lane now rather than letting
             * peers wait out their barrier time-outs */
            if (aborted != -1)
                stop = CTRL_TIMEOUT; /* past the hard deadline: the arm timed out */
            aborted = 1;
            for (int i = 0; i < a->world; i++)
                if (i != my)
                    MPI_Send(&stop, 1, MPI_INT32_T, a->lane[i], TAG_CTRL, MPI_COMM_WORLD);
            if (my >= 0 && !own.done) {
                bk_proc_kill(&own, t_term ? TERM_KILL_S : 2.0, stop == CTRL_TIMEOUT);
                own_reported = report_own(&a->r[my], &own);
            }
        }
        int all_in = nrem == 0 && own_reported;
        if (all_in && !all_in_since) {
            all_in_since = 1;
            t_all_in = now;
        }
        /* after every process ended, give queued messages a short grace (statuses, and
         * samples sent again after a connection broke: bk_coord_all_in) */
        if (all_in && (bk_coord_all_in(c) || now - t_all_in > 2000000000ull))
            break;
        /* terminated: the partial record must be written quickly, within 500 ms of the
         * signal. Until then, once every engine has ended, the statuses of those that
         * ended well are still awaited (each engine pushes its status after its last
         * samples): an arm whose engines had all finished before the signal stands */
        if (t_term && ((all_in && ended_well_status_in(a)) || now - t_term > 500000000ull))
            break;
        if (now > hard + 10000000000ull) {
            /* an agent never answered: give up on it (its report stays missing) */
            for (int i = 0; i < a->world; i++)
                if (rq[i] != MPI_REQUEST_NULL) {
                    MPI_Cancel(&rq[i]);
                    MPI_Request_free(&rq[i]);
                }
            break;
        }
        if (tty && now - last_prog > 100000000ull) {
            progress(run, c, a, t0);
            last_prog = now;
        }
    }
    if (tty)
        fprintf(stderr, "\r%*s\r", 72, "");
    if (!aborted) {
        int32_t ctrl = CTRL_END;
        for (int i = 0; i < a->world; i++)
            if (i != my)
                MPI_Send(&ctrl, 1, MPI_INT32_T, a->lane[i], TAG_CTRL, MPI_COMM_WORLD);
    }
    if (my >= 0)
        engine_over(env, a->name, my, &own);
    (void)own_spawned;
    free(rq);
    free(reps);
    a->t_end_ns = bk_now_ns();
    a->terminated = t_term != 0;
    bk_run_judge_arm(run, a);
    /* the signal came while the arm ran; an arm whose every engine still ended well with
     * all its samples stands (the run stops before the next arm), else it was cut short */
    if (t_term && !a->ok) {
        char why[sizeof a->reason + 64];
        snprintf(why, sizeof why, "terminated by %s during arm %s%s%s", bk_terminate_name(),
                 a->name, a->reason[0] ? "; " : "", a->reason);
        bk_strlcpy_words(a->reason, why, sizeof a->reason);
        a->ok = 0;
    } else if (a->ok && !a->audit) {
        bk_straggler_note(run, a);
    }
out:
    bk_coord_end_arm(c);
    return st;
}

bk_status bk_run_arm(bk_run *run, bk_coord *c, const bk_agent_env *env, int idx, bk_err *err)
{
    bk_status st = BK_OK;
    bk_arm_run *a = &run->arms[idx];
    int is_cand = idx == BK_ARM_IDX_C || idx == BK_ARM_IDX_A;
    const int *lane = is_cand ? run->candidate : run->baseline;
    const int rounds = idx >= BK_ARM_IDX_A ? 1 : run->plan.protocol.repeats > 1
                                                     ? run->plan.protocol.repeats : 1;
    a->idx = idx;
    a->name = bk_arm_names[idx];
    a->rounds = rounds;
    bk_strlcpy(a->variant, is_cand ? run->plan.candidate.name : run->plan.incumbent.name,
               sizeof a->variant);
    a->audit = idx >= BK_ARM_IDX_A;
    a->world = run->lane_size;
    a->lane = calloc((size_t)a->world, sizeof *a->lane);
    a->r = calloc((size_t)(rounds * a->world), sizeof *a->r);
    if (!a->lane || !a->r)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    for (int i = 0; i < rounds * a->world; i++) {
        a->r[i].mpi_rank = lane[i % a->world];
        bk_strlcpy(a->r[i].host, run->hosts[lane[i % a->world]], BK_HOST_LEN);
    }
    for (int i = 0; i < a->world; i++)
        a->lane[i] = lane[i];
    a->ran = 1;
    a->ok = 1;
    a->t_start_ns = bk_now_ns();
    int full = 0; /* a->reason was cut to fit */
    for (int k = 0; k < rounds && a->ok; k++) {
        char name[BK_ARM_LEN];
        bk_arm_run v = *a; /* round k: its name, its slice of the rank data */
        v.name = bk_arm_round_name(idx, k, name);
        v.rounds = 1;
        v.r = a->r + (size_t)k * (size_t)a->world;
        v.ok = 0;
        v.reason[0] = '\0';
        if (k > 0 && bk_terminate_signal()) {
            snprintf(a->reason, sizeof a->reason, "terminated by %s before round %d of %d",
                     bk_terminate_name(), k + 1, rounds);
            a->ok = 0;
            break;
        }
        if (rounds > 1 && !env->quiet)
            fprintf(stderr, "bracket: arm %s round %d of %d (fresh processes)\n", a->name,
                    k + 1, rounds);
        st = run_round(run, c, env, idx, &v, err);
        a->ok = st == BK_OK && v.ok;
        if (rounds == 1) {
            bk_strlcpy(a->reason, v.reason, sizeof a->reason);
        } else if (!a->ok && v.reason[0]) {
            /* the failing round (the last) first, the earlier rounds' straggler notes after
             * it: the failure decides the arm, and whether a signal cut it is read from the
             * reason's start (bk_arm_terminated); after the notes it was missed, or cut off */
            char notes[sizeof a->reason], line[sizeof v.reason + 64];
            bk_strlcpy(notes, a->reason, sizeof notes);
            snprintf(line, sizeof line, "round %d of %d: %s", k + 1, rounds, v.reason);
            full = bk_strlcpy_words(a->reason, line, sizeof a->reason) != 0;
            const size_t len = strlen(a->reason);
            if (notes[0] && !full) {
                snprintf(line, sizeof line, "; %s", notes);
                full = bk_strlcpy_words(a->reason + len, line, sizeof a->reason - len) != 0;
            }
        } else if (v.reason[0] && !full) { /* a straggler note of a round that ended well;
                                              * none after a reason cut short */
            size_t len = strlen(a->reason);
            char line[sizeof v.reason + 64];
            snprintf(line, sizeof line, "%sround %d of %d: %s", len ? "; " : "", k + 1, rounds,
                     v.reason);
            full = bk_strlcpy_words(a->reason + len, line, sizeof a->reason - len) != 0;
        }
        if (st != BK_OK)
            break;
    }
    a->t_end_ns = bk_now_ns();
    return st;
}

void bk_run_finish_agents(int exit_status)
{
    arm_msg m;
    memset(&m, 0, sizeof m);
    m.kind = 2;
    m.idx = exit_status;
    MPI_Request req;
    MPI_Ibcast(&m, sizeof m, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_req(&req);
}

void bk_cleanup_engine(const bk_agent_env *env, const char *arm, int lane_rank)
{
    if (env->backend != BK_BACKEND_CPU)
        return;
    char name[BK_SHM_NAME_LEN];
    bk_shm_name(env->run_id, arm, lane_rank, name);
    bk_shm_unlink_name(name, NULL); /* absent is fine: the engine cleaned up itself */
}

void bk_run_cleanup_all(const bk_run *run, const bk_agent_env *env)
{
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) {
        const bk_arm_run *a = &run->arms[idx];
        if (!a->ran)
            continue;
        for (int k = 0; k < bk_arm_rounds(a); k++) {
            char name[BK_ARM_LEN];
            for (int r = 0; r < a->world; r++)
                bk_cleanup_engine(env, bk_arm_round_name(idx, k, name), r);
        }
    }
}

bk_backend bk_resolve_backend(bk_backend want)
{
    if (want != BK_BACKEND_AUTO)
        return want;
#ifdef BK_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
        return BK_BACKEND_CUDA;
#endif
    return BK_BACKEND_CPU;
}

const char *bk_private_plan_failed(int e, char *buf, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "cannot write the plan to a private folder in %s%s: %s (set TMPDIR to a "
             "writable folder of a short path, or unset it for /tmp)", tmp && *tmp ? tmp : "/tmp",
             tmp && *tmp ? " ($TMPDIR)" : "", strerror(e));
    return buf;
}

int bk_write_private_plan(const char *what, const char *text, const char *const *also,
                          char *dir, size_t dlen, char *path, size_t plen)
{
    const char *tmp = getenv("TMPDIR");
    path[0] = '\0';
    const int n = snprintf(dir, dlen, "%s/bracket-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
                           what);
    if (n < 0 || (size_t)n >= dlen || (size_t)n + sizeof "/plan.json" > plen) {
        dir[0] = '\0'; /* a cut template would name another folder, or none */
        errno = ENAMETOOLONG;
        return -1;
    }
    const char *files[10] = { "plan.json" };
    for (int i = 0; also && also[i] && i < 8; i++)
        files[i + 1] = also[i];
    /* the folder and its files are the janitor's before the folder exists */
    if (bk_janitor_mkdtemp(dir, files) != 0) {
        dir[0] = '\0';
        return -1;
    }
    snprintf(path, plen, "%s/plan.json", dir);
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f)
        ok = fclose(f) == 0 && ok;
    if (ok)
        return 0;
    int e = errno;
    unlink(path);
    rmdir(dir);
    path[0] = dir[0] = '\0';
    errno = e;
    return -1;
}
