/* cmd_topo.c - `bracket topo` (show or save the topology) and `bracket lanes`
 * (the baseline and candidate lanes a bracket would use). */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/cli.h"
#include "topology/topology.h"

#define BK__MAX_CPU_SLOTS 4096 /* CPU ranks `bracket lanes --cpu-slots` plans on one host */

static int exit_of(bk_status st)
{
    return st == BK_OK ? BK_EXIT_PASS : st == BK_ERR_INPUT ? BK_EXIT_USAGE : BK_EXIT_INTERNAL;
}

static void report(const char *cmd, const bk_err *err)
{
    fprintf(stderr, "bracket %s: %s\n", cmd, err->msg);
    if (getenv("BK_DEBUG"))
        fprintf(stderr, "  at %s\n", err->trail);
}

/* Under mpirun (Open MPI or PMIx environment), gather every node's probe. */
static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
}

/* Whether this process says what is wrong with the command line (and prints --help): under
 * mpirun only rank 0 does, as the launcher's environment tells before MPI_Init (every rank
 * parses the same arguments), not one copy a rank. The others leave at once with status 0
 * (quiet_status): mpirun ends the whole job at the first rank that fails, and a silent rank
 * failing first killed rank 0 before it had said why (the CI saw it once); mpirun then
 * exits with rank 0's status. */
static int speaks(void)
{
    if (!launched_by_mpi())
        return 1;
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMIX_RANK");
    return !r || strcmp(r, "0") == 0;
}

/* A usage error's status for this rank: `status` where it speaks, else 0 (above). */
static int quiet_status(int status)
{
    return speaks() ? status : BK_EXIT_PASS;
}

/* MPI_Init (unless done) and our rank */
static bk_status mpi_start(int *rank, int *inited, bk_err *err)
{
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
            return BK_FAIL(err, BK_ERR_SYSTEM, "MPI_Init failed");
        *inited = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    return BK_OK;
}

/* The topology a command works on: --topology FILE, an hwloc XML, or a probe. With use_mpi
 * (launched by mpirun, MPI started) the probe is gathered over MPI, and a file is read by
 * rank 0 alone (*t stays NULL on the others). */
static bk_status get_topology(const char *file, const char *xml, int use_mpi, int rank,
                              bk_topo **t, bk_err *err)
{
    *t = NULL;
    if (use_mpi && (file || xml) && rank != 0)
        return BK_OK;
    if (file)
        return bk_topo_load(file, t, err);
    if (xml)
        return bk_topo_probe_xml(xml, t, err);
    if (!use_mpi)
        return bk_topo_probe(t, err);
    MPI_Comm world = MPI_COMM_WORLD;
    bk_rank_place *places = NULL;
    bk_status st = bk_topo_gather(&world, NULL, "", t, &places, err);
    free(places);
    return st;
}

static void done_mpi(int inited)
{
    if (inited)
        MPI_Finalize();
}

static void topo_usage(FILE *f)
{
    fprintf(f,
            "usage: bracket topo [--topology FILE | --hwloc-xml FILE] [--save FILE] [--json]\n"
            "                    [--quiet]\n"
            "Show this machine (or cluster, under mpirun) the way nvidia-smi topo -m does.\n\n"
            "  -t, --topology FILE   read a bracket.topology/1 snapshot instead of probing\n"
            "  -x, --hwloc-xml FILE  probe an hwloc XML export instead of this machine\n"
            "  -s, --save FILE       write the snapshot to FILE (default: none)\n"
            "  -j, --json            print the snapshot JSON instead of the matrix (alone on\n"
            "                        stdout: the \"saved\" line then goes to stderr)\n"
            "  -q, --quiet           no matrix, no \"saved\" line: only errors (for --save;\n"
            "                        --json still prints the snapshot)\n"
            "  -h, --help            this text\n\n"
            "The snapshot is saved before anything is printed. Under mpirun every node is\n"
            "probed by one rank and rank 0 prints the cluster (a --topology or --hwloc-xml\n"
            "file is read by rank 0 alone).\n"
            "Exit: 0 ok, 2 bad input or usage, 1 internal error.\n");
}

