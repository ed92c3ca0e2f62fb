/* shm.c - POSIX shared-memory peer memory and barriers for the cpu backend.
 *
 * Each rank creates one segment "/bk-<hash of run_id>-<arm>-<rank>": a 4 KiB flag
 * page, then the payload. The flag page holds a magic word (published last, with
 * release, so a peer that sees it sees a fully sized and initialised segment) and
 * the rank's barrier epoch. A barrier bumps our own epoch (release) and waits until
 * every peer's epoch has reached it (acquire): what a rank wrote before a barrier
 * is visible to every peer after it.
 *
 * Waiting backs off - the cpu backend may run more ranks than cores: a few hundred
 * pause spins, then sched_yield, then the waiter parks on a futex on the peer's
 * sequence word (Linux; the peer's next publish wakes it at once, and a park lasts
 * at most 1 ms, so deadlines hold even if a wake is lost). A nanosleep nap would
 * oversleep by the timer slack (50 us), which showed as bimodal barrier times.
 * When every rank of the lane has a core of its own (bk_shm_set_spin), a barrier
 * waiter spins for up to a few milliseconds first: its spinning takes nothing from
 * its peers, and a peer that shares its core with another busy process is only
 * descheduled for a scheduler slice. Yielding or parking there would hand our core
 * away at each wait and pay a slice per hand-off: beside one CPU hog, an arm ran 15
 * to 45x slower (docs/BENCHMARKS.md, "cpu backend beside a busy process").
 * Connect, waiting for segments to appear, naps with growing naps up to 200 us.
 *
 * Crash safety: connect unlinks our own name once every rank has mapped every
 * segment, so from then on a process that dies (even by SIGKILL) leaves nothing in
 * /dev/shm. A process that dies before that cannot unlink; its segment stays until
 * the agent that spawned the engine calls bk_shm_unlink_name on the name
 * (bk_shm_name gives it), and a later create of the same name fails with EEXIST
 * rather than sharing a stale segment. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "collectives/collectives.h"
#include "runner/memory.h"

#define SHM_MAGIC 0x31306d68736b62ull /* "bkshm01" */
#define SHM_HDR 4096
#define SPINS 256
#define YIELDS 64
#define YIELD_NS 200000ull /* barrier waiters yield this long before they park */
#define MAX_NAP_NS 200000ull
#define MAX_WORLD 1024

typedef struct shm_hdr {
    _Atomic uint64_t magic;
    uint64_t payload;
    int32_t rank, world;
    char pad[64 - 24];
    _Atomic uint64_t epoch;    /* own cache line: the barrier epoch */
    _Atomic uint32_t seq;      /* low 32 bits of epoch, the futex word */
    _Atomic uint32_t waiters;  /* peers parked on seq */
} shm_hdr;

struct bk_shm {
    int rank, world;
    size_t bytes;
    char name[BK_SHM_NAME_LEN];
    void **maps;     /* world mappings (ours at maps[rank]), each SHM_HDR + bytes */
    uint64_t epoch;  /* our last published epoch */
    uint64_t spin_ns; /* barrier waiters spin this long before they yield (0: SPINS only) */
    uint64_t end_ns;  /* barriers end here too (0: no end; bk_shm_set_end) */
};

static shm_hdr *hdr_of(const bk_shm *shm, int r) { return (shm_hdr *)shm->maps[r]; }

/* ---- waiting ---- */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#endif
}

static void backoff(unsigned *k)
{
    if (*k < SPINS) {
        cpu_relax();
    } else if (*k < SPINS + YIELDS) {
        sched_yield();
    } else {
        unsigned shift = *k - SPINS - YIELDS;
        uint64_t nap = 1000ull << (shift > 8 ? 8 : shift);
        bk_sleep_ns(nap > MAX_NAP_NS ? MAX_NAP_NS : nap);
    }
    (*k)++;
}

/* One pause while less than ns has passed since the first call (which sets *end);
 * 0 once the time is up. */
static int spin_until(uint64_t *end, uint64_t ns)
{
    uint64_t now = bk_now_ns();
    if (!*end)
        *end = now + ns;
    if (now >= *end)
        return 0;
    cpu_relax();
    return 1;
}

#define PARK_NS 1000000ull

