/* run_judge.c - an arm's outcome from its lane ranks' evidence (bk_run_judge_arm: exit codes,
 * signals, time-outs, statuses, sample counts) and whether a termination cut the run short
 * (bk_run_terminated). `bracket run` and `bracket score` judge alike from the same code. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/catalog.h"
#include "runner/orchestrate.h"
#include "runner/terminate.h"

static int all_tensors(const bk_run *run, const bk_rank_data *d)
{
    for (int k = 0; k < run->plan.workload.nshapes * run->noutputs; k++)
        if (!d->tensors || !d->tensors[k])
            return 0;
    return 1;
}

uint64_t bk_plan_routed(const bk_plan *p, const char *variant, int world, bk_backend backend)
{
    const bk_variant *v = bk_catalog_variant(p->target, variant);
    const bk_variant *inc = bk_catalog_variant(p->target, p->incumbent.name);
    uint64_t m = 0;
    if (!v || v == inc) /* the incumbent's arms: nothing to route */
        return 0;
    for (int i = 0; i < p->workload.nshapes && i < 64; i++)
        if (!bk_domain_contains(&v->domain, &p->workload.shapes[i], world, p->arena.dtype,
                                backend, 1, NULL, 0))
            m |= (uint64_t)1 << i;
    return m;
}

uint64_t bk_arm_want_routed(const bk_run *run, const bk_arm_run *a)
{
    /* the candidate's arms route what the run's catalog routed; the incumbent's nothing */
    const bk_plan *p = &run->plan;
    return strcmp(a->variant, p->candidate.name) == 0 &&
                   strcmp(p->candidate.name, p->incumbent.name) != 0
               ? run->cand_routed
               : 0;
}

void bk_routed_text(uint64_t m, char *buf, size_t len) /* BK_ROUTED_TEXT holds any */
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    if (!m) {
        snprintf(buf, len, "none");
        return;
    }
    for (int i = 0; i < 64 && used < len; i++)
        if (m & ((uint64_t)1 << i)) {
            int k = snprintf(buf + used, len - used, "%s%d", used ? ", " : "", i);
            used += k > 0 ? (size_t)k : 0;
        }
}

/* Append `line` to a's reason at *len, within its first `cap` bytes ("; " between lines);
 * a reason that fills up to cap ends after a whole word, and no line comes after it.
 * Returns 1 when some of the line went in. */
static int add_line(bk_arm_run *a, size_t *len, size_t cap, const char *line)
{
    if (*len + 2 >= cap)
        return 0;
    if (bk_strlcpy_words(a->reason + *len, line, cap - *len) != 0)
        *len = cap; /* full, ending in "...": nothing after it */
    else
        *len += strlen(a->reason + *len);
    return 1;
}

/* What a round's reason gets before it in an arm of several rounds (run.c: "round 16 of
 * 16: "): kept free where the never-said-hello lines end the reason, so they stay whole */
#define ROUND_PREFIX_ROOM 32

/* The rendezvous answers once every lane rank said hello, so the ranks that said it wait
 * there for the others, and fail at the arm's end with "rendezvous: no answer from the
 * coordinator"; the rank they waited for (hung before its hello: its backend's start, say)
 * is then killed after their failure, and a killed rank gets no line of its own. Where some
 * lane ranks said hello and some did not, and no signal to the run cut it short, the lines
 * naming those that did not go into `out` (at most half the reason, cut after a word); the
 * judge reserves room for them and adds them only where every rank it named for its own
 * failure said hello: a named rank that failed before its hello is the cause itself, and
 * the others without one may only have been slower to start. Returns out's length. */
static size_t no_hello_lines(const bk_arm_run *a, char *out, size_t cap)
{
    int said = 0;
    out[0] = '\0';
    for (int r = 0; r < a->world; r++)
        said += a->r[r].hello != 0;
    if (a->terminated || said == 0 || said == a->world)
        return 0;
    size_t n = 0;
    for (int r = 0; r < a->world && n + 2 < cap; r++) {
        const bk_rank_data *d = &a->r[r];
        if (d->hello)
            continue;
        char pd[96], line[256 + 2 * BK_HOST_LEN];
        bk_proc_describe(&d->proc, pd, sizeof pd);
        snprintf(line, sizeof line, "; arm %s lane rank %d (%s, MPI rank %d): never said hello "
                 "to the rendezvous, where the lane's ranks that did waited for it (its engine: "
                 "%s)", a->name, r, d->host, d->mpi_rank, pd);
        if (bk_strlcpy_words(out + n, line, cap - n) != 0)
            return strlen(out); /* full, ending in "..." */
        n += strlen(out + n);
    }
    return n;
}

