/* cmd_verify.c - `bracket verify PLAN` (or `--target T --variant V`, a plan of the target's
 * own; `--target T` alone: each of its variants, verify_all.c): the candidate's numerics
 * against the float64 reference over its domain's shapes, with fresh seeded inputs per
 * check, poisoned outputs, unmutated inputs, graph replay equal to eager (cuda), and
 * routing outside the domain.
 * The engines are the real ones (`bracket engine --audit`), started here without MPI. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/catalog.h"
#include "runner/cli.h"
#include "runner/memory.h"
#include "runner/janitor.h"
#include "runner/coordinator.h"
#include "runner/orchestrate.h"
#include "runner/verify_probes.h"
#include "runner/verify_row.h"
#include "topology/topology.h"

#define MAX_SETS 66 /* 64 of the user's (as plan check and run), --variant's, the shapes */
#define MAX_SEED (INT64_MAX - 1000) /* room for one seed per check (--checks <= 1000) */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: bracket verify PLAN [--variant V] [--set PATH=VALUE]... [--checks N]\n"
        "                      [--seed S] [--world N] [--no-domain-shapes]\n"
        "       bracket verify --target T [--variant V] [--set PATH=VALUE]...\n"
        "                      [--checks N] [--seed S] [--world N] [--no-domain-shapes]\n"
        "\n"
        "Checks the plan's candidate (or V) against the target's float64 reference: every\n"
        "output element within quality.rtol/atol of the reference, no element left\n"
        "unwritten (outputs are poisoned with NaN first), inputs unchanged by the call,\n"
        "and on the cuda backend a graph replay bitwise equal to the eager call. The\n"
        "shapes are the plan's plus probes of the variant's domain, at a hidden it serves\n"
        "(the first plan shape it serves, else its smallest): tokens 1, 7, 64, the\n"
        "domain's token edges and one past each; at its smallest tokens, the smallest and\n"
        "largest hidden, one past each and one not a multiple of the domain's. A probe\n"
        "outside the domain must be routed to the incumbent. A token probe whose tensors\n"
        "would pass 1 GiB over the lane runs at the smallest hidden; a probe still too\n"
        "big, or one the incumbent cannot serve either, is left out; the output names\n"
        "each. A diagnostic candidate's domain is what it serves: its base's, widened by\n"
        "the backend's default base; a probe past its base's edges where there is none\n"
        "(cuda) is left out too, since its call would fail. A candidate that serves none\n"
        "of the shapes (world, tokens or hidden outside its domain) is refused. Each\n"
        "check draws fresh inputs from a new seed (the table's first column, so a failure\n"
        "can be replayed with --seed); a failing row is followed by its first bad\n"
        "element. Engines are started as for a run, on this host, no MPI. On cuda a lane\n"
        "of more ranks than GPUs shares them, and since NCCL needs one GPU a rank, the\n"
        "shapes an NCCL incumbent would serve are then left out (each named) and an NCCL\n"
        "candidate is refused.\n"
        "\n"
        "With --target and no PLAN, V is checked on a plan of the target's own: its\n"
        "incumbent on the backend, one typical shape (below) and the probes above, a lane\n"
        "of 2 (or the smallest the variant takes; on cuda, for a candidate reaching its\n"
        "peers through NCCL, no more than the GPUs here), quality.rtol and atol 1e-2; the\n"
        "backend is V's own where it has one, else cuda where a GPU is visible, else cpu.\n"
        "--set changes any of it (workload.shapes, quality.atol, backend,\n"
        "incumbent.variant). `bracket plan variants` lists each target's variants.\n"
        "With --target and no --variant, every variant of T on the backend (--set, else\n"
        "cuda where a GPU is visible, else cpu) is checked so, one after another, the\n"
        "incumbent too; not the diagnostic ones (wrong on purpose). Then a line a\n"
        "variant: PASSED, FAILED or not verified (refused, or verify failed), and the\n"
        "exit status of the worst.\n"
        "\n"
        "Targets:\n");
    for (int i = 0; i < bk_catalog_ntargets(); i++) {
        const bk_target *t = bk_catalog_target_at(i);
        const bk_shape *e = &t->example;
        char inc[256];
        bk_target_incumbents_text(t, inc, sizeof inc);
        fprintf(f, "  %s\n      incumbent %s\n      shape: tokens %lld, hidden %lld", t->name,
                inc, (long long)e->tokens, (long long)e->hidden);
        if (e->experts)
            fprintf(f, ", experts %lld, topk %lld, intermediate %lld", (long long)e->experts,
                    (long long)e->topk, (long long)e->intermediate);
        fprintf(f, "\n");
    }
    fprintf(f,
        "\n"
        "  -t, --target T        no plan: verify V (--variant) of target T, or each of\n"
        "                        its variants, as above\n"
        "  -v, --variant V       verify V instead of the plan's candidate (the plan's\n"
        "                        candidate.params stay: --set 'candidate.params={}')\n"
        "  -s, --set PATH=VAL    override a plan field first (repeatable, 64 at most)\n"
        "  -n, --checks N        independent checks with fresh seeds, 1..1000 (default 2)\n"
        "  -S, --seed S          seed of the first check, 0..2^63 - 1001 (the checks'\n"
        "                        seeds follow it; default: from the clock)\n"
        "  -w, --world N         lane size, 1..256 as a plan's tp x ep (default: the\n"
        "                        plan's tp x ep; with --target, as above)\n"
        "      --no-domain-shapes  only the plan's shapes\n"
        "  -h, --help            this text\n"
        "\n"
        "Exit status: 0 every check passed, 3 a check failed, 2 bad input or usage (a\n"
        "candidate that serves none of the shapes too), 1 an engine failed or another\n"
        "internal failure. With --target T alone: 3 when a variant failed, else 1 when\n"
        "a variant's verify failed, else 2 when one was refused, else 0.\n");
}

