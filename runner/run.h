/* run.h - one bracket run as rank 0 sees it: the plan, lanes, arms and what came of them.
 * Shared by the orchestration (run.c), the evaluation (evaluate.c) and the record (record.c). */
#ifndef BK_RUN_H
#define BK_RUN_H

#include <stdint.h>

#include "plans/plan.h"
#include "runner/coordinator.h"
#include "runner/score.h"

#define BK_MAX_LANE 1024

/* A against T, per shape and output tensor, over every lane rank. */
typedef struct bk_quality_shape {
    uint64_t elems;
    uint64_t mismatches;   /* |a - t| > atol + rtol * |t| */
    uint64_t nan_a, nan_t; /* NaN (includes unwritten: outputs are poisoned with NaN) */
    double max_abs, max_rel;
    char digest_a[80], digest_t[80];
} bk_quality_shape;

typedef struct bk_quality {
    bk_quality_state state;
    char reason[512];
    int nshapes, noutputs;
    bk_quality_shape *per; /* [shape * noutputs] */
} bk_quality;

typedef struct bk_run {
    bk_plan plan;
    char plan_digest[80];
    char run_id[BK_RUN_ID_LEN];
    char out_dir[512];
    char run_dir[700];
    bk_backend backend;
    int world_size;             /* MPI ranks */
    int lane_size;
    int baseline[BK_MAX_LANE];
    int candidate[BK_MAX_LANE];
    int shared_lanes;           /* lane policy shared: both lanes are the same ranks */
    int lane_gpu_shared;        /* two ranks of a lane on one GPU (cuda backend; only
                                 * lanes.policy shared allows it): their kernels take turns,
                                 * so no straggler is named (bk_straggler_note); not recorded */
    char lane_signature[256];
    char topo_digest[48];
    char lane_note[512];
    char sum_note[1024];        /* bk_catalog_bf16_sum_note of the plan: at set-up, and again
                                 * in bk_record_read (not recorded); the header, and the
                                 * report under a failed quality */
    char (*hosts)[BK_HOST_LEN]; /* [world_size] */
    double routing_share;
    /* the shapes the candidate's arms (C, A) route to the incumbent, bit i shape i: by the
     * run's catalog (bk_plan_routed at set-up; read back from the record's routing.shapes,
     * so a record is judged by the catalog that ran it, not the scorer's); known 0: not
     * recorded, the routing is not judged */
    uint64_t cand_routed;
    int cand_routed_known;
    int noutputs;
    const char *output_names[16];
    bk_arm_run arms[BK_ARM_NAMES];
    bk_quality quality;
    bk_wire_stats wire;
    char created[32];           /* UTC ISO 8601 */
    char version[32];           /* the bracket that ran it: BK_VERSION in `bracket run`, the
                                 * record's bracket_version in `bracket score` */
    char binary_digest[80];
    char stopped[256];          /* why later arms did not run, if any */
    int unfinished;             /* a provisional record, written before an arm (record.json's
                                 * `unfinished`; false when absent, as in older records) */
} bk_run;

/* Score a run from its arms' samples (B, C, B') and its quality; bc_only for
 * v7's first look. */
bk_status bk_run_evaluate(const bk_run *run, int bc_only, bk_score *out, bk_err *err);

/* Compare A with T (tensors kept on the arms) into run->quality. */
void bk_run_quality(bk_run *run);

/* The first step of bk_run_quality, deciding without a comparison: when an engine of arm C
 * or A reported that the candidate broke its contract (bk_rank_data.broke_contract: it
 * mutated an input, or a timed call did not compute what an untimed one does), set q's
 * state to FAIL with that engine's message; else when A or T did not run or did not
 * complete, to MISSING with the reason. 1 when it decided, else 0, q untouched. */
int bk_quality_missing(const bk_run *run, bk_quality *q);

/* The last step: q's state from its per-tensor comparison (q->per, nshapes x noutputs):
 * FAIL when any element mismatched (NaN and unwritten elements count as mismatches),
 * else PASS; the reason gives the count and `first`, the first bad element. */
void bk_quality_decide(bk_quality *q, const char *first);

/* One element of one output in words, as the quality reason and `bracket verify` give the
 * first bad one: "shape S (tokens T, hidden H) TENSOR rank R element I: A_NAME a, B_NAME b
 * (rtol x, atol y)", into buf (always terminated, truncated to len). */
