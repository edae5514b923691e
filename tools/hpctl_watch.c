/*
 * hpctl watch [PID]: huge-page use of one process (smaps_rollup, faults
 * from /proc/PID/stat) or of the machine (/proc/meminfo, /proc/vmstat),
 * plus the mTHP folios of every size (the per-size stats counters are
 * machine-wide: Documentation/admin-guide/mm/transhuge.rst, "Monitoring
 * usage"), one line per interval. Per NUMA node: the process's pages from
 * /proc/PID/numa_maps (Documentation/filesystems/proc.rst, "numa_maps"),
 * or the machine's from /sys/devices/system/node/nodeN/meminfo.
 */
#include "hpctl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 32
#define MAX_NODES 1024   /* Linux's largest MAX_NUMNODES */

struct sample {
    int ok;
    long long rss_kb, anon_huge_kb, hugetlb_kb, shmem_pmd_kb, file_pmd_kb;
    long long faults, major_faults;      /* cumulative */
    long long thp_fault_alloc, thp_fault_fallback;   /* machine: /proc/vmstat */
    long long hugetlb_total, hugetlb_free;           /* machine: default-size pool */
    int n_sizes;
    unsigned long kb[MAX_SIZES];
    long long nr_anon[MAX_SIZES], fault_alloc[MAX_SIZES];
    /* Per node, nodes[0..n_nodes): with a PID, resident kB outside and in
     * hugetlb mappings (numa_ok: numa_maps was read); without, the node's
     * AnonHugePages kB and default-size pool. -1: not known. */
    int n_nodes, numa_ok;
    int nodes[MAX_NODES];
    long long node_rss_kb[MAX_NODES], node_hugetlb_kb[MAX_NODES];
    long long node_anon_huge_kb[MAX_NODES], node_pool_total[MAX_NODES], node_pool_free[MAX_NODES];
};

/* "Name:   123 kB" lines of a /proc file, several names at once. */
static void scan_fields(const char *path, const char *const names[], long long *vals[], int n,
                        char sep)
{
    char full[512], line[256];
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    for (int i = 0; i < n; i++)
        *vals[i] = -1;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f))
        for (int i = 0; i < n; i++) {
            size_t len = strlen(names[i]);
            if (!strncmp(line, names[i], len) && line[len] == sep) {
                *vals[i] = strtoll(line + len + 1, NULL, 10);
                break;
            }
        }
    fclose(f);
}

/* minflt (field 10) and majflt (field 12) of /proc/PID/stat; the command
 * name (field 2) may hold spaces and parentheses, so count from the last ')'. */
static int read_faults(int pid, long long *minflt, long long *majflt)
{
    char path[64], full[512], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long mi, ma;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %llu", &mi, &ma) != 2)
        return -1;
    *minflt = (long long)mi;
    *majflt = (long long)ma;
    return 0;
}

/* Index of node in s->nodes, added (in order) if missing; -1 if full. */
static int node_slot(struct sample *s, int node)
{
    int i = 0;
    while (i < s->n_nodes && s->nodes[i] < node)
        i++;
    if (i < s->n_nodes && s->nodes[i] == node)
        return i;
    if (s->n_nodes == MAX_NODES)
        return -1;
    memmove(&s->nodes[i + 1], &s->nodes[i], (size_t)(s->n_nodes - i) * sizeof(s->nodes[0]));
    memmove(&s->node_rss_kb[i + 1], &s->node_rss_kb[i],
            (size_t)(s->n_nodes - i) * sizeof(s->node_rss_kb[0]));
    memmove(&s->node_hugetlb_kb[i + 1], &s->node_hugetlb_kb[i],
            (size_t)(s->n_nodes - i) * sizeof(s->node_hugetlb_kb[0]));
    s->nodes[i] = node;
    s->node_rss_kb[i] = s->node_hugetlb_kb[i] = 0;
    s->n_nodes++;
    return i;
}

