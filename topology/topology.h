/* topology.h - machine topology (hwloc + NVML + CUDA), bracket.topology/1 snapshots,
 * lane signatures and the lane finder, rank-to-GPU binding, MPI gathering. */
#ifndef BK_TOPOLOGY_H
#define BK_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "plans/plan.h"
#include "runner/status.h"

#define BK_TOPO_SCHEMA "bracket.topology/1"
#define BK_TOPO_MAX_GPUS 64 /* per host */
#define BK_TOPO_MAX_NICS 32 /* per host */
#define BK_TOPO_MAX_NUMA 64 /* per host */
#define BK_TOPO_MAX_NOTES 8
#define BK_TOPO_NOTE_LEN 160
#define BK_TOPO_MAX_CPU 65535 /* largest CPU number a snapshot's numa[].cpus may list */
#define BK_TOPO_MAX_FILE ((size_t)256 << 20) /* bytes of a snapshot file (the 128-host
                                               * fixture is 0.4 MB) */

/* How two devices of one host are joined, ordered from farthest to nearest,
 * like `nvidia-smi topo -m`. NET joins devices of different hosts. A GPU pair
 * with NVLink has cls BK_LINK_NV and nvlinks > 0. */
typedef enum bk_link_class {
    BK_LINK_NONE = 0, /* unknown / not applicable */
    BK_LINK_NET,      /* different hosts */
    BK_LINK_SYS,      /* PCIe + the SMP interconnect between NUMA nodes */
    BK_LINK_NODE,     /* PCIe + host bridges within one NUMA node */
    BK_LINK_PHB,      /* PCIe + one host bridge */
    BK_LINK_PXB,      /* several PCIe bridges, no host bridge */
    BK_LINK_PIX,      /* at most one PCIe bridge */
    BK_LINK_NV,       /* NVLink (count in nvlinks) */
    BK_LINK_SELF      /* the device itself ("X") */
} bk_link_class;

typedef struct bk_link {
    uint8_t cls;     /* bk_link_class */
    uint8_t nvlinks; /* NVLink count when cls == BK_LINK_NV */
} bk_link;

/* What the probe could see on a host (bits of bk_topo_host.seen). */
enum { BK_SEEN_HWLOC = 1, BK_SEEN_PCI = 2, BK_SEEN_NVML = 4, BK_SEEN_CUDA = 8 };

/* Bytes of one host's NUMA CPU lists together (bk_topo_host.cpu_text): a list of singletons
 * ("0,2,4,...", CPUs numbered across sockets in turn) of some 3000 CPUs fits; a fixed 256
 * bytes a node did not fit 70. */
#define BK_TOPO_CPU_TEXT 16384

typedef struct bk_topo_numa {
    int os_index;
    uint64_t memory_bytes;
    uint32_t cpus_at; /* its CPU list (hwloc list syntax, e.g. "0-31,64-95") in the host's
                       * cpu_text: bk_topo_numa_cpus; 0 is the empty list */
} bk_topo_numa;

typedef struct bk_topo_gpu {
    char bus_id[32]; /* "0000:18:00.0" (lower case) */
    char uuid[64];   /* "GPU-..." or "" when NVML was not seen */
    char name[96];
    int numa;        /* index into the host's numa[], -1 unknown */
    int nic;         /* index of the nearest NIC, -1 none */
    int cuda_index;  /* CUDA ordinal with all GPUs visible, -1 unknown */
} bk_topo_gpu;

typedef struct bk_topo_nic {
    char name[64];   /* "mlx5_0", "eth0", ... */
    char bus_id[32];
    char kind[8];    /* "ib" or "eth" */
    int numa;
} bk_topo_nic;

typedef struct bk_topo_host {
    char hostname[128];
    char boot_id[64];
    int packages, cores, pus;
    int nnuma, ngpus, nnics;
    bk_topo_numa numa[BK_TOPO_MAX_NUMA];
    bk_topo_gpu gpus[BK_TOPO_MAX_GPUS];
    bk_topo_nic nics[BK_TOPO_MAX_NICS];
    bk_link links[BK_TOPO_MAX_GPUS][BK_TOPO_MAX_GPUS];     /* GPU x GPU */
    uint8_t gpu_nic[BK_TOPO_MAX_GPUS][BK_TOPO_MAX_NICS];   /* GPU x NIC, bk_link_class */
    int nvswitch;    /* 1 when the GPUs meet through NVSwitch */
    int p2p_known;   /* 1 when p2p_access/p2p_rank were measured (CUDA) */
    int8_t p2p_access[BK_TOPO_MAX_GPUS][BK_TOPO_MAX_GPUS];
    int8_t p2p_rank[BK_TOPO_MAX_GPUS][BK_TOPO_MAX_GPUS];   /* cudaDevP2PAttrPerformanceRank */
    unsigned seen;   /* BK_SEEN_* */
    int nnotes;      /* what the probe could not see, in words */
    char notes[BK_TOPO_MAX_NOTES][BK_TOPO_NOTE_LEN];
    uint32_t cpu_text_used; /* bytes of cpu_text taken (0: none yet) */
    char cpu_text[BK_TOPO_CPU_TEXT]; /* the NUMA nodes' CPU lists, each NUL-terminated, after
                                      * an empty one at 0; a host is copied by value whole */
} bk_topo_host;