/* Publish epoch e and wake whoever parked on it (seq_cst: a waiter that
 * registered after our load of `waiters` reads the new seq, see park()). */
static void publish(shm_hdr *h, uint64_t e)
{
    atomic_store_explicit(&h->epoch, e, memory_order_seq_cst);
    atomic_store_explicit(&h->seq, (uint32_t)e, memory_order_seq_cst);
#ifdef __linux__
    if (atomic_load_explicit(&h->waiters, memory_order_seq_cst) != 0) /* result unneeded */
        syscall(SYS_futex, (uint32_t *)&h->seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
#endif
}

/* Sleep until peer h publishes an epoch (or PARK_NS passes). */
static void park(shm_hdr *h, uint64_t e)
{
#ifdef __linux__
    struct timespec ts = { 0, (long)PARK_NS };
    atomic_fetch_add_explicit(&h->waiters, 1, memory_order_seq_cst);
    uint32_t v = atomic_load_explicit(&h->seq, memory_order_seq_cst);
    if (atomic_load_explicit(&h->epoch, memory_order_seq_cst) < e) /* any return: re-check */
        syscall(SYS_futex, (uint32_t *)&h->seq, FUTEX_WAIT, v, &ts, NULL, 0);
    atomic_fetch_sub_explicit(&h->waiters, 1, memory_order_seq_cst);
#else
    (void)h;
    (void)e;
    bk_sleep_ns(50000);
#endif
}

static uint64_t deadline_of(double timeout_s)
{
    return bk_now_ns() + (uint64_t)(timeout_s > 0 ? timeout_s * 1e9 : 0);
}

/* ---- names ---- */

void bk_shm_name(const char *run_id, const char *arm, int rank, char name_out[BK_SHM_NAME_LEN])
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    char a[17];
    size_t i = 0;
    for (const char *p = run_id; p && *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    /* arms are short ("B", "C", "B'", "A", "T"): keep [A-Za-z0-9_], "'" -> "p" */
    for (const char *p = arm; p && *p && i < sizeof a - 1; p++) {
        char c = *p;
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        a[i++] = ok ? c : c == '\'' ? 'p' : '_';
    }
    a[i] = '\0';
    snprintf(name_out, BK_SHM_NAME_LEN, "/bk-%012llx-%s-%d",
             (unsigned long long)(h & 0xffffffffffffull), a, rank);
}

bk_status bk_shm_unlink_name(const char *name, bk_err *err)
{
    if (shm_unlink(name) != 0 && errno != ENOENT)
        return BK_FAIL(err, BK_ERR_SYSTEM, "shm_unlink %s: %s", name, strerror(errno));
    return BK_OK;
}

/* ---- create, connect, destroy ---- */

bk_status bk_shm_create(const char *run_id, const char *arm, int rank, int world,
                        size_t bytes, bk_shm **out, char name_out[BK_SHM_NAME_LEN],
                        bk_err *err)
{
    bk_status st = BK_OK;
    bk_shm *shm = NULL;
    int fd = -1, created = 0;
    *out = NULL;
    if (world < 1 || world > MAX_WORLD || rank < 0 || rank >= world)
        return BK_FAIL(err, BK_ERR_INTERNAL, "shm: rank %d of world %d is out of range", rank,
                       world);
    shm = calloc(1, sizeof *shm);
    if (!shm || !(shm->maps = calloc((size_t)world, sizeof *shm->maps))) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "shm: out of memory");
        goto out;
    }
    shm->rank = rank;
    shm->world = world;
    shm->bytes = bytes;
    bk_shm_name(run_id, arm, rank, shm->name);
    fd = shm_open(shm->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "shm_open %s: %s%s", shm->name, strerror(errno),
                     errno == EEXIST ? " (left by a crashed engine? bk_shm_unlink_name it, or "
                                       "remove it from /dev/shm)" : "");
        goto out;
    }
    created = 1;
    if (ftruncate(fd, (off_t)(SHM_HDR + bytes)) != 0) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "ftruncate %s to %zu bytes: %s", shm->name,
                     SHM_HDR + bytes, strerror(errno));
        goto out;
    }
    /* the pages taken now: ftruncate reserves none, and a tmpfs too small for them (a
     * container's /dev/shm is often 64 MiB) would end this engine and its peers with SIGBUS
     * at the first touch of a page past its room */
    int rc = posix_fallocate(fd, 0, (off_t)(SHM_HDR + bytes));
    if (rc != 0) {
        struct statvfs vfs;
        char room[96] = "", want[32], avail[32], all[32];
        if (statvfs("/dev/shm", &vfs) == 0)
            snprintf(room, sizeof room, "; /dev/shm has %s free of %s",
                     bk_mem_text((uint64_t)vfs.f_bavail * vfs.f_frsize, avail, sizeof avail),
                     bk_mem_text((uint64_t)vfs.f_blocks * vfs.f_frsize, all, sizeof all));
        st = BK_FAIL(err, BK_ERR_SYSTEM, "shared memory for rank %d: %zu bytes (%s) "
                     "cannot be had in /dev/shm: %s%s%s", rank, SHM_HDR + bytes,
                     bk_mem_text(SHM_HDR + bytes, want, sizeof want), strerror(rc), room,
                     rc == ENOSPC ? " (each engine of a lane maps this much for its peers: "
                                    "a larger /dev/shm, e.g. docker run --shm-size, or "
                                    "smaller shapes)" : "");
        goto out;
    }
    void *m = mmap(NULL, SHM_HDR + bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        st = BK_FAIL(err, BK_ERR_SYSTEM, "mmap %s (%zu bytes): %s", shm->name, SHM_HDR + bytes,
                     strerror(errno));
        goto out;
    }
    shm->maps[rank] = m;
    shm_hdr *h = m;
    h->payload = bytes;
    h->rank = rank;
    h->world = world;
    atomic_store_explicit(&h->epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
    bk_strlcpy(name_out, shm->name, BK_SHM_NAME_LEN);
    *out = shm;
    shm = NULL;
out:
    if (fd >= 0)
        close(fd);
    if (shm) {
        if (created)
            shm_unlink(shm->name);
        if (shm->maps && shm->maps[rank])
            munmap(shm->maps[rank], SHM_HDR + bytes);
        free(shm->maps);
        free(shm);
    }
    return st;
}