/* The pages of each node in /proc/PID/numa_maps: per mapping, "N<node>=<pages>"
 * counts pages of kernelpagesize_kB (show_numa_map in fs/proc/task_mmu.c).
 * A hugetlb mapping's page size is its huge page size and each of its huge
 * pages counts 1; any other mapping counts base pages, a THP or mTHP folio
 * as many base pages as it holds, so numa_maps cannot tell those apart from
 * base pages. A file name cannot fake a token: numa_maps escapes '='. */
static int read_numa_maps(int pid, struct sample *s)
{
    char path[64], full[512];
    snprintf(path, sizeof(path), "/proc/%d/numa_maps", pid);
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    if (!f)
        return -1;
    long base_kb = sysconf(_SC_PAGESIZE) / 1024;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        const char *k = strstr(line, " kernelpagesize_kB=");
        long long page_kb = k ? strtoll(k + 19, NULL, 10) : base_kb;
        int hugetlb = page_kb > base_kb;
        for (const char *p = strstr(line, " N"); p; p = strstr(p + 1, " N")) {
            char *end;
            long node = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != '=' || node < 0 || node >= MAX_NODES)
                continue;
            long long pages = strtoll(end + 1, NULL, 10);
            int i = node_slot(s, (int)node);
            if (i < 0 || pages <= 0)
                continue;
            if (hugetlb)
                s->node_hugetlb_kb[i] += pages * page_kb;
            else
                s->node_rss_kb[i] += pages * page_kb;
        }
    }
    free(line);
    fclose(f);
    return 0;
}

/* "Node N Name:  123 kB" lines of NODE_DIR/nodeN/meminfo. */
static void read_node_meminfo(struct sample *s, int i)
{
    static const char *const names[] = {"AnonHugePages", "HugePages_Total", "HugePages_Free"};
    long long *vals[] = {&s->node_anon_huge_kb[i], &s->node_pool_total[i], &s->node_pool_free[i]};
    char path[64], full[512], line[256], name[64];
    for (int k = 0; k < 3; k++)
        *vals[k] = -1;
    snprintf(path, sizeof(path), NODE_DIR "/node%d/meminfo", s->nodes[i]);
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        int node;
        long long v;
        if (sscanf(line, "Node %d %63[^:]: %lld", &node, name, &v) != 3 || node != s->nodes[i])
            continue;
        for (int k = 0; k < 3; k++)
            if (!strcmp(name, names[k]))
                *vals[k] = v;
    }
    fclose(f);
}

static void take(int pid, struct sample *s)
{
    memset(s, 0, sizeof(*s));
    static const char *const mem[] = {"AnonHugePages", "ShmemPmdMapped", "FilePmdMapped",
                                      "HugePages_Total", "HugePages_Free", "Hugetlb"};
    long long *memv[] = {&s->anon_huge_kb, &s->shmem_pmd_kb, &s->file_pmd_kb, &s->hugetlb_total,
                         &s->hugetlb_free, &s->hugetlb_kb};
    scan_fields("/proc/meminfo", mem, memv, 6, ':');
    static const char *const vm[] = {"thp_fault_alloc", "thp_fault_fallback", "pgfault",
                                     "pgmajfault"};
    long long *vmv[] = {&s->thp_fault_alloc, &s->thp_fault_fallback, &s->faults,
                        &s->major_faults};
    scan_fields("/proc/vmstat", vm, vmv, 4, ' ');
    s->ok = 1;
    if (pid > 0) {
        char path[64];
        long long shared, priv;
        static const char *const roll[] = {"Rss", "AnonHugePages", "ShmemPmdMapped",
                                           "FilePmdMapped", "Shared_Hugetlb", "Private_Hugetlb"};
        long long *rollv[] = {&s->rss_kb, &s->anon_huge_kb, &s->shmem_pmd_kb, &s->file_pmd_kb,
                              &shared, &priv};
        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
        scan_fields(path, roll, rollv, 6, ':');
        /* 1 GiB private hugetlb pages may be counted as shared: sum both. */
        s->hugetlb_kb = (shared > 0 ? shared : 0) + (priv > 0 ? priv : 0);
        s->ok = s->rss_kb >= 0 && read_faults(pid, &s->faults, &s->major_faults) == 0;
    }
    /* Every node of the machine, with 0 for those the process has no page on. */
    int all[MAX_NODES];
    int n_all = hpctl_list_nodes(all, MAX_NODES, NULL);
    for (int i = 0; i < n_all; i++)
        node_slot(s, all[i]);
    if (pid > 0)
        s->numa_ok = read_numa_maps(pid, s) == 0;
    else
        for (int i = 0; i < s->n_nodes; i++)
            read_node_meminfo(s, i);
    s->n_sizes = size_dirs(THP_DIR, s->kb, MAX_SIZES);
    for (int i = 0; i < s->n_sizes; i++) {
        char path[256];
        uint64_t v;
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/stats/nr_anon", s->kb[i]);
        s->nr_anon[i] = read_u64(path, &v) == 0 ? (long long)v : -1;
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/stats/anon_fault_alloc", s->kb[i]);
        s->fault_alloc[i] = read_u64(path, &v) == 0 ? (long long)v : -1;
    }
}

