/* cmd_plan.c - `bracket plan check PLAN`: validate a plan against its schema and the catalog;
 * `bracket plan variants`: what a plan can name (targets, variants, their domains). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "kernels/catalog.h"
#include "runner/cli.h"
#include "runner/memory.h"
#include "runner/orchestrate.h"
#include "runner/report.h"
#include "runner/score.h"

static void usage(FILE *f)
{
    /* what `bracket run` would pick for backend "auto" on this machine */
    const char *auto_is = bk_backend_name(bk_resolve_backend(BK_BACKEND_AUTO));
    fprintf(f,
        "usage: bracket plan check PLAN [--set PATH=VALUE]... [--backend cpu|cuda|auto]\n"
        "       bracket plan variants [--target T]\n"
        "\n"
        "check validates PLAN (schema bracket.plan/1, see plans/README.md) and checks it\n"
        "against the target catalog: the target, both variants, their params, the dtype\n"
        "and every shape. Errors name the file and the line:column of a syntax error or\n"
        "the dotted path of a bad field. Nothing is run. A valid plan's line says how\n"
        "many rounds each timed arm runs and about how much memory rank 0 will hold for\n"
        "the samples and the audit outputs, against what this host (or its memory cgroup)\n"
        "has available, naming which holds it (the cgroup by its folder): `bracket run`\n"
        "refuses a plan that needs more there, and check then exits 2; it does so too\n"
        "for a shape whose output, one rank's, passes the 1 GiB an audit message carries.\n"
        "Where an arm's engines would not fit beside rank 0 on this host, check warns and\n"
        "exits 0: `bracket run` refuses that only when the lanes sit on rank 0's host,\n"
        "which depends on the job (a one-host job's always do).\n"
        "The lines after it name the shapes the incumbent serves in arm C (outside the\n"
        "candidate's domain).\n"
        "The incumbent must serve the lane and every shape; a DIAGNOSTIC candidate serves\n"
        "its base's domain (see variants).\n"
        "\n"
        "variants lists the targets this build knows and, for each, the variants a plan's\n"
        "incumbent.variant or candidate.variant can name: the backends, dtypes, tokens,\n"
        "hidden sizes and lane sizes (worlds) each serves, and what it does. DIAGNOSTIC\n"
        "variants (slowed, crash, corrupt, lazy, mutate; of\n"
        "collective.allreduce_residual_rmsnorm only) exist to prove a bracket notices;\n"
        "see plans/README.md.\n"
        "\n"
        "  -s, --set PATH=VAL   apply an override first, as `bracket run` would (64 at\n"
        "                       most)\n"
        "  -b, --backend B      check for this backend, cpu, cuda or auto (default: the\n"
        "                       plan's; \"auto\" resolved as `bracket run` does: %s on\n"
        "                       this machine)\n"
        "  -t, --target T       variants: this target's only\n"
        "  -h, --help           this text\n"
        "\n"
        "Exit status: 0 valid (or listed), 2 invalid, too big for this host's memory or\n"
        "for an audit's message, a candidate serving none of the shapes, or bad usage;\n"
        "1 internal failure.\n",
        auto_is);
}