/* Map peer r once its segment exists and is published; 1 when done, 0 to retry. */
static bk_status try_map(bk_shm *shm, int r, const char *name, int *done, bk_err *err)
{
    struct stat sb;
    *done = 0;
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return errno == ENOENT ? BK_OK
                               : BK_FAIL(err, BK_ERR_SYSTEM, "shm_open %s (rank %d): %s", name,
                                         r, strerror(errno));
    /* create sizes a segment in one step from 0: one of a header or more is sized, and
     * once published its header says whose it is (a smaller payload than ours included) */
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < SHM_HDR) {
        close(fd); /* not sized yet */
        return BK_OK;
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return BK_FAIL(err, BK_ERR_SYSTEM, "mmap %s (rank %d): %s", name, r, strerror(errno));
    shm_hdr *h = m;
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_MAGIC) {
        munmap(m, (size_t)sb.st_size);
        return BK_OK;
    }
    if (h->payload != shm->bytes || h->rank != r || h->world != shm->world) {
        bk_status st = BK_FAIL(err, BK_ERR_PEER,
                               "shm: segment %s is rank %d/%d with %llu bytes, expected rank "
                               "%d/%d with %zu", name, h->rank, h->world,
                               (unsigned long long)h->payload, r, shm->world, shm->bytes);
        munmap(m, (size_t)sb.st_size);
        return st;
    }
    if ((size_t)sb.st_size != SHM_HDR + shm->bytes) {
        munmap(m, (size_t)sb.st_size);
        return BK_FAIL(err, BK_ERR_PEER, "shm: segment %s has %lld bytes, expected %zu", name,
                       (long long)sb.st_size, SHM_HDR + shm->bytes);
    }
    shm->maps[r] = m;
    *done = 1;
    return BK_OK;
}

