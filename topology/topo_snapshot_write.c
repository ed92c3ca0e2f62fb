/* topo_snapshot_write.c - bracket.topology/1 snapshots: canonical JSON out, and `topo --save`'s
 * checked, atomic write (topo_snapshot.c reads them). */
#include "topology/topology.h"
#include "runner/record_io.h"

/* Messages and names live in fixed buffers; a cut-off message is acceptable. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- writing */

static json_t *link_matrix(int rows, int cols, const bk_topo_host *h, int gpu_nic)
{
    json_t *m = json_array();
    char buf[16];
    for (int i = 0; m && i < rows; i++) {
        json_t *row = json_array();
        for (int j = 0; row && j < cols; j++) {
            bk_link l = h->links[i][j];
            if (gpu_nic) {
                l.cls = h->gpu_nic[i][j];
                l.nvlinks = 0;
            }
            json_array_append_new(row, json_string(bk_link_str(l, buf, sizeof buf)));
        }
        json_array_append_new(m, row);
    }
    return m;
}

static json_t *int_matrix(int n, const int8_t (*v)[BK_TOPO_MAX_GPUS])
{
    json_t *m = json_array();
    for (int i = 0; i < n; i++) {
        json_t *row = json_array();
        for (int j = 0; j < n; j++)
            json_array_append_new(row, json_integer(v[i][j]));
        json_array_append_new(m, row);
    }
    return m;
}

static json_t *host_json(const bk_topo_host *h)
{
    json_t *o = json_object();
    json_object_set_new(o, "hostname", json_string(h->hostname));
    json_object_set_new(o, "boot_id", json_string(h->boot_id));
    json_object_set_new(o, "packages", json_integer(h->packages));
    json_object_set_new(o, "cores", json_integer(h->cores));
    json_object_set_new(o, "pus", json_integer(h->pus));
    json_t *numa = json_array();
    for (int i = 0; i < h->nnuma; i++)
        json_array_append_new(numa, json_pack("{s:i, s:s, s:I}", "os_index", h->numa[i].os_index,
                                              "cpus", bk_topo_numa_cpus(h, i), "memory_bytes",
                                              (json_int_t)h->numa[i].memory_bytes));
    json_object_set_new(o, "numa", numa);
    json_t *gpus = json_array();
    for (int i = 0; i < h->ngpus; i++) {
        const bk_topo_gpu *g = &h->gpus[i];
        json_array_append_new(gpus, json_pack("{s:s, s:s, s:s, s:i, s:i}", "bus_id", g->bus_id,
                                              "uuid", g->uuid, "name", g->name, "numa", g->numa,
                                              "cuda_index", g->cuda_index));
    }
    json_object_set_new(o, "gpus", gpus);
    json_t *nics = json_array();
    for (int i = 0; i < h->nnics; i++) {
        const bk_topo_nic *k = &h->nics[i];
        json_array_append_new(nics, json_pack("{s:s, s:s, s:s, s:i}", "name", k->name, "bus_id",
                                              k->bus_id, "kind", k->kind, "numa", k->numa));
    }
    json_object_set_new(o, "nics", nics);
    json_object_set_new(o, "links", link_matrix(h->ngpus, h->ngpus, h, 0));
    json_object_set_new(o, "gpu_nic", link_matrix(h->ngpus, h->nnics, h, 1));
    json_object_set_new(o, "nvswitch", json_boolean(h->nvswitch));
    if (h->p2p_known)
        json_object_set_new(o, "p2p", json_pack("{s:o, s:o}", "access",
                                                int_matrix(h->ngpus, h->p2p_access), "rank",
                                                int_matrix(h->ngpus, h->p2p_rank)));
    json_t *seen = json_array();
    static const char *const names[] = { "hwloc", "pci", "nvml", "cuda" };
    for (int b = 0; b < 4; b++)
        if (h->seen & (1u << b))
            json_array_append_new(seen, json_string(names[b]));
    json_object_set_new(o, "seen", seen);
    json_t *notes = json_array();
    for (int i = 0; i < h->nnotes; i++)
        json_array_append_new(notes, json_string(h->notes[i]));
    json_object_set_new(o, "notes", notes);
    return o;
}

char *bk_topo_host_dump(const bk_topo_host *h)
{
    json_t *o = host_json(h);
    char *s = o ? json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *bk_topo_dump(bk_topo *t)
{
    json_t *root = json_object();
    json_object_set_new(root, "schema", json_string(BK_TOPO_SCHEMA));
    json_t *hosts = json_array();
    for (int i = 0; i < t->nhosts; i++)
        json_array_append_new(hosts, host_json(&t->hosts[i]));
    json_object_set_new(root, "hosts", hosts);
    char *compact = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
    if (compact)
        snprintf(t->digest, sizeof t->digest, "fnv1a64:%016" PRIx64,
                 bk_fnv1a64(compact, strlen(compact)));
    free(compact);
    char *s = json_dumps(root, JSON_SORT_KEYS | JSON_INDENT(1));
    json_decref(root);
    return s;
}

bk_status bk_topo_save_check(const char *path, bk_err *err)
{
    struct stat sb;
    if (!path || !*path)
        return BK_FAIL(err, BK_ERR_INPUT, "the snapshot's file name is empty");
    /* room for the temporary file's suffix, ".tmp.PID.N" (bk_write_atomic) */
    const size_t room = 32;
    if (strlen(path) + room > 1024)
        return BK_FAIL(err, BK_ERR_INPUT, "%.40s...: a file name of %zu characters is too long "
                       "(at most %zu)", path, strlen(path), 1024 - room);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (strlen(base) + room > NAME_MAX)
        return BK_FAIL(err, BK_ERR_INPUT, "%.40s...: its last part is %zu characters long, too "
                       "long for a file name here (at most %zu)", base, strlen(base),
                       (size_t)NAME_MAX - room);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: is a directory; give the snapshot a file name "
                       "(e.g. %s/topology.json)", path, path);
    /* the save renames over `path`: never over a device, FIFO, socket or a symlink to one */
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: exists and is not a regular file (a device, "
                       "FIFO, socket or symlink); the snapshot would replace it", path);
    /* the folder it goes in (the temporary file and the rename need to write there) */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &sb) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: the folder %s does not exist", path, dir);
    if (!S_ISDIR(sb.st_mode))
        return BK_FAIL(err, BK_ERR_INPUT, "%s: %s is not a folder", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return BK_FAIL(err, BK_ERR_INPUT, "%s: cannot write in the folder %s: %s", path, dir,
                       strerror(errno));
    return BK_OK;
}

bk_status bk_topo_save(bk_topo *t, const char *path, bk_err *err)
{
    bk_status st = bk_topo_save_check(path, err);
    if (st != BK_OK)
        return st;
    char *s = bk_topo_dump(t);
    size_t n = s ? strlen(s) : 0;
    char *text = s ? realloc(s, n + 2) : NULL;
    if (!text) {
        free(s);
        return BK_FAIL(err, BK_ERR_INTERNAL, "%s: could not encode the snapshot", path);
    }
    text[n] = '\n';
    text[n + 1] = '\0';
    /* a new temporary file beside it, synced, renamed over it: a crash or a failure leaves
     * the old file or the new one, and nothing already there is written through */
    st = bk_write_atomic(path, text, n + 1, err);
    free(text);
    return st;
}

