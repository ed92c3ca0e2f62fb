/* cmd_run.c - `bracket run PLAN`: options, every rank's GPU binding and topology, rank 0's
 * set-up (run_setup.c) sent to the agents, the arms, scoring, the record. */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/cli.h"
#include "runner/digest.h"
#include "runner/janitor.h"
#include "runner/orchestrate.h"
#include "runner/report.h"
#include "runner/run_setup.h"
#include "runner/terminate.h"
#include "runner/transport.h"
#include "topology/topology.h"

/* Rank 0 -> all, after the plan is checked. */
typedef struct plan_msg {
    int32_t status;     /* exit status when nonzero: every rank leaves */
    int32_t backend;
    int32_t policy;
    double arm_s;
    int64_t plan_len;
} plan_msg;

/* Rank 0 -> all, once lanes, run id and endpoints exist. */
typedef struct setup_msg {
    int32_t status;
    char run_id[BK_RUN_ID_LEN];
    char ep_rv[320];
    char ep_samples[320];
    int32_t tcp;        /* the keys below are the run's CURVE keys (never the server secret) */
    char server_public[BK_Z85_KEY_LEN], client_public[BK_Z85_KEY_LEN];
    char client_secret[BK_Z85_KEY_LEN];
} setup_msg;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: mpirun -np N bracket run PLAN [--out DIR] [--set PATH=VALUE]...\n"
        "                       [--quiet] [--topology FILE] [--iface IFACE] [--port PORT]\n"
        "\n"
        "Runs the plan's bracket: B (incumbent, baseline lane) -> C (candidate,\n"
        "disjoint lane) -> B' (incumbent again; under protocol v7 only when B/C cannot\n"
        "decide), then the audit A (candidate, eager, untimed) and the pristine\n"
        "reference T (incumbent), each arm as fresh engine processes (each timed arm\n"
        "protocol.repeats times, each round fresh; its cost the mean over rounds).\n"
        "Needs at least 2 x tp x ep ranks (tp x ep with lanes.policy=shared, a one-GPU\n"
        "rehearsal); ranks past the lanes stay idle (the header names them).\n"
        "\n"
        "  -o, --out DIR        where DIR/<run-id>/record.json, samples.msgpack and\n"
        "                       topology.json go (default: bracket-out)\n"
        "  -s, --set PATH=VAL   override one plan field by its dotted path, e.g.\n"
        "                       --set candidate.variant=shm_twopass (repeatable; the\n"
        "                       record keeps the plan as run)\n"
        "  -t, --topology FILE  plan lanes on this bracket.topology/1 snapshot instead of\n"
        "                       probing (see `bracket topo --save`; read by rank 0 alone)\n"
        "  -i, --iface IFACE    rendezvous and samples over tcp:// with CURVE on this\n"
        "                       interface even when every rank is on one host (default:\n"
        "                       ipc:// on one host; across hosts rank 0's Ethernet NIC\n"
        "                       with an IPv4 address nearest its GPU, else the first\n"
        "                       interface that is up, not loopback, with IPv4)\n"
        "  -p, --port PORT      tcp: the rendezvous port, samples on PORT+1 (default: any\n"
        "                       free ports)\n"
        "  -q, --quiet          only the report: no header (plan, lanes, routing), no\n"
        "                       per-arm progress or GPU binding lines\n"
        "  -h, --help           this text\n"
        "\n"
        "Exit status: 0 PASS, 3 FAIL, 4 NO_DECISION, 2 bad input or usage,\n"
        "1 internal failure.\n");
}