/* Each failed lane rank's line in a's reason, from its start (left as it was where none
 * failed), within its first `cap` bytes; a->ok 0 where one failed. Returns 1 when a rank
 * whose line went in never said hello. */
static int rank_lines(const bk_run *run, bk_arm_run *a, size_t cap)
{
    const uint64_t want_routed = bk_arm_want_routed(run, a);
    a->ok = 1;
    size_t len = 0;
    int named_no_hello = 0;
    uint64_t want = a->audit ? 0
                             : (uint64_t)run->plan.workload.iters * (uint64_t)run->plan.workload.nshapes;
    for (int r = 0; r < a->world; r++) {
        const bk_rank_data *d = &a->r[r];
        char why[800] = "";
        char pd[96];
        bk_proc_describe(&d->proc, pd, sizeof pd);
        if (!d->reported)
            snprintf(why, sizeof why, "no report from the agent of MPI rank %d", d->mpi_rank);
        else if (d->proc.timed_out)
            snprintf(why, sizeof why, "engine timed out after %.0f s", run->plan.timeouts.arm_s);
        else if (d->agent_signal && (d->proc.killed || d->proc.signal == SIGTERM ||
                                     d->proc.signal == SIGINT || d->proc.signal == SIGHUP))
            snprintf(why, sizeof why, "its agent (MPI rank %d) got %s and stopped the engine "
                     "(%s)", d->mpi_rank, bk_terminate_signame(d->agent_signal), pd);
        else if (a->terminated && (d->proc.signal == SIGTERM || d->proc.signal == SIGINT ||
                                   d->proc.signal == SIGHUP))
            snprintf(why, sizeof why, "engine %s%s as the run was terminated",
                     d->proc.killed ? "" : "ended by ", pd); /* "killed by the runner (...)" */
        else if (d->proc.signal && !d->proc.killed)
            snprintf(why, sizeof why, "engine crashed: %s", pd);
        else if (d->proc.killed)
            snprintf(why, sizeof why, "engine killed %s", a->terminated
                         ? "by the runner as the run was terminated" : "after a peer failed");
        else if (d->proc.exit_code != 0)
            snprintf(why, sizeof why, "engine failed (%s)%s%s", pd, d->status_msg[0] ? ": " : "",
                     d->status_msg);
        else if (!d->status_seen)
            snprintf(why, sizeof why, "no final status received");
        else if (!d->status_ok)
            snprintf(why, sizeof why, "engine reported failure: %s",
                     d->status_msg[0] ? d->status_msg : "(no reason given)");
        else if (!a->audit && (d->samples_got != want || d->samples_claimed != want))
            snprintf(why, sizeof why, "samples missing: got %llu, sent %llu, expected %llu",
                     (unsigned long long)d->samples_got, (unsigned long long)d->samples_claimed,
                     (unsigned long long)want);
        else if (a->audit && !all_tensors(run, d))
            snprintf(why, sizeof why, "output tensors missing from the audit");
        else if (run->cand_routed_known && d->routed_known && d->routed != want_routed) {
            /* the engine routed other shapes to the incumbent than the plan's domains say:
             * the arm did not time what the plan describes */
            char got[BK_ROUTED_TEXT], want[BK_ROUTED_TEXT];
            bk_routed_text(d->routed, got, sizeof got);
            bk_routed_text(want_routed, want, sizeof want);
            snprintf(why, sizeof why, "engine served shape(s) %s with the incumbent; the "
                     "variant's domain routes %s", got, want);
        }
        if (!why[0])
            continue;
        if (a->ok || !d->proc.killed || d->agent_signal) { /* its line, where room is left */
            char line[sizeof why + 2 * BK_HOST_LEN];
            snprintf(line, sizeof line, "%sarm %s lane rank %d (%s, MPI rank %d): %s",
                     len ? "; " : "", a->name, r, d->host, d->mpi_rank, why);
            if (add_line(a, &len, cap, line))
                named_no_hello |= !d->hello;
        }
        a->ok = 0;
    }
    return named_no_hello;
}

