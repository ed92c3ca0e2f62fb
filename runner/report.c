/* report.c - the run's header, per-arm table, score and verdict, as printed text. */
#include <math.h>
#include <string.h>

#include "kernels/catalog.h"
#include "runner/report.h"

static int in_lane(const bk_run *run, int rank)
{
    for (int i = 0; i < run->lane_size; i++)
        if (run->baseline[i] == rank || run->candidate[i] == rank)
            return 1;
    return 0;
}

/* A share of the workload as a percentage that never reads as all or none when it is
 * neither: 99.96% is "more than 99.9%", 0.01% "less than 0.1%". */
void bk_share_text(double share, char *buf, size_t len)
{
    char v[32];
    snprintf(v, sizeof v, "%.1f", 100 * share);
    if (share > 0 && !strcmp(v, "0.0"))
        snprintf(buf, len, "less than 0.1%%");
    else if (share < 1 && !strcmp(v, "100.0"))
        snprintf(buf, len, "more than 99.9%%");
    else
        snprintf(buf, len, "%s%%", v);
}

/* The MPI ranks in neither lane ("4,5" or "4-63"; ",..." ends what does not fit), into
 * buf (len >= 8); returns how many. */
static int idle_ranks(const bk_run *run, char *buf, size_t len)
{
    int n = 0, full = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < run->world_size; r++) {
        if (in_lane(run, r))
            continue;
        int last = r;
        while (last + 1 < run->world_size && !in_lane(run, last + 1))
            last++;
        n += last - r + 1;
        char span[32];
        const char *sep = used ? "," : "";
        if (last - r >= 2)
            snprintf(span, sizeof span, "%s%d-%d", sep, r, last);
        else if (last > r)
            snprintf(span, sizeof span, "%s%d,%d", sep, r, last);
        else
            snprintf(span, sizeof span, "%s%d", sep, r);
        if (!full && used + strlen(span) + sizeof ",..." <= len) {
            used += (size_t)snprintf(buf + used, len - used, "%s", span);
        } else if (!full) {
            snprintf(buf + used, len - used, ",...");
            full = 1;
        }
        r = last;
    }
    return n;
}

void bk_report_header(FILE *f, const bk_run *run)
{
    const bk_plan *p = &run->plan;
    fprintf(f, "bracket %s  run %s", run->version, run->run_id);
    if (strcmp(run->version, BK_VERSION) != 0) /* a record of another version, rescored */
        fprintf(f, "  (scored by bracket %s)", BK_VERSION);
    fputc('\n', f);
    fprintf(f, "  plan       %s (%s)  %s\n", p->name, p->path, run->plan_digest);
    fprintf(f, "  target     %s  dtype %s  tp %d ep %d  graph %s\n", p->target, p->arena.dtype,
            p->arena.tp, p->arena.ep, p->arena.graph_mode);
    fprintf(f, "  incumbent  %s\n  candidate  %s  %s\n", p->incumbent.name, p->candidate.name,
            p->candidate.source_digest);
    if (p->source_digest_note[0])
        fprintf(f, "  note       %s\n", p->source_digest_note);
    if (run->sum_note[0])
        fprintf(f, "  warning    %s\n", run->sum_note);
    char few[256];
    if (bk_score_few_iters_text(p->workload.iters, p->protocol.confidence, few, sizeof few))
        fprintf(f, "  warning    %s\n", few);
    char loose[512];
    if (bk_plan_loose_quality_text(p, loose, sizeof loose))
        fprintf(f, "  warning    %s\n", loose);
    if (bk_plan_eager_decode_text(p, run->backend, loose, sizeof loose))
        fprintf(f, "  note       %s\n", loose);
    fprintf(f, "  backend    %s%s\n", bk_backend_name(run->backend),
            run->backend == BK_BACKEND_CPU ? "  (cpu backend: a rehearsal, never a GPU result)" : "");
    fprintf(f, "  lanes      baseline [");
    for (int i = 0; i < run->lane_size; i++)
        fprintf(f, "%s%d", i ? "," : "", run->baseline[i]);
    fprintf(f, "]  candidate [");
    for (int i = 0; i < run->lane_size; i++)
        fprintf(f, "%s%d", i ? "," : "", run->candidate[i]);
    fprintf(f, "]  %s\n", run->lane_note);
    char idle[256];
    int nidle = idle_ranks(run, idle, sizeof idle);
    if (nidle > 0) /* started by mpirun, yet nothing runs there: say so */
        fprintf(f, "  idle       MPI rank%s %s: in neither lane, no engine runs there (the lanes "
                   "take %d of the %d ranks)\n", nidle > 1 ? "s" : "", idle,
                run->world_size - nidle, run->world_size);
    fprintf(f, "  workload   %s, %d shape(s), %d warm-up + %d timed iterations, seed %llu\n",
            bk_phase_name(p->workload.phase), p->workload.nshapes, p->workload.warmup_iters,
            p->workload.iters, (unsigned long long)p->workload.seed);
    fprintf(f, "  protocol   v%d  confidence %.3g  min gain %.3g  drift limit %.3g (%s)",
            (int)p->protocol.version, p->protocol.confidence, p->protocol.min_gain,
            p->protocol.drift_limit, bk_drift_policy_name(p->protocol.drift_policy));
    if (p->protocol.repeats > 1)
        fprintf(f, "  repeats %d (each timed arm's cost: the mean over its rounds, each in "
                   "fresh processes)", p->protocol.repeats);
    fprintf(f, "\n");
    char served[48];
    bk_share_text(run->routing_share, served, sizeof served);
    fprintf(f, "  routing    the candidate serves %s of the workload's weight\n", served);
    fflush(f);
}