static int parse(int argc, char **argv, bk__run_opts *o, char *msg, size_t len)
{
    static const struct option opts[] = {
        { "out", required_argument, 0, 'o' }, { "set", required_argument, 0, 's' },
        { "topology", required_argument, 0, 't' },
        { "iface", required_argument, 0, 'i' }, { "port", required_argument, 0, 'p' },
        { "quiet", no_argument, 0, 'q' },     { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    memset(o, 0, sizeof *o);
    o->out = "bracket-out";
    optind = 1;
    opterr = 0;
    int c;
    while ((c = bk_cli_getopt(argc, argv, ":o:s:t:qhi:p:", opts)) != -1) {
        switch (c) {
        case 'o':
            if (!optarg[0]) {
                snprintf(msg, len, "--out: an empty path; name the output folder (default: "
                         "bracket-out)");
                return -1;
            }
            o->out = optarg;
            break;
        case 't': o->topology = optarg; break;
        case 'i':
            if (!optarg[0]) {
                snprintf(msg, len, "--iface: an empty interface name; name one (e.g. eth0) "
                         "or leave --iface out");
                return -1;
            }
            o->iface = optarg;
            break;
        case 'p': { /* two ports, PORT and PORT + 1 */
            long long v = 0;
            if (bk_cli_int("--port", optarg, 1, 65534, &v, msg, len) != 0)
                return -1;
            o->port = (int)v;
            break;
        }
        case 's':
            if (o->nsets == BK__RUN_MAX_SETS) {
                snprintf(msg, len, "too many --set (at most %d)", BK__RUN_MAX_SETS);
                return -1;
            }
            o->sets[o->nsets++] = optarg;
            break;
        case 'q': o->quiet = 1; break;
        case 'h': o->help = 1; return 0;
        default:
            bk_cli_opt_error(c, argv, opts, msg, len);
            return -1;
        }
    }
    if (optind != argc - 1) {
        snprintf(msg, len, optind >= argc ? "missing PLAN" : "one PLAN expected, got %d",
                 argc - optind);
        return -1;
    }
    o->plan = argv[optind];
    return 0;
}

/* Run one arm; 0 when it ended well, else the run stops with the reason kept. */
static int run_one(bk_run *run, bk_coord *coord, const bk_agent_env *env, int idx)
{
    const bk_plan *p = &run->plan;
    int cand = idx == BK_ARM_IDX_C || idx == BK_ARM_IDX_A;
    bk_err err = { 0 };
    if (!env->quiet)
        fprintf(stderr, "bracket: arm %s (%s%s) on %d rank(s)...\n", bk_arm_names[idx],
                cand ? p->candidate.name : p->incumbent.name, idx >= BK_ARM_IDX_A ? ", audit" : "",
                run->lane_size);
    if (bk_run_arm(run, coord, env, idx, &err) == BK_OK && run->arms[idx].ok)
        return 0;
    if (err.msg[0])
        bk_strlcpy(run->arms[idx].reason, err.msg, sizeof run->arms[idx].reason);
    bk_run_stopped_failed(run, idx, run->stopped, sizeof run->stopped);
    return -1;
}

/* The record as it stands before arm idx, marked unfinished (docs/record.md, "Unfinished
 * runs"): what is left when rank 0 ends during arm idx with no chance to write its final
 * record (SIGKILL, the OOM killer, a second Ctrl-C); else the final record replaces it. Called
 * between arms only: the previous arm's engines have ended, the next are not spawned, so no
 * timed region pays for it. 0 when written; else one warning line on stderr, and the run
 * goes on without it. */
static int write_unfinished(const bk_run *run, bk_coord *coord, int idx)
{
    bk_err err = { 0 };
    bk_score sc;
    memset(&sc, 0, sizeof sc);
    bk_run *then = malloc(sizeof *then);
    int rc = -1;
    if (!then) {
        BK_FAIL(&err, BK_ERR_INTERNAL, "out of memory");
        goto out;
    }
    *then = *run; /* shallow: the arms' data is only read */
    then->unfinished = 1;
    bk_run_stopped_unfinished(idx, then->stopped, sizeof then->stopped);
    then->wire = *bk_coord_stats(coord);
    then->quality.per = NULL; /* A and T have not both run: no comparison is allocated */
    bk_run_quality(then);
    if (bk_run_evaluate(then, 0, &sc, &err) == BK_OK) {
        bk_terminate_mark_unfinished(&sc, bk_arm_names[idx]);
        if (bk_record_write(then, &sc, &err) == BK_OK)
            rc = 0;
    }
    free(then->quality.per);
out:
    free(then);
    if (rc != 0)
        fprintf(stderr, "bracket run: warning: the unfinished record before arm %s was not "
                "written: %s\n", bk_arm_names[idx], err.msg);
    return rc;
}

/* B, C, B' (under v7 only when B/C cannot decide), then A and T; before each, the unfinished
 * record (*unfinished_at: the arm of the last one written, else -1). */
static void run_arms(bk_run *run, bk_coord *coord, const bk_agent_env *env, int *unfinished_at)
{
    const bk_plan *p = &run->plan;
    *unfinished_at = -1;
    for (int idx = 0; idx < BK_ARM_NAMES; idx++) { /* in run order */
        if (idx == BK_ARM_IDX_BP && p->protocol.version == BK_PROTO_V7 &&
            bk_run_v7_decided(run, run->stopped, sizeof run->stopped))
            continue;
        if (bk_terminate_signal()) {
            bk_run_stopped_before(bk_terminate_name(), idx, run->stopped, sizeof run->stopped);
            return;
        }
        if (write_unfinished(run, coord, idx) == 0)
            *unfinished_at = idx;
        if (bk_terminate_signal()) { /* came during that write: no engine of idx spawned */
            bk_run_stopped_before(bk_terminate_name(), idx, run->stopped, sizeof run->stopped);
            return;
        }
        if (run_one(run, coord, env, idx) != 0)
            return;
    }
}

/* Every rank's set-up error (bad: it has one, in msg), printed by rank 0 once a distinct
 * message, naming the first rank that gave it and how many others did: a --topology file
 * that is missing everywhere is one line, not one a rank. Collective. */
static void print_rank_errors(const bk_run *run, int rank, int bad, const char *msg)
{
    typedef struct {
        int bad;
        char msg[sizeof ((bk_err *)0)->msg];
    } rank_err;
    rank_err mine;
    memset(&mine, 0, sizeof mine);
    mine.bad = bad;
    if (bad)
        bk_strlcpy(mine.msg, msg, sizeof mine.msg);
    rank_err *all = rank == 0 ? calloc((size_t)run->world_size, sizeof *all) : NULL;
    if (rank == 0 && !all) {
        fprintf(stderr, "bracket run: out of memory gathering the ranks' errors\n");
        MPI_Abort(MPI_COMM_WORLD, BK_EXIT_INTERNAL);
    }
    MPI_Gather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    for (int i = 0; i < run->world_size; i++) {
        if (!all[i].bad)
            continue;
        int same = 0;
        for (int j = i + 1; j < run->world_size; j++)
            if (all[j].bad && !strcmp(all[j].msg, all[i].msg)) {
                all[j].bad = 0; /* said with rank i */
                same++;
            }
        char more[64] = "";
        if (same)
            snprintf(more, sizeof more, " and %d other rank(s)", same);
        fprintf(stderr, "bracket run [%s rank %d%s]: %s\n", run->hosts[i], i, more, all[i].msg);
    }
    free(all);
}

static int verdict_exit(bk_verdict v)
{
    return v == BK_VERDICT_PASS ? BK_EXIT_PASS
         : v == BK_VERDICT_FAIL ? BK_EXIT_FAIL : BK_EXIT_NO_DECISION;
}

/* Open MPI's shared-memory segment of this rank to its janitor (janitor.h): the local rank
 * Open MPI gave it, or this rank's place among its node's ranks when the variable is absent
 * (a launch by srun). */
static void janitor_mpi_segments(void)
{
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int local = -1;
    if (lr && *lr) {
        char *end;
        long v = strtol(lr, &end, 10);
        local = *end == '\0' && v >= 0 && v < 1 << 20 ? (int)v : -1;
    } else {
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, &local);
            MPI_Comm_free(&node);
        }
    }
    bk_janitor_add_mpi_segments(local);
}