void bk_run_judge_arm(const bk_run *run, bk_arm_run *a)
{
    /* the lines naming ranks that never said hello, with room kept for them at the end (and
     * for a round's prefix before the reason); where they are not wanted after all, the
     * ranks' lines are written again with the whole reason theirs */
    char tail[sizeof a->reason / 2];
    const size_t ntail = no_hello_lines(a, tail, sizeof tail);
    const size_t cap = sizeof a->reason - (ntail ? ntail + ROUND_PREFIX_ROOM : 0);
    const int named_no_hello = rank_lines(run, a, cap);
    if (a->ok || !ntail)
        return;
    if (named_no_hello) { /* the room kept is not used: the lines again, with all of it */
        rank_lines(run, a, sizeof a->reason);
        return;
    }
    /* after the lines (a failed arm has one, so the tail's leading "; " separates) */
    const size_t at = strlen(a->reason);
    memcpy(a->reason + at, tail, ntail + 1);
}

/* NAME out of "terminated by NAME during ..." / "... before ..." (at most len - 1 bytes) */
static int terminated_name(const char *text, char *name, size_t len)
{
    static const char pre[] = "terminated by ";
    int k0 = 0, r0 = 0, skip = 0;
    /* a round of a repeated arm: "round k of R: terminated by ..." */
    if (sscanf(text, "round %d of %d: %n", &k0, &r0, &skip) == 2 && skip > 0)
        text += skip;
    if (strncmp(text, pre, sizeof pre - 1) != 0)
        return 0;
    const char *n = text + sizeof pre - 1, *end = strstr(n, " during arm ");
    const char *before = strstr(n, " before ");
    if (!end || (before && before < end))
        end = before;
    if (!end || end == n)
        return 0;
    size_t k = (size_t)(end - n) < len ? (size_t)(end - n) : len - 1;
    memcpy(name, n, k);
    name[k] = '\0';
    return 1;
}

int bk_arm_terminated(const bk_arm_run *a, char *name, size_t len)
{
    return a->ran && !a->ok && terminated_name(a->reason, name, len);
}

int bk_arm_broke_contract(const bk_arm_run *a)
{
    for (int r = 0; a->r && r < bk_arm_rounds(a) * a->world; r++)
        if (a->r[r].broke_contract)
            return r;
    return -1;
}

int bk_run_terminated(const bk_run *run, char *name, size_t len)
{
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) /* in run order */
        if (bk_arm_terminated(&run->arms[idx], name, len))
            return 1;
    return strstr(run->stopped, " before arm ") && terminated_name(run->stopped, name, len);
}

void bk_run_stopped_failed(const bk_run *run, int idx, char *buf, size_t len)
{
    char name[32];
    if (bk_arm_terminated(&run->arms[idx], name, sizeof name))
        snprintf(buf, len, "terminated by %s during arm %s; later arms not run", name,
                 bk_arm_names[idx]);
    else
        snprintf(buf, len, "arm %s failed; later arms not run", bk_arm_names[idx]);
}

void bk_run_stopped_before(const char *signame, int idx, char *buf, size_t len)
{
    snprintf(buf, len, "terminated by %s before arm %s", signame, bk_arm_names[idx]);
}

#define UNFINISHED_PRE "unfinished: written before arm "
#define UNFINISHED_POST "; the run did not replace it"

void bk_run_stopped_unfinished(int idx, char *buf, size_t len)
{
    snprintf(buf, len, UNFINISHED_PRE "%s" UNFINISHED_POST, bk_arm_names[idx]);
}

int bk_run_unfinished_arm(const char *stopped)
{
    char want[256];
    if (strncmp(stopped, UNFINISHED_PRE, sizeof UNFINISHED_PRE - 1) != 0)
        return -1;
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) {
        bk_run_stopped_unfinished(idx, want, sizeof want);
        if (!strcmp(stopped, want))
            return idx;
    }
    return -1;
}

int bk_run_v7_decided(const bk_run *run, char *buf, size_t len)
{
    bk_score look;
    bk_err e = { 0 };
    bk_run *then = malloc(sizeof *then);
    int decided = 0;
    if (!then)
        return 0;
    *then = *run; /* shallow: the arms' data is only read */
    then->quality.state = BK_QUALITY_NOT_RUN;
    if (bk_run_evaluate(then, 1, &look, &e) == BK_OK && look.verdict != BK_VERDICT_NO_DECISION) {
        snprintf(buf, len, "v7: B/C decided (%s), B' not run", bk_verdict_name(look.verdict));
        decided = 1;
    }
    free(then);
    return decided;
}

