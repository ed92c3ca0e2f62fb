/* plan.h - the bracket.plan/1 loader and validator (jansson), and --set overrides. */
#ifndef BK_PLAN_H
#define BK_PLAN_H

#include <jansson.h>
#include <stdint.h>

#include "runner/status.h"

#define BK_PLAN_SCHEMA "bracket.plan/1"
#define BK_MAX_SHAPES 64
#define BK_NAME_LEN 128
#define BK_DIGEST_LEN 96

typedef enum { BK_PHASE_DECODE, BK_PHASE_PREFILL, BK_PHASE_CHUNKED_PREFILL } bk_phase;
typedef enum { BK_PROTO_V7 = 7, BK_PROTO_V8 = 8 } bk_protocol_version;
typedef enum { BK_DRIFT_EXCLUDE_LATER, BK_DRIFT_STRICT } bk_drift_policy;
typedef enum { BK_LANES_DISJOINT, BK_LANES_SHARED } bk_lane_policy;
typedef enum { BK_BACKEND_AUTO, BK_BACKEND_CPU, BK_BACKEND_CUDA } bk_backend;

/* One workload shape. tokens and hidden are always present; the MoE fields
 * (experts, topk, intermediate) are 0 unless the target uses them. */
typedef struct bk_shape {
    int64_t tokens;
    int64_t hidden;
    int64_t experts;
    int64_t topk;
    int64_t intermediate;
    double weight; /* normalised by the loader so the weights sum to 1 */
} bk_shape;

typedef struct bk_variant_ref {
    char name[BK_NAME_LEN];
    char source_digest[BK_DIGEST_LEN]; /* "" for the incumbent */
    json_t *params;                    /* object, owned by the plan (never NULL) */
} bk_variant_ref;

typedef struct bk_arena {
    char stack_digest[BK_DIGEST_LEN];
    int64_t incumbent_generation;
    char model[BK_NAME_LEN];
    char substrate[BK_NAME_LEN];
    char target_catalog[BK_NAME_LEN];
    char architecture[BK_NAME_LEN];
    int tp, ep;
    char dtype[16];
    char quantization[32];
    char graph_mode[16]; /* "eager" or "graph" */
    char calib_speed[BK_NAME_LEN];
    char calib_quality[BK_NAME_LEN];
} bk_arena;

typedef struct bk_plan {
    char path[512]; /* where it was loaded from (for messages) */
    char name[BK_NAME_LEN];
    bk_arena arena;
    char target[BK_NAME_LEN];
    bk_variant_ref incumbent;
    bk_variant_ref candidate;
    struct {
        bk_phase phase;
        int nshapes;
        bk_shape shapes[BK_MAX_SHAPES];
        int warmup_iters;
        int iters;
        uint64_t seed;
    } workload;
    struct {
        bk_protocol_version version;
        double confidence;  /* (0.5, 1) */
        double min_gain;    /* >= 0 */
        double drift_limit; /* >= 0 */
        bk_drift_policy drift_policy;
        int bootstrap_resamples;
        int repeats;        /* 1..16: rounds of each timed arm, each in fresh processes */
    } protocol;
    struct {
        double rtol, atol;
    } quality;
    bk_lane_policy lane_policy;
    bk_backend backend;
    struct {
        double arm_s;
        double rendezvous_s;
    } timeouts;
    json_t *doc; /* the plan as run (after --set), owned */
    /* Not in the document: the loader's note when a --set changed candidate.variant but not
     * candidate.source_digest (which then names the plan's candidate's source); "" else. */
    char source_digest_note[640];
} bk_plan;

/* Load and validate a plan file, applying `nsets` overrides "dotted.path=value"
 * first (value parsed as JSON when it parses, else taken as a string).
 * Errors name the file and either line:column (syntax) or the dotted path of
 * the bad field, e.g. "plans/x.json: arena.tp: must be an integer >= 1".
 * On success *out owns its memory (bk_plan_free). On failure *out is zeroed. */
bk_status bk_plan_load(const char *path, const char *const *sets, int nsets, bk_plan *out,
                       bk_err *err);

/* The same from JSON text; `label` stands for the file name in messages. */
bk_status bk_plan_parse(const char *text, const char *label, const char *const *sets,
                        int nsets, bk_plan *out, bk_err *err);

void bk_plan_free(bk_plan *plan);

/* A refusal msg "LABEL: PATH: ..." (PATH a field's dotted path, or "A x B") of a plan loaded
 * with `sets` says which --set it comes from, at its end: ' (from --set "P=V")' when the
 * field is P or lies inside it (the last such --set, the one that stands); else
 * ' (--set "P=V" and --set "Q=W" changed it)', every --set inside the field (the last of
 * each path), in order. Unchanged when none is, or the message is not of that form. The
 * loader applies it to its own refusals; callers, to later checks of the plan (the
 * catalog's), with the sets the user gave. */
void bk_plan_name_set(const char *label, const char *const *sets, int nsets, char *msg,
                      size_t len);

/* 1 when ch may stand in a plan's name (letters, digits, '.', '_', '-'), else 0. */
int bk_plan_name_char(char ch);

/* The plan as run, as canonical JSON text (sorted keys, compact); caller frees. */
char *bk_plan_dump(const bk_plan *plan);

/* A plan value as the user wrote it (compact JSON), shortened past 60 characters: the
 * "got ..." of an error about it. Returns dst. */
const char *bk_plan_value_text(const json_t *v, char *dst, size_t n);

/* 1 with a warning in buf when the plan's quality tolerance checks little: rtol >= 1 (an
 * output of 0 passes wherever the reference is) or atol >= 1 (past the size of the targets'
 * outputs, normalised or smaller); 0 (buf "") otherwise. */
int bk_plan_loose_quality_text(const bk_plan *p, char *buf, size_t len);

/* 1 with a note in buf when decode is timed eagerly on the cuda backend (b, the backend the
 * plan runs on): serving stacks replay decode steps as CUDA graphs, so a speed-up measured
 * without them speaks for the debugging mode, not the arena (the arena's guide), unless the
 * arena publishes eager decode; 0 (buf "") otherwise. buf may be NULL with len 0 (whether
 * it applies, alone). */
int bk_plan_eager_decode_text(const bk_plan *p, bk_backend b, char *buf, size_t len);

const char *bk_phase_name(bk_phase p);
const char *bk_backend_name(bk_backend b);
const char *bk_drift_policy_name(bk_drift_policy p);
const char *bk_lane_policy_name(bk_lane_policy p);

#endif
