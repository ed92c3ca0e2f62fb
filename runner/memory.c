/* memory.c - rank 0's peak for a plan, and the memory this host and cgroup still have. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/catalog.h"
#include "runner/memory.h"
#include "runner/wire.h"

/* bytes as a double, held in a uint64_t (UINT64_MAX past it) */
static uint64_t sat(double b) { return b >= 1.8e19 ? UINT64_MAX : (uint64_t)b; }

void bk_rank0_peak_split(const bk_plan *p, bk_rank0_peak *out)
{
    const bk_target *tg = bk_catalog_target(p->target);
    const int world = p->arena.tp * p->arena.ep;
    const double R = p->protocol.repeats > 1 ? p->protocol.repeats : 1;
    const double W = world > 0 ? world : 1;
    const double per_round = (double)p->workload.nshapes * (double)p->workload.iters;
    double slots = 8.0 * W * per_round * (3 * R + 2);     /* B, C, B' in R rounds; A, T */
    double packed = 10.0 * W * per_round * 3 * R;          /* samples.msgpack in memory */
    /* critical paths of B, C, B' (evaluate), the scorer's copies of them and of the
     * pooled B+B', one sort scratch: 9 arm-sized arrays of 8 B */
    double scorer = 9.0 * 8.0 * per_round * R;
    double outputs = 0, top = 0;
    memset(out, 0, sizeof *out);
    out->top_shape = -1;
    for (int s = 0; tg && s < p->workload.nshapes; s++) {
        double one = 0;
        for (int t = 0; t < tg->ntensors; t++)
            if (tg->tensor_is_output[t])
                one += 2.0 * W * (double)tg->tensor_elems(&p->workload.shapes[s], world, t) *
                       (double)tg->tensor_elem_bytes(t);
        if (one > top) {
            top = one;
            out->top_shape = s;
        }
        outputs += one;
    }
    const double samples = slots + (packed > scorer ? packed : scorer);
    out->samples = sat(samples);
    out->outputs = sat(outputs);
    out->top_outputs = sat(top);
    out->total = sat(samples + outputs);
}

int bk_audit_msg_too_big(const bk_plan *p, int world, char *why, size_t len)
{
    const bk_target *tg = bk_catalog_target(p->target);
    for (int s = 0; tg && s < p->workload.nshapes; s++) {
        const bk_shape *sh = &p->workload.shapes[s];
        for (int t = 0; t < tg->ntensors; t++) {
            if (!tg->tensor_is_output[t])
                continue;
            const double bytes = (double)tg->tensor_elems(sh, world, t) *
                                 (double)tg->tensor_elem_bytes(t);
            if (bytes <= (double)BK_WIRE_TENSOR_MAX)
                continue;
            char b[32];
            snprintf(why, len, "workload.shapes[%d] (tokens %lld, hidden %lld): audits A and T "
                     "send each rank's output '%s' whole, %s here, and one message carries "
                     "at most %llu bytes (1 GiB, less 4 KiB for its other fields): give this "
                     "shape fewer tokens", s, (long long)sh->tokens, (long long)sh->hidden,
                     tg->tensor_names[t], bk_mem_text(sat(bytes), b, sizeof b),
                     (unsigned long long)BK_WIRE_TENSOR_MAX);
            return s;
        }
    }
    return -1;
}

uint64_t bk_rank0_peak_bytes(const bk_plan *p)
{
    bk_rank0_peak k;
    bk_rank0_peak_split(p, &k);
    return k.total;
}