int bk_cmd_run(int argc, char **argv)
{
    int rank = 0, size = 1;
    bk_terminate_install(); /* before MPI_Init: a signal during it is noted, not fatal */
    /* the janitor forks now, while this process has one thread (janitor.h) */
    const int janitor_errno = bk_janitor_start(argc, argv) == 0 ? 0 : errno;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    signal(SIGPIPE, SIG_IGN); /* an output pipe whose mpirun is gone fails, not kills */
    janitor_mpi_segments();
    /* A signal that came while MPI started: no run id exists yet, so there is nothing to
     * record and no engine to stop; every rank leaves with status 4 and rank 0 says why. */
    int sig = bk_terminate_signal(), any_sig = 0;
    MPI_Allreduce(&sig, &any_sig, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_sig) {
        if (rank == 0)
            fprintf(stderr, "bracket run: terminated by %s while MPI started, before the run had "
                    "an id: no arm ran, nothing recorded\n", bk_terminate_signame(any_sig));
        MPI_Finalize();
        return BK_EXIT_NO_DECISION;
    }

    bk__run_opts o;
    char msg[256];
    int rc = 0, decided = 0; /* decided: a signal came only after the last arm ended */
    bk_run *run = NULL;
    bk_coord *coord = NULL;
    char *plan_text = NULL;
    char agent_dir[300] = "", plan_path[340] = "", keys_path[340] = "";
    bk_transport tr;
    memset(&tr, 0, sizeof tr);
    bk_topo *snapshot = NULL, *topo = NULL;
    bk_rank_place *places = NULL;
    bk_err err = { 0 };

    if (parse(argc, argv, &o, msg, sizeof msg) != 0) {
        if (rank == 0) {
            fprintf(stderr, "bracket run: %s\n", msg);
            fprintf(stderr, "(bracket run --help: the whole usage)\n");
        }
        rc = BK_EXIT_USAGE;
        goto out;
    }
    if (o.help) {
        if (rank == 0)
            usage(stdout);
        goto out;
    }
    run = calloc(1, sizeof *run);
    if (!run) {
        rc = BK_EXIT_INTERNAL;
        goto out;
    }
    run->world_size = size;
    run->hosts = calloc((size_t)size, sizeof *run->hosts);
    char host[BK_HOST_LEN] = "";
    gethostname(host, sizeof host - 1);
    bk_text_clean(host); /* printed and recorded with every rank's line */
    MPI_Allgather(host, BK_HOST_LEN, MPI_CHAR, run->hosts, BK_HOST_LEN, MPI_CHAR, MPI_COMM_WORLD);

    plan_msg pm;
    memset(&pm, 0, sizeof pm);
    if (rank == 0) {
        pm.status = bk__setup_plan(&o, run, &plan_text, &err);
        if (pm.status != 0) {
            fprintf(stderr, "bracket run: %s\n", err.msg);
        } else {
            pm.backend = run->backend;
            pm.policy = run->plan.lane_policy;
            pm.arm_s = run->plan.timeouts.arm_s;
            pm.plan_len = (int64_t)strlen(plan_text);
        }
    }
    MPI_Bcast(&pm, sizeof pm, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (pm.status != 0) {
        rc = pm.status;
        goto out;
    }
    if (rank != 0) {
        plan_text = malloc((size_t)pm.plan_len + 1);
        if (!plan_text)
            MPI_Abort(MPI_COMM_WORLD, BK_EXIT_INTERNAL);
    }
    MPI_Bcast(plan_text, (int)pm.plan_len + 1, MPI_CHAR, 0, MPI_COMM_WORLD);

    /* binding and topology: every rank */
    MPI_Comm world = MPI_COMM_WORLD;
    int local_rank = 0, local_size = 1, bad = 0, any_bad = 0;
    bk_binding bind;
    memset(&bind, 0, sizeof bind);
    bind.device = -1;
    char bus_id[64] = "";
    /* local rank among the node's ranks that see the same GPUs (Slurm --gpus-per-task=k
     * numbers each task's own k GPUs from 0); the cpu backend's ranks all share one key */
    int node_size = 0;
    char key[BK_VISIBLE_KEY_MAX] = "";
    if (pm.backend == BK_BACKEND_CUDA)
        bk_cuda_visible_key(key, sizeof key);
    if (bk_topo_gpu_group(&world, key, &local_rank, &local_size, &node_size, &err) != BK_OK)
        bad = 1;
    if (!bad && pm.backend == BK_BACKEND_CUDA) {
        bk_bind_env be;
        const int ndev = bk_cuda_device_count();
        bk_bind_env_from_process(&be, local_rank, local_size, ndev);
        be.node_size = node_size;
        if (bk_bind_rank(&be, (bk_lane_policy)pm.policy, &bind, &err) != BK_OK) {
            bad = 1;
        } else if (bind.device < 0) {
            const char *vis = getenv("CUDA_VISIBLE_DEVICES");
            char seen[48];
            snprintf(seen, sizeof seen, ndev < 0 ? "no CUDA driver or runtime"
                                                 : "%d CUDA device(s)", ndev);
            BK_FAIL(&err, BK_ERR_INPUT, "the plan's backend is cuda, but this rank sees no GPU "
                    "(%s%s%s%s): run it where GPUs are, or with --set backend=cpu", seen,
                    vis ? ", CUDA_VISIBLE_DEVICES=\"" : "", vis ? vis : "", vis ? "\"" : "");
            bad = 1;
        } else if (bk_cuda_bus_id(bind.device, bus_id, sizeof bus_id, &err) != BK_OK) {
            bad = 1;
        }
        else if (!o.quiet)
            fprintf(stderr, "bracket [%s rank %d]: GPU %d (%s): %s\n", host, rank, bind.device,
                    bus_id, bind.why);
    }
    /* read where the run starts (rank 0), as the plan is: a snapshot need not be on every
     * node (bk_topo_gather: rank 0's stands for every host) */
    if (!bad && o.topology && rank == 0 && bk_topo_load(o.topology, &snapshot, &err) != BK_OK)
        bad = 1;
    /* this rank's private folder (the plan as run; the tcp keys later), made before rank 0
     * makes the run's folder: a $TMPDIR that cannot hold it is refused here, every rank's
     * reason said once, with nothing made yet (bk_write_private_plan) */
    static const char *const with_keys[] = { "keys", NULL };
    if (!bad && bk_write_private_plan("agent", plan_text, with_keys, agent_dir,
                                      sizeof agent_dir, plan_path, sizeof plan_path) != 0) {
        const int e = errno;
        char why[sizeof err.msg];
        BK_FAIL(&err, BK_ERR_INPUT, "%s", bk_private_plan_failed(e, why, sizeof why));
        bad = 1;
    }
    char exe[1024];
    if (!bad && bk_self_exe(exe, sizeof exe, &err) != BK_OK)
        bad = 2; /* not the user's input: an internal failure */
    print_rank_errors(run, rank, bad, err.msg);
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        rc = any_bad == 2 ? BK_EXIT_INTERNAL : BK_EXIT_USAGE;
        goto out;
    }
    if (bk_topo_gather(&world, snapshot, bus_id, &topo, &places, &err) != BK_OK) {
        if (rank == 0)
            fprintf(stderr, "bracket run: topology: %s\n", err.msg);
        /* a snapshot that does not describe these hosts is bad input */
        rc = err.code == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
        goto out;
    }
    setup_msg sm;
    memset(&sm, 0, sizeof sm);
    if (rank == 0) {
        sm.status = bk__setup_run(&o, run, topo, places, &coord, &tr, &err);
        if (sm.status != 0) {
            fprintf(stderr, "bracket run: %s\n", err.msg);
        } else {
            bk_strlcpy(sm.run_id, run->run_id, sizeof sm.run_id);
            bk_strlcpy(sm.ep_rv, bk_coord_rendezvous_ep(coord), sizeof sm.ep_rv);
            bk_strlcpy(sm.ep_samples, bk_coord_samples_ep(coord), sizeof sm.ep_samples);
            sm.tcp = tr.tcp;
            if (tr.tcp) {
                bk_strlcpy(sm.server_public, tr.keys.server_public, sizeof sm.server_public);
                bk_strlcpy(sm.client_public, tr.keys.client_public, sizeof sm.client_public);
                bk_strlcpy(sm.client_secret, tr.keys.client_secret, sizeof sm.client_secret);
                if (!o.quiet)
                    fprintf(stderr, "bracket: transport tcp with CURVE on %s (%s): %s, %s\n",
                            tr.iface, tr.addr, sm.ep_rv, sm.ep_samples);
            }
        }
    }
    MPI_Bcast(&sm, sizeof sm, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (sm.status != 0) {
        rc = sm.status;
        goto out;
    }
    if (sm.tcp) {
        /* the engines' keys: a 0600 file in this agent's private folder */
        bk_curve_keys k;
        memset(&k, 0, sizeof k);
        bk_strlcpy(k.server_public, sm.server_public, sizeof k.server_public);
        bk_strlcpy(k.client_public, sm.client_public, sizeof k.client_public);
        bk_strlcpy(k.client_secret, sm.client_secret, sizeof k.client_secret);
        snprintf(keys_path, sizeof keys_path, "%s/keys", agent_dir);
        if (bk_keys_write(keys_path, &k, &err) != BK_OK) {
            fprintf(stderr, "bracket [%s rank %d]: %s\n", host, rank, err.msg);
            keys_path[0] = '\0';
            MPI_Abort(MPI_COMM_WORLD, BK_EXIT_INTERNAL);
        }
        memset(&k, 0, sizeof k);
        memset(sm.client_secret, 0, sizeof sm.client_secret);
    }
    bk_terminate_remove_on_signal(plan_path);
    if (keys_path[0])
        bk_terminate_remove_on_signal(keys_path);
    bk_terminate_remove_on_signal(agent_dir);
    if (janitor_errno)
        fprintf(stderr, "bracket run [%s rank %d]: warning: no janitor for its private files "
                "(%s): a rank killed outright leaves them in $TMPDIR\n", host, rank,
                strerror(janitor_errno));
    bk_agent_env env = {
        .exe = exe, .plan_path = plan_path, .run_id = sm.run_id, .ep_rv = sm.ep_rv,
        .ep_samples = sm.ep_samples, .backend = (bk_backend)pm.backend, .device = bind.device,
        .mpi_rank = rank, .host = host, .arm_s = pm.arm_s, .quiet = o.quiet,
        .keys_path = keys_path[0] ? keys_path : NULL,
    };
    if (rank == 0 && bk_sha256_file(exe, run->binary_digest, &err) != BK_OK)
        bk_strlcpy(run->binary_digest, "unknown", sizeof run->binary_digest);
    if (rank != 0) {
        rc = bk_agent_loop(&env);
        goto out;
    }
    if (!o.quiet)
        bk_report_header(stdout, run);
    int unfinished_at = -1;
    run_arms(run, coord, &env, &unfinished_at);
    run->wire = *bk_coord_stats(coord);
    bk_run_quality(run);
    bk_score score;
    memset(&score, 0, sizeof score);
    if (bk_run_evaluate(run, 0, &score, &err) != BK_OK) {
        fprintf(stderr, "bracket run: scoring failed: %s\n", err.msg);
        rc = BK_EXIT_INTERNAL;
    }
    char tname[32];
    const int cut = bk_run_terminated(run, tname, sizeof tname);
    if (cut)
        bk_terminate_mark_as(&score, tname, run->stopped, sizeof run->stopped);
    else
        decided = 1;
    /* the record first: the verdict printed below is either backed by it or followed by
     * the line that says it is not (on stdout, the verdict's own stream, so no reordering).
     * It replaces the unfinished record written before the last arm that started. */
    bk_err rerr = { 0 };
    bk_status rst = bk_record_write(run, &score, &rerr);
    if (rst != BK_OK)
        fprintf(stderr, "bracket run: the record was not written: %s\n", rerr.msg);
    bk_report_print(stdout, run, &score);
    if (rst != BK_OK) {
        char left[96] = "", upath[sizeof run->run_dir + 16];
        struct stat ust;
        snprintf(upath, sizeof upath, "%s/record.json", run->run_dir);
        /* only where it is still there (the folder may be what went: removed, unmounted) */
        if (unfinished_at >= 0 && stat(upath, &ust) == 0 && S_ISREG(ust.st_mode))
            snprintf(left, sizeof left, "; the unfinished record written before arm %s remains",
                     bk_arm_names[unfinished_at]);
        printf("record: NOT WRITTEN (%s): the verdict above has no record%s\n", rerr.msg, left);
        rc = BK_EXIT_INTERNAL;
    } else {
        printf("record: %s/record.json\n", run->run_dir);
    }
    if (rc == 0)
        rc = verdict_exit(score.verdict);
    fflush(stdout);
    if (bk_terminate_signal()) {
        /* the partial record is written; end the whole job now (agents that were
         * not signalled themselves are still waiting for us) */
        if (cut)
            fprintf(stderr, "bracket run: terminated by %s; partial record written\n",
                    bk_terminate_name());
        else
            fprintf(stderr, "bracket run: %s came after the last arm had ended: the run is "
                    "complete and decided as it ran\n", bk_terminate_name());
        fflush(stderr);
        if (keys_path[0])
            unlink(keys_path);
        unlink(plan_path);
        rmdir(agent_dir);
        bk_coord_close(coord);
        bk_run_cleanup_all(run, &env); /* the agents MPI_Abort ends may not have yet */
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    bk_run_finish_agents(rc);
out:
    if (keys_path[0])
        unlink(keys_path);
    memset(&tr.keys, 0, sizeof tr.keys);
    if (plan_path[0])
        unlink(plan_path);
    if (agent_dir[0])
        rmdir(agent_dir);
    bk_coord_close(coord);
    bk_topo_free(topo);
    bk_topo_free(snapshot);
    free(places);
    free(plan_text);
    if (run) {
        bk_run_free(run); /* the arms too */
        free(run);
    }
    fflush(stdout);
    if (bk_terminate_signal()) {
        /* terminated: rank 0 ends the job with MPI_Abort; a finalize could wait
         * for ranks that are already gone */
        fflush(stderr);
        _exit(rc || decided ? rc : BK_EXIT_NO_DECISION);
    }
    MPI_Finalize();
    return rc;
}