static long long delta(long long now, long long before)
{
    return now >= 0 && before >= 0 && now >= before ? now - before : -1;
}

static void print_nodes_json(int pid, const struct sample *s)
{
    printf(", \"nodes\": ");
    if (pid > 0 && !s->numa_ok) {
        printf("null");
        return;
    }
    printf("[");
    for (int i = 0; i < s->n_nodes; i++) {
        printf("%s{\"node\": %d, ", i ? ", " : "", s->nodes[i]);
        if (pid > 0)
            printf("\"rss_kb\": %lld, \"hugetlb_kb\": %lld}", s->node_rss_kb[i],
                   s->node_hugetlb_kb[i]);
        else
            printf("\"anon_huge_kb\": %lld, \"hugetlb_pool_total\": %lld, "
                   "\"hugetlb_pool_free\": %lld}", s->node_anon_huge_kb[i], s->node_pool_total[i],
                   s->node_pool_free[i]);
    }
    printf("]");
}

static void print_json(int pid, double t, const struct sample *s, const struct sample *prev)
{
    printf("{\"schema\": %d, \"command\": \"watch\", \"pid\": ", HPCTL_SCHEMA);
    pid > 0 ? printf("%d", pid) : printf("null");
    printf(", \"t\": %.3f, \"anon_huge_kb\": %lld, \"hugetlb_kb\": %lld, \"shmem_pmd_kb\": %lld, "
           "\"file_pmd_kb\": %lld, \"faults\": %lld, \"major_faults\": %lld, \"faults_delta\": %lld",
           t, s->anon_huge_kb, s->hugetlb_kb, s->shmem_pmd_kb, s->file_pmd_kb, s->faults,
           s->major_faults, prev ? delta(s->faults, prev->faults) : -1);
    if (pid > 0)
        printf(", \"rss_kb\": %lld", s->rss_kb);
    else
        printf(", \"hugetlb_pool_total\": %lld, \"hugetlb_pool_free\": %lld, "
               "\"thp_fault_alloc\": %lld, \"thp_fault_fallback\": %lld",
               s->hugetlb_total, s->hugetlb_free, s->thp_fault_alloc, s->thp_fault_fallback);
    print_nodes_json(pid, s);
    printf(", \"mthp\": [");
    for (int i = 0; i < s->n_sizes; i++) {
        long long d = -1;
        for (int j = 0; prev && j < prev->n_sizes; j++)
            if (prev->kb[j] == s->kb[i])
                d = delta(s->fault_alloc[i], prev->fault_alloc[j]);
        printf("%s{\"page_size\": %llu, \"nr_anon\": %lld, \"anon_fault_alloc\": %lld, "
               "\"anon_fault_alloc_delta\": %lld}", i ? ", " : "",
               (unsigned long long)s->kb[i] << 10, s->nr_anon[i], s->fault_alloc[i], d);
    }
    printf("]}\n");
}