void bk_verify_peak_split(const bk_plan *p, int world, int cuda, bk_verify_peak *out)
{
    const bk_target *tg = bk_catalog_target(p->target);
    const double W = world > 0 ? world : 1;
    double engine = 0, peer = 0, outs_all = 0, ref = 0, top = -1;
    memset(out, 0, sizeof *out);
    out->top_shape = -1;
    for (int s = 0; tg && s < p->workload.nshapes; s++) {
        const bk_shape *sh = &p->workload.shapes[s];
        double in_b = 0, out_b = 0, out_elems = 0;
        for (int t = 0; t < tg->ntensors; t++) {
            const double n = (double)tg->tensor_elems(sh, world, t);
            const double b = n * (double)tg->tensor_elem_bytes(t);
            if (tg->tensor_is_output[t]) {
                out_b += b;
                out_elems += n;
            } else {
                in_b += b;
            }
        }
        const double e = cuda ? 2 * out_b : in_b + 3 * out_b;
        const double pb = cuda ? 0 : (double)tg->peer_bytes(sh, world);
        const double r = out_elems * 8.0 + in_b; /* one rank's reference at a time */
        if (e > engine)
            engine = e;
        if (pb > peer)
            peer = pb;
        if (r > ref)
            ref = r;
        outs_all += (cuda ? 2 : 1) * W * out_b;
        if (W * (e + pb) + r > top) {
            top = W * (e + pb) + r;
            out->top_shape = s;
        }
    }
    /* the engines are gone when verify computes the references: the peak is the larger */
    const double engines = W * (engine + peer);
    out->engine = sat(engine + peer);
    out->engines = sat(engines);
    out->outputs = sat(outs_all);
    out->reference = sat(ref);
    out->total = sat(outs_all + (engines > ref ? engines : ref));
}

uint64_t bk_arm_host_bytes(const bk_plan *p, int cuda, bk_verify_peak *vp)
{
    bk_verify_peak_split(p, p->arena.tp * p->arena.ep, cuda, vp);
    const uint64_t r0 = bk_rank0_peak_bytes(p);
    return r0 + vp->engines < r0 ? UINT64_MAX : r0 + vp->engines;
}

const char *bk_mem_text(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, len, "%.1f GiB", (double)bytes / (1 << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, len, "%.1f MiB", (double)bytes / (1 << 20));
    else
        snprintf(buf, len, "%.1f KiB", (double)bytes / (1 << 10));
    return buf;
}

void bk_lower_shape_text(const bk_shape *s, const char *where, char *buf, size_t len)
{
    if (s->experts > 0)
        snprintf(buf, len, "lower experts x intermediate x hidden, the experts' weights, or "
                 "tokens x hidden of the largest shape (%sexperts %lld x intermediate %lld x "
                 "hidden %lld, tokens %lld)", where, (long long)s->experts,
                 (long long)s->intermediate, (long long)s->hidden, (long long)s->tokens);
    else
        snprintf(buf, len, "lower tokens x hidden of the largest shape (%stokens %lld x hidden "
                 "%lld)", where, (long long)s->tokens, (long long)s->hidden);
}

void bk_rank0_too_big_text(const bk_plan *p, uint64_t have, const char *from, char *buf,
                           size_t len)
{
    bk_rank0_peak k;
    char total[32], samples[32], outputs[32], top[32], haves[32], advice[256];
    bk_rank0_peak_split(p, &k);
    bk_mem_text(k.total, total, sizeof total);
    bk_mem_text(k.samples, samples, sizeof samples);
    bk_mem_text(k.outputs, outputs, sizeof outputs);
    bk_mem_text(k.top_outputs, top, sizeof top);
    bk_mem_text(have, haves, sizeof haves);
    if (k.outputs > k.samples && k.top_shape >= 0)
        snprintf(advice, sizeof advice, "lower tokens x hidden of the largest shapes (workload."
                 "shapes[%d], tokens %lld x hidden %lld, holds %s of the audit outputs)",
                 k.top_shape, (long long)p->workload.shapes[k.top_shape].tokens,
                 (long long)p->workload.shapes[k.top_shape].hidden, top);
    else
        snprintf(advice, sizeof advice, "lower workload.iters, protocol.repeats or the number of "
                 "shapes");
    snprintf(buf, len, "rank 0 would hold about %s for this plan (%s for the samples of 3 timed "
             "arms x %d round(s), lanes of %d ranks, %d shape(s) x %d iterations; %s for the "
             "audit outputs, every lane rank's output tensors of each shape from arms A and T) "
             "but %s has %s available; %s", total, samples,
             p->protocol.repeats > 1 ? p->protocol.repeats : 1, p->arena.tp * p->arena.ep,
             p->workload.nshapes, p->workload.iters, outputs, from && from[0] ? from :
             "this host", haves, advice);
}