typedef struct verify_opts {
    const char *plan, *variant, *target;
    const char *sets[MAX_SETS];
    int nsets, checks, world, domain_shapes;
    int64_t seed;
} verify_opts;

static int parse(int argc, char **argv, verify_opts *o)
{
    static const struct option opts[] = {
        { "variant", required_argument, 0, 'v' }, { "set", required_argument, 0, 's' },
        { "target", required_argument, 0, 't' },
        { "checks", required_argument, 0, 'n' },  { "seed", required_argument, 0, 'S' },
        { "world", required_argument, 0, 'w' },   { "no-domain-shapes", no_argument, 0, 'D' },
        { "help", no_argument, 0, 'h' },          { 0, 0, 0, 0 }
    };
    memset(o, 0, sizeof *o);
    o->checks = 2;
    o->seed = -1;
    o->domain_shapes = 1;
    optind = 1;
    opterr = 0;
    int c;
    long long v = 0;
    char msg[256];
    while ((c = bk_cli_getopt(argc, argv, ":v:t:s:n:S:w:h", opts)) != -1) {
        switch (c) {
        case 'v':
            if (!optarg[0] || strlen(optarg) >= BK_NAME_LEN) {
                fprintf(stderr, "bracket verify: --variant: a variant's name, 1 to %d "
                        "characters, got %zu\n", BK_NAME_LEN - 1, strlen(optarg));
                return -1;
            }
            o->variant = optarg;
            break;
        case 't': o->target = optarg; break;
        case 's':
            if (o->nsets == MAX_SETS - 2) {
                fprintf(stderr, "bracket verify: too many --set (at most %d)\n", MAX_SETS - 2);
                return -1;
            }
            o->sets[o->nsets++] = optarg;
            break;
        case 'n':
        case 'S':
        case 'w':
            if (bk_cli_int(c == 'n' ? "--checks" : c == 'S' ? "--seed" : "--world", optarg,
                           c == 'S' ? 0 : 1,
                           c == 'n' ? 1000 : c == 'S' ? MAX_SEED : BK_LANE_MAX, &v, msg,
                           sizeof msg) != 0) {
                fprintf(stderr, "bracket verify: %s\n", msg);
                return -1;
            }
            if (c == 'n')
                o->checks = (int)v;
            else if (c == 'S')
                o->seed = v;
            else
                o->world = (int)v;
            break;
        case 'D': o->domain_shapes = 0; break;
        case 'h': return 1; /* its exit through main, which checks the standard output */
        default:
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket verify: %s\n", msg);
            return -1;
        }
    }
    if (o->target) {
        if (optind != argc) {
            fprintf(stderr, "bracket verify: a PLAN (%s) or --target, not both\n",
                    argv[optind]);
            return -1;
        }
        return 0;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "bracket verify: %s\n", optind == argc
                ? "a PLAN, or --target T, expected" : "one PLAN expected");
        return -1;
    }
    o->plan = argv[optind];
    return 0;
}

