/* cmd_verify.c - `bracket verify PLAN`: the candidate's numerics against the float64
 * reference over its domain's shapes, with fresh seeded inputs per check, poisoned outputs,
 * unmutated inputs, graph replay equal to eager (cuda), and routing outside the domain.
 * The engines are the real ones (`bracket engine --audit`), started here without MPI. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/catalog.h"
#include "runner/cli.h"
#include "runner/coordinator.h"
#include "runner/orchestrate.h"
#include "topology/topology.h"

#define MAX_SETS 64
#define MAX_SEED (INT64_MAX - 1000) /* room for one seed per check (--checks <= 1000) */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: bracket verify PLAN [--variant V] [--set PATH=VALUE]... [--checks N]\n"
        "                      [--seed S] [--world N] [--no-domain-shapes]\n"
        "\n"
        "Checks the plan's candidate (or V) against the target's float64 reference: every\n"
        "output element within quality.rtol/atol of the reference, no element left\n"
        "unwritten (outputs are poisoned with NaN first), inputs unchanged by the call, and\n"
        "on the cuda backend a graph replay bitwise equal to the eager call. The shapes are\n"
        "the plan's plus probes across the variant's domain (tokens 1, 7, 64, the domain's\n"
        "edges, and one past its upper edge, which must be routed to the incumbent).\n"
        "Each check draws fresh inputs from a new seed (printed, so a failure can be\n"
        "replayed with --seed). Engines are started as for a run, on this host, no MPI.\n"
        "\n"
        "  -v, --variant V       verify V instead of the plan's candidate\n"
        "  -s, --set PATH=VAL    override a plan field first (repeatable)\n"
        "  -n, --checks N        independent checks with fresh seeds (default 2)\n"
        "  -S, --seed S          seed of the first check (default: from the clock)\n"
        "  -w, --world N         lane size (default: the plan's tp x ep)\n"
        "      --no-domain-shapes  only the plan's shapes\n"
        "  -h, --help            this text\n"
        "\n"
        "Exit status: 0 every check passed, 3 a check failed, 2 bad input or usage,\n"
        "1 an engine failed or another internal failure.\n");
}

typedef struct verify_opts {
    const char *plan, *variant;
    const char *sets[MAX_SETS];
    int nsets, checks, world, domain_shapes;
    int64_t seed;
} verify_opts;