static void print_arm(FILE *f, const bk_run *run, const bk_score *sc, int idx, int k)
{
    const bk_arm_run *a = &run->arms[idx];
    if (!a->ran) {
        fprintf(f, "  %-3s %-22s not run\n", bk_arm_names[idx], a->variant[0] ? a->variant : "-");
        return;
    }
    char procs[256] = "";
    size_t len = 0;
    /* rounds: the processes of the last round that started stand for the others */
    int last = bk_arm_rounds(a) - 1;
    for (; last > 0; last--) {
        int started = 0;
        for (int r = 0; r < a->world; r++)
            started |= a->r[(size_t)last * a->world + r].reported ||
                       a->r[(size_t)last * a->world + r].pid != 0;
        if (started)
            break;
    }
    if (bk_arm_rounds(a) > 1)
        len = (size_t)snprintf(procs, sizeof procs, "%d rounds, round %d ", a->rounds, last + 1);
    const bk_rank_data *rd = a->r + (size_t)last * a->world;
    for (int r = 0; r < a->world && len < sizeof procs - 32; r++) {
        char d[96];
        bk_proc_describe(&rd[r].proc, d, sizeof d);
        len += (size_t)snprintf(procs + len, sizeof procs - len, "%sr%d:%s", r ? " " : "",
                                rd[r].mpi_rank, d);
    }
    if (k >= 0 && sc->arms[k].scored) {
        const bk_arm_summary *s = &sc->arms[k];
        size_t n = 0;
        for (int i = 0; i < run->plan.workload.nshapes; i++)
            n += s->n[i];
        fprintf(f, "  %-3s %-22s n %-7zu cost %10.2f us  [%9.2f, %9.2f]  %s\n", bk_arm_names[idx],
                a->variant, n, s->cost_ns / 1e3, s->cost_lo_ns / 1e3, s->cost_hi_ns / 1e3, procs);
        const bk_target *tg = bk_catalog_target(run->plan.target);
        for (int i = 0; i < run->plan.workload.nshapes; i++) {
            const bk_shape *sh = &run->plan.workload.shapes[i];
            double algbw = bk_target_algbw(tg, sh, a->world, s->median_ns[i]);
            /* in C, a shape outside the candidate's domain ran the incumbent: say so */
            char why[256] = "";
            const int routed = idx == BK_ARM_IDX_C &&
                               !bk_catalog_served_by(&run->plan, &run->plan.candidate, i,
                                                     run->backend, 1, why, sizeof why);
            fprintf(f, "        shape %d (tokens %lld, hidden %lld, weight %.3g): median %.2f us"
                       "  algbw %.2f GB/s  busbw %.2f GB/s%s%s%s\n",
                    i, (long long)sh->tokens, (long long)sh->hidden, sh->weight,
                    s->median_ns[i] / 1e3, algbw, tg ? algbw * tg->busbw_factor(a->world) : 0,
                    routed ? "  (ran the incumbent: " : "", routed ? why : "",
                    routed ? ")" : "");
        }
    } else {
        fprintf(f, "  %-3s %-22s %s  %s\n", bk_arm_names[idx], a->variant,
                a->ok ? (a->audit ? "ok (audit)" : "ok") : "FAILED", procs);
    }
    if (!a->ok && a->reason[0])
        fprintf(f, "        %s\n", a->reason);
}