static double bf16d(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

/* Start the lane's engines for one audit, wait for them (bounded), judge; `routed`: the
 * shapes the engines must say they served with the incumbent (bk_plan_routed). */
static bk_status audit(const bk_plan *p, bk_coord *c, bk_arm_run *a, int idx, const char *exe,
                       const char *run_id, const char *plan_path, const char *variant, int world, int64_t seed,
                       int graph, uint64_t routed, bk_err *err)
{
    bk_status st = BK_OK;
    memset(a, 0, sizeof *a);
    a->idx = idx;
    a->name = bk_arm_names[idx];
    a->audit = 1;
    a->world = world;
    bk_strlcpy(a->variant, variant, sizeof a->variant);
    a->lane = calloc((size_t)world, sizeof *a->lane);
    a->r = calloc((size_t)world, sizeof *a->r);
    if (!a->lane || !a->r)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    BK_TRY(bk_coord_begin_arm(c, a, err));
    a->ran = 1;
    for (int r = 0; r < world; r++) {
        char rs[16], ws[16], ds[16], ss[32];
        snprintf(rs, sizeof rs, "%d", r);
        snprintf(ws, sizeof ws, "%d", world);
        int device = -1;
        if (p->backend == BK_BACKEND_CUDA) {
            /* the runner's binding rules, every engine a local rank of this host;
             * several engines may share a GPU here (correctness, not speed) */
            bk_bind_env be;
            bk_binding bind;
            bk_bind_env_from_process(&be, r, world, bk_cuda_device_count());
            BK_TRY(bk_bind_rank(&be, BK_LANES_SHARED, &bind, err));
            device = bind.device;
        }
        snprintf(ds, sizeof ds, "%d", device);
        snprintf(ss, sizeof ss, "%lld", (long long)seed);
        char *argv[] = { (char *)exe, "engine", "--plan", (char *)plan_path, "--run",
                         (char *)run_id, "--arm",
                         (char *)a->name, "--variant", (char *)variant, "--rendezvous",
                         (char *)bk_coord_rendezvous_ep(c), "--samples",
                         (char *)bk_coord_samples_ep(c), "--rank", rs, "--world", ws, "--device",
                         ds, "--backend", (char *)bk_backend_name(p->backend), "--audit",
                         "--check-inputs", "--seed", ss, graph ? "--graph" : NULL, NULL };
        if (p->backend == BK_BACKEND_CPU)
            bk_janitor_add_shm(run_id, a->name, r);
        BK_TRY(bk_proc_spawn(exe, argv, &a->r[r].proc, err));
    }
    uint64_t deadline = bk_now_ns() + (uint64_t)(p->timeouts.arm_s * 1e9);
    for (;;) {
        bk_coord_poll(c, 5);
        int done = 1, failed = 0;
        for (int r = 0; r < world; r++) {
            if (!bk_proc_poll(&a->r[r].proc))
                done = 0;
            else if (a->r[r].proc.exit_code != 0)
                failed = 1;
        }
        if (failed || bk_now_ns() > deadline) {
            for (int r = 0; r < world; r++)
                bk_proc_kill(&a->r[r].proc, 2.0, !failed);
            done = 1;
        }
        if (done) {
            uint64_t grace = bk_now_ns() + 2000000000ull;
            while (!bk_coord_all_status(c) && bk_now_ns() < grace)
                bk_coord_poll(c, 5);
            break;
        }
    }
    a->ok = 1;
    /* the reason names the first rank that failed of itself, not one stopped here because
     * another had failed (that one would read "killed by the runner"); else the first */
    int named = -1;
    for (int pass = 0; pass < 2 && named < 0; pass++)
        for (int r = 0; r < world && named < 0; r++) {
            const bk_rank_data *d = &a->r[r];
            if ((d->proc.exit_code != 0 || !d->status_ok) && (pass || !d->proc.killed))
                named = r;
        }
    for (int r = 0; r < world; r++)
        a->r[r].reported = 1;
    if (named >= 0) {
        const bk_rank_data *d = &a->r[named];
        char pd[96];
        bk_proc_describe(&d->proc, pd, sizeof pd);
        snprintf(a->reason, sizeof a->reason, "engine rank %d (%s): %s", named, pd,
                 d->status_msg[0] ? d->status_msg : "no status");
        a->ok = 0;
        /* the named one said hello and so waited at the rendezvous for any that never did
         * (hung in its start, then killed here): those are named too, as a run names them
         * (bk_run_judge_arm) */
        for (int r = 0; r < world && d->hello; r++) {
            if (a->r[r].hello)
                continue;
            const size_t n = strlen(a->reason);
            char line[256];
            bk_proc_describe(&a->r[r].proc, pd, sizeof pd);
            snprintf(line, sizeof line, "; engine rank %d never said hello to the rendezvous, "
                     "where the ranks that did waited for it (%s)", r, pd);
            if (bk_strlcpy_words(a->reason + n, line, sizeof a->reason - n) != 0)
                break; /* full, ending in "..." */
        }
    }
    /* the "served by" column is what each engine says it served: the shapes it routed to
     * the incumbent must be those the variant's domain routes */
    for (int r = 0; r < world && a->ok; r++) {
        const bk_rank_data *d = &a->r[r];
        if (d->routed_known && d->routed == routed)
            continue;
        char got[BK_ROUTED_TEXT] = "no status", exp[BK_ROUTED_TEXT];
        if (d->routed_known)
            bk_routed_text(d->routed, got, sizeof got);
        bk_routed_text(routed, exp, sizeof exp);
        snprintf(a->reason, sizeof a->reason, "engine rank %d served shape(s) %s with the "
                 "incumbent; the variant's domain routes %s", r, got, exp);
        a->ok = 0;
    }
out:
    return st;
}

/* One row of the table (verify_row.h): shape s of one seed, every output of every rank of
 * arms[0] against the float64 reference (and arms[1], the graph replay, bitwise against
 * arms[0]). */
bk_status bk__verify_check_row(const bk_plan *p, const bk_target *tg, const bk_arm_run *arms,
                               int graph, const int *outs, int nout, int s, int world,
                               int64_t seed, bk__verify_row *w, bk_err *err)
{
    const bk_shape *sh = &p->workload.shapes[s];
    double rtol = p->quality.rtol, atol = p->quality.atol;
    char gdiff[400] = "";
    bk_status st = BK_OK;
    memset(w, 0, sizeof *w);
    w->geq = 1;
    for (int r = 0; r < world; r++) {
        double *ref[BK_MAX_TENSORS] = { 0 };
        BK_TRY(tg->reference(sh, (uint64_t)seed, s, r, world, ref, err));
        for (int q = 0; q < nout; q++) {
            size_t idx = (size_t)s * (size_t)nout + (size_t)q;
            const char *name = tg->tensor_names[outs[q]];
            const uint16_t *got = arms[0].r[r].tensors[idx];
            size_t n = tg->tensor_elems(sh, world, outs[q]);
            if (!got || arms[0].r[r].tensor_len[idx] != n * 2) {
                if (!w->bad)
                    snprintf(w->first, sizeof w->first, "shape %d (tokens %lld, hidden %lld) %s "
                             "rank %d: %zu bytes came back, want %zu", s, (long long)sh->tokens,
                             (long long)sh->hidden, name, r,
                             got ? arms[0].r[r].tensor_len[idx] : 0, n * 2);
                w->bad += n;
                free(ref[q]);
                continue;
            }
            for (size_t i = 0; i < n; i++) {
                double x = bf16d(got[i]), y = ref[q][i], d = fabs(x - y);
                if (isnan(x) || !(d <= atol + rtol * fabs(y))) {
                    if (!w->bad)
                        bk_quality_element_text(w->first, sizeof w->first, s, sh, name, r, i,
                                                "got", x, "want", y, rtol, atol);
                    w->bad++;
                }
                if (isnan(x)) {
                    w->nans++;
                } else {
                    w->max_abs = d > w->max_abs ? d : w->max_abs;
                    if (y != 0 && d / fabs(y) > w->max_rel)
                        w->max_rel = d / fabs(y);
                }
            }
            if (graph && w->geq) {
                const uint16_t *ge = arms[1].r[r].tensors[idx];
                if (!ge || arms[1].r[r].tensor_len[idx] != n * 2) {
                    w->geq = 0;
                    snprintf(gdiff, sizeof gdiff, "shape %d %s rank %d: %zu bytes came back from "
                             "the replay, want %zu", s, name, r,
                             ge ? arms[1].r[r].tensor_len[idx] : 0, n * 2);
                } else if (memcmp(ge, got, n * 2) != 0) {
                    size_t i = 0;
                    while (ge[i] == got[i])
                        i++;
                    w->geq = 0;
                    bk_quality_element_text(gdiff, sizeof gdiff, s, sh, name, r, i, "graph",
                                            bf16d(ge[i]), "eager", bf16d(got[i]), rtol, atol);
                }
            }
            free(ref[q]);
        }
    }
    if (!w->bad && !w->geq)
        snprintf(w->first, sizeof w->first, "graph replay differs from eager: %s", gdiff);
    if (w->nans) /* the largest difference of a row with a NaN is no number: not 0 */
        w->max_abs = w->max_rel = NAN;
out:
    return st;
}

/* Say why a candidate that serves none of the plan's (and probes') shapes leaves nothing to
 * verify: each shape's reason, or one for all when they share it (a world outside the
 * domain excludes every shape alike). */
static void refuse_none_served(const bk_plan *p, const bk_variant *v, int world,
                               bk_backend backend, int checks)
{
    char why[BK_MAX_SHAPES][256], dom[256], all[2048] = "";
    size_t used = 0;
    int same = 1;
    for (int s = 0; s < p->workload.nshapes; s++) {
        bk_domain_contains(&v->domain, &p->workload.shapes[s], world, p->arena.dtype, backend,
                           1, why[s], sizeof why[s]);
        same = same && !strcmp(why[s], why[0]);
    }
    for (int s = 0; !same && s < p->workload.nshapes && used < sizeof all; s++) {
        int k = snprintf(all + used, sizeof all - used, "%sshape %d (tokens %lld, hidden %lld): %s",
                         s ? "; " : "", s, (long long)p->workload.shapes[s].tokens,
                         (long long)p->workload.shapes[s].hidden, why[s]);
        used += k > 0 ? (size_t)k : 0;
    }
    bk_domain_text(&v->domain, dom, sizeof dom);
    fprintf(stderr, "bracket verify: %s: the candidate %s serves none of the %d shape check(s) "
            "(%d shape(s) x %d seed(s)): every one would go to the incumbent %s, so nothing of "
            "the candidate would be verified; %s%s (its domain: %s); give verify a --world and "
            "shapes inside that domain\n", p->path[0] ? p->path : "plan", v->name,
            p->workload.nshapes * checks, p->workload.nshapes, checks, p->incumbent.name,
            same ? "every shape: " : "", same ? why[0] : all, dom);
}

/* --target's backend: the last --set backend= (cpu or cuda), else the variant's own where
 * it runs on one backend alone, else cuda where a GPU is visible, else cpu. */
static bk_backend target_backend(const verify_opts *o, const bk_variant *v)
{
    const char *want = NULL;
    for (int i = 0; i < o->nsets; i++)
        if (strncmp(o->sets[i], "backend=", 8) == 0)
            want = o->sets[i] + 8;
    if (want && (!strcmp(want, "cpu") || !strcmp(want, "cuda")))
        return !strcmp(want, "cpu") ? BK_BACKEND_CPU : BK_BACKEND_CUDA;
    if (v && (v->backends == BK_BK_CPU || v->backends == BK_BK_CUDA))
        return v->backends == BK_BK_CPU ? BK_BACKEND_CPU : BK_BACKEND_CUDA;
    return bk_resolve_backend(BK_BACKEND_AUTO);
}

/* --target T and the backend for V (NULL: for all of T's variants): *tg and *be, or an
 * exit status after saying what is wrong (an unknown target, no incumbent there). */
static int target_of(const verify_opts *o, const bk_variant *v, const bk_target **tg,
                     bk_backend *be)
{
    if (!(*tg = bk_catalog_target(o->target))) {
        char known[512];
        bk_catalog_targets_text(known, sizeof known);
        fprintf(stderr, "bracket verify: --target: no target '%s' (known: %s)\n", o->target,
                known);
        return BK_EXIT_USAGE;
    }
    *be = target_backend(o, v);
    if (!(*tg)->incumbent[*be]) {
        fprintf(stderr, "bracket verify: --target %s: no incumbent on backend %s in this "
                "build\n", (*tg)->name, bk_backend_name(*be));
        return BK_EXIT_USAGE;
    }
    return 0;
}

/* Why a check on the cuda backend cannot run here: this build has no cuda backend, or no
 * GPU is visible. --set backend=cpu is offered where it is a way out: a build with cuda and a
 * candidate v (NULL: a target's variants, some of them cpu ones) that runs on cpu. */
static void say_no_cuda(const char *label, const bk_variant *v)
{
#ifndef BK_HAVE_CUDA
    (void)v;
    fprintf(stderr, "bracket verify: %s: backend cuda, but this bracket was built without its "
            "cuda backend (no CUDA toolkit and NCCL at build time, or -DBK_CUDA=OFF): build it "
            "where they are (README), or verify a cpu variant\n", label);
#else
    char alone[200] = ", or with --set backend=cpu";
    if (v && !(v->backends & BK_BK_CPU))
        snprintf(alone, sizeof alone, " (the candidate %s runs on cuda alone)", v->name);
    fprintf(stderr, "bracket verify: %s: backend cuda, but no GPU is visible here (%s): run it "
            "where GPUs are%s\n", label, bk_cuda_device_count() < 0 ? "no CUDA driver or runtime"
            : "0 CUDA devices", alone);
#endif
}

/* --target T --variant V: the plan verify runs (bk__verify_target_plan) in *text, its
 * label for messages in `label`. 0, or an exit status after saying what is wrong. */
static int target_plan(const verify_opts *o, char **text, char *label, size_t len)
{
    const bk_target *tg;
    bk_backend be;
    /* an unknown variant still gets a plan: its check names it with the known ones */
    const bk_variant *v = bk_catalog_variant(o->target, o->variant);
    int rc = target_of(o, v, &tg, &be);
    if (rc)
        return rc;
    snprintf(label, len, "--target %s", tg->name);
    int world = o->world ? o->world : bk__verify_default_world(v);
    if (!o->world && be == BK_BACKEND_CUDA && v && v->nccl) { /* NCCL: one GPU a rank */
        const int ngpu = bk_cuda_device_count();
        world = ngpu > 0 && ngpu < world ? ngpu : world;
    }
    *text = bk__verify_target_plan(tg, o->variant, be, world);
    if (!*text) {
        fprintf(stderr, "bracket verify: out of memory\n");
        return BK_EXIT_INTERNAL;
    }
    return 0;
}

/* The plan from PLAN, or from the --target plan's text. */
static bk_status load_plan(const verify_opts *o, const char *text, const char *label,
                           const char *const *sets, int nsets, bk_plan *p, bk_err *err)
{
    return text ? bk_plan_parse(text, label, sets, nsets, p, err)
                : bk_plan_load(o->plan, sets, nsets, p, err);
}

int bk_cmd_verify(int argc, char **argv)
{
    verify_opts o;
    const int prc = parse(argc, argv, &o);
    if (prc > 0) {
        usage(stdout);
        return BK_EXIT_PASS;
    }
    if (prc != 0) {
        fprintf(stderr, "(bracket verify --help: the whole usage)\n");
        return BK_EXIT_USAGE;
    }
    if (o.target && !o.variant) { /* every real variant of the target, one by one */
        const bk_target *tg;
        bk_backend be;
        int trc = target_of(&o, NULL, &tg, &be);
        if (trc)
            return trc;
        if (be == BK_BACKEND_CUDA && bk_cuda_device_count() <= 0) {
            char label[160];
            snprintf(label, sizeof label, "--target %s", tg->name);
            say_no_cuda(label, NULL);
            return BK_EXIT_USAGE;
        }
        /* the plan once, with the incumbent as V: a bad --set is said once, not a time a
         * variant */
        verify_opts oi = o;
        oi.variant = tg->incumbent[be];
        char label[160], *text = NULL;
        bk_plan p;
        bk_err err = { 0 };
        if ((trc = target_plan(&oi, &text, label, sizeof label)) != 0)
            return trc;
        bk_status st = load_plan(&oi, text, label, oi.sets, oi.nsets, &p, &err);
        free(text);
        if (st != BK_OK) {
            fprintf(stderr, "bracket verify: %s\n", err.msg);
            return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
        }
        bk_plan_free(&p);
        return bk__verify_all(tg, be, argc, argv);
    }
    char tlabel[160], *ptext = NULL;
    const char *label = o.plan; /* what messages name the plan by */
    if (o.target) {
        int trc = target_plan(&o, &ptext, tlabel, sizeof tlabel);
        if (trc)
            return trc;
        label = tlabel;
    }
    /* however verify ends (Ctrl-C, a job's time limit, SIGKILL), its janitor removes the
     * plan copy, the coordinator's sockets and the cpu engines' segments; started while
     * this process has one thread (janitor.h) */
    if (bk_janitor_start(argc, argv) != 0)
        fprintf(stderr, "bracket verify: warning: no janitor for its private files (%s): "
                "verify killed outright leaves them in $TMPDIR\n", strerror(errno));
    int rc = BK_EXIT_INTERNAL;
    bk_err err = { 0 };
    bk_plan base, p;
    memset(&p, 0, sizeof p);
    bk_coord *c = NULL;
    char dir[300] = "", plan_path[340] = "", exe[1024];
    char *shapes = NULL, *text = NULL;
    int inside[BK_MAX_SHAPES];
    bk_arm_run arms[2];
    memset(arms, 0, sizeof arms);
    int failures = 0, nout = 0, outs[BK_MAX_TENSORS];
    char setv[BK_NAME_LEN + 32], run_id[64];
    snprintf(run_id, sizeof run_id, "verify-%d-%llx", (int)getpid(),
             (unsigned long long)(bk_now_ns() & 0xffffffffull));
    const int user_sets = o.nsets; /* the --set flags; verify's own follow them */
    if (o.variant) {
        snprintf(setv, sizeof setv, "candidate.variant=%s", o.variant);
        o.sets[o.nsets++] = setv;
    }
    bk_status st = load_plan(&o, ptext, label, o.sets, o.nsets, &base, &err);
    if (st != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        free(ptext);
        return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    /* PLAN is read once: a pipe (<(...), /dev/stdin) has nothing left for a second read, so
     * the plan is loaded again below from the text of the one loaded here */
    if (!ptext && !(ptext = bk_plan_dump(&base))) {
        fprintf(stderr, "bracket verify: out of memory\n");
        bk_plan_free(&base);
        return BK_EXIT_INTERNAL;
    }
    bk_backend backend = bk_resolve_backend(base.backend);
    const bk_variant *v = bk_catalog_variant(base.target, base.candidate.name);
    /* the GPUs verify's engines will share (round-robin) on this host; -1: no CUDA */
    const int ngpu = backend == BK_BACKEND_CUDA ? bk_cuda_device_count() : 0;
    if (backend == BK_BACKEND_CUDA && ngpu <= 0) {
        say_no_cuda(label, v);
        bk_plan_free(&base);
        free(ptext);
        return BK_EXIT_USAGE;
    }
    /* a refusal of the candidate's variant is --variant's when it was given (applied last,
     * over any --set of candidate.variant or candidate) */
    if ((st = bk_catalog_check_plan(&base, backend, &err)) != BK_OK &&
        !(o.variant && strstr(err.msg, "candidate.variant: ")))
        bk_plan_name_set(base.path, o.sets, user_sets, err.msg, sizeof err.msg);
    if (st != BK_OK || !v) {
        /* a candidate given with --variant is named by the flag, not by the plan's path */
        const char *cand = strstr(err.msg, "candidate.variant: ");
        if (st == BK_OK)
            fprintf(stderr, "bracket verify: %s: candidate.variant: not in the catalog\n",
                    label);
        else if (o.variant && cand)
            fprintf(stderr, "bracket verify: --variant: %s\n",
                    cand + strlen("candidate.variant: "));
        else
            fprintf(stderr, "bracket verify: %s\n", err.msg);
        bk_plan_free(&base);
        free(ptext);
        return BK_EXIT_USAGE;
    }
    int world = o.world ? o.world : base.arena.tp * base.arena.ep;
    const bk_variant *inc = bk_catalog_variant(base.target, base.incumbent.name);
    const bk_target *tg = bk_catalog_target(base.target);
    bk__verify_probes pr = { .tg = tg, .v = v, .inc = inc, .world = world,
                             .dtype = base.arena.dtype, .backend = backend };
    bk_catalog_diag_bases(v, base.candidate.params, backend, &pr.base, &pr.fallback);
    /* NCCL refuses a lane whose ranks share a GPU */
    char blocked[160];
    snprintf(blocked, sizeof blocked, "reaches its peers through NCCL (one GPU a rank), and the "
             "lane of %d shares %d GPU%s here", world, ngpu, ngpu == 1 ? "" : "s");
    if (world > 1 && world > ngpu && backend == BK_BACKEND_CUDA) {
        const bk_variant *cv = pr.base ? pr.base : v;
        if (cv->nccl) {
            fprintf(stderr, "bracket verify: %s: the candidate %s %s: give --world %d or "
                    "less, or run it where %d GPUs are\n", label, cv->name, blocked,
                    ngpu > 0 ? ngpu : 1, world);
            bk_plan_free(&base);
            free(ptext);
            return BK_EXIT_USAGE;
        }
        if (inc->nccl)
            pr.inc_blocked = blocked;
    }
    shapes = bk__verify_shapes_json(&base, &pr, o.domain_shapes);
    bk_plan_free(&base);
    if (shapes && strcmp(shapes, "[]") == 0) { /* every shape left out (pr.notes: why) */
        fprintf(stderr, "%sbracket verify: %s: no shape left to verify (each one's reason "
                "above)\n", pr.notes, label);
        rc = BK_EXIT_USAGE;
        goto out;
    }
    size_t set_len = shapes ? strlen(shapes) + 32 : 0;
    char *set_shapes = shapes ? malloc(set_len) : NULL, set_tp[64], set_ep[32], set_be[64];
    if (!set_shapes) {
        fprintf(stderr, "bracket verify: out of memory\n");
        goto out;
    }
    snprintf(set_shapes, set_len, "workload.shapes=%s", shapes);
    free(shapes);
    shapes = set_shapes;
    snprintf(set_tp, sizeof set_tp, "arena.tp=%d", world);
    snprintf(set_ep, sizeof set_ep, "arena.ep=1");
    snprintf(set_be, sizeof set_be, "backend=%s", bk_backend_name(backend));
    o.sets[o.nsets++] = set_shapes;
    const char *sets2[MAX_SETS + 4];
    memcpy(sets2, o.sets, sizeof(char *) * (size_t)o.nsets);
    int n2 = o.nsets;
    sets2[n2++] = set_tp;
    sets2[n2++] = set_ep;
    sets2[n2++] = set_be;
    if ((st = load_plan(&o, ptext, label, sets2, n2, &p, &err)) != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        rc = BK_EXIT_USAGE;
        goto out;
    }
    /* Routing is decided by the domain alone, the same for every seed: a candidate that
     * serves none of the shapes would leave nothing of it verified, so refuse up front.
     * (`routed`: what each engine must say it served with the incumbent, the engines' own
     * rule, which routes nothing when V is the incumbent.) */
    const int nrows = p.workload.nshapes * o.checks;
    const uint64_t routed = bk_plan_routed(&p, v->name, world, backend);
    int served = 0;
    for (int s = 0; s < p.workload.nshapes; s++) {
        inside[s] = bk_domain_contains(&v->domain, &p.workload.shapes[s], world, p.arena.dtype,
                                       backend, 1, NULL, 0);
        served += inside[s];
    }
    if (!served) {
        refuse_none_served(&p, v, world, backend, o.checks);
        rc = BK_EXIT_USAGE;
        goto out;
    }
    /* the plan's variants checked again at the lane verify runs: a parameter that holds at
     * the plan's tp x ep may not at --world's (a diagnostic's rank) */
    if (o.world && (st = bk_catalog_check_plan(&p, backend, &err)) != BK_OK) {
        bk_plan_name_set(p.path, o.sets, user_sets, err.msg, sizeof err.msg);
        fprintf(stderr, "bracket verify: %s (with --world %d)\n", err.msg, world);
        rc = st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
        goto out;
    }
    /* refused before any engine starts: killed for memory halfway, an engine is only
     * "signal 9 (Killed): no status" */
    bk_verify_peak vp;
    bk_verify_peak_split(&p, world, backend == BK_BACKEND_CUDA, &vp);
    uint64_t have = 0;
    char from[256];
    if (vp.top_shape >= 0 && bk_mem_available(&have, from, sizeof from) && vp.total > have) {
        char tot[32], eng[32], outs[32], ref[32], hv[32], where[48], lower[256];
        snprintf(where, sizeof where, "shape %d of the table: ", vp.top_shape);
        bk_lower_shape_text(&p.workload.shapes[vp.top_shape], where, lower, sizeof lower);
        fprintf(stderr, "bracket verify: %s: this host would hold about %s at the peak (the "
                "outputs verify gathers, %s, with %d engine(s) of about %s each while they run "
                "or a float64 reference of %s after) but %s has %s available; %s\n", label,
                bk_mem_text(vp.total, tot, sizeof tot),
                bk_mem_text(vp.outputs, outs, sizeof outs), world,
                bk_mem_text(vp.engine, eng, sizeof eng),
                bk_mem_text(vp.reference, ref, sizeof ref), from[0] ? from : "this host",
                bk_mem_text(have, hv, sizeof hv), lower);
        rc = BK_EXIT_USAGE;
        goto out;
    }
    /* and so is a shape whose output is too big for one message: its audit would find it
     * missing only after the engines ran */
    char audit_why[512];
    if (bk_audit_msg_too_big(&p, world, audit_why, sizeof audit_why) >= 0) {
        fprintf(stderr, "bracket verify: %s: %s\n", label, audit_why);
        rc = BK_EXIT_USAGE;
        goto out;
    }
    text = bk_plan_dump(&p);
    if (!text || bk_self_exe(exe, sizeof exe, &err) != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto out;
    }
    if (bk_write_private_plan("verify", text, NULL, dir, sizeof dir, plan_path,
                              sizeof plan_path) != 0) {
        const int e = errno;
        char why[1024];
        fprintf(stderr, "bracket verify: %s\n", bk_private_plan_failed(e, why, sizeof why));
        rc = BK_EXIT_USAGE; /* this environment's, as a bad flag is */
        goto out;
    }
    for (int t = 0; t < tg->ntensors; t++)
        if (tg->tensor_is_output[t])
            outs[nout++] = t;
    if (bk_coord_open(&c, run_id, p.workload.nshapes, 1, nout, &err) != BK_OK ||
        bk_coord_set_outputs(c, tg, p.workload.shapes, p.arena.dtype, &err) != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        goto out;
    }
    int64_t seed = o.seed >= 0 ? o.seed : (int64_t)(bk_now_ns() % 1000000007ull);
    printf("bracket verify: %s on %s, backend %s, lane of %d, %d check(s), tolerance rtol %g atol %g\n",
           v->name, p.target, bk_backend_name(backend), world, o.checks, p.quality.rtol,
           p.quality.atol);
    fputs(pr.notes, stdout);
    /* a variant that sums the ranks' x in bf16 (NCCL) errs by its own roundings, which grow
     * with the lane: said before the float64 checks that may fail it (bk_variant.bf16_sum) */
    const bk_variant *by[BK_MAX_SHAPES];
    for (int s = 0; s < p.workload.nshapes; s++)
        by[s] = inside[s] ? v : inc;
    int at = -1;
    const double e = bk_catalog_bf16_sum_worst(&p, by, world, (uint64_t)seed, &at);
    if (at >= 0 && e >= 0.75)
        printf("warning: %s sums the ranks' x in bf16 (a bf16 allreduce); replayed on the CPU "
               "on a sample at %d ranks its residual_out strays from the exact sum by %.2f x "
               "this tolerance or more (the worst sampled element in shape %d, %lld x %lld): "
               "the checks below may fail it by its own rounding\n", by[at]->name, world, e,
               at, (long long)p.workload.shapes[at].tokens,
               (long long)p.workload.shapes[at].hidden);
    char loose[512];
    if (bk_plan_loose_quality_text(&p, loose, sizeof loose))
        printf("warning: %s\n", loose);
    int moe = 0; /* MoE targets: their shapes differ in experts, topk, intermediate too */
    for (int s = 0; s < p.workload.nshapes; s++)
        moe |= p.workload.shapes[s].experts || p.workload.shapes[s].topk ||
               p.workload.shapes[s].intermediate;
    /* the seed column as wide as the last seed (a default seed has up to 10 digits) */
    int seed_w = snprintf(NULL, 0, "%lld", (long long)(seed + o.checks - 1)) + 1;
    seed_w = seed_w < 6 ? 6 : seed_w;
    printf("%-*s %-5s %-7s %-7s ", seed_w, "seed", "shape", "tokens", "hidden");
    if (moe)
        printf("%-7s %-5s %-7s ", "experts", "topk", "interm");
    printf("%-22s %-11s %-11s %-9s %s\n", "served by", "max_abs", "max_rel", "bad",
           "graph==eager");
    /* the table is written as it is decided, a row at a time: a verify stopped (Ctrl-C, a
     * job's time limit) keeps the rows it printed into a file or pipe (buffered, a Ctrl-C
     * lost them all) */
    bk_cli_stdout_flush();
    for (int k = 0; k < o.checks; k++, seed++) {
        int graph = backend == BK_BACKEND_CUDA;
        for (int g = 0; g <= graph; g++) {
            bk_arm_free(&arms[g], p.workload.nshapes, nout);
            if (audit(&p, c, &arms[g], g ? BK_ARM_IDX_T : BK_ARM_IDX_A, exe, run_id, plan_path, v->name,
                      world, seed, g, routed, &err) != BK_OK || !arms[g].ok) {
                const int broke = bk_arm_broke_contract(&arms[g]);
                if (broke >= 0) { /* a failed check, not a failure of verify */
                    printf("FAILED: seed %lld%s: the variant broke its contract: %s\n",
                           (long long)seed, g ? " (graph)" : "", arms[g].r[broke].status_msg);
                    rc = BK_EXIT_FAIL;
                    goto out;
                }
                fprintf(stderr, "bracket verify: seed %lld%s: %s\n", (long long)seed,
                        g ? " (graph)" : "", err.msg[0] ? err.msg : arms[g].reason);
                failures++;
                rc = BK_EXIT_INTERNAL;
                goto out;
            }
        }
        for (int s = 0; s < p.workload.nshapes; s++) {
            const bk_shape *sh = &p.workload.shapes[s];
            bk__verify_row w;
            if (bk__verify_check_row(&p, tg, arms, graph, outs, nout, s, world, seed, &w,
                                     &err) != BK_OK) {
                fprintf(stderr, "bracket verify: reference: %s\n", err.msg);
                goto out;
            }
            int ok = w.bad == 0 && w.geq;
            failures += !ok;
            printf("%-*lld %-5d %-7lld %-7lld ", seed_w, (long long)seed, s,
                   (long long)sh->tokens, (long long)sh->hidden);
            if (moe)
                printf("%-7lld %-5lld %-7lld ", (long long)sh->experts, (long long)sh->topk,
                       (long long)sh->intermediate);
            printf("%-22s %-11.3g %-11.3g %-9llu %s%s\n",
                   inside[s] ? v->name : p.incumbent.name, w.max_abs, w.max_rel,
                   (unsigned long long)w.bad, graph ? (w.geq ? "yes" : "NO") : "n/a (cpu)",
                   ok ? "" : "   <- FAILED");
            if (!ok)
                printf("       first bad: %s\n", w.first);
            if (w.nans)
                printf("       NaN: %llu element(s) (so max_abs and max_rel are nan)\n",
                       (unsigned long long)w.nans);
            bk_cli_stdout_flush();
        }
    }
    printf("inputs unchanged by every call: yes (checked by each engine)\n");
    printf("%s: %d failing shape check(s) of %d; ", failures ? "FAILED" : "PASSED", failures,
           nrows);
    if (served == p.workload.nshapes)
        printf("the candidate %s served all %d\n", v->name, nrows);
    else
        printf("the candidate %s served %d, the incumbent %s %d (outside the candidate's "
               "domain: the routing checks)\n", v->name, served * o.checks, p.incumbent.name,
               nrows - served * o.checks);
    rc = failures ? BK_EXIT_FAIL : 0;
out:
    for (int g = 0; g < 2; g++)
        bk_arm_free(&arms[g], p.workload.nshapes, nout);
    bk_coord_close(c);
    if (plan_path[0])
        unlink(plan_path);
    if (dir[0])
        rmdir(dir);
    free(shapes);
    free(text);
    free(ptext);
    bk_plan_free(&p);
    return rc;
}
