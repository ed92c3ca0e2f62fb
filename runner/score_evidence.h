/* score_evidence.h - `bracket score`'s checks of a record against its own evidence. */
#ifndef BK_SCORE_EVIDENCE_H
#define BK_SCORE_EVIDENCE_H

#include <jansson.h>
#include <stddef.h>

#include "runner/run.h"

/* The record `rec` (read from `path`, and as `run`) against its own evidence: the plan's and
 * the samples' digests, topology.json (a note on it into `note`; *topo_missing 1 when the
 * record names none that is there), the backend, each timed arm's rounds against the plan's
 * repeats, the arms against their processes, an unfinished record's arms, the lanes
 * against their policy, the run's facts, the quality state against its tensors. 0 when all
 * agree; -1 when one differs (why says which field, and both values); -2 topology.json
 * cannot be read as the record's (bad input), -3 this machine failed reading it. */
int bk__score_evidence(const char *path, json_t *rec, const bk_run *run, char *why,
                       size_t len, char *note, size_t note_len, int *topo_missing);

#endif