bk_status bk_shm_connect(bk_shm *shm, const char *const *names, double timeout_s, bk_err *err)
{
    bk_status st = BK_OK;
    uint64_t deadline = deadline_of(timeout_s);
    if (strcmp(names[shm->rank], shm->name) != 0)
        return BK_FAIL(err, BK_ERR_INTERNAL, "shm connect: names[%d] is %s, our segment is %s",
                       shm->rank, names[shm->rank], shm->name);
    for (int r = 0; r < shm->world; r++) {
        unsigned k = 0;
        int done = shm->maps[r] != NULL;
        while (!done) {
            BK_TRY(try_map(shm, r, names[r], &done, err));
            if (done)
                break;
            if (bk_now_ns() > deadline) {
                st = BK_FAIL(err, BK_ERR_TIMEOUT,
                             "shm connect: rank %d's segment %s did not appear within %.1f s", r,
                             names[r], timeout_s);
                goto out;
            }
            backoff(&k);
        }
    }
    /* Every rank has mapped every segment before anyone may unlink its own. Then
     * the name goes at once: the mappings live on, and an engine killed from here
     * on (SIGKILL, a whole job aborted) leaves nothing in /dev/shm. */
    BK_TRY(bk_shm_barrier(shm, timeout_s, err));
    shm_unlink(shm->name);
out:
    return st;
}

void bk_shm_destroy(bk_shm *shm)
{
    if (!shm)
        return;
    for (int r = 0; r < shm->world; r++)
        if (shm->maps[r])
            munmap(shm->maps[r], SHM_HDR + shm->bytes);
    shm_unlink(shm->name);
    free(shm->maps);
    free(shm);
}

/* ---- access ---- */

void *bk_shm_local(bk_shm *shm) { return (char *)shm->maps[shm->rank] + SHM_HDR; }

void *bk_shm_peer(bk_shm *shm, int rank)
{
    if (rank < 0 || rank >= shm->world || !shm->maps[rank])
        return NULL;
    return (char *)shm->maps[rank] + SHM_HDR;
}

size_t bk_shm_bytes(const bk_shm *shm) { return shm->bytes; }
int bk_shm_rank(const bk_shm *shm) { return shm->rank; }
int bk_shm_world(const bk_shm *shm) { return shm->world; }

/* ---- barrier ---- */

void bk_shm_set_spin(bk_shm *shm, uint64_t spin_ns) { shm->spin_ns = spin_ns; }
void bk_shm_set_end(bk_shm *shm, uint64_t end_ns) { shm->end_ns = end_ns; }

bk_status bk_shm_barrier(bk_shm *shm, double timeout_s, bk_err *err)
{
    int cut;
    timeout_s = bk_wait_bound(shm->end_ns, timeout_s, &cut);
    uint64_t e = ++shm->epoch, deadline = deadline_of(timeout_s);
    publish(hdr_of(shm, shm->rank), e);
    unsigned k = 0;
    uint64_t t0 = 0, spin_end = 0;
    for (int r = 0; r < shm->world; r++) {
        if (r == shm->rank)
            continue;
        if (!shm->maps[r])
            return BK_FAIL(err, BK_ERR_INTERNAL, "barrier: rank %d is not connected", r);
        shm_hdr *h = hdr_of(shm, r);
        uint64_t seen;
        while ((seen = atomic_load_explicit(&h->epoch, memory_order_acquire)) < e) {
            if (k >= SPINS && bk_now_ns() > deadline)
                return BK_FAIL(err, BK_ERR_TIMEOUT,
                               "barrier: rank %d did not arrive within %.1f s (%sepoch %llu, "
                               "it is at %llu)", r, timeout_s, cut ? BK_ARM_END_SAID "; " : "",
                               (unsigned long long)e, (unsigned long long)seen);
            /* Spin (for spin_ns when set), then yield for up to YIELD_NS (sched_yield
             * returns at once on an idle core and gives the core away on a busy one),
             * then park on the futex: a short imbalance never pays a futex wake-up,
             * whose tens of microseconds would otherwise decide a small shape's time. */
            if (k < SPINS) {
                backoff(&k);
            } else if (shm->spin_ns && !t0 && spin_until(&spin_end, shm->spin_ns)) {
                continue;
            } else if (!t0 || bk_now_ns() - t0 < YIELD_NS) {
                if (!t0)
                    t0 = bk_now_ns();
                sched_yield();
                k++;
            } else {
                park(h, e);
            }
        }
    }
    return BK_OK;
}
