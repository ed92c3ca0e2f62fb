/* cmd_plan.c - `bracket plan check PLAN`: validate a plan against its schema and the catalog;
 * `bracket plan variants`: what a plan can name (targets, variants, their domains). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "kernels/catalog.h"
#include "runner/cli.h"
#include "runner/memory.h"
#include "runner/orchestrate.h"

static void usage(FILE *f)
{
    /* what `bracket run` would pick for backend "auto" on this machine */
    const char *auto_is = bk_backend_name(bk_resolve_backend(BK_BACKEND_AUTO));
    fprintf(f,
        "usage: bracket plan check PLAN [--set PATH=VALUE]... [--backend cpu|cuda]\n"
        "       bracket plan variants [--target T]\n"
        "\n"
        "check validates PLAN (schema bracket.plan/1, see plans/README.md) and checks it against\n"
        "the target catalog: the target, both variants, their params, the dtype and every\n"
        "shape. Errors name the file and the line:column of a syntax error or the dotted\n"
        "path of a bad field. Nothing is run. A valid plan's line says how many rounds each\n"
        "timed arm runs and about how much memory rank 0 will hold for the samples, against\n"
        "what this host (or its cgroup) has available: `bracket run` refuses a plan that\n"
        "needs more there, and check then exits 2.\n"
        "\n"
        "variants lists the targets this build knows and, for each, the variants a plan's\n"
        "incumbent.variant or candidate.variant can name: the backends, dtypes, tokens,\n"
        "hidden sizes and lane sizes (worlds) each serves, and what it does. DIAGNOSTIC\n"
        "variants (slowed, crash, corrupt) exist to prove a bracket notices; see\n"
        "plans/README.md.\n"
        "\n"
        "  -s, --set PATH=VAL   apply an override first, as `bracket run` would\n"
        "  -b, --backend B      check for this backend (default: the plan's, \"auto\" resolved\n"
        "                       as `bracket run` does: %s on this machine)\n"
        "  -t, --target T       variants: this target's only\n"
        "  -h, --help           this text\n"
        "\n"
        "Exit status: 0 valid (or listed), 2 invalid, too big for this host's memory or bad\n"
        "usage, 1 internal failure.\n", auto_is);
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
    while ((c = getopt_long(argc, argv, ":t:h", opts, NULL)) != -1) {
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
        fprintf(stderr, "bracket plan variants: --target: no target '%s' (known:", only);
        for (int t = 0; t < bk_catalog_ntargets(); t++)
            fprintf(stderr, "%s %s", t ? "," : "", bk_catalog_target_at(t)->name);
        fprintf(stderr, ")\n");
        return BK_EXIT_USAGE;
    }
    for (int t = 0; t < bk_catalog_ntargets(); t++) {
        const bk_target *tg = bk_catalog_target_at(t);
        if (only && strcmp(only, tg->name) != 0)
            continue;
        printf("%s%s: %s\n", t && !only ? "\n" : "", tg->name, tg->summary);
        for (int i = 0; i < bk_catalog_nvariants(); i++) {
            const bk_variant *v = bk_catalog_variant_at(i);
            char dom[256];
            if (strcmp(v->target, tg->name) != 0)
                continue;
            bk_domain_text(&v->domain, dom, sizeof dom);
            printf("  %s\n      %s\n      domain: %s\n", v->name, v->summary, dom);
        }
    }
    return 0;
}

static const char *mib_or_gib(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)bytes / (1 << 30));
    else
        snprintf(buf, len, "%.1f MiB", (double)bytes / (1 << 20));
    return buf;
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
    while ((c = getopt_long(argc, argv, ":s:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (nsets == 64) {
                fprintf(stderr, "bracket plan check: too many --set\n");
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
    bk_plan plan;
    bk_err err = { 0 };
    bk_status st = bk_plan_load(argv[optind], sets, nsets, &plan, &err);
    if (st != BK_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    bk_backend b = bk_resolve_backend(plan.backend); /* as `bracket run` resolves it */
    if (backend) {
        if (!strcmp(backend, "cpu"))
            b = BK_BACKEND_CPU;
        else if (!strcmp(backend, "cuda"))
            b = BK_BACKEND_CUDA;
        else {
            fprintf(stderr, "bracket plan check: --backend: '%s' is not cpu or cuda\n", backend);
            bk_plan_free(&plan);
            return BK_EXIT_USAGE;
        }
    }
    st = bk_catalog_check_plan(&plan, b, &err);
    if (st != BK_OK) {
        fprintf(stderr, "%s\n", err.msg);
        bk_plan_free(&plan);
        return st == BK_ERR_INPUT || st == BK_ERR_UNSUPPORTED ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    char rounds[64] = "";
    if (plan.protocol.repeats > 1)
        snprintf(rounds, sizeof rounds, ", %d rounds of each timed arm", plan.protocol.repeats);
    /* what `bracket run` refuses after the schema: too big for rank 0, or a candidate that
     * serves none of the shapes (its first line says so instead of "valid") */
    const double share = bk_routing_share(&plan, b, 1);
    uint64_t need = bk_rank0_peak_bytes(&plan), have = 0;
    char needs[32], haves[32];
    const int known = bk_mem_available(&have), too_big = known && need > have;
    const int refused = too_big || share <= 0;
    printf("%s: %s (%s, %s vs %s, %d shape(s)%s, backend %s, candidate serves %.1f%% of the "
           "workload)\n", argv[optind], refused ? "refused by `bracket run`" : "valid",
           plan.target, plan.incumbent.name, plan.candidate.name, plan.workload.nshapes, rounds,
           bk_backend_name(b), 100 * share);
    printf("  rank 0 holds about %s at its peak (samples and audit outputs)",
           mib_or_gib(need, needs, sizeof needs));
    if (known)
        printf("; %s available here%s", mib_or_gib(have, haves, sizeof haves),
               too_big ? ": too much, `bracket run` refuses it on such a host" : "");
    printf("\n");
    if (too_big)
        fprintf(stderr, "bracket plan check: %s: rank 0 would hold about %s for this plan's "
                "samples but this host (or its cgroup) has %s available; lower "
                "workload.iters, protocol.repeats or the number of shapes\n", argv[optind],
                needs, haves);
    if (share <= 0)
        fprintf(stderr, "%s: workload.shapes: the candidate %s serves none of them (each lies "
                "outside its domain; `bracket plan variants` shows it), so arm C would time the "
                "incumbent again and `bracket run` refuses the plan\n", argv[optind],
                plan.candidate.name);
    bk_plan_free(&plan);
    return refused ? BK_EXIT_USAGE : 0;
}
