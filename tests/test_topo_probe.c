/* test_topo_probe.c - probing this machine (no GPU needed), hwloc XML and
 * synthetic topologies, PCIe path classes, and the topo/lanes commands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/cli.h"
#include "runner/record_io.h"
#include "topology/topology.h"

static const char *fx(const char *name)
{
    static char path[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/tests/fixtures/topo/%s", BK_SOURCE_DIR, name);
    return path[k];
}

static void test_probe_this_machine(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe(&t, &err) != BK_OK)
        fail_msg("probe failed: %s", err.msg);
    const bk_topo_host *h = &t->hosts[0];
    assert_int_equal(t->nhosts, 1);
    assert_true(h->pus >= 1 && h->cores >= 1 && h->nnuma >= 1);
    assert_true(h->seen & BK_SEEN_HWLOC);
    assert_true(h->hostname[0] != '\0');
    assert_non_null(strstr(t->digest, "fnv1a64:"));
    int said_nvml = !!(h->seen & BK_SEEN_NVML), said_cuda = !!(h->seen & BK_SEEN_CUDA);
    for (int i = 0; i < h->nnotes; i++) {
        said_nvml |= strstr(h->notes[i], "NVML") != NULL;
        said_cuda |= strstr(h->notes[i], "CUDA") != NULL;
    }
    assert_true(said_nvml); /* saw NVML, or says why not */
    assert_true(said_cuda);
    /* the digest covers what NVML and CUDA added (notes included) */
    char digest[sizeof t->digest];
    memcpy(digest, t->digest, sizeof digest);
    free(bk_topo_dump(t));
    assert_string_equal(digest, t->digest);
    /* the probe survives its own snapshot */
    char *text = bk_topo_dump(t);
    bk_topo *u = NULL;
    assert_int_equal(bk_topo_parse(text, "probe.json", &u, &err), BK_OK);
    assert_string_equal(u->digest, t->digest);
    free(text);
    bk_topo_free(u);
    bk_topo_free(t);
}

