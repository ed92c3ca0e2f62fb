/* test_topo_nvml.c - the NVML pass against a fake libnvidia-ml built at test
 * time (BK_NVML_LIBRARY): NVLink bridges, NVSwitch, GPUs only NVML sees, and a
 * driver that fails to initialise. Skipped when no C compiler is at hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topology/topology.h"

/* FAKE_NVML_MODE: b = pairs (0,1) (2,3) joined by 4 NVLinks, s = 18 links each to
 * NVSwitch, i = init fails, p = no NVLink and PCIe levels MULTIPLE within a pair,
 * HOSTBRIDGE across, w = GPU d has 2d links up, to a far end of bus C0 (an NVSwitch
 * that an old driver, one without the remote device type, shows by PCI only). Four
 * GPUs. Built twice: with and without nvmlDeviceGetNvLinkRemoteDeviceType (NO_RT). */
static const char fake_src[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "typedef struct { char legacy[16]; unsigned d, b, dv, pid, sid; char busId[32]; } pci;\n"
    "static int devs[4] = {0, 1, 2, 3};\n"
    "static const char *bus[4] = {\"00000000:18:00.0\", \"00000000:2A:00.0\",\n"
    "                             \"00000000:3A:00.0\", \"00000000:5D:00.0\"};\n"
    "static int mode(void) { const char *m = getenv(\"FAKE_NVML_MODE\"); return m ? m[0] : 'b'; }\n"
    "int nvmlInit_v2(void) { return mode() == 'i' ? 9 : 0; }\n"
    "int nvmlShutdown(void) { return 0; }\n"
    "const char *nvmlErrorString(int e) { return e == 9 ? \"Driver Not Loaded\" : \"Not Found\"; }\n"
    "int nvmlDeviceGetCount_v2(unsigned *n) { *n = 4; return 0; }\n"
    "int nvmlDeviceGetHandleByIndex_v2(unsigned i, int **d) { if (i >= 4) return 2; *d = &devs[i]; return 0; }\n"
    "int nvmlDeviceGetHandleByPciBusId_v2(const char *b, int **d) {\n"
    "  unsigned x, y, z, w, X, Y, Z, W; if (sscanf(b, \"%x:%x:%x.%x\", &x, &y, &z, &w) != 4) return 2;\n"
    "  for (int i = 0; i < 4; i++) { sscanf(bus[i], \"%x:%x:%x.%x\", &X, &Y, &Z, &W);\n"
    "    if (x == X && y == Y && z == Z && w == W) { *d = &devs[i]; return 0; } }\n"
    "  return 6; }\n"
    "int nvmlDeviceGetPciInfo_v3(int *d, pci *p) { memset(p, 0, sizeof *p); strcpy(p->busId, bus[*d]); return 0; }\n"
    "int nvmlDeviceGetUUID(int *d, char *b, unsigned n) { snprintf(b, n, \"GPU-fake-%d\", *d); return 0; }\n"
    "int nvmlDeviceGetName(int *d, char *b, unsigned n) { (void)d; snprintf(b, n, \"Fake H200\"); return 0; }\n"
    "int nvmlDeviceGetNvLinkState(int *d, unsigned l, int *on) { (void)d; if (l >= 18) return 2;\n"
    "  *on = mode() == 's' ? 1 : mode() == 'p' ? 0 : mode() == 'w' ? (int)l < 2 * *d : l < 4; return 0; }\n"
    "#ifndef NO_RT\n"
    "int nvmlDeviceGetNvLinkRemoteDeviceType(int *d, unsigned l, int *t) { (void)d; (void)l;\n"
    "  *t = mode() == 's' ? 2 : 0; return 0; }\n"
    "#endif\n"
    "int nvmlDeviceGetNvLinkRemotePciInfo_v2(int *d, unsigned l, pci *p) { (void)l;\n"
    "  memset(p, 0, sizeof *p); strcpy(p->busId, mode() == 'w' ? \"00000000:C0:00.0\" : bus[*d ^ 1]);\n"
    "  return 0; }\n"
    "int nvmlDeviceGetTopologyCommonAncestor(int *a, int *b, int *lvl) { int same = *a / 2 == *b / 2;\n"
    "  *lvl = mode() == 'p' ? (same ? 20 : 30) : same ? 10 : 40; return 0; }\n";

static char libpath[256], oldpath[300];
static char dir[] = "/tmp/bk_fake_nvml_XXXXXX"; /* removed with its three files at teardown */
static char src[300];

static int setup(void **state)
{
    (void)state;
    char cmd[2048];
    if (!mkdtemp(dir))
        return -1;
    snprintf(src, sizeof src, "%s/fake.c", dir);
    snprintf(libpath, sizeof libpath, "%s/libnvidia-ml.so.1", dir);
    FILE *f = fopen(src, "w");
    if (!f)
        return -1;
    fputs(fake_src, f);
    fclose(f);
    snprintf(oldpath, sizeof oldpath, "%s/old/libnvidia-ml.so.1", dir);
    if (system("command -v cc >/dev/null 2>&1") != 0) {
        /* the tests that need the library skip; the reason is said once, here */
        print_message("SKIPPED: no cc on PATH to build the fake libnvidia-ml.so.1\n");
        libpath[0] = '\0';
    } else {
        /* a compiler that is there and fails is the test's failure (cmocka runs the group
         * teardown after a failed setup too: it removes the folder) */
        snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o %s %s && mkdir %s/old && "
                 "cc -DNO_RT -shared -fPIC -o %s %s", libpath, src, dir, oldpath, src);
        if (system(cmd) != 0)
            return -1;
    }
    setenv("BK_NVML_LIBRARY", libpath, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("BK_NVML_LIBRARY");
    unlink(src);
    if (libpath[0])
        unlink(libpath);
    unlink(oldpath);
    char old[300];
    snprintf(old, sizeof old, "%s/old", dir);
    rmdir(old);
    return rmdir(dir) == 0 ? 0 : -1;
}

/* n GPUs as hwloc would leave them, their bus ids still to set: no NUMA, NIC or CUDA index
 * known, PCIe (SYS) links only. */
static void hwloc_gpus(bk_topo_host *h, int n)
{
    memset(h, 0, sizeof *h);
    h->ngpus = n;
    for (int i = 0; i < n; i++) {
        h->gpus[i].numa = h->gpus[i].nic = h->gpus[i].cuda_index = -1;
        for (int j = 0; j < n; j++)
            h->links[i][j].cls = i == j ? BK_LINK_SELF : BK_LINK_SYS;
    }
}

/* A host as hwloc would leave it: four GPUs, PCIe links only. */
static void pcie_host(bk_topo_host *h)
{
    static const char *const bus[] = { "0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                       "0000:5d:00.0" };
    hwloc_gpus(h, 4);
    for (int i = 0; i < 4; i++)
        bk_strlcpy(h->gpus[i].bus_id, bus[i], sizeof h->gpus[i].bus_id);
}

static void test_bridges(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    pcie_host(h);
    setenv("FAKE_NVML_MODE", "b", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_true(h->seen & BK_SEEN_NVML);
    assert_int_equal(h->links[0][1].cls, BK_LINK_NV);
    assert_int_equal(h->links[0][1].nvlinks, 4);
    assert_int_equal(h->links[3][2].nvlinks, 4);
    assert_int_equal(h->links[0][2].cls, BK_LINK_SYS); /* no NVLink: PCIe class kept */
    assert_false(h->nvswitch);
    assert_string_equal(h->gpus[2].uuid, "GPU-fake-2");
    assert_string_equal(h->gpus[2].name, "Fake H200");
    assert_int_equal(h->nnotes, 0);
    free(h);
}

static void test_nvswitch(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    pcie_host(h);
    setenv("FAKE_NVML_MODE", "s", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_true(h->nvswitch);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            if (i != j) {
                assert_int_equal(h->links[i][j].cls, BK_LINK_NV);
                assert_int_equal(h->links[i][j].nvlinks, 18);
            }
    free(h);
}

static void test_gpus_only_nvml_sees(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    setenv("FAKE_NVML_MODE", "b", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK); /* hwloc saw none */
    assert_int_equal(h->ngpus, 4);
    assert_string_equal(h->gpus[1].bus_id, "0000:2a:00.0");
    assert_int_equal(h->links[0][1].nvlinks, 4);
    assert_int_equal(h->links[0][2].cls, BK_LINK_NODE); /* from NVML's common ancestor */
    assert_int_equal(h->links[1][1].cls, BK_LINK_SELF);
    assert_non_null(strstr(h->notes[0], "hwloc did not see 4 GPU(s)"));
    free(h);
}

static void test_init_fails_and_missing_library(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    pcie_host(h);
    setenv("FAKE_NVML_MODE", "i", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_false(h->seen & BK_SEEN_NVML);
    assert_non_null(strstr(h->notes[0], "NVML: init failed: Driver Not Loaded"));
    assert_int_equal(h->links[0][1].cls, BK_LINK_SYS);
    pcie_host(h);
    setenv("BK_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_non_null(strstr(h->notes[0], "/nonexistent/libnvidia-ml.so.1 not found"));
    /* there, but no library: dlopen's reason, not "not found" */
    pcie_host(h);
    setenv("BK_NVML_LIBRARY", src, 1); /* the fake's C source */
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    if (!strstr(h->notes[0], "cannot be loaded (") || strstr(h->notes[0], "not found"))
        fail_msg("%s", h->notes[0]);
    setenv("BK_NVML_LIBRARY", libpath, 1);
    free(h);
}

/* GPUs only NVML sees get their PCIe class from NVML's common ancestor level, and
 * unknown NUMA node, NIC and CUDA index; the classes hwloc found stay. */
static void test_added_gpus_levels(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    pcie_host(h);
    bk_strlcpy(h->gpus[1].bus_id, "0000:3a:00.0", sizeof h->gpus[1].bus_id); /* NVML's 2 */
    h->ngpus = 2;
    h->gpus[0].numa = h->gpus[1].numa = 0;
    memset(h->links, 0, sizeof h->links);
    h->links[0][0].cls = h->links[1][1].cls = BK_LINK_SELF;
    h->links[0][1].cls = h->links[1][0].cls = BK_LINK_PIX; /* hwloc's, not NVML's */
    setenv("FAKE_NVML_MODE", "p", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_int_equal(h->ngpus, 4);
    assert_string_equal(h->gpus[2].bus_id, "0000:2a:00.0");
    assert_string_equal(h->gpus[3].bus_id, "0000:5d:00.0");
    assert_int_equal(h->links[0][1].cls, BK_LINK_PIX);
    assert_int_equal(h->links[1][0].cls, BK_LINK_PIX);
    assert_int_equal(h->links[0][2].cls, BK_LINK_PXB); /* NVML 0 and 1: MULTIPLE */
    assert_int_equal(h->links[1][3].cls, BK_LINK_PXB); /* NVML 2 and 3 */
    assert_int_equal(h->links[0][3].cls, BK_LINK_PHB); /* across: HOSTBRIDGE */
    assert_int_equal(h->links[2][1].cls, BK_LINK_PHB);
    assert_int_equal(h->links[2][2].cls, BK_LINK_SELF);
    for (int i = 2; i < 4; i++) {
        assert_int_equal(h->gpus[i].numa, -1);
        assert_int_equal(h->gpus[i].nic, -1);
        assert_int_equal(h->gpus[i].cuda_index, -1);
    }
    assert_int_equal(h->gpus[0].numa, 0);
    free(h);
}

/* A host nearly full: NVML's extra GPUs are not added past BK_TOPO_MAX_GPUS. */
static void test_added_gpus_full_host(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    hwloc_gpus(h, BK_TOPO_MAX_GPUS - 1); /* none of them on NVML's buses */
    for (int i = 0; i < h->ngpus; i++)
        snprintf(h->gpus[i].bus_id, sizeof h->gpus[i].bus_id, "0000:%02x:00.0", 0x80 + i);
    setenv("FAKE_NVML_MODE", "b", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_int_equal(h->ngpus, BK_TOPO_MAX_GPUS);
    assert_string_equal(h->gpus[BK_TOPO_MAX_GPUS - 1].bus_id, "0000:18:00.0");
    /* NVML has no handle for the GPUs hwloc saw: their class to the new one is not
     * asked of NVML (the fake, like a strict driver, would crash on a NULL handle) */
    assert_int_equal(h->links[0][BK_TOPO_MAX_GPUS - 1].cls, BK_LINK_SYS);
    assert_int_equal(h->links[BK_TOPO_MAX_GPUS - 1][0].cls, BK_LINK_SYS);
    free(h);
}

/* An old driver (no remote device type) shows the NVSwitch as a far end of a bus
 * that is no GPU: the GPUs reach each other over it with as many links as the
 * poorer of the two has. */
static void test_nvswitch_by_pci(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    pcie_host(h);
    setenv("BK_NVML_LIBRARY", oldpath, 1);
    setenv("FAKE_NVML_MODE", "w", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    setenv("BK_NVML_LIBRARY", libpath, 1);
    assert_int_equal(h->nnotes, 0);
    assert_true(h->seen & BK_SEEN_NVML);
    assert_true(h->nvswitch);
    assert_int_equal(h->links[0][1].cls, BK_LINK_SYS); /* GPU 0 has no link up */
    assert_int_equal(h->links[1][0].cls, BK_LINK_SYS);
    assert_int_equal(h->links[1][2].cls, BK_LINK_NV);
    assert_int_equal(h->links[1][2].nvlinks, 2);
    assert_int_equal(h->links[2][1].nvlinks, 2);
    assert_int_equal(h->links[3][2].nvlinks, 4);
    assert_int_equal(h->links[2][3].nvlinks, 4);
    free(h);
}

/* The library is closed again, and an empty BK_NVML_LIBRARY means the default one. */
static void test_library_closed_and_default(void **state)
{
    (void)state;
    if (!libpath[0])
        skip();
    bk_topo_host *h = calloc(1, sizeof *h);
    bk_err err = { 0 };
    char line[1024];
    pcie_host(h);
    setenv("FAKE_NVML_MODE", "b", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    assert_true(h->seen & BK_SEEN_NVML);
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps) {
        while (fgets(line, sizeof line, maps))
            if (strstr(line, dir))
                fail_msg("the fake NVML is still mapped: %s", line);
        fclose(maps);
    }
    pcie_host(h);
    setenv("BK_NVML_LIBRARY", "", 1);
    assert_int_equal(bk_topo_probe_nvml(h, &err), BK_OK);
    setenv("BK_NVML_LIBRARY", libpath, 1);
    for (int i = 0; i < h->nnotes; i++)
        if (strstr(h->notes[i], "NVML:") && !strstr(h->notes[i], "libnvidia-ml.so.1") &&
            !strstr(h->notes[i], "init failed") && !strstr(h->notes[i], "GPU 0000"))
            fail_msg("empty BK_NVML_LIBRARY did not mean libnvidia-ml.so.1: %s", h->notes[i]);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bridges),
        cmocka_unit_test(test_nvswitch),
        cmocka_unit_test(test_gpus_only_nvml_sees),
        cmocka_unit_test(test_init_fails_and_missing_library),
        cmocka_unit_test(test_added_gpus_levels),
        cmocka_unit_test(test_added_gpus_full_host),
        cmocka_unit_test(test_nvswitch_by_pci),
        cmocka_unit_test(test_library_closed_and_default),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    /* cmocka prints a failed group teardown but does not count it: check its work here */
    if (access(dir, F_OK) == 0) {
        fprintf(stderr, "teardown left %s behind\n", dir);
        return 1;
    }
    return failed;
}