static int parse(int argc, char **argv, verify_opts *o)
{
    static const struct option opts[] = {
        { "variant", required_argument, 0, 'v' }, { "set", required_argument, 0, 's' },
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
    while ((c = getopt_long(argc, argv, ":v:s:n:S:w:h", opts, NULL)) != -1) {
        switch (c) {
        case 'v': o->variant = optarg; break;
        case 's':
            if (o->nsets == MAX_SETS - 2)
                return -1;
            o->sets[o->nsets++] = optarg;
            break;
        case 'n':
        case 'S':
        case 'w':
            if (bk_cli_int(c == 'n' ? "--checks" : c == 'S' ? "--seed" : "--world", optarg,
                           c == 'S' ? 0 : 1, c == 'n' ? 1000 : c == 'S' ? MAX_SEED : 64, &v, msg,
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
        case 'h': usage(stdout); exit(0);
        default:
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket verify: %s\n", msg);
            return -1;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "bracket verify: one PLAN expected\n");
        return -1;
    }
    o->plan = argv[optind];
    return 0;
}

/* The shapes to verify: the plan's, then probes across the domain, deduplicated on
 * every size (tokens, hidden and the MoE fields; an absent MoE field reads 0). */
static void add_shape(json_t *shapes, int64_t tokens, const bk_shape *like)
{
    size_t i;
    json_t *s;
    json_array_foreach(shapes, i, s)
    {
        if (json_integer_value(json_object_get(s, "tokens")) == tokens &&
            json_integer_value(json_object_get(s, "hidden")) == like->hidden &&
            json_integer_value(json_object_get(s, "experts")) == like->experts &&
            json_integer_value(json_object_get(s, "topk")) == like->topk &&
            json_integer_value(json_object_get(s, "intermediate")) == like->intermediate)
            return;
    }
    if (json_array_size(shapes) >= BK_MAX_SHAPES)
        return;
    s = json_pack("{s:I, s:I, s:f}", "tokens", (json_int_t)tokens, "hidden", (json_int_t)like->hidden,
                  "weight", 1.0);
    if (like->experts)
        json_object_set_new(s, "experts", json_integer(like->experts));
    if (like->topk)
        json_object_set_new(s, "topk", json_integer(like->topk));
    if (like->intermediate)
        json_object_set_new(s, "intermediate", json_integer(like->intermediate));
    json_array_append_new(shapes, s);
}

static char *shapes_json(const bk_plan *p, const bk_variant *v, int domain_shapes)
{
    json_t *shapes = json_array();
    for (int i = 0; i < p->workload.nshapes; i++)
        add_shape(shapes, p->workload.shapes[i].tokens, &p->workload.shapes[i]);
    if (domain_shapes) {
        const bk_shape *like = &p->workload.shapes[0];
        int64_t lo = v->domain.min_tokens > 0 ? v->domain.min_tokens : 1;
        int64_t probes[] = { lo, 1, 7, 64, v->domain.max_tokens, v->domain.max_tokens + 1 };
        for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++)
            if (probes[k] >= 1 && probes[k] <= 4096)
                add_shape(shapes, probes[k], like);
    }
    char *text = json_dumps(shapes, JSON_COMPACT);
    json_decref(shapes);
    return text;
}

static double bf16d(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

/* Start the lane's engines for one audit, wait for them (bounded), judge. */
static bk_status audit(const bk_plan *p, bk_coord *c, bk_arm_run *a, int idx, const char *exe,
                       const char *run_id, const char *plan_path, const char *variant, int world, int64_t seed,
                       int graph, bk_err *err)
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
    for (int r = 0; r < world; r++) {
        bk_rank_data *d = &a->r[r];
        d->reported = 1;
        if (d->proc.exit_code != 0 || !d->status_ok) {
            char pd[96];
            bk_proc_describe(&d->proc, pd, sizeof pd);
            if (a->ok)
                snprintf(a->reason, sizeof a->reason, "engine rank %d (%s): %s", r, pd,
                         d->status_msg[0] ? d->status_msg : "no status");
            a->ok = 0;
        }
    }
out:
    return st;
}

int bk_cmd_verify(int argc, char **argv)
{
    verify_opts o;
    if (parse(argc, argv, &o) != 0) {
        usage(stderr);
        return BK_EXIT_USAGE;
    }
    int rc = BK_EXIT_INTERNAL;
    bk_err err = { 0 };
    bk_plan base, p;
    memset(&p, 0, sizeof p);
    bk_coord *c = NULL;
    char dir[300] = "", plan_path[340] = "", exe[1024];
    char *shapes = NULL, *text = NULL;
    bk_arm_run arms[2];
    memset(arms, 0, sizeof arms);
    int failures = 0, nout = 0, outs[BK_MAX_TENSORS];
    char setv[128], run_id[64];
    snprintf(run_id, sizeof run_id, "verify-%d-%llx", (int)getpid(),
             (unsigned long long)(bk_now_ns() & 0xffffffffull));
    if (o.variant) {
        snprintf(setv, sizeof setv, "candidate.variant=%s", o.variant);
        o.sets[o.nsets++] = setv;
    }
    bk_status st = bk_plan_load(o.plan, o.sets, o.nsets, &base, &err);
    if (st != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        return st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
    }
    bk_backend backend = bk_resolve_backend(base.backend);
    if (backend == BK_BACKEND_CUDA && bk_cuda_device_count() <= 0) {
        fprintf(stderr, "bracket verify: %s: the plan's backend is cuda, but no GPU is visible "
                "here (%s): run it where GPUs are, or with --set backend=cpu\n", o.plan,
                bk_cuda_device_count() < 0 ? "no CUDA driver or runtime" : "0 CUDA devices");
        bk_plan_free(&base);
        return BK_EXIT_USAGE;
    }
    const bk_variant *v = bk_catalog_variant(base.target, base.candidate.name);
    if (!v || (st = bk_catalog_check_plan(&base, backend, &err)) != BK_OK) {
        if (v)
            fprintf(stderr, "bracket verify: %s\n", err.msg);
        else
            fprintf(stderr, "bracket verify: %s: candidate.variant: not in the catalog\n",
                    o.plan);
        bk_plan_free(&base);
        return BK_EXIT_USAGE;
    }
    int world = o.world ? o.world : base.arena.tp * base.arena.ep;
    shapes = shapes_json(&base, v, o.domain_shapes);
    char set_shapes[8192], set_tp[64], set_ep[32], set_be[64];
    snprintf(set_shapes, sizeof set_shapes, "workload.shapes=%s", shapes);
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
    bk_plan_free(&base);
    if ((st = bk_plan_load(o.plan, sets2, n2, &p, &err)) != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        rc = BK_EXIT_USAGE;
        goto out;
    }
    text = bk_plan_dump(&p);
    if (!text || bk_self_exe(exe, sizeof exe, &err) != BK_OK ||
        bk_write_private_plan("verify", text, dir, sizeof dir, plan_path, sizeof plan_path) != 0) {
        fprintf(stderr, "bracket verify: cannot write the plan to a private folder: %s\n",
                err.msg[0] ? err.msg : strerror(errno));
        goto out;
    }
    const bk_target *tg = bk_catalog_target(p.target);
    for (int t = 0; t < tg->ntensors; t++)
        if (tg->tensor_is_output[t])
            outs[nout++] = t;
    if (bk_coord_open(&c, run_id, p.workload.nshapes, 1, nout, &err) != BK_OK) {
        fprintf(stderr, "bracket verify: %s\n", err.msg);
        goto out;
    }
    int64_t seed = o.seed >= 0 ? o.seed : (int64_t)(bk_now_ns() % 1000000007ull);
    printf("bracket verify: %s on %s, backend %s, lane of %d, %d check(s), tolerance rtol %g atol %g\n",
           v->name, p.target, bk_backend_name(backend), world, o.checks, p.quality.rtol,
           p.quality.atol);
    int moe = 0; /* MoE targets: their shapes differ in experts, topk, intermediate too */
    for (int s = 0; s < p.workload.nshapes; s++)
        moe |= p.workload.shapes[s].experts || p.workload.shapes[s].topk ||
               p.workload.shapes[s].intermediate;
    printf("%-6s %-5s %-7s %-7s ", "check", "shape", "tokens", "hidden");
    if (moe)
        printf("%-7s %-5s %-7s ", "experts", "topk", "interm");
    printf("%-22s %-11s %-11s %-9s %s\n", "served by", "max_abs", "max_rel", "bad",
           "graph==eager");
    for (int k = 0; k < o.checks; k++, seed++) {
        int graph = backend == BK_BACKEND_CUDA;
        for (int g = 0; g <= graph; g++) {
            bk_arm_free(&arms[g], p.workload.nshapes, nout);
            if (audit(&p, c, &arms[g], g ? BK_ARM_IDX_T : BK_ARM_IDX_A, exe, run_id, plan_path, v->name,
                      world, seed, g, &err) != BK_OK || !arms[g].ok) {
                fprintf(stderr, "bracket verify: seed %lld%s: %s\n", (long long)seed,
                        g ? " (graph)" : "", err.msg[0] ? err.msg : arms[g].reason);
                failures++;
                rc = BK_EXIT_INTERNAL;
                goto out;
            }
        }
        for (int s = 0; s < p.workload.nshapes; s++) {
            const bk_shape *sh = &p.workload.shapes[s];
            int inside = bk_domain_contains(&v->domain, sh, world, p.arena.dtype, backend, 1, NULL, 0);
            double max_abs = 0, max_rel = 0;
            uint64_t bad = 0;
            int geq = 1;
            for (int r = 0; r < world; r++) {
                double *ref[BK_MAX_TENSORS] = { 0 };
                bk_err rerr = { 0 };
                if (tg->reference(sh, (uint64_t)seed, s, r, world, ref, &rerr) != BK_OK) {
                    fprintf(stderr, "bracket verify: reference: %s\n", rerr.msg);
                    goto out;
                }
                for (int q = 0; q < nout; q++) {
                    size_t idx = (size_t)s * (size_t)nout + (size_t)q;
                    const uint16_t *got = arms[0].r[r].tensors[idx];
                    size_t n = tg->tensor_elems(sh, world, outs[q]);
                    if (!got || arms[0].r[r].tensor_len[idx] != n * 2) {
                        bad += n;
                        free(ref[q]);
                        continue;
                    }
                    for (size_t i = 0; i < n; i++) {
                        double x = bf16d(got[i]), y = ref[q][i], d = fabs(x - y);
                        if (isnan(x) || !(d <= p.quality.atol + p.quality.rtol * fabs(y)))
                            bad++;
                        if (!isnan(x)) {
                            max_abs = d > max_abs ? d : max_abs;
                            if (y != 0 && d / fabs(y) > max_rel)
                                max_rel = d / fabs(y);
                        }
                    }
                    if (graph) {
                        const void *ge = arms[1].r[r].tensors[idx];
                        geq = geq && ge && arms[1].r[r].tensor_len[idx] == n * 2 &&
                              !memcmp(ge, got, n * 2);
                    }
                    free(ref[q]);
                }
            }
            int ok = bad == 0 && geq;
            failures += !ok;
            printf("%-6lld %-5d %-7lld %-7lld ", (long long)seed, s, (long long)sh->tokens,
                   (long long)sh->hidden);
            if (moe)
                printf("%-7lld %-5lld %-7lld ", (long long)sh->experts, (long long)sh->topk,
                       (long long)sh->intermediate);
            printf("%-22s %-11.3g %-11.3g %-9llu %s%s\n",
                   inside ? v->name : p.incumbent.name, max_abs, max_rel, (unsigned long long)bad,
                   graph ? (geq ? "yes" : "NO") : "n/a (cpu)", ok ? "" : "   <- FAILED");
        }
    }
    printf("inputs unchanged by every call: yes (checked by each engine)\n");
    printf("%s: %d failing shape check(s)\n", failures ? "FAILED" : "PASSED", failures);
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
    bk_plan_free(&p);
    return rc;
}
