/* topo_snapshot.c - bracket.topology/1 snapshots: validated JSON in (topo_snapshot_write.c
 * writes them). */
#include "topology/topology.h"
#include "runner/record_io.h"

/* Messages and names live in fixed buffers; a cut-off message is acceptable. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- reading */

typedef struct {
    const char *label; /* file name for messages */
    char path[128];    /* JSON path of the host being read, e.g. "hosts[2]" */
    bk_err *err;
} rd;

#define RD_FAIL(r, ...) rd_fail((r), __VA_ARGS__)
static bk_status rd_fail(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bk_status rd_fail(rd *r, const char *fmt, ...)
{
    char what[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return BK_FAIL(r->err, BK_ERR_INPUT, "%s: %s%s%s", r->label, r->path, r->path[0] ? "." : "",
                   what);
}

static bk_status rd_int(rd *r, json_t *o, const char *key, int lo, int hi, int required, int dflt,
                        int *out)
{
    json_t *v = json_object_get(o, key);
    *out = dflt;
    if (!v)
        return required ? RD_FAIL(r, "%s: missing", key) : BK_OK;
    if (!json_is_integer(v))
        return RD_FAIL(r, "%s: must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return RD_FAIL(r, "%s: %lld is out of range [%d, %d]", key, (long long)x, lo, hi);
    *out = (int)x;
    return BK_OK;
}

static bk_status rd_str(rd *r, json_t *o, const char *key, int required, char *out, size_t n)
{
    json_t *v = json_object_get(o, key);
    out[0] = '\0';
    if (!v)
        return required ? RD_FAIL(r, "%s: missing", key) : BK_OK;
    if (!json_is_string(v))
        return RD_FAIL(r, "%s: must be a string", key);
    if (bk_strlcpy(out, json_string_value(v), n) != 0)
        return RD_FAIL(r, "%s: longer than %zu bytes", key, n - 1);
    const long at = bk_control_at(out);
    if (at >= 0)
        return RD_FAIL(r, "%s: a control character (byte 0x%02x at offset %ld)", key,
                       (unsigned char)out[at], at);
    return BK_OK;
}

static bk_status rd_array(rd *r, json_t *o, const char *key, size_t max, json_t **out)
{
    json_t *v = json_object_get(o, key);
    *out = v;
    if (!v)
        return RD_FAIL(r, "%s: missing", key);
    if (!json_is_array(v))
        return RD_FAIL(r, "%s: must be an array", key);
    if (json_array_size(v) > max)
        return RD_FAIL(r, "%s: %zu entries, at most %zu allowed", key, json_array_size(v), max);
    return BK_OK;
}

static bk_status rd_object_at(rd *r, json_t *arr, const char *key, size_t i, json_t **out)
{
    *out = json_array_get(arr, i);
    if (!json_is_object(*out))
        return RD_FAIL(r, "%s[%zu]: must be an object", key, i);
    return BK_OK;
}

/* The keys each object of a snapshot may hold (docs/topology.md); anything else is refused,
 * as plans refuse theirs: an unknown key would be left out of the digest, or be a typo. */
static const char *const top_keys[] = { "schema", "hosts", NULL };
static const char *const host_keys[] = { "hostname", "boot_id", "packages", "cores", "pus",
                                         "numa", "gpus", "nics", "links", "gpu_nic",
                                         "nvswitch", "p2p", "seen", "notes", NULL };
static const char *const numa_keys[] = { "os_index", "cpus", "memory_bytes", NULL };
static const char *const gpu_keys[] = { "bus_id", "uuid", "name", "numa", "cuda_index", NULL };
static const char *const nic_keys[] = { "name", "bus_id", "kind", "numa", NULL };
static const char *const p2p_keys[] = { "access", "rank", NULL };

/* Refuse a key of `o` that is not in `allowed`; `in` is the object's own path below r's
 * ("p2p." for hosts[0].p2p), "" for r's object itself. */
static bk_status rd_keys(rd *r, json_t *o, const char *in, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        const char *const *a = allowed;
        while (*a && strcmp(*a, key))
            a++;
        if (!*a)
            return RD_FAIL(r, "%s%s: unknown key", in, key);
    }
    return BK_OK;
}

/* A NUMA node's CPUs, as the probe writes them (topo_cpulist.c). */
static bk_status rd_cpus(rd *r, const char *cpus)
{
    char why[400];
    return bk__cpulist_check(cpus, why, sizeof why) ? RD_FAIL(r, "cpus: %s", why) : BK_OK;
}

/* A rows x cols matrix of link strings; `gpu_nic` selects which to fill. */
static bk_status rd_links(rd *r, json_t *o, const char *key, int rows, int cols, bk_topo_host *h,
                          int gpu_nic)
{
    json_t *m;
    bk_status st = rd_array(r, o, key, BK_TOPO_MAX_GPUS, &m);
    if (st != BK_OK)
        return st;
    if ((int)json_array_size(m) != rows)
        return RD_FAIL(r, "%s: %zu rows but the host has %d GPUs", key, json_array_size(m), rows);
    for (int i = 0; i < rows; i++) {
        json_t *row = json_array_get(m, (size_t)i);
        if (!json_is_array(row))
            return RD_FAIL(r, "%s[%d]: must be an array", key, i);
        if ((int)json_array_size(row) != cols)
            return RD_FAIL(r, "%s[%d]: %zu entries but %d expected (%s)", key, i,
                           json_array_size(row), cols, gpu_nic ? "one per NIC" : "one per GPU");
        for (int j = 0; j < cols; j++) {
            json_t *c = json_array_get(row, (size_t)j);
            bk_link l = { BK_LINK_NONE, 0 };
            if (gpu_nic && json_is_string(c) && !strcmp(json_string_value(c), "?")) {
                h->gpu_nic[i][j] = BK_LINK_NONE; /* path unknown (GPU seen by NVML only) */
                continue;
            }
            if (!json_is_string(c) || bk_link_parse(json_string_value(c), &l) != 0)
                return RD_FAIL(r, "%s[%d][%d]: must be one of X, NV<n>, PIX, PXB, PHB, NODE, SYS",
                               key, i, j);
            if (gpu_nic) {
                if (l.cls == BK_LINK_NV || l.cls == BK_LINK_SELF || l.cls == BK_LINK_NET)
                    return RD_FAIL(r, "%s[%d][%d]: %s is not a GPU-to-NIC path", key, i, j,
                                   json_string_value(c));
                h->gpu_nic[i][j] = l.cls;
                continue;
            }
            if ((i == j) != (l.cls == BK_LINK_SELF))
                return RD_FAIL(r, "%s[%d][%d]: %s", key, i, j,
                               i == j ? "the diagonal must be X" : "X only on the diagonal");
            if (l.cls == BK_LINK_NET)
                return RD_FAIL(r, "%s[%d][%d]: NET cannot join GPUs of one host", key, i, j);
            h->links[i][j] = l;
        }
    }
    for (int i = 0; !gpu_nic && i < rows; i++)
        for (int j = 0; j < i; j++)
            if (memcmp(&h->links[i][j], &h->links[j][i], sizeof(bk_link)) != 0) {
                char a[16], b[16];
                return RD_FAIL(r, "%s[%d][%d]: %s but %s[%d][%d] is %s (matrix not symmetric)", key,
                               i, j, bk_link_str(h->links[i][j], a, sizeof a), key, j, i,
                               bk_link_str(h->links[j][i], b, sizeof b));
            }
    return BK_OK;
}

static bk_status rd_p2p(rd *r, json_t *o, bk_topo_host *h)
{
    json_t *p = json_object_get(o, "p2p");
    if (!p)
        return BK_OK;
    if (!json_is_object(p))
        return RD_FAIL(r, "p2p: must be an object");
    bk_status st = rd_keys(r, p, "p2p.", p2p_keys);
    if (st != BK_OK)
        return st;
    static const char *const keys[2] = { "access", "rank" };
    for (int k = 0; k < 2; k++) {
        json_t *m = json_object_get(p, keys[k]);
        if (!json_is_array(m) || (int)json_array_size(m) != h->ngpus)
            return RD_FAIL(r, "p2p.%s: must be a %dx%d integer matrix", keys[k], h->ngpus,
                           h->ngpus);
        for (int i = 0; i < h->ngpus; i++) {
            json_t *row = json_array_get(m, (size_t)i);
            if (!json_is_array(row) || (int)json_array_size(row) != h->ngpus)
                return RD_FAIL(r, "p2p.%s[%d]: must be an array of %d integers", keys[k], i,
                               h->ngpus);
            for (int j = 0; j < h->ngpus; j++) {
                json_t *c = json_array_get(row, (size_t)j);
                /* access: 0 or 1 (cudaDeviceCanAccessPeer); rank: -1 (none) to 127 */
                const json_int_t lo = k ? -1 : 0, hi = k ? 127 : 1;
                if (!json_is_integer(c) || json_integer_value(c) < lo ||
                    json_integer_value(c) > hi)
                    return RD_FAIL(r, "p2p.%s[%d][%d]: must be an integer in [%d, %d]", keys[k], i,
                                   j, (int)lo, (int)hi);
                (k ? h->p2p_rank : h->p2p_access)[i][j] = (int8_t)json_integer_value(c);
            }
        }
    }
    h->p2p_known = 1;
    return BK_OK;
}

static bk_status rd_host(rd *r, json_t *o, bk_topo_host *h)
{
    bk_status st = BK_OK;
    json_t *a;
    char key[48];
#define T(x)                                                                                       \
    do {                                                                                           \
        if ((st = (x)) != BK_OK)                                                                   \
            return st;                                                                             \
    } while (0)
    T(rd_keys(r, o, "", host_keys));
    T(rd_str(r, o, "hostname", 1, h->hostname, sizeof h->hostname));
    if (!h->hostname[0])
        return RD_FAIL(r, "hostname: empty (ranks are matched to hosts by it)");
    T(rd_str(r, o, "boot_id", 0, h->boot_id, sizeof h->boot_id));
    T(rd_int(r, o, "packages", 0, 1 << 20, 0, 0, &h->packages));
    T(rd_int(r, o, "cores", 0, 1 << 24, 0, 0, &h->cores));
    T(rd_int(r, o, "pus", 0, 1 << 24, 0, 0, &h->pus));
    if (h->pus > 0 && h->cores > h->pus) /* 0: not seen */
        return RD_FAIL(r, "pus: %d, fewer than the %d cores (a core has one PU or more)", h->pus,
                       h->cores);
    T(rd_array(r, o, "numa", BK_TOPO_MAX_NUMA, &a));
    h->nnuma = (int)json_array_size(a);
    for (int i = 0; i < h->nnuma; i++) {
        json_t *e;
        T(rd_object_at(r, a, "numa", (size_t)i, &e));
        snprintf(key, sizeof key, "numa[%d]", i);
        rd sub = *r;
        snprintf(sub.path, sizeof sub.path, "%s%s%s", r->path, r->path[0] ? "." : "", key);
        json_t *mem = json_object_get(e, "memory_bytes");
        T(rd_keys(&sub, e, "", numa_keys));
        T(rd_int(&sub, e, "os_index", 0, 1 << 20, 1, 0, &h->numa[i].os_index));
        for (int j = 0; j < i; j++) /* GPUs and ranks are placed by it */
            if (h->numa[j].os_index == h->numa[i].os_index)
                return RD_FAIL(&sub, "os_index: %d is also the os_index of %s%snuma[%d] (one NUMA "
                               "node listed twice)", h->numa[i].os_index, r->path,
                               r->path[0] ? "." : "", j);
        const json_t *cpus = json_object_get(e, "cpus");
        if (cpus && !json_is_string(cpus))
            return RD_FAIL(&sub, "cpus: must be a string");
        const char *list = cpus ? json_string_value(cpus) : "";
        T(rd_cpus(&sub, list));
        if (bk_topo_numa_set_cpus(h, i, list) != 0)
            return RD_FAIL(&sub, "cpus: the host's NUMA CPU lists together pass %d characters",
                           BK_TOPO_CPU_TEXT - 2);
        if (mem && (!json_is_integer(mem) || json_integer_value(mem) < 0))
            return RD_FAIL(&sub, "memory_bytes: must be an integer >= 0");
        h->numa[i].memory_bytes = mem ? (uint64_t)json_integer_value(mem) : 0;
    }
    T(rd_array(r, o, "gpus", BK_TOPO_MAX_GPUS, &a));
    h->ngpus = (int)json_array_size(a);
    for (int i = 0; i < h->ngpus; i++) {
        json_t *e;
        bk_topo_gpu *g = &h->gpus[i];
        T(rd_object_at(r, a, "gpus", (size_t)i, &e));
        rd sub = *r;
        snprintf(sub.path, sizeof sub.path, "%s%sgpus[%d]", r->path, r->path[0] ? "." : "", i);
        T(rd_keys(&sub, e, "", gpu_keys));
        T(rd_str(&sub, e, "bus_id", 1, g->bus_id, sizeof g->bus_id));
        /* kept in the form the probe and the ranks give (matched as text when a rank's GPU is
         * looked up): "00000000:1A:00.0" is read as 0000:1a:00.0 */
        char as_read[sizeof g->bus_id];
        bk_strlcpy(as_read, g->bus_id, sizeof as_read);
        if (bk_pci_bus_norm(as_read, g->bus_id, sizeof g->bus_id) != 0)
            return RD_FAIL(&sub, "bus_id: \"%s\" is not a PCI bus id (DOMAIN:BUS:DEVICE.FUNCTION "
                           "in hex, e.g. 0000:18:00.0)", as_read);
        T(rd_str(&sub, e, "uuid", 0, g->uuid, sizeof g->uuid));
        T(rd_str(&sub, e, "name", 0, g->name, sizeof g->name));
        T(rd_int(&sub, e, "numa", -1, h->nnuma - 1, 0, -1, &g->numa));
        T(rd_int(&sub, e, "cuda_index", -1, BK_TOPO_MAX_GPUS - 1, 0, -1, &g->cuda_index));
        /* CUDA numbers the GPUs it sees 0, 1, ... : never more of them than the host has */
        if (g->cuda_index >= h->ngpus)
            return RD_FAIL(&sub, "cuda_index: %d, but the host lists %d GPU(s) (a CUDA ordinal "
                           "is below the number of GPUs; -1: not visible to CUDA)",
                           g->cuda_index, h->ngpus);
        /* one GPU twice would make two "different" lanes of one device */
        for (int j = 0; j < i; j++) {
            if (!strcmp(h->gpus[j].bus_id, g->bus_id))
                return RD_FAIL(&sub, "bus_id: \"%s\" is also the bus_id of %s%sgpus[%d] (one "
                               "GPU listed twice)", as_read, r->path, r->path[0] ? "." : "", j);
            if (g->uuid[0] && !strcmp(h->gpus[j].uuid, g->uuid))
                return RD_FAIL(&sub, "uuid: \"%s\" is also the uuid of %s%sgpus[%d] (one GPU "
                               "listed twice)", g->uuid, r->path, r->path[0] ? "." : "", j);
            if (g->cuda_index >= 0 && h->gpus[j].cuda_index == g->cuda_index)
                return RD_FAIL(&sub, "cuda_index: %d is also the cuda_index of %s%sgpus[%d] (one "
                               "CUDA ordinal for two GPUs)", g->cuda_index, r->path,
                               r->path[0] ? "." : "", j);
        }
    }
    T(rd_array(r, o, "nics", BK_TOPO_MAX_NICS, &a));
    h->nnics = (int)json_array_size(a);
    for (int i = 0; i < h->nnics; i++) {
        json_t *e;
        bk_topo_nic *k = &h->nics[i];
        T(rd_object_at(r, a, "nics", (size_t)i, &e));
        rd sub = *r;
        snprintf(sub.path, sizeof sub.path, "%s%snics[%d]", r->path, r->path[0] ? "." : "", i);
        T(rd_keys(&sub, e, "", nic_keys));
        T(rd_str(&sub, e, "name", 1, k->name, sizeof k->name));
        T(rd_str(&sub, e, "bus_id", 0, k->bus_id, sizeof k->bus_id));
        T(rd_str(&sub, e, "kind", 1, k->kind, sizeof k->kind));
        if (strcmp(k->kind, "ib") && strcmp(k->kind, "eth"))
            return RD_FAIL(&sub, "kind: must be \"ib\" or \"eth\", not \"%s\"", k->kind);
        T(rd_int(&sub, e, "numa", -1, h->nnuma - 1, 0, -1, &k->numa));
        for (int j = 0; j < i; j++) { /* one NIC twice: by name, or by a known bus id */
            const int same_name = !strcmp(h->nics[j].name, k->name);
            if (same_name || (k->bus_id[0] && !strcmp(h->nics[j].bus_id, k->bus_id)))
                return RD_FAIL(&sub, "%s: \"%s\" is also the %s of %s%snics[%d] (one NIC listed "
                               "twice)", same_name ? "name" : "bus_id",
                               same_name ? k->name : k->bus_id, same_name ? "name" : "bus_id",
                               r->path, r->path[0] ? "." : "", j);
        }
    }
    T(rd_links(r, o, "links", h->ngpus, h->ngpus, h, 0));
    T(rd_links(r, o, "gpu_nic", h->ngpus, h->nnics, h, 1));
    json_t *nvs = json_object_get(o, "nvswitch");
    if (nvs && !json_is_boolean(nvs))
        return RD_FAIL(r, "nvswitch: must be true or false");
    h->nvswitch = nvs && json_is_true(nvs);
    T(rd_p2p(r, o, h));
    json_t *seen = json_object_get(o, "seen");
    if (seen && !json_is_array(seen))
        return RD_FAIL(r, "seen: must be an array of strings");
    for (size_t i = 0; seen && i < json_array_size(seen); i++) {
        const char *s = json_string_value(json_array_get(seen, i));
        static const char *const names[] = { "hwloc", "pci", "nvml", "cuda" };
        int b = 0;
        while (s && b < 4 && strcmp(s, names[b]))
            b++;
        if (!s || b == 4)
            return RD_FAIL(r, "seen[%zu]: must be one of hwloc, pci, nvml, cuda", i);
        h->seen |= 1u << b;
    }
    json_t *notes = json_object_get(o, "notes");
    if (notes && !json_is_array(notes))
        return RD_FAIL(r, "notes: must be an array of strings");
    /* kept whole or refused: bk_topo_note drops and cuts what does not fit */
    if (json_array_size(notes) > BK_TOPO_MAX_NOTES)
        return RD_FAIL(r, "notes: %zu notes; a host holds at most %d", json_array_size(notes),
                       BK_TOPO_MAX_NOTES);
    for (size_t i = 0; notes && i < json_array_size(notes); i++) {
        const char *s = json_string_value(json_array_get(notes, i));
        if (!s)
            return RD_FAIL(r, "notes[%zu]: must be a string", i);
        if (strlen(s) >= BK_TOPO_NOTE_LEN)
            return RD_FAIL(r, "notes[%zu]: %zu bytes; a note holds at most %d", i, strlen(s),
                           BK_TOPO_NOTE_LEN - 1);
        if (bk_control_at(s) >= 0)
            return RD_FAIL(r, "notes[%zu]: a control character (byte 0x%02x at offset %ld)", i,
                           (unsigned char)s[bk_control_at(s)], bk_control_at(s));
        bk_topo_note(h, "%s", s);
    }
    bk_topo_host_nearest_nics(h);
#undef T
    return st;
}

/* jansson's error, where the text is: a syntax error is the file's (bad input); out of
 * memory (a huge file of small values: jansson takes some 20 bytes a byte of numbers) is
 * this machine's, and jansson then leaves no position and sometimes no text */
static bk_status parse_failed(const char *label, const json_error_t *je, bk_err *err)
{
    if (json_error_code(je) == json_error_out_of_memory || !je->text[0])
        return BK_FAIL(err, BK_ERR_SYSTEM, "%s: out of memory while parsing it%s%s", label,
                       je->text[0] ? ": " : "", je->text);
    return BK_FAIL(err, BK_ERR_INPUT, "%s: line %d column %d: %s", label, je->line, je->column,
                   je->text);
}

bk_status bk_topo_host_parse(const char *text, const char *label, bk_topo_host *h, bk_err *err)
{
    json_error_t je;
    rd r = { .label = label, .path = "", .err = err };
    memset(h, 0, sizeof *h);
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return parse_failed(label, &je, err);
    bk_status st = json_is_object(o) ? rd_host(&r, o, h) : RD_FAIL(&r, "host: must be an object");
    json_decref(o);
    return st;
}

bk_status bk_topo_parse(const char *text, const char *label, bk_topo **out, bk_err *err)
{
    bk_status st = BK_OK;
    json_error_t je;
    bk_topo *t = NULL;
    rd r = { .label = label, .path = "", .err = err };
    *out = NULL;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return parse_failed(label, &je, err);
    if (!json_is_object(root)) {
        st = RD_FAIL(&r, "the snapshot must be a JSON object");
        goto out;
    }
    /* the schema first: a record or a plan given as a snapshot is said to be one */
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!schema || strcmp(schema, BK_TOPO_SCHEMA)) {
        char other[96];
        st = RD_FAIL(&r, "schema: must be \"%s\"%s", BK_TOPO_SCHEMA,
                     bk_schema_other(schema, "a topology snapshot", other, sizeof other));
        goto out;
    }
    if ((st = rd_keys(&r, root, "", top_keys)) != BK_OK)
        goto out;
    json_t *hosts;
    if ((st = rd_array(&r, root, "hosts", 100000, &hosts)) != BK_OK)
        goto out;
    if (json_array_size(hosts) == 0) {
        st = RD_FAIL(&r, "hosts: at least one host is needed");
        goto out;
    }
    /* each an object before the hosts' memory is taken (some 54 KB a host) */
    for (size_t i = 0; i < json_array_size(hosts); i++) {
        json_t *e;
        if ((st = rd_object_at(&r, hosts, "hosts", i, &e)) != BK_OK)
            goto out;
    }
    BK_TRY(bk_topo_new((int)json_array_size(hosts), &t, err));
    for (int i = 0; i < t->nhosts; i++) {
        rd sub = r;
        snprintf(sub.path, sizeof sub.path, "hosts[%d]", i);
        if ((st = rd_host(&sub, json_array_get(hosts, (size_t)i), &t->hosts[i])) != BK_OK)
            goto out;
    }
    int i, j;
    if (bk_topo_duplicate_host(t, &i, &j)) {
        rd sub = r;
        snprintf(sub.path, sizeof sub.path, "hosts[%d]", i);
        st = RD_FAIL(&sub, "hostname: \"%s\" with the same boot_id as hosts[%d]",
                     t->hosts[i].hostname, j);
        goto out;
    }
    bk_strlcpy(t->source, label, sizeof t->source);
    free(bk_topo_dump(t)); /* sets the digest */
    *out = t;
    t = NULL;
out:
    bk_topo_free(t);
    json_decref(root);
    return st;
}

bk_status bk_topo_load(const char *path, bk_topo **out, bk_err *err)
{
    char *text = NULL;
    size_t n = 0;
    *out = NULL;
    /* a FIFO or device refused before it is opened (an open would wait, a read not end); a
     * file past the cap before it is read */
    bk_status st = bk_read_json_file(path, BK_TOPO_MAX_FILE, "a topology snapshot", &text, &n,
                                     err);
    if (st != BK_OK)
        return st;
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) /* jansson would quote it invisibly */
        st = BK_FAIL(err, BK_ERR_INPUT, "%s:1:1: starts with a UTF-8 byte order mark (bytes EF "
                     "BB BF), which JSON does not allow: save the snapshot without it", path);
    else
        st = bk_topo_parse(text, path, out, err);
    free(text);
    return st;
}
