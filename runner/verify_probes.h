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
    bk_shape like;    /* the probes' hidden and MoE fields */
    json_t *shapes;
    char notes[4096]; /* one line per probe left out or changed, for the user */
    size_t used;
} bk__verify_probes;

/* The plan's shapes, then (domain_shapes) probes of what c->v serves (a diagnostic's: its
 * base's domain, widened by its default base) at a hidden it serves.
 * A compact JSON array for workload.shapes (caller frees; NULL when out of memory); one
 * line in c->notes per probe left out or changed. */
char *bk__verify_shapes_json(const bk_plan *p, bk__verify_probes *c, int domain_shapes);

#endif