/* The first number after `key` in file `path` (a "Key: N kB" or a bare number file);
 * 0 when it cannot be read. `*max` is set when the file says "max". */
static int read_number(const char *path, const char *key, uint64_t *v, int *max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int ok = 0;
    while (!ok && fgets(line, sizeof line, f)) {
        const char *at = line;
        if (key) {
            size_t n = strlen(key);
            if (strncmp(line, key, n) != 0)
                continue;
            at = line + n;
        }
        if (max && strncmp(at, "max", 3) == 0) {
            *max = 1;
            ok = 1;
        } else {
            ok = sscanf(at, "%" SCNu64, v) == 1;
        }
    }
    fclose(f);
    return ok;
}

/* limit - usage of one cgroup (v2 memory.max/memory.current or v1
 * memory.limit_in_bytes/memory.usage_in_bytes); 0 with *known = 0 when unlimited or
 * unreadable. */
static uint64_t cg_left(const char *dir, const char *lim_file, const char *use_file, int *known)
{
    char path[1200];
    uint64_t lim = 0, use = 0;
    int unlimited = 0;
    *known = 0;
    snprintf(path, sizeof path, "%s/%s", dir, lim_file);
    if (!read_number(path, NULL, &lim, &unlimited) || unlimited || lim >= (1ull << 62))
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, use_file);
    if (!read_number(path, NULL, &use, NULL))
        return 0;
    *known = 1;
    return lim > use ? lim - use : 0;
}

/* One cgroup hierarchy as this process sees it mounted (/proc/self/mountinfo): `root` the
 * cgroup path of the mount's root, `at` where it is mounted. A container may bind its own
 * cgroup alone (root "/docker/ID"), a cgroup namespace shows paths from its own root, and a
 * hybrid host mounts v2 at /sys/fs/cgroup/unified: /sys/fs/cgroup + path fits none. */
typedef struct {
    char root[1024];
    char at[1024];
    int found;
} cg_mount;

/* mountinfo writes a space, tab, newline or backslash of a path as \ooo */
static void unescape_octal(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* `want` one of the comma-separated options in `opts` */
static int has_option(const char *opts, const char *want)
{
    const size_t n = strlen(want);
    for (const char *o = opts;; o++) { /* o: an option's start; o++ steps over its comma */
        if (!strncmp(o, want, n) && (o[n] == ',' || o[n] == '\0'))
            return 1;
        if (!(o = strchr(o, ',')))
            return 0;
    }
}

/* The cgroup2 mount and the v1 memory controller's mount in `mountinfo`; of several mounts
 * of one, the one whose root sits highest (it sees the most cgroups above ours). */
static void find_cg_mounts(const char *mountinfo, cg_mount *v2, cg_mount *v1)
{
    v2->found = v1->found = 0;
    FILE *f = fopen(mountinfo, "r");
    char *line = NULL; /* whole lines: an overlay mount's options run to kilobytes */
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        char root[1024], at[1024], fstype[64], opts[1024];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, at) != 2 ||
            sscanf(dash + 3, "%63s %*s %1023s", fstype, opts) != 2)
            continue;
        cg_mount *m = !strcmp(fstype, "cgroup2")                               ? v2
                    : !strcmp(fstype, "cgroup") && has_option(opts, "memory") ? v1 : NULL;
        unescape_octal(root);
        unescape_octal(at);
        if (!m || (m->found && strlen(root) >= strlen(m->root)))
            continue;
        bk_strlcpy(m->root, root, sizeof m->root);
        bk_strlcpy(m->at, at, sizeof m->at);
        m->found = 1;
    }
    free(line);
    if (f)
        fclose(f);
}