void bk_quality_element_text(char *buf, size_t len, int s, const bk_shape *sh, const char *tensor,
                             int rank, size_t i, const char *a_name, double a, const char *b_name,
                             double b, double rtol, double atol);

/* Judge one round of an arm from its lane ranks' reports (processes' exit codes, signals,
 * time-outs, final statuses, sample counts; an audit's tensors): a->ok, and a->reason
 * naming each failed rank. */
void bk_run_judge_arm(const bk_run *run, bk_arm_run *a);
/* The shapes arm a's engines must serve with the incumbent (bit i: shape i), by the arm's
 * variant's domain at its lane: the engine's routing rule, which its status reports back. */
uint64_t bk_arm_want_routed(const bk_run *run, const bk_arm_run *a);
/* The same for `variant` of plan p on a lane of `world` on `backend` (bracket verify's). */
uint64_t bk_plan_routed(const bk_plan *p, const char *variant, int world, bk_backend backend);
/* "1, 3" for bits 1 and 3 of m, "none" for 0; BK_ROUTED_TEXT bytes hold all 64. */
#define BK_ROUTED_TEXT 320
void bk_routed_text(uint64_t m, char *buf, size_t len);

/* Whether a SIGTERM / SIGINT cut the run short, from the run's own evidence: an arm that
 * ran and failed with a reason "terminated by NAME during arm X" or "... before round k of
 * R", or `stopped` "terminated by NAME before arm X" (arm X not run). 1 with NAME in name
 * (len bytes), else 0. A signal that came after the last arm ended cut nothing: the run is
 * decided as it ran. `bracket run` marks the score from this, and `bracket score` marks its
 * recomputation from it, never from the record's own verdict text. */
int bk_run_terminated(const bk_run *run, char *name, size_t len);
/* The same for one arm (its reason, or its round's: "round k of R: terminated by NAME ..."). */
int bk_arm_terminated(const bk_arm_run *a, char *name, size_t len);
/* The index into a->r (round by round) of the first process whose status said the arm's own
 * variant broke its contract (bk_rank_data.broke_contract), or -1 (also for no processes). */
int bk_arm_broke_contract(const bk_arm_run *a);

/* The record's `stopped`, written by `bracket run` and checked by `bracket score` from the
 * same text: for arm idx that failed, "terminated by NAME during arm X; later arms not run"
 * when a signal cut it short, else "arm X failed; later arms not run"; for arm idx not
 * started because of signal `signame`, "terminated by NAME before arm X". */
void bk_run_stopped_failed(const bk_run *run, int idx, char *buf, size_t len);
void bk_run_stopped_before(const char *signame, int idx, char *buf, size_t len);
/* The `stopped` of an unfinished record, the provisional one `bracket run` writes before
 * starting arm idx and replaces with its final record: "unfinished: written before arm X;
 * the run did not replace it". bk_run_unfinished_arm reads X back from such a text: its
 * index, or -1 when the text is not of that form. */
void bk_run_stopped_unfinished(int idx, char *buf, size_t len);
int bk_run_unfinished_arm(const char *stopped);
/* v7's look before B': 1 when B and C alone decide (evaluated as before A and T ran, the
 * quality not yet known), with "v7: B/C decided (PASS), B' not run" (or FAIL) in buf. */
int bk_run_v7_decided(const bk_run *run, char *buf, size_t len);

/* The record: record.json (bracket.record/1) and samples.msgpack in run_dir,
 * each written to a temporary file, flushed and renamed. */
bk_status bk_record_write(const bk_run *run, const bk_score *score, bk_err *err);

/* The record's "score" object, and arm idx's object (its "summary" from sc), as
 * bk_record_write writes them (new references). */
json_t *bk_record_score_json(const bk_score *sc);
json_t *bk_record_arm_json(const bk_run *run, const bk_score *sc, int idx);

/* Read a record back for `bracket score`: the plan, arms (status, processes
 * and samples from samples.msgpack) and quality; enough to re-evaluate. */
bk_status bk_record_read(const char *record_path, bk_run *run, bk_err *err);
/* Frees what a run or a read holds (the arms too; also after a failed read); the struct
 * itself is the caller's. */
void bk_run_free(bk_run *run);

#endif