static void test_xml_pci_classes(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_xml(fx("pcie_2s.xml"), &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    const bk_topo_host *h = &t->hosts[0];
    assert_string_equal(h->hostname, "pcie-xml");
    assert_int_equal(h->packages, 2);
    assert_int_equal(h->nnuma, 2);
    assert_int_equal(h->ngpus, 8);
    assert_int_equal(h->nnics, 2);
    assert_string_equal(h->gpus[0].bus_id, "0000:02:00.0");
    assert_int_equal(h->links[0][0].cls, BK_LINK_SELF);
    assert_int_equal(h->links[0][1].cls, BK_LINK_PIX);  /* one switch */
    assert_int_equal(h->links[0][2].cls, BK_LINK_NODE); /* two host bridges, one socket */
    assert_int_equal(h->links[0][4].cls, BK_LINK_SYS);  /* across sockets */
    assert_int_equal(h->links[4][6].cls, BK_LINK_PXB);  /* two switches under one bridge */
    assert_int_equal(h->links[6][4].cls, BK_LINK_PXB);
    assert_int_equal(h->gpus[0].numa, 0);
    assert_int_equal(h->gpus[5].numa, 1);
    assert_string_equal(h->nics[0].name, "mlx5_0");
    assert_string_equal(h->nics[0].kind, "ib");
    assert_string_equal(h->nics[1].name, "eth0");
    assert_string_equal(h->nics[1].kind, "eth");
    assert_int_equal(h->gpu_nic[2][0], BK_LINK_PIX);
    assert_int_equal(h->gpu_nic[0][0], BK_LINK_NODE);
    assert_int_equal(h->gpu_nic[4][1], BK_LINK_PHB);
    assert_int_equal(h->gpu_nic[4][0], BK_LINK_SYS);
    assert_int_equal(h->gpus[2].nic, 0);
    assert_int_equal(h->gpus[7].nic, 1);
    bk_topo_free(t);
}

static void test_synthetic_cpu_side(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_probe_synthetic("pack:2 numa:1 core:3 pu:2", &t, &err), BK_OK);
    const bk_topo_host *h = &t->hosts[0];
    assert_int_equal(h->packages, 2);
    assert_int_equal(h->nnuma, 2);
    assert_int_equal(h->cores, 6);
    assert_int_equal(h->pus, 12);
    assert_int_equal(h->ngpus, 0);
    assert_string_equal(bk_topo_numa_cpus(h, 1), "6-11");
    assert_non_null(strstr(h->notes[0], "no PCI device"));
    bk_topo_free(t);
    /* a memory-only NUMA node (HBM, CXL) beside the package's own: hwloc gives both the
     * package's CPUs; the probe's snapshot, read back in the child's answer, takes that */
    if (bk_topo_probe_synthetic("pack:1 [numa] [numa] core:2 pu:1", &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(t->hosts[0].nnuma, 2);
    assert_string_equal(bk_topo_numa_cpus(&t->hosts[0], 0), "0-1");
    assert_string_equal(bk_topo_numa_cpus(&t->hosts[0], 1), "0-1");
    bk_topo_free(t);
    bk_err e2 = { 0 };
    assert_int_equal(bk_topo_probe_synthetic("pack:banana", &t, &e2), BK_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "pack:banana"));
    bk_err e3 = { 0 };
    assert_int_equal(bk_topo_probe_xml("/nonexistent.xml", &t, &e3), BK_ERR_INPUT);
    assert_string_equal(e3.msg, "/nonexistent.xml: cannot read: No such file or directory");
    /* a device or a folder is refused before hwloc opens it (/dev/zero was read for 60 s) */
    bk_err e4 = { 0 };
    assert_int_equal(bk_topo_probe_xml("/dev/zero", &t, &e4), BK_ERR_INPUT);
    assert_string_equal(e4.msg, "/dev/zero: cannot read: not a regular file or a pipe");
    bk_err e5 = { 0 };
    assert_int_equal(bk_topo_probe_xml("/tmp", &t, &e5), BK_ERR_INPUT);
    assert_string_equal(e5.msg, "/tmp: cannot read: Is a directory");
}

/* A synthetic host of `per` PUs a package, numbered across the two packages in turn (0, 2, 4
 * ... on the first, 1, 3, 5 ... on the second, as some two-socket servers number them), into
 * desc; the first NUMA node's list, hwloc's way, into list. */
static void interleaved(int per, char *desc, size_t dn, char *list, size_t ln)
{
    size_t d = (size_t)snprintf(desc, dn, "pack:2 numa:1 core:%d pu:1(indexes=", per), l = 0;
    for (int k = 0; k < 2 * per; k++) {
        const int cpu = k < per ? 2 * k : 2 * (k - per) + 1;
        d += (size_t)snprintf(desc + d, dn - d, "%s%d", k ? "," : "", cpu);
        if (k < per)
            l += (size_t)snprintf(list + l, ln - l, "%s%d", k ? "," : "", cpu);
    }
    snprintf(desc + d, dn - d, ")");
    assert_true(d + 1 < dn && l + 1 < ln);
}

/* A NUMA node's CPU list is kept whole however long: 512 CPUs numbered in turn across the
 * sockets give a list of about 2000 characters, cut at 255 before (a snapshot the loader then
 * refused, a gather that failed on such machines). A host whose lists together pass
 * BK_TOPO_CPU_TEXT is refused by the probe, never cut. */
static void test_long_cpu_lists(void **state)
{
    (void)state;
    static char desc[65536], list[32768];
    interleaved(512, desc, sizeof desc, list, sizeof list);
    assert_true(strlen(list) > 1900);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_synthetic(desc, &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(t->hosts[0].nnuma, 2);
    assert_string_equal(bk_topo_numa_cpus(&t->hosts[0], 0), list);
    assert_int_equal(strncmp(bk_topo_numa_cpus(&t->hosts[0], 1), "1,3,5,", 6), 0);
    /* saved and read back whole */
    char *text = bk_topo_dump(t);
    bk_topo *u = NULL;
    if (bk_topo_parse(text, "long.json", &u, &err) != BK_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(bk_topo_numa_cpus(&u->hosts[0], 0), list);
    assert_string_equal(t->digest, u->digest);
    free(text);
    bk_topo_free(u);
    bk_topo_free(t);
    /* 2 x 2048 CPUs in turn: about 2 x 9800 characters, more than a host holds */
    interleaved(2048, desc, sizeof desc, list, sizeof list);
    bk_err e2 = { 0 };
    assert_int_equal(bk_topo_probe_synthetic(desc, &t, &e2), BK_ERR_UNSUPPORTED);
    if (!strstr(e2.msg, "characters) does not fit in the 16384 bytes a host's NUMA CPU lists "
                        "share"))
        fail_msg("%s", e2.msg);
}

/* Index of the GPU (or NIC) with this bus id, or -1. */
static int gpu_at(const bk_topo_host *h, const char *bus)
{
    for (int i = 0; i < h->ngpus; i++)
        if (!strcmp(h->gpus[i].bus_id, bus))
            return i;
    return -1;
}

static int nic_at(const bk_topo_host *h, const char *bus)
{
    for (int i = 0; i < h->nnics; i++)
        if (!strcmp(h->nics[i].bus_id, bus))
            return i;
    return -1;
}

/* How many of the host's notes hold `what`. */
static int has_note(const bk_topo_host *h, const char *what)
{
    int n = 0;
    for (int i = 0; i < h->nnotes; i++)
        n += strstr(h->notes[i], what) != NULL;
    return n;
}

/* pcie_odd.xml (gen_hwloc_xml.py says what is in it). */
static void test_xml_odd_cases(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_xml(fx("pcie_odd.xml"), &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    const bk_topo_host *h = &t->hosts[0];
    int outer = gpu_at(h, "0000:10:00.0"), inner = gpu_at(h, "0000:04:00.0");
    int far = gpu_at(h, "0000:40:00.0");
    assert_true(outer >= 0 && inner >= 0 && far >= 0);
    /* one bridge on one side, three on the other: PXB either way round */
    assert_int_equal(h->links[outer][inner].cls, BK_LINK_PXB);
    assert_int_equal(h->links[inner][outer].cls, BK_LINK_PXB);
    assert_int_equal(h->gpus[outer].numa, 0);
    assert_int_equal(h->gpus[far].numa, -1); /* under the machine: no single NUMA node */
    assert_int_equal(h->links[outer][far].cls, BK_LINK_SYS);
    /* 68 GPUs: 64 kept, said so, and the NIC on the bus after them still seen */
    assert_int_equal(h->ngpus, BK_TOPO_MAX_GPUS);
    /* one note however many were left out (it was one a GPU past 64: 72 GPUs filled all 8
     * notes, and the NVML and CUDA notes were lost) */
    assert_int_equal(has_note(h, "68 GPUs; the 4 past the first 64 are left out"), 1);
    assert_int_equal(has_note(h, "left out"), 1);
    assert_int_equal(h->nnics, 3);
    int ib = nic_at(h, "0000:18:00.0"), roce = nic_at(h, "0000:19:00.0");
    int eth9 = nic_at(h, "0000:f0:00.0");
    assert_true(ib >= 0 && roce >= 0 && eth9 >= 0);
    assert_string_equal(h->nics[ib].name, "mlx5_1"); /* the verbs name, not its netdev ib0 */
    assert_string_equal(h->nics[ib].kind, "ib");
    assert_string_equal(h->nics[roce].name, "ens1"); /* Ethernet: the netdev, not mlx5_2 */
    assert_string_equal(h->nics[roce].kind, "eth");
    assert_string_equal(h->nics[eth9].name, "eth9");
    assert_int_equal(h->gpu_nic[far][eth9], BK_LINK_PHB);
    assert_int_equal(h->gpu_nic[outer][ib], BK_LINK_PHB);
    assert_int_equal(h->gpu_nic[inner][eth9], BK_LINK_SYS);
    bk_topo_free(t);
}

/* NICs past the 32 a host keeps are said, once (they were dropped without a word). */
static void test_xml_many_nics(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_xml(fx("pcie_nics.xml"), &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    const bk_topo_host *h = &t->hosts[0];
    assert_int_equal(h->ngpus, 1);
    assert_int_equal(h->nnics, BK_TOPO_MAX_NICS);
    assert_string_equal(h->nics[31].name, "eth31");
    assert_int_equal(has_note(h, "40 NICs; the 8 past the first 32 are left out"), 1);
    assert_int_equal(has_note(h, "left out"), 1);
    bk_topo_free(t);
}

/* One PCI device is enough to have seen PCI. */
static void test_xml_one_pci_device(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_xml(fx("pcie_one.xml"), &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    const bk_topo_host *h = &t->hosts[0];
    assert_int_equal(h->nnics, 1);
    assert_true(h->seen & BK_SEEN_PCI);
    assert_false(has_note(h, "no PCI device"));
    bk_topo_free(t);
}

/* More NUMA nodes than a host holds: the first 64 are kept, and it says so. */
static void test_synthetic_too_many_numa(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_synthetic("pack:66 numa:1 core:1 pu:1", &t, &err) != BK_OK)
        fail_msg("%s", err.msg);
    const bk_topo_host *h = &t->hosts[0];
    assert_int_equal(h->packages, 66);
    assert_int_equal(h->nnuma, BK_TOPO_MAX_NUMA);
    assert_int_equal(h->numa[63].os_index, 63);
    assert_true(has_note(h, "more than 64 NUMA nodes"));
    bk_topo_free(t);
}

/* The boot id is the bare UUID, without the file's newline. */
static void test_host_identity(void **state)
{
    (void)state;
    char host[128], boot[64];
    bk_host_identity(host, sizeof host, boot, sizeof boot);
    assert_true(host[0] != '\0');
    if (access("/proc/sys/kernel/random/boot_id", R_OK) != 0)
        skip();
    assert_int_equal(strlen(boot), 36);
    assert_null(strpbrk(boot, "\r\n"));
}

/* text as a new file /tmp/bk_topo_xml_XXXXXX, its name into tmp (the caller removes it) */
static void xml_file(char tmp[sizeof "/tmp/bk_topo_xml_XXXXXX"], const char *text)
{
    strcpy(tmp, "/tmp/bk_topo_xml_XXXXXX");
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* An XML that hwloc reads but cannot load (a machine without a cpuset) is bad
 * input, like an unreadable one, not a system failure. */
static void test_xml_load_fails(void **state)
{
    (void)state;
    char tmp[sizeof "/tmp/bk_topo_xml_XXXXXX"];
    xml_file(tmp, "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">"
                  "<object type=\"Machine\" os_index=\"0\"/></topology>\n");
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_probe_xml(tmp, &t, &err), BK_ERR_INPUT);
    assert_non_null(strstr(err.msg, "hwloc load failed"));
    assert_null(t);
    remove(tmp);
}

/* An XML file hwloc's own importer crashes on (Debian 12's hwloc 2.9: an object with a cpuset
 * but no complete_cpuset; hwloc rejects it from its pull request 783 on): the import runs in
 * a child process, so bracket answers with an error naming the file, and goes on. Found by
 * tests/fuzz/fuzz_xml. The same file read whole afterwards: the parent is fine. */
static void test_xml_hwloc_crash(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    bk_err err = { 0 };
    assert_int_equal(bk_read_file(fx("pcie_one.xml"), &text, &len, &err), BK_OK);
    /* the first Core loses its complete_cpuset */
    static const char attr[] = " complete_cpuset=\"0x00000001\"";
    char *core = strstr(text, "<object type=\"Core\"");
    assert_non_null(core);
    char *cc = strstr(core, attr);
    assert_non_null(cc);
    memmove(cc, cc + sizeof attr - 1, strlen(cc + sizeof attr - 1) + 1);
    char tmp[sizeof "/tmp/bk_topo_xml_XXXXXX"];
    xml_file(tmp, text);
    free(text);
    bk_topo *t = NULL;
    bk_err_clear(&err);
    assert_int_equal(bk_topo_probe_xml(tmp, &t, &err), BK_ERR_INPUT);
    assert_null(t);
    assert_non_null(strstr(err.msg, tmp));
    assert_non_null(strstr(err.msg, "hwloc"));
    print_message("%s\n", err.msg);
    /* and a whole file still probes, in this same process */
    bk_err_clear(&err);
    assert_int_equal(bk_topo_probe_xml(fx("pcie_one.xml"), &t, &err), BK_OK);
    assert_int_equal(t->hosts[0].nnics, 1);
    bk_topo_free(t);
    remove(tmp);
}

/* Run a command with the NULL-terminated argument list. */
static int run(int (*cmd)(int, char **), ...)
{
    char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, cmd);
    while (argc < 15 && (argv[argc] = va_arg(ap, char *)) != NULL)
        argc++;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    return cmd(argc, argv);
}

static void test_commands(void **state)
{
    (void)state;
    char tmp[] = "/tmp/bk_topo_cmd_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(run(bk_cmd_topo, "topo", "--topology", fx("nvbridge4.json"), "--save", tmp, (char *)NULL), BK_EXIT_PASS);
    bk_topo *t = NULL;
    bk_err err = { 0 };
    assert_int_equal(bk_topo_load(tmp, &t, &err), BK_OK);
    assert_int_equal(t->hosts[0].links[0][1].nvlinks, 4);
    bk_topo_free(t);
    remove(tmp);
    assert_int_equal(run(bk_cmd_topo, "topo", "--hwloc-xml", fx("pcie_2s.xml"), "--json", (char *)NULL), BK_EXIT_PASS);
    assert_int_equal(run(bk_cmd_topo, "topo", "-t", "/nonexistent.json", (char *)NULL),
                     BK_EXIT_USAGE);
    assert_int_equal(run(bk_cmd_topo, "topo", "--bogus", (char *)NULL), BK_EXIT_USAGE);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--tp", "4", "-t", fx("hgx8_nvswitch.json"), (char *)NULL),
                     BK_EXIT_PASS);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--tp", "4", "-t", fx("pcie8_asym.json"), (char *)NULL),
                     BK_EXIT_USAGE);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--tp", "2", "--ep", "2", "-t",
                         fx("pcie8_asym.json"), (char *)NULL), BK_EXIT_USAGE);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--tp", "2", "--ep", "2", "-t",
                         fx("hgx8_nvswitch.json"), (char *)NULL), BK_EXIT_PASS);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "-t", fx("hgx8_nvswitch.json"), (char *)NULL),
                     BK_EXIT_USAGE); /* --tp missing */
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--tp", "0", (char *)NULL), BK_EXIT_USAGE);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--tp", "2", "--cpu-slots", "4", "-x",
                         fx("pcie_2s.xml"), (char *)NULL), BK_EXIT_PASS);
    assert_int_equal(run(bk_cmd_lanes, "lanes", "--help", (char *)NULL), BK_EXIT_PASS);
}