/* The folder of cgroup `path` in mount `m`; 0 when the mount does not show it (the path lies
 * outside the mount's root, or climbs with "..", as a cgroup outside our namespace does). */
static int cg_dir(const cg_mount *m, const char *path, char *dir, size_t len)
{
    size_t n = strcmp(m->root, "/") ? strlen(m->root) : 0;
    if (!m->found || path[0] != '/' || (n && (strncmp(path, m->root, n) != 0 ||
                                              (path[n] != '/' && path[n] != '\0'))))
        return 0;
    for (const char *d = strstr(path, "/.."); d; d = strstr(d + 1, "/.."))
        if (d[3] == '/' || d[3] == '\0')
            return 0;
    snprintf(dir, len, "%s%s", m->at, strcmp(path + n, "/") ? path + n : "");
    return 1;
}

int bk__mem_available_in(const char *meminfo, const char *self_cgroup, const char *mountinfo,
                         uint64_t *bytes, char *from, size_t from_len)
{
    uint64_t kb = 0, avail = 0;
    int have = read_number(meminfo, "MemAvailable:", &kb, NULL);
    if (have)
        avail = kb * 1024;
    char dummy[1];
    if (!from || !from_len) {
        from = dummy;
        from_len = sizeof dummy;
    }
    snprintf(from, from_len, "%s", have ? "this host" : "");
    cg_mount mv2, mv1;
    find_cg_mounts(mountinfo, &mv2, &mv1);
    /* "0::/path" (v2) or "N:memory:/path" (v1) in /proc/self/cgroup */
    FILE *f = fopen(self_cgroup, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        const int v2 = c2 == c1 + 1;
        if (!v2 && ((size_t)(c2 - c1 - 1) != strlen("memory") || strncmp(c1 + 1, "memory", 6)))
            continue;
        /* the process's cgroup and each one above it that its mount shows: a limit can sit on
         * any of them (Slurm puts it on the job's and the step's, the task's own memory.max
         * being "max") */
        char path[1024];
        bk_strlcpy(path, c2 + 1, sizeof path);
        for (;;) {
            char dir[2100];
            int known = 0;
            uint64_t left;
            if (!cg_dir(v2 ? &mv2 : &mv1, path, dir, sizeof dir))
                break;
            if (v2) {
                left = cg_left(dir, "memory.max", "memory.current", &known);
            } else {
                left = cg_left(dir, "memory.limit_in_bytes", "memory.usage_in_bytes", &known);
                /* in v1 a cgroup above ours binds us only with memory.use_hierarchy 1 (its
                 * usage then counts ours); systemd turns it on, a hand-made tree may not */
                char hier[2200];
                uint64_t on = 1;
                snprintf(hier, sizeof hier, "%s/memory.use_hierarchy", dir);
                if (strcmp(path, c2 + 1) != 0 && read_number(hier, NULL, &on, NULL) && !on)
                    known = 0;
            }
            if (known && (!have || left < avail)) {
                avail = left;
                have = 1;
                snprintf(from, from_len, "its memory cgroup %s", dir);
            }
            char *slash = strrchr(path, '/');
            if (!slash || slash == path)
                break; /* up to the top cgroup below the root */
            *slash = '\0';
        }
    }
    if (f)
        fclose(f);
    *bytes = avail;
    return have;
}

int bk_mem_available(uint64_t *bytes, char *from, size_t from_len)
{
    return bk__mem_available_in("/proc/meminfo", "/proc/self/cgroup", "/proc/self/mountinfo",
                                bytes, from, from_len);
}