/* After "quality: pass": whether A equals T bit for bit, or how far within the tolerance
 * it is, so a candidate off by an ulp is visible beside one that computes the same bits. */
static void print_pass_detail(FILE *f, const bk_run *run)
{
    const bk_quality *q = &run->quality;
    if (q->state != BK_QUALITY_PASS || !q->per)
        return;
    int differ = 0;
    double max_abs = 0, max_rel = 0;
    for (int i = 0; i < q->nshapes * q->noutputs; i++) {
        differ += strcmp(q->per[i].digest_a, q->per[i].digest_t) != 0;
        max_abs = q->per[i].max_abs > max_abs ? q->per[i].max_abs : max_abs;
        max_rel = q->per[i].max_rel > max_rel ? q->per[i].max_rel : max_rel;
    }
    if (!differ)
        fprintf(f, " (A equals T bit for bit)");
    else
        fprintf(f, " (A differs from T bitwise in %d of %d shape x output(s), within rtol %g, "
                "atol %g: max abs err %.3g, max rel err %.3g)", differ, q->nshapes * q->noutputs,
                run->plan.quality.rtol, run->plan.quality.atol, max_abs, max_rel);
}

void bk_report_print(FILE *f, const bk_run *run, const bk_score *sc)
{
    fprintf(f, "\narms:\n");
    print_arm(f, run, sc, BK_ARM_IDX_B, BK_ARM_B);
    print_arm(f, run, sc, BK_ARM_IDX_C, BK_ARM_C);
    print_arm(f, run, sc, BK_ARM_IDX_BP, BK_ARM_BP);
    print_arm(f, run, sc, BK_ARM_IDX_A, -1);
    print_arm(f, run, sc, BK_ARM_IDX_T, -1);
    if (run->stopped[0])
        fprintf(f, "  note: %s\n", run->stopped);
    fprintf(f, "\nquality: %s%s%s", bk_quality_name(run->quality.state),
            run->quality.reason[0] ? ": " : "", run->quality.reason);
    print_pass_detail(f, run);
    fputc('\n', f);
    /* the set-up's warning again where it matters (a --quiet run printed no header) */
    if (run->quality.state == BK_QUALITY_FAIL && run->sum_note[0])
        fprintf(f, "  note: %s\n", run->sum_note);
    if (sc->have_drift)
        fprintf(f, "drift:   B'/B - 1 = %+.2f%% (limit %.2f%%)%s\n", 100 * sc->drift,
                100 * sc->drift_limit,
                sc->drift_exceeded ? (sc->bp_excluded ? "  exceeded: B' kept, excluded"
                                                      : "  exceeded")
                                   : "");
    /* a B' far off B under exclude_later: the verdict stands on B vs C alone, but the
     * machine moved during the bracket by much more than the plan allows */
    if (sc->have_drift && sc->bp_excluded && sc->drift_limit > 0 &&
        fabs(sc->drift) > 2 * sc->drift_limit) {
        const int r = run->plan.protocol.repeats;
        fprintf(f, "  note: B' moved %.1f times the drift limit from B: the machine's speed "
                   "changed during the bracket;\n        B vs C alone decides it. ",
                fabs(sc->drift) / sc->drift_limit);
        /* what would guard against it, from where this run stands */
        if (r < 3)
            fprintf(f, "protocol.drift_policy \"strict\" (no verdict on such a drift) or "
                       "protocol.repeats 3 (this run: %d) guards against that\n", r);
        else
            fprintf(f, "%d rounds an arm did not steady the machine: protocol.drift_policy "
                       "\"strict\" gives no verdict on such a drift; a quieter machine is the "
                       "cure\n", r);
    }
    if (sc->have_speedup)
        fprintf(f, "speed-up: %.4f  [%.4f, %.4f] at %.0f%% vs baseline %s (cost %.2f us); PASS "
                   "needs lower bound > %.4f\n", sc->speedup, sc->speedup_lo, sc->speedup_hi,
                100 * sc->confidence, sc->baseline, sc->base_cost_ns / 1e3, 1 + sc->min_gain);
    const bk_wire_stats *w = &run->wire;
    uint64_t rej = 0;
    for (int i = 0; i < BK_REJ_COUNT; i++)
        rej += w->rejected[i];
    if (rej)
        fprintf(f, "wire:    %llu messages accepted, %llu rejected\n",
                (unsigned long long)w->accepted, (unsigned long long)rej);
    if (w->repeated || w->repeated_tensors || w->repeated_hellos) {
        /* "wire:    came again ...: 12 samples, 2 audit tensors, 1 hello" */
        const uint64_t n[3] = { w->repeated, w->repeated_tensors, w->repeated_hellos };
        const char *what[3] = { "sample", "audit tensor", "hello" };
        const char *sep = "";
        fprintf(f, "wire:    came again (sent again after a connection to rank 0 broke or was "
                   "not ready), each taken once:");
        for (int i = 0; i < 3; i++) {
            if (!n[i])
                continue;
            fprintf(f, "%s %llu %s%s", sep, (unsigned long long)n[i], what[i],
                    n[i] == 1 ? "" : "s");
            sep = ",";
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\nverdict: %s (%s)\n", bk_verdict_name(sc->verdict), sc->status);
    if (sc->reasons[0])
        fprintf(f, "  %s\n", sc->reasons);
    double margin = 0;
    if (bk_score_thin_margin(sc, run->plan.protocol.repeats, &margin))
        fprintf(f, "  note: one round per arm: B' differs from B by %.2f%%, more than the "
                   "%.2f%% by\n        which this %s clears 1 + min_gain; the interval leaves "
                   "out the offset\n        each engine process brings, which protocol.repeats "
                   "3 or more carries\n",
                100 * fabs(sc->drift), 100 * margin, bk_verdict_name(sc->verdict));
    /* the header, which -q drops, says it too (bracket score: recomputed by the reader) */
    const double share = run->routing_share;
    if (share <= 0) /* refused by `bracket run` since 2026-12-03; older records */
        fprintf(f, "  (the candidate's domain serves none of the workload: every call ran the "
                   "incumbent, so C timed the incumbent again)\n");
    else if (share < 1) {
        char served[48];
        bk_share_text(share, served, sizeof served);
        fprintf(f, "  (the candidate serves %s of the workload's weight; the other calls ran "
                   "the incumbent)\n", served);
    }
    if (run->plan.source_digest_note[0]) /* a --set's, kept in identity.source_digest_note */
        fprintf(f, "  note: %s\n", run->plan.source_digest_note);
    if (run->backend == BK_BACKEND_CPU)
        fprintf(f, "  (cpu backend: rehearsal of the process, not a GPU measurement)\n");
    if (run->shared_lanes)
        fprintf(f, "  (shared lanes: B and C ran on the same ranks; a rehearsal, not a bracket)\n");
    /* the header's note, which -q drops, in short */
    if (bk_plan_eager_decode_text(&run->plan, run->backend, NULL, 0))
        fprintf(f, "  (decode timed eagerly: evidence about a debugging mode, not the arena, "
                   "unless it publishes eager decode)\n");
    const char *const role[2] = { "incumbent", "candidate" };
    const char *const name[2] = { run->plan.incumbent.name, run->plan.candidate.name };
    for (int i = 0; i < 2; i++) {
        const bk_variant *v = bk_catalog_variant(run->plan.target, name[i]);
        if (v && v->diagnostic)
            fprintf(f, "  (%s %s is a DIAGNOSTIC variant: a self-check of this bracket, never "
                       "a qualification result)\n", role[i], name[i]);
    }
}