/* `bracket plan variants [--target T]`. */
static int plan_variants(int argc, char **argv)
{
    static const struct option opts[] = { { "target", required_argument, 0, 't' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *only = NULL;
    int c;
    char msg[160];
    optind = 1;
    opterr = 0;
    while ((c = bk_cli_getopt(argc, argv, ":t:h", opts)) != -1) {
        switch (c) {
        case 't': only = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket plan variants: %s\n", msg);
            return BK_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "bracket plan variants: unexpected argument '%s'\n", argv[optind]);
        return BK_EXIT_USAGE;
    }
    if (only && !bk_catalog_target(only)) {
        char known[512];
        bk_catalog_targets_text(known, sizeof known);
        fprintf(stderr, "bracket plan variants: --target: no target '%s' (known: %s)\n", only,
                known);
        return BK_EXIT_USAGE;
    }
    for (int t = 0; t < bk_catalog_ntargets(); t++) {
        const bk_target *tg = bk_catalog_target_at(t);
        if (only && strcmp(only, tg->name) != 0)
            continue;
        printf("%s%s: %s\n", t && !only ? "\n" : "", tg->name, tg->summary);
        char inc[256];
        bk_target_incumbents_text(tg, inc, sizeof inc);
        printf("  incumbent: %s; `bracket verify --target %s --variant V` checks V without a "
               "plan\n", inc, tg->name);
        for (int i = 0; i < bk_catalog_nvariants(); i++) {
            const bk_variant *v = bk_catalog_variant_at(i);
            char dom[256];
            if (strcmp(v->target, tg->name) != 0)
                continue;
            bk_variant_domain_text(v, dom, sizeof dom);
            printf("  %s\n      %s\n      domain: %s\n%s", v->name, v->summary, dom,
                   v->nccl ? "      NCCL at lanes above 1: one GPU a rank\n" : "");
        }
    }
#ifndef BK_HAVE_CUDA
    /* what a reader of the README's list would look for here */
    printf("\n(this bracket was built without its cuda backend: its cuda variants and cuda "
           "incumbents are not listed; README says how to build them)\n");
#endif
    return 0;
}

/* The refusal of a plan whose candidate serves none of the shapes: the lane when the lane
 * is the cause, else each shape's reason (as many as fit). */
void bk_plan_none_served_text(const char *path, const bk_plan *plan, bk_backend b, char *buf,
                              size_t len)
{
    char why[512], one[256], reasons[640] = "";
    size_t used = 0;
    if (bk_catalog_lane_outside(plan, &plan->candidate, b, why, sizeof why)) {
        snprintf(buf, len, "%s: %s, so the candidate serves none of the workload: arm C would "
                 "time the incumbent again and `bracket run` refuses the plan", path, why);
        return;
    }
    for (int i = 0; i < plan->workload.nshapes && used < sizeof reasons; i++) {
        bk_catalog_served_by(plan, &plan->candidate, i, b, 1, one, sizeof one);
        int k = snprintf(reasons + used, sizeof reasons - used, "%s[%d]: %s", i ? "; " : "",
                         i, one);
        used += k > 0 ? (size_t)k : 0;
    }
    snprintf(buf, len, "%s: workload.shapes: the candidate %s serves none of them (each lies "
             "outside its domain: %s; `bracket plan variants` shows it), so arm C would time the "
             "incumbent again and `bracket run` refuses the plan", path, plan->candidate.name,
             reasons);
}

/* The shapes the incumbent serves in arm C (outside the candidate's domain), one line each
 * with the reason: `bracket run` times the incumbent there in arm C as in B. */
static void note_routed(const bk_plan *plan, bk_backend b)
{
    char why[256];
    const bk_variant *inc = bk_catalog_variant(plan->target, plan->incumbent.name);
    for (int i = 0; i < plan->workload.nshapes; i++)
        if (!bk_catalog_served_by(plan, &plan->candidate, i, b, 1, why, sizeof why))
            printf("  workload.shapes[%d]: outside the candidate's domain (%s): the incumbent "
                   "%s serves it in arm C too\n", i, why, inc ? inc->name : "?");
}

/* A diagnostic candidate serves what its base cannot through its default base: say where,
 * one line per reason (a lane size outside the base's domain is every shape's). */
static void note_fallbacks(const bk_plan *plan, bk_backend b)
{
    const bk_variant *cand = bk_catalog_variant(plan->target, plan->candidate.name);
    const json_t *base = json_object_get(plan->candidate.params, "base");
    char why[BK_MAX_SHAPES][256], list[512];
    int via[BK_MAX_SHAPES] = { 0 };
    const bk_variant *by[BK_MAX_SHAPES] = { 0 };
    if (!cand || !cand->diagnostic)
        return;
    for (int i = 0; i < plan->workload.nshapes && i < BK_MAX_SHAPES; i++) {
        by[i] = bk_catalog_served_by(plan, &plan->candidate, i, b, 1, why[i], sizeof why[i]);
        via[i] = by[i] && why[i][0]; /* only a named base has a default base behind it */
    }
    for (int i = 0; i < plan->workload.nshapes && i < BK_MAX_SHAPES; i++) {
        size_t used = 0;
        if (!via[i])
            continue;
        for (int j = i; j < plan->workload.nshapes && j < BK_MAX_SHAPES && used < sizeof list;
             j++) {
            if (!via[j] || strcmp(why[j], why[i]) != 0)
                continue;
            int k = snprintf(list + used, sizeof list - used, "%s[%d]", j > i ? ", " : "", j);
            used += k > 0 ? (size_t)k : 0;
            via[j] = 0; /* said on this line */
        }
        printf("  workload.shapes%s: outside the domain of candidate.params.base %s (%s): %s "
               "wraps its default base %s there instead\n", list,
               json_is_string(base) ? json_string_value(base) : "?", why[i], cand->name,
               by[i]->name);
    }
}

int bk_cmd_plan(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? BK_EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "variants"))
        return plan_variants(argc - 1, argv + 1);
    if (strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "bracket plan: unknown subcommand '%s' (check or variants)\n", argv[1]);
        return BK_EXIT_USAGE;
    }
    argc--;
    argv++;
    static const struct option opts[] = { { "set", required_argument, 0, 's' },
                                          { "backend", required_argument, 0, 'b' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *sets[64];
    int nsets = 0, c;
    const char *backend = NULL;
    char msg[160];
    optind = 1;
    opterr = 0;
    while ((c = bk_cli_getopt(argc, argv, ":s:b:h", opts)) != -1) {
        switch (c) {
        case 's':
            if (nsets == 64) {
                fprintf(stderr, "bracket plan check: too many --set (at most 64)\n");
                return BK_EXIT_USAGE;
            }
            sets[nsets++] = optarg;
            break;
        case 'b': backend = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket plan check: %s\n", msg);
            return BK_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "bracket plan check: one PLAN expected\n");
        return BK_EXIT_USAGE;
    }
    /* the flag before the plan: a bad one is said whatever the plan holds */
    bk_backend b = BK_BACKEND_AUTO;
    if (backend) {
        if (!strcmp(backend, "cpu"))
            b = BK_BACKEND_CPU;
        else if (!strcmp(backend, "cuda"))
            b = BK_BACKEND_CUDA;
        else if (!strcmp(backend, "auto"))
            b = bk_resolve_backend(BK_BACKEND_AUTO);
        else {
            fprintf(stderr, "bracket plan check: --backend: '%s' is not cpu, cuda or auto\n",
                    backend);
            return BK_EXIT_USAGE;
        }
    }
    bk_plan plan;
    bk_err err = { 0 };
    bk_status st = bk_plan_load(argv[optind], sets, nsets, &plan, &err);
    if (st != BK_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    if (!backend)
        b = bk_resolve_backend(plan.backend); /* as `bracket run` resolves it */
    st = bk_catalog_check_plan(&plan, b, &err);
    if (st != BK_OK) {
        bk_plan_name_set(plan.path, sets, nsets, err.msg, sizeof err.msg);
        /* a backend the build lacks, given by the flag: the flag's, not the plan's field */
        const char *lack = strstr(err.msg, ": backend: cuda, but ");
        if (backend && lack)
            fprintf(stderr, "bracket plan check: --backend %s: %s\n", backend,
                    lack + strlen(": backend: cuda, but "));
        else
            fprintf(stderr, "%s\n", err.msg);
        bk_plan_free(&plan);
        return st == BK_ERR_INPUT || st == BK_ERR_UNSUPPORTED ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    char rounds[64];
    snprintf(rounds, sizeof rounds, ", %d round%s of each timed arm", plan.protocol.repeats,
             plan.protocol.repeats == 1 ? "" : "s");
    /* what `bracket run` refuses after the schema: too big for rank 0, or a candidate that
     * serves none of the shapes (its first line says so instead of "valid") */
    const double share = bk_routing_share(&plan, b, 1);
    uint64_t need = bk_rank0_peak_bytes(&plan), have = 0;
    char needs[32], haves[32], big[1536];
    char from[256];
    const int known = bk_mem_available(&have, from, sizeof from), too_big = known && need > have;
    char audit[512];
    const int audit_big = bk_audit_msg_too_big(&plan, plan.arena.tp * plan.arena.ep, audit,
                                               sizeof audit) >= 0;
    const int refused = too_big || share <= 0 || audit_big;
    char served[48];
    bk_share_text(share, served, sizeof served);
    printf("%s: %s (%s, %s vs %s, %d shape(s)%s, backend %s, candidate serves %s of the "
           "workload)\n", argv[optind], refused ? "refused by `bracket run`" : "valid",
           plan.target, plan.incumbent.name, plan.candidate.name, plan.workload.nshapes, rounds,
           bk_backend_name(b), served);
    printf("  rank 0 holds about %s at its peak (samples and audit outputs)",
           bk_mem_text(need, needs, sizeof needs));
    if (known)
        printf("; %s available to %s%s", bk_mem_text(have, haves, sizeof haves),
               from, too_big ? ": too much, `bracket run` refuses it on such a host" : "");
    printf("\n");
    if (b == BK_BACKEND_CPU && !strcmp(plan.arena.graph_mode, "graph"))
        printf("  note: arena.graph_mode \"graph\" is the cuda backend's (a CUDA graph of the "
               "timed step); the cpu engines call every step eagerly\n");
    char eager[512];
    if (bk_plan_eager_decode_text(&plan, b, eager, sizeof eager))
        printf("  note: %s\n", eager);
    if (share > 0)
        note_routed(&plan, b);
    note_fallbacks(&plan, b);
    if (plan.source_digest_note[0])
        printf("  %s\n", plan.source_digest_note);
    char sum_note[1024];
    if (bk_catalog_bf16_sum_note(&plan, b, sum_note, sizeof sum_note) > 0 && sum_note[0])
        printf("  warning: %s\n", sum_note);
    if (bk_score_few_iters_text(plan.workload.iters, plan.protocol.confidence, sum_note,
                                sizeof sum_note))
        printf("  warning: %s\n", sum_note);
    if (bk_plan_loose_quality_text(&plan, sum_note, sizeof sum_note))
        printf("  warning: %s\n", sum_note);
    /* an arm's engines beside rank 0 on one host (bracket run refuses it there) */
    bk_verify_peak vp;
    const int world = plan.arena.tp * plan.arena.ep;
    const uint64_t both = bk_arm_host_bytes(&plan, b == BK_BACKEND_CUDA, &vp);
    if (known && !too_big && vp.top_shape >= 0 && both > have) {
        char eng[32], all[32], where[48], lower[256];
        snprintf(where, sizeof where, "workload.shapes[%d], ", vp.top_shape);
        bk_lower_shape_text(&plan.workload.shapes[vp.top_shape], where, lower, sizeof lower);
        printf("  warning: an arm's %d engine(s) hold about %s each (tensors of workload."
               "shapes[%d]); with rank 0 on their host, %s: more than the %s available here, "
               "so `bracket run` refuses it where the lanes share rank 0's host; %s\n", world,
               bk_mem_text(vp.engine, eng, sizeof eng), vp.top_shape,
               bk_mem_text(both, all, sizeof all), haves, lower);
    }
    if (too_big) {
        bk_rank0_too_big_text(&plan, have, from, big, sizeof big);
        fprintf(stderr, "bracket plan check: %s: %s\n", argv[optind], big);
    }
    if (share <= 0) {
        char msg[1536];
        bk_plan_none_served_text(argv[optind], &plan, b, msg, sizeof msg);
        bk_plan_name_set(argv[optind], sets, nsets, msg, sizeof msg);
        fprintf(stderr, "%s\n", msg);
    }
    if (audit_big)
        fprintf(stderr, "bracket plan check: %s: %s\n", argv[optind], audit);
    bk_plan_free(&plan);
    return refused ? BK_EXIT_USAGE : 0;
}