/* NUMA node i's CPU list ("" when none was set). */
static inline const char *bk_topo_numa_cpus(const bk_topo_host *h, int i)
{
    return h->cpu_text + h->numa[i].cpus_at;
}
/* Set NUMA node i's CPU list (appended to the host's cpu_text); 0, or -1 when the host's
 * lists together would pass BK_TOPO_CPU_TEXT bytes (nothing set). */
int bk_topo_numa_set_cpus(bk_topo_host *h, int i, const char *cpus);

typedef struct bk_topo {
    int nhosts;
    bk_topo_host *hosts;  /* owned */
    char source[512];     /* "probe" or the file it was loaded from */
    char digest[40];      /* "fnv1a64:<16 hex>" of the canonical snapshot JSON */
} bk_topo;

/* ---- model (topo_model.c) ---- */

/* A topology of `nhosts` zeroed hosts (every link BK_LINK_NONE). */
bk_status bk_topo_new(int nhosts, bk_topo **out, bk_err *err);
void bk_topo_free(bk_topo *t);
/* 1 when two hosts are one: the same hostname and boot_id. */
int bk_topo_same_host(const bk_topo_host *a, const bk_topo_host *b);
/* 1 when two hosts share hostname and boot_id, with *i the later of the first such pair in
 * file order and *j the first host it repeats; else 0 (n log n: a snapshot may hold 100000
 * hosts). */
