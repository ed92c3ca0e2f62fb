/* verify_probes.h - internal to `bracket verify` (cmd_verify.c, verify_probes.c): the shapes
 * it checks, the plan's and probes across the candidate's domain. */
#ifndef BK_VERIFY_PROBES_H
#define BK_VERIFY_PROBES_H

#include <jansson.h>
#include <stddef.h>

#include "kernels/catalog.h"
#include "plans/plan.h"

/* The probes' context: the caller fills tg .. backend, and base and fallback for a
 * diagnostic v (bk_catalog_diag_bases); shapes and like are the builder's; notes holds what
 * the user should read. */
typedef struct bk__verify_probes {
    const bk_target *tg;
    const bk_variant *v, *inc;
    int world;
    const char *dtype;
    bk_backend backend;
    const bk_variant *base, *fallback; /* a diagnostic v's base and default base, else NULL */
    /* why the incumbent cannot run on this lane (NCCL on a lane sharing GPUs), else NULL:
     * a shape the candidate does not serve is then left out, with a note */
    const char *inc_blocked;
    bk_shape like;    /* the probes' hidden and MoE fields */
    json_t *shapes;
    char notes[4096]; /* one line per probe left out or changed, for the user */
    size_t used;
} bk__verify_probes;

/* The plan's shapes, then (domain_shapes) probes of what c->v serves (a diagnostic's: its
 * base's domain, widened by its default base) at a hidden it serves; with c->inc_blocked,
 * none the incumbent would serve.
 * A compact JSON array for workload.shapes (caller frees; NULL when out of memory); one
 * line in c->notes per probe left out or changed. */
char *bk__verify_shapes_json(const bk_plan *p, bk__verify_probes *c, int domain_shapes);

/* `bracket verify --target T --variant V` with no plan: the lane size it defaults to (2
 * where v's domain takes it, else the smallest world the domain takes), and the plan it
 * runs, as JSON text (caller frees; NULL when out of memory): target tg, candidate `variant`
 * (v when the catalog has it, else NULL: the plan's check then names the unknown variant),
 * incumbent tg->incumbent[backend] (NULL when it has none there), one shape (tg->example),
 * a lane of `world` ranks, quality.rtol and atol 1e-2 (the shipped plans'), the plan
 * loader's defaults elsewhere, placeholder digests (verify records nothing). */
int bk__verify_default_world(const bk_variant *v);
char *bk__verify_target_plan(const bk_target *tg, const char *variant, bk_backend backend,
                             int world);

/* `bracket verify --target T` with no --variant (argv: verify's own, argv[0] "verify"):
 * each real (not diagnostic) variant of tg on `backend`, one after another, by `bracket
 * verify ARGV --variant V` in a child process that dies with this one, then a line a
 * variant. The exit status: 3 when one failed, else 1 when one's verify or engines failed,
 * else 2 when one was refused (each says why in its section), else 0. */
int bk__verify_all(const bk_target *tg, bk_backend backend, int argc, char **argv);

#endif
