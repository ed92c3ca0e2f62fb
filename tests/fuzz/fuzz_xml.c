/* fuzz_xml.c - libFuzzer: any text as the hwloc XML of `bracket topo --hwloc-xml FILE`
 * (bk_topo_probe_xml: hwloc imports it, then bracket reads GPUs, NICs, NUMA nodes and links
 * from hwloc's tree). No crash, no read out of bounds, no leak in bracket's part (ASan,
 * UBSan; hwloc's own XML parser is hwloc's, and it runs in a child process since hwloc 2.9
 * crashes on some files: topo_probe.c); a refusal says why; an accepted topology's canonical
 * text parses again to the same text and digest. Seeds: the .xml files of tests/fixtures/topo. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "topology/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[128];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_path[0])
        snprintf(g_path, sizeof g_path, "%s/topo.xml", fuzz_tmpdir("xml"));
    if (fuzz_put(g_path, data, size) != 0)
        abort();
    bk_topo *t = NULL;
    bk_err err = { 0 };
    if (bk_topo_probe_xml(g_path, &t, &err) != BK_OK) {
        if (!err.msg[0])
            abort();
        return 0;
    }
    fuzz_canon_stable(t);
    bk_topo_free(t);
    return 0;
}