int bk_topo_duplicate_host(const bk_topo *t, int *i, int *j);
/* Append a note (what could not be seen) to a host; extra notes are dropped. */
void bk_topo_note(bk_topo_host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "X", "NV18", "PIX", ... for a link (buf >= 8 bytes); returns buf. */
const char *bk_link_str(bk_link l, char *buf, size_t n);
/* Parse "X", "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"; 0 on success. */
int bk_link_parse(const char *s, bk_link *out);
const char *bk_link_class_name(bk_link_class c);
/* Total GPUs over all hosts; global index = host's offset + local index. */
int bk_topo_ngpus(const bk_topo *t);
/* Fill the nearest NIC of each GPU from gpu_nic (ties: lowest index). */
void bk_topo_host_nearest_nics(bk_topo_host *h);

/* ---- probe (topo_probe.c, topo_nvml.c, topo_cuda.c) ---- */

/* Probe this host: hwloc (packages, NUMA, cores, PCI GPUs and NICs, PCIe path
 * classes), then NVML (NVLink, NVSwitch, UUIDs) and the CUDA runtime (peer
 * access and P2P rank), both loaded with dlopen. Missing NVML/CUDA/driver is
 * not an error: the host's notes say what could not be seen. */
bk_status bk_topo_probe(bk_topo **out, bk_err *err);
/* The hwloc part alone over a loaded hwloc topology (real, XML or synthetic);
 * `topo` is a hwloc_topology_t. Fills CPU side, GPUs, NICs, PCI classes. */
bk_status bk_topo_probe_hwloc(void *topo, bk_topo_host *h, bk_err *err);
/* Same, loading an hwloc XML file or a synthetic description ("pack:2 core:4 pu:1"), in a
 * child process (fork; hwloc's importer can crash on a malformed file): BK_ERR_INPUT naming
 * the file when hwloc refuses it, crashes or takes over 60 s. */
bk_status bk_topo_probe_xml(const char *xml_path, bk_topo **out, bk_err *err);
bk_status bk_topo_probe_synthetic(const char *desc, bk_topo **out, bk_err *err);
/* NVML pass: NVLink counts per GPU pair, NVSwitch, UUIDs, names. Never fails
 * for a missing library or driver (adds a note, returns BK_OK). */
bk_status bk_topo_probe_nvml(bk_topo_host *h, bk_err *err);
/* CUDA runtime pass: cuda_index per GPU, peer access and P2P rank; notes when absent. */
bk_status bk_topo_probe_cuda(bk_topo_host *h, bk_err *err);
/* A PCI bus id in the form every source here uses, "0000:1a:00.0" (lower case, 4-digit
 * domain), from the forms NVML ("00000000:1A:00.0") and CUDA ("0000:1A:00.0") give; 0 on
 * success, -1 when `in` is no bus id: anything but DOMAIN:BUS:DEVICE.FUNCTION in hex, with
 * 1-8, 1-2, 1-2 and 1 digits, a device of at most 1f and a function of at most 7, nothing
 * before or after. */
int bk_pci_bus_norm(const char *in, char *out, size_t n);
/* PCI bus id ("0000:18:00.0") of CUDA device `ordinal` as this process sees it
 * (after CUDA_VISIBLE_DEVICES). BK_ERR_UNSUPPORTED without a CUDA runtime. */
bk_status bk_cuda_bus_id(int ordinal, char *buf, size_t n, bk_err *err);
/* CUDA device count seen by this process; -1 without a runtime or driver. Asked once a
 * process, the answer kept. */
int bk_cuda_device_count(void);
/* The PCI bus ids of every device this process sees, in ordinal order, joined by ','
 * ("" with no CUDA or no device; cut at n - 1 bytes): which GPUs a rank sees. */
void bk_cuda_visible_key(char *buf, size_t n);
#define BK_VISIBLE_KEY_MAX 1024 /* 64 bus ids of 12 bytes and their commas fit */

/* ---- snapshots (topo_snapshot.c) ---- */

/* Canonical JSON text (sorted keys) of the snapshot; caller frees. Sets t->digest. */
char *bk_topo_dump(bk_topo *t);
/* Write the snapshot to path through path.tmp, fsynced, then renamed (a crash leaves the
 * old file or the new). bk_topo_save_check first: */
bk_status bk_topo_save(bk_topo *t, const char *path, bk_err *err);
/* BK_ERR_INPUT when path cannot take a snapshot: empty, too long, a folder, or in a folder
 * that does not exist or that this process cannot write in. Nothing is written. */
bk_status bk_topo_save_check(const char *path, bk_err *err);
/* Load and validate; errors name the file and the JSON path, e.g.
 * "x.json: hosts[0].links[2][1]: NV12 but links[1][2] is PIX (matrix not symmetric)". */
bk_status bk_topo_load(const char *path, bk_topo **out, bk_err *err);
bk_status bk_topo_parse(const char *text, const char *label, bk_topo **out, bk_err *err);
/* One host as JSON text (for MPI gathering); caller frees. */
char *bk_topo_host_dump(const bk_topo_host *h);
bk_status bk_topo_host_parse(const char *text, const char *label, bk_topo_host *h, bk_err *err);

/* ---- printing (topo_print.c) ---- */

/* The `nvidia-smi topo -m` style GPU matrix with NIC columns, CPU and NUMA
 * affinity, legend, and notes, one block per host. */
void bk_topo_print(const bk_topo *t, void *file /* FILE* */);

/* ---- lanes (topo_sig.c, topo_lanes.c) ---- */

/* Where an MPI rank sits: host index in the topology, GPU (local index on that
 * host, -1 for the cpu backend) and NUMA node (index into the host's numa[], -1 unknown). */
typedef struct bk_rank_place {
    int host;
    int gpu;
    int numa;
} bk_rank_place;

#define BK_LANE_MAX 256 /* ranks per lane */
#define BK_SIG_LEN 160
#define BK_WHY_LEN 768
#define BK_LANE_ALTS 8

typedef struct bk_lane_alt {
    int size;
    int ranks[BK_LANE_MAX];
    char signature[BK_SIG_LEN];
    int count; /* natural lanes with this signature */
} bk_lane_alt;

/* The lane finder's answer. Rank lists are MPI ranks, in lane order (rank i of
 * a lane's engine group is ranks[i]). */
typedef struct bk_lane_pick {
    int size;                       /* ranks per lane (TP x EP) */
    int baseline[BK_LANE_MAX];      /* B and B' run here */
    int candidate[BK_LANE_MAX];     /* C runs here */
    char baseline_sig[BK_SIG_LEN];  /* signature of each lane */
    char candidate_sig[BK_SIG_LEN];
    int equal;                      /* 1 when the signatures are equal */
    int shared;                     /* 1 under BK_LANES_SHARED: both lanes are the same ranks */
    int gpu;                        /* 1 when lanes are GPUs, 0 for CPU slots */
    int nlanes;                     /* natural lanes considered */
    int nalts;                      /* other signatures seen, best first */
    bk_lane_alt alts[BK_LANE_ALTS];
    char why[BK_WHY_LEN];           /* how the pair was chosen, or why none fits */
} bk_lane_pick;

/* Signature of a lane: invariant to relabelling, built from the canonical form
 * of the lane's pair matrix (link class, same NUMA node), each member's NIC
 * affinity, the NUMA spread and the host count. Written as
 * "g4 h1 n1 nic:PIX NV18x6 #<16 hex>" (summary, then a hash of the canonical form). */
bk_status bk_lane_signature(const bk_topo *t, const bk_rank_place *places, const int *ranks,
                            int size, char *sig, size_t n, bk_err *err);

/* Choose a baseline lane and a disjoint candidate lane of `lane_size` ranks with
 * equal signatures among `nranks` ranks placed by `places` (t may be NULL for the
 * cpu backend with places[].host all 0). Policy shared: both lanes are the same
 * ranks (out->shared = 1). When no equal disjoint pair exists, returns
 * BK_ERR_INPUT with the reason in err->msg and out->why, and out holds the
 * closest pair (out->equal = 0). Two ranks on one GPU are refused unless shared. */
bk_status bk_lanes_choose(const bk_topo *t, int lane_size, int nranks,
                          const bk_rank_place *places, bk_lane_policy policy,
                          bk_lane_pick *out, bk_err *err);

/* One rank per GPU in host-major order (what `bracket lanes --topology` plans
 * with). *places is malloc'ed; returns the count in *nranks. */
bk_status bk_places_one_per_gpu(const bk_topo *t, bk_rank_place **places, int *nranks,
                                bk_err *err);

/* ---- what a lane's members can reach (topo_lane_reach.c) ---- */

/* 1 when every rank of `ranks` sits on one host (a host being hostname + boot id, as the
 * topology tells them apart: not the hostname alone); else 0 with *a, *b the first two ranks
 * on different hosts. Peer memory (POSIX shm, CUDA IPC) is one host's. */
int bk_lane_one_host(const bk_rank_place *places, const int *ranks, int n, int *a, int *b);

/* 0 when the topology KNOWS that two GPUs of the lane cannot reach each other's memory
 * (CUDA peer access, as probed: p2p known on their host, both GPUs seen by CUDA at probe
 * time, access 0 either way), or that two of its ranks are on different hosts; *a, *b are
 * then those ranks and `why` (may be NULL) says which GPUs. 1 otherwise, including when
 * nothing is known (no CUDA at probe time, a snapshot without "p2p", GPUs the probing
 * process could not see: CUDA_VISIBLE_DEVICES, Slurm's per-task binding). */
int bk_lane_p2p_ok(const bk_topo *t, const bk_rank_place *places, const int *ranks, int n,
                   int *a, int *b, char *why, size_t why_len);

/* ---- binding (topo_bind.c) ---- */

/* The environment binding reads, as plain values (NULL = unset), so the rules
 * are a pure function testable without a machine. */
typedef struct bk_bind_env {
    const char *cuda_visible_devices; /* CUDA_VISIBLE_DEVICES */
    const char *slurm_step_gpus;      /* SLURM_STEP_GPUS (physical ids of the step) */
    const char *slurm_job_gpus;       /* SLURM_JOB_GPUS */
    int local_rank;                   /* place among the node's ranks that see the same
                                         GPUs (bk_bind_group); all of them see the same
                                         GPUs under plain mpirun */
    int local_size;                   /* how many ranks of the node see those GPUs */
    int node_size;                    /* all ranks of the node; 0: the same as local_size */
    int device_count;                 /* CUDA devices this process sees; -1 unknown */
} bk_bind_env;

typedef struct bk_binding {
    int device;         /* CUDA ordinal to cudaSetDevice(); -1: no GPU (cpu backend) */
    int shared;         /* 1 when other ranks of the group get the same device */
    char physical[64];  /* the physical id ("3", "GPU-uuid") when known, else "" */
    char why[256];      /* the rule that decided, for the log */
} bk_binding;

/* Fill env from the process environment (local rank/size and device count given). */
void bk_bind_env_from_process(bk_bind_env *env, int local_rank, int local_size,
                              int device_count);
/* The binding rules: a process that sees exactly one device uses device 0
 * (Slurm --gpus-per-task, one-entry CUDA_VISIBLE_DEVICES; shared when other ranks of
 * its group see it too, a one-GPU machine under mpirun -np 2: not refused here, the
 * lanes refuse a disjoint plan on it); otherwise device = local rank (its place among
 * the node's ranks that see the same devices: under Slurm --gpus-per-task=k each task's
 * k GPUs are numbered from 0 in it); more such ranks than devices share devices
 * round-robin, which is refused (BK_ERR_INPUT) unless policy is BK_LANES_SHARED. No
 * device: device -1. */
bk_status bk_bind_rank(const bk_bind_env *env, bk_lane_policy policy, bk_binding *out,
                       bk_err *err);

/* The group of one node's ranks that see the same GPUs: keys holds `nlocal` NUL-ended
 * strings `stride` bytes apart, entry i the key of local rank i (bk_cuda_visible_key);
 * *group_rank is how many ranks before `me` have me's key, *group_size how many have it. */
void bk_bind_group(const char *keys, size_t stride, int nlocal, int me, int *group_rank,
                   int *group_size);

/* ---- gathering over MPI (topo_gather.c) ---- */

/* Collective over `comm` (an MPI_Comm passed by address, so this header needs
 * no mpi.h): ranks are grouped per node (MPI_Comm_split_type SHARED); local
 * rank 0 of each node probes (or, with `snapshot` non-NULL, nobody probes and
 * the snapshot is used); every rank reports hostname, boot id, the PCI bus id
 * of its bound device (`bus_id`, "" for cpu) and its NUMA node. Hosts are told
 * apart by hostname + boot id. On rank 0, *out is the cluster topology and
 * *places (malloc'ed, one per rank of comm) where each rank sits; other ranks
 * get NULLs. Errors on any rank are reported on every rank. Only rank 0's
 * `snapshot` is read (the others may pass NULL): with one there, no node probes. */
bk_status bk_topo_gather(const void *comm, const bk_topo *snapshot, const char *bus_id,
                         bk_topo **out, bk_rank_place **places, bk_err *err);

/* Collective over `comm` (MPI_Comm*): among the ranks of this node
 * (MPI_Comm_split_type SHARED), those whose `key` (bk_cuda_visible_key; cut at
 * BK_VISIBLE_KEY_MAX - 1 bytes) equals this rank's: *group_rank is this rank's place
 * among them, *group_size their count, *node_size the node's ranks. */
bk_status bk_topo_gpu_group(const void *comm, const char *key, int *group_rank,
                            int *group_size, int *node_size, bk_err *err);

/* Local rank and size from MPI_Comm_split_type(SHARED) over `comm` (MPI_Comm*):
 * bk_topo_gpu_group with one key for every rank. */
bk_status bk_topo_local_rank(const void *comm, int *local_rank, int *local_size, bk_err *err);

/* Hostname and boot id of this machine. */
void bk_host_identity(char *hostname, size_t hn, char *boot_id, size_t bn);

/* ---- internal, shared between topology files (topo_canon.c) ---- */

/* Canonical form of an n x n symmetric code matrix with per-vertex labels,
 * invariant to relabelling: individualisation-refinement search for the
 * lexicographically smallest relabelled (labels, upper triangle). Returns its
 * hash in *hash and 1 in *exact; past a search budget it falls back to the
 * refined colour classes (still invariant, less discriminating) and *exact = 0. */
bk_status bk__canon_hash(int n, const uint16_t *codes, const uint16_t *labels, uint64_t *hash,
                         int *exact, bk_err *err);

/* 64-bit FNV-1a of a byte string (digest of snapshots and canonical forms). */
uint64_t bk_fnv1a64(const void *data, size_t n);
/* The same hash from another offset basis: BK_FNV1A64_OLD_BASIS is the one digests and lane
 * signatures were made with before 2026-12-03 (a digit short of FNV-1a's), which
 * `bracket score` still recognises in old records. */
#define BK_FNV1A64_OLD_BASIS 1469598103934665603ull
uint64_t bk_fnv1a64_from(uint64_t basis, const void *data, size_t n);
/* A 64-bit hash of n 16-bit words, a word of 8 bytes at a time: the lane finder's memo
 * key (FNV-1a, a byte at a time, was a third of its time at 256 members). Never stored. */
uint64_t bk__hash_u16(const uint16_t *v, size_t n);

/* ---- internal (topo_cpulist.c) ---- */

/* 0 when `cpus` is a CPU list as the probe writes it (hwloc_bitmap_list_snprintf): ""
 * (a NUMA node without CPUs) or numbers and ranges a-b joined by commas, in increasing
 * order, none past BK_TOPO_MAX_CPU. Otherwise -1, and why[] says what is wrong. */
int bk__cpulist_check(const char *cpus, char *why, size_t n);

#endif