int bk_cmd_topo(int argc, char **argv)
{
    static const struct option opts[] = {
        { "topology", required_argument, NULL, 't' }, { "hwloc-xml", required_argument, NULL, 'x' },
        { "save", required_argument, NULL, 's' },     { "json", no_argument, NULL, 'j' },
        { "quiet", no_argument, NULL, 'q' },          { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL, *xml = NULL, *save = NULL;
    int json = 0, quiet = 0, c, rank = 0, inited = 0;
    bk_err err = { 0 };
    bk_topo *t = NULL;
    char msg[160];
    optind = 1;
    opterr = 0;
    while ((c = bk_cli_getopt(argc, argv, ":t:x:s:jqh", opts)) != -1) {
        switch (c) {
        case 't': file = optarg; break;
        case 'x': xml = optarg; break;
        case 's': save = optarg; break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        case 'h':
            if (speaks())
                topo_usage(stdout);
            return BK_EXIT_PASS;
        default:
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            if (speaks())
                fprintf(stderr, "bracket topo: %s\n", msg);
            return quiet_status(BK_EXIT_USAGE);
        }
    }
    if ((optind < argc || (file && xml)) && !speaks())
        return quiet_status(BK_EXIT_USAGE);
    if (optind < argc || (file && xml)) {
        if (optind < argc)
            fprintf(stderr, "bracket topo: unexpected argument '%s'\n", argv[optind]);
        else
            fprintf(stderr, "bracket topo: --topology and --hwloc-xml exclude each other\n");
        fprintf(stderr, "(bracket topo --help: the whole usage)\n");
        return BK_EXIT_USAGE;
    }
    const int use_mpi = launched_by_mpi();
    if (use_mpi && mpi_start(&rank, &inited, &err) != BK_OK) {
        report("topo", &err);
        return BK_EXIT_INTERNAL;
    }
    /* before probing: a bad --save target is the user's to fix, not worth a probe first.
     * Checked where it is written, by rank 0 (a rank on another host may lack its folder),
     * said once; every rank leaves with its status. */
    int bad = 0;
    if (save && rank == 0 && bk_topo_save_check(save, &err) != BK_OK) {
        report("topo", &err);
        bad = 1;
    }
    if (save && use_mpi)
        MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) {
        done_mpi(inited);
        return BK_EXIT_USAGE;
    }
    bk_status st = get_topology(file, xml, use_mpi, rank, &t, &err);
    if (st == BK_OK && rank == 0) {
        /* saved before anything is printed: a reader that stops early (| head) or a full
         * standard output does not cost the snapshot (t->digest was set by the load, the
         * probe or the gather) */
        if (save)
            st = bk_topo_save(t, save, &err);
        char *text = st == BK_OK && json ? bk_topo_dump(t) : NULL;
        if (st == BK_OK && json && !text)
            st = BK_FAIL(&err, BK_ERR_INTERNAL, "cannot encode the snapshot");
        if (st == BK_OK && json)
            printf("%s\n", text);
        else if (st == BK_OK && !quiet)
            bk_topo_print(t, stdout);
        /* with --json the standard output is the snapshot alone */
        if (st == BK_OK && save && !quiet)
            fprintf(json ? stderr : stdout, "saved %s (%s)\n", save, t->digest);
        free(text);
    }
    if (st != BK_OK && rank == 0)
        report("topo", &err);
    bk_topo_free(t);
    done_mpi(inited);
    return exit_of(st);
}

static void lanes_usage(FILE *f)
{
    fprintf(f,
            "usage: bracket lanes --tp N [--ep M] [--topology FILE | --hwloc-xml FILE]\n"
            "                     [--policy disjoint|shared] [--cpu-slots N]\n\n"
            "Choose the baseline lane (B, B') and a disjoint candidate lane (C) of TP x EP\n"
            "ranks whose topology signatures are equal, and show the alternatives.\n\n"
            "  -p, --tp N            tensor-parallel size, 1..%d (required)\n"
            "  -e, --ep M            expert-parallel size (default 1); lane size = N x M,\n"
            "                        at most %d\n"
            "  -t, --topology FILE   plan on a bracket.topology/1 snapshot (default: probe\n"
            "                        here)\n"
            "  -x, --hwloc-xml FILE  plan on an hwloc XML export\n"
            "  -P, --policy P        disjoint (default) or shared (one-lane rehearsal)\n"
            "  -c, --cpu-slots N     plan CPU lanes for N ranks (1..%d) on the first host\n"
            "                        (cpu backend; default: GPU lanes, one rank per GPU)\n"
            "  -h, --help            this text\n\n"
            "Exit: 0 lanes found, 2 no equal pair or bad input (the reason is printed),\n"
            "1 internal error.\n", BK_LANE_MAX, BK_LANE_MAX, BK__MAX_CPU_SLOTS);
}

/* N CPU ranks on host 0, filled core by core, NUMA node by NUMA node (mpirun --map-by core). */
static bk_status cpu_places(const bk_topo *t, int n, bk_rank_place **out, bk_err *err)
{
    const bk_topo_host *h = &t->hosts[0];
    bk_rank_place *p = calloc((size_t)n, sizeof *p);
    if (!p)
        return BK_FAIL(err, BK_ERR_SYSTEM, "out of memory");
    int per = h->nnuma > 0 && h->cores > 0 ? (h->cores + h->nnuma - 1) / h->nnuma : n;
    for (int r = 0; r < n; r++) {
        p[r].host = 0;
        p[r].gpu = -1;
        p[r].numa = h->nnuma > 0 ? (r / (per > 0 ? per : 1)) % h->nnuma : -1;
    }
    *out = p;
    return BK_OK;
}

static void print_lane(const char *what, const bk_topo *t, const bk_rank_place *pl,
                       const int *ranks, int n, const char *sig)
{
    printf("%-9s ranks [", what);
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", ranks[i]);
    printf("]\n");
    if (pl[ranks[0]].gpu >= 0) {
        printf("          GPUs ");
        for (int i = 0; i < n; i++) {
            const bk_rank_place *p = &pl[ranks[i]];
            printf("%s%s:GPU%d(%s)", i ? " " : "", t->hosts[p->host].hostname, p->gpu,
                   t->hosts[p->host].gpus[p->gpu].bus_id);
        }
        printf("\n");
    }
    printf("          signature %s\n", sig);
}

int bk_cmd_lanes(int argc, char **argv)
{
    static const struct option opts[] = {
        { "tp", required_argument, NULL, 'p' },        { "ep", required_argument, NULL, 'e' },
        { "topology", required_argument, NULL, 't' },  { "hwloc-xml", required_argument, NULL, 'x' },
        { "policy", required_argument, NULL, 'P' },    { "cpu-slots", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
    };
    const char *file = NULL, *xml = NULL;
    int tp = 0, ep = 1, cpu = 0, c, nranks = 0;
    bk_lane_policy policy = BK_LANES_DISJOINT;
    bk_err err = { 0 };
    bk_topo *t = NULL;
    bk_rank_place *pl = NULL;
    bk_lane_pick *pick = NULL;
    char msg[256];
    long long v = 0;
    optind = 1;
    opterr = 0;
    while ((c = bk_cli_getopt(argc, argv, ":p:e:t:x:P:c:h", opts)) != -1) {
        switch (c) {
        case 'p':
        case 'e':
        case 'c':
            if (bk_cli_int(c == 'p' ? "--tp" : c == 'e' ? "--ep" : "--cpu-slots", optarg, 1,
                           c == 'c' ? BK__MAX_CPU_SLOTS : BK_LANE_MAX, &v, msg,
                           sizeof msg) != 0) {
                fprintf(stderr, "bracket lanes: %s\n", msg);
                return BK_EXIT_USAGE;
            }
            *(c == 'p' ? &tp : c == 'e' ? &ep : &cpu) = (int)v;
            break;
        case 't': file = optarg; break;
        case 'x': xml = optarg; break;
        case 'P':
            if (!strcmp(optarg, "disjoint"))
                policy = BK_LANES_DISJOINT;
            else if (!strcmp(optarg, "shared"))
                policy = BK_LANES_SHARED;
            else {
                fprintf(stderr, "bracket lanes: --policy: \"%s\" is not disjoint or shared\n", optarg);
                return BK_EXIT_USAGE;
            }
            break;
        case 'h': lanes_usage(stdout); return BK_EXIT_PASS;
        default:
            bk_cli_opt_error(c, argv, opts, msg, sizeof msg);
            fprintf(stderr, "bracket lanes: %s\n", msg);
            return BK_EXIT_USAGE;
        }
    }
    if (optind < argc || tp == 0 || (file && xml)) {
        if (optind < argc)
            fprintf(stderr, "bracket lanes: unexpected argument '%s'\n", argv[optind]);
        else
            fprintf(stderr, "bracket lanes: %s\n", tp == 0 ? "--tp is required"
                                                          : "--topology and --hwloc-xml "
                                                            "exclude each other");
        fprintf(stderr, "(bracket lanes --help: the whole usage)\n");
        return BK_EXIT_USAGE;
    }
    if (tp * ep > BK_LANE_MAX) { /* each <= BK_LANE_MAX: the product cannot overflow */
        fprintf(stderr, "bracket lanes: --tp %d x --ep %d = %d exceeds %d ranks a lane (tp x ep "
                "must be in 1..%d)\n", tp, ep, tp * ep, BK_LANE_MAX, BK_LANE_MAX);
        return BK_EXIT_USAGE;
    }
    bk_status st = get_topology(file, xml, 0, 0, &t, &err);
    if (st == BK_OK)
        st = cpu ? cpu_places(t, cpu, &pl, &err) : bk_places_one_per_gpu(t, &pl, &nranks, &err);
    if (st == BK_ERR_INPUT && !cpu && t && bk_topo_ngpus(t) == 0) { /* say what would work */
        size_t len = strlen(err.msg);
        snprintf(err.msg + len, sizeof err.msg - len, " (lanes of CPU slots, as the cpu backend "
                 "runs them: --cpu-slots N%s)",
                 file || xml ? "" : "; another machine's GPUs: --topology FILE");
    }
    if (cpu)
        nranks = cpu;
    pick = calloc(1, sizeof *pick);
    if (st == BK_OK && !pick)
        st = BK_FAIL(&err, BK_ERR_SYSTEM, "out of memory");
    if (st == BK_OK) {
        printf("topology %s (%s): %d host(s), %d %s\n", t->source, t->digest, t->nhosts, nranks,
               cpu ? (nranks == 1 ? "CPU slot" : "CPU slots") : (nranks == 1 ? "GPU" : "GPUs"));
        printf("lane size %d (TP %d x EP %d), policy %s\n\n", tp * ep, tp, ep,
               policy == BK_LANES_SHARED ? "shared" : "disjoint");
        st = bk_lanes_choose(t, tp * ep, nranks, pl, policy, pick, &err);
        if (pick->baseline_sig[0]) {
            print_lane(st == BK_OK ? "baseline" : "closest", t, pl, pick->baseline, pick->size,
                       pick->baseline_sig);
            print_lane(st == BK_OK ? "candidate" : "vs", t, pl, pick->candidate, pick->size,
                       pick->candidate_sig);
        }
        printf("%s: %s\n", st == BK_OK ? "chosen" : "refused", pick->why[0] ? pick->why : err.msg);
        int a = -1, b = -1;
        if (st == BK_OK && !bk_lane_one_host(pl, pick->baseline, pick->size, &a, &b))
            printf("note: each lane spans hosts; `bracket run` takes such lanes only on the cuda "
                   "backend with variants that need no peer memory (NCCL: nccl_then_rmsnorm, "
                   "the MoE variants); the cpu backend and the IPC variants need each lane on "
                   "one host\n");
        if (pick->nalts > 0)
            printf("\nother signatures among %d natural lanes:\n", pick->nlanes);
        for (int i = 0; i < pick->nalts; i++) {
            printf("  %-60s x%d  e.g. ranks [", pick->alts[i].signature, pick->alts[i].count);
            for (int k = 0; k < pick->alts[i].size; k++)
                printf("%s%d", k ? "," : "", pick->alts[i].ranks[k]);
            printf("]\n");
        }
        if (st != BK_OK)
            goto out; /* the refusal and its reason are printed above */
    }
    if (st != BK_OK)
        report("lanes", &err);
out:
    free(pick);
    free(pl);
    bk_topo_free(t);
    return exit_of(st);
}