static void print_text(int pid, double t, const struct sample *s, const struct sample *prev,
                       unsigned line)
{
    if (line % 20 == 0)
        printf("%8s %10s %12s %12s %10s  %s  %s\n", "TIME", pid > 0 ? "RSS_KB" : "POOL_FREE",
               "ANONHUGE_KB", "HUGETLB_KB", "NEW_FAULTS",
               pid > 0 ? "PER NODE (rss/hugetlb kB)" : "PER NODE (anonhuge kB/pool free)",
               "MTHP FOLIOS (nr_anon, machine-wide)");
    /* NEW_FAULTS counts since the previous line: the first line has none
     * ("-"), as its JSON has faults_delta -1. */
    long long d = prev ? delta(s->faults, prev->faults) : -1;
    char faults[24];
    snprintf(faults, sizeof(faults), d >= 0 ? "%lld" : prev ? "?" : "-", d);
    printf("%8.1f %10lld %12lld %12lld %10s ", t, pid > 0 ? s->rss_kb : s->hugetlb_free,
           s->anon_huge_kb, s->hugetlb_kb, faults);
    if ((pid > 0 && !s->numa_ok) || !s->n_nodes)
        printf(" -");
    for (int i = 0; (pid <= 0 || s->numa_ok) && i < s->n_nodes; i++)
        pid > 0 ? printf(" node%d=%lld/%lld", s->nodes[i], s->node_rss_kb[i],
                         s->node_hugetlb_kb[i])
                : printf(" node%d=%lld/%lld", s->nodes[i], s->node_anon_huge_kb[i],
                         s->node_pool_free[i]);
    printf(" ");
    int any = 0;
    for (int i = 0; i < s->n_sizes; i++) {
        if (s->nr_anon[i] <= 0)
            continue;
        char hs[32];
        human_size((uint64_t)s->kb[i] << 10, hs, sizeof(hs));
        printf(" %s:%lld", hs, s->nr_anon[i]);
        any = 1;
    }
    printf("%s\n", any ? "" : " -");
}

static int watch_usage(void)
{
    fprintf(stderr, "usage: hpctl watch [PID] [--interval SECONDS] [--count N] [--json]\n");
    return HPCTL_USAGE;
}

int hpctl_watch(int argc, char **argv)
{
    int json = 0, pid = 0;
    double interval = 1.0;
    uint64_t count = 0, v;
    for (int i = 0; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (parse_u64(argv[++i], &count) != 0)
                return hpctl_bad("watch", "--count \"%s\" is not a whole number of lines "
                                 "(0: no limit)", argv[i]), watch_usage();
        } else if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
            errno = 0;
            interval = strtod(argv[++i], &end);
            if (errno || *end || end == argv[i] || !(interval > 0 && interval <= 3600))
                return hpctl_bad("watch", "--interval \"%s\" is not a number of seconds above "
                                 "0 and at most 3600", argv[i]), watch_usage();
        } else if (!pid && ((argv[i][0] >= '0' && argv[i][0] <= '9') ||
                            (argv[i][0] == '-' && argv[i][1] >= '0' && argv[i][1] <= '9'))) {
            if (parse_u64(argv[i], &v) != 0 || v == 0 || v >= 1u << 30)
                return hpctl_bad("watch", "\"%s\" is not a process ID (a number from 1)",
                                 argv[i]), watch_usage();
            pid = (int)v;
        } else {
            return hpctl_unexpected("watch", argv, i, argc,
                                    (const char *const[]){"--count", "--interval", NULL}),
                   watch_usage();
        }
    }
    struct sample prev, now;
    take(pid, &prev);
    if (!prev.ok) {
        fprintf(stderr, "hpctl: no process %d (or its /proc files cannot be read)\n", pid);
        return HPCTL_ENOENT;
    }
    uint64_t t0 = now_ns();
    if (json)
        print_json(pid, 0, &prev, NULL);
    else
        print_text(pid, 0, &prev, NULL, 0);
    fflush(stdout);
    for (uint64_t n = 1; !count || n < count; n++) {
        struct timespec ts = {(time_t)interval, (long)((interval - floor(interval)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        take(pid, &now);
        if (!now.ok) {
            if (!json)
                printf("process %d has exited\n", pid);
            return HPCTL_OK;
        }
        double t = (double)(now_ns() - t0) / 1e9;
        if (json)
            print_json(pid, t, &now, &prev);
        else
            print_text(pid, t, &now, &prev, (unsigned)n);
        fflush(stdout);
        prev = now;
    }
    return HPCTL_OK;
}