static void test_print_matrix(void **state)
{
    (void)state;
    bk_topo *t = NULL;
    bk_err err = { 0 };
    char *buf = NULL;
    size_t n = 0;
    assert_int_equal(bk_topo_load(fx("cluster2x8_ib.json"), &t, &err), BK_OK);
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    bk_topo_print(t, f);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(buf, "GPU0    X     NV18  NV18"));
    assert_non_null(strstr(buf, "NIC7  CPU Affinity     NUMA Affinity"));
    assert_non_null(strstr(buf, "PIX   NODE  NODE  NODE  SYS   SYS   SYS   SYS   0-55             0"));
    assert_non_null(strstr(buf, "nearest NIC4 (PIX)"));
    assert_non_null(strstr(buf, "host node001 boot boot-nod: same layout as node000"));
    assert_null(strstr(buf, "host node001 boot boot-node001: 2 package(s)"));
    assert_non_null(strstr(buf, "NV#  = Connection traversing a bonded set of # NVLinks"));
    free(buf);
    /* a node whose GPUs differ (here one of them) has a matrix of its own */
    snprintf(t->hosts[1].gpus[3].name, sizeof t->hosts[1].gpus[3].name, "NVIDIA A100-SXM4-80GB");
    f = open_memstream(&buf, &n);
    assert_non_null(f);
    bk_topo_print(t, f);
    assert_int_equal(fclose(f), 0);
    assert_null(strstr(buf, "same layout as"));
    assert_non_null(strstr(buf, "NVIDIA A100-SXM4-80GB"));
    free(buf);
    bk_topo_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_this_machine),
        cmocka_unit_test(test_xml_pci_classes),
        cmocka_unit_test(test_synthetic_cpu_side),
        cmocka_unit_test(test_long_cpu_lists),
        cmocka_unit_test(test_xml_many_nics),
        cmocka_unit_test(test_xml_odd_cases),
        cmocka_unit_test(test_xml_one_pci_device),
        cmocka_unit_test(test_synthetic_too_many_numa),
        cmocka_unit_test(test_host_identity),
        cmocka_unit_test(test_xml_load_fails),
        cmocka_unit_test(test_xml_hwloc_crash),
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_print_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
