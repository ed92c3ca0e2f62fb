/* topo_cpulist.c - CPU lists in hwloc's list syntax ("0-31,64-95"), checked as the probe
 * writes them, for snapshots read back from a file or another node. */
#include "topology/topology.h"

#include <stdio.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation" /* a cut-off message is acceptable */

/* One CPU number at *p (digits, no leading zero, as hwloc writes them); advances *p past
 * it. 0 on success; -1 for no number; -2 for one past BK_TOPO_MAX_CPU. */
static int cpu_number(const char **p, long *out)
{
    const char *s = *p;
    long x = 0;
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
        return -1;
    for (; *s >= '0' && *s <= '9'; s++)
        if (x <= BK_TOPO_MAX_CPU)
            x = x * 10 + (*s - '0');
    *p = s;
    *out = x;
    return x > BK_TOPO_MAX_CPU ? -2 : 0;
}

int bk__cpulist_check(const char *cpus, char *why, size_t n)
{
    const char *p = cpus;
    long last = -1;
    while (*p) {
        long lo, hi;
        const char *at = p;
        int rc = cpu_number(&p, &lo);
        hi = lo;
        if (rc == 0 && *p == '-') {
            p++;
            at = p;
            rc = cpu_number(&p, &hi);
        }
        if (rc == -2) {
            snprintf(why, n, "\"%s\": CPU %.*s is past %d, the largest CPU number a snapshot "
                     "may hold", cpus, (int)strspn(at, "0123456789"), at, BK_TOPO_MAX_CPU);
            return -1;
        }
        /* a number or a range, increasing, then the end or a comma and more */
        if (rc != 0 || hi < lo || lo <= last || (*p && (*p != ',' || !p[1]))) {
            snprintf(why, n, "\"%s\" is not a CPU list (numbers and ranges in increasing "
                     "order, as hwloc writes them: \"0-31,64-95\")", cpus);
            return -1;
        }
        last = hi;
        p += *p == ',';
    }
    return 0;
}
