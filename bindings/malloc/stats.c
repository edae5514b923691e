/* HP_MALLOC_STATS: what the arenas and the process hold at exit, measured
 * from /proc/self/smaps (proc(5): Rss, AnonHugePages for THP,
 * Private_Hugetlb and Shared_Hugetlb for hugetlb; a 1 GiB private hugetlb
 * mapping is sometimes counted under Shared_Hugetlb, so both are summed).
 * Written with write(2) and no allocation: this runs in a destructor, when
 * the heap may be half torn down. */
#include "hpm.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_GROUPS 8
#define MAX_RANGES 64

struct hpm_counters hpm_ctr;

struct group {
    char backend[32];
    uint64_t page_size;
    unsigned narenas;
    uint64_t mapped_kb, rss_kb, huge_kb;
};
static struct group groups[MAX_GROUPS];
static unsigned ngroups;
static struct { uintptr_t start, end; unsigned group; } ranges[MAX_RANGES];
static unsigned nranges;

/* Programs may close stderr before exit (coreutils' close_stdout does):
 * the stats keep their own copy of it, taken at start-up, close-on-exec,
 * high enough to stay out of the way of programs that number their fds. */
static int stats_fd = -1;

void hpm_stats_init(void)
{
    if (hpm_opt.stats && !hpm_opt.stats_path)
        stats_fd = fcntl(2, F_DUPFD_CLOEXEC, 200);
    /* The one-line report to a file (hpctl run --report) starts with a
     * line saying that this process loaded the library: one that ends
     * without running exit handlers (_exit, as dash's "exit" does, or a
     * signal) writes nothing else. */
    if (hpm_opt.stats == 2 && hpm_opt.stats_path) {
        int fd = open(hpm_opt.stats_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[64];
            snprintf(line, sizeof(line), "libhp-malloc: pid %d: started\n", (int)getpid());
            ssize_t w = write(fd, line, strlen(line));
            (void)w;
            close(fd);
        }
    }
}

void hpm_large_account(size_t bytes)
{
    atomic_fetch_add(&hpm_ctr.large_allocs, 1);
    atomic_fetch_add(&hpm_ctr.large_bytes, bytes);
}

/* Called under the arena lock. */
void hpm_stats_arena(const void *start, size_t len, const char *backend, uint64_t page_size)
{
    unsigned g;
    for (g = 0; g < ngroups; g++)
        if (!strcmp(groups[g].backend, backend) && groups[g].page_size == page_size)
            break;
    if (g == ngroups) {
        if (ngroups == MAX_GROUPS)
            return;
        snprintf(groups[g].backend, sizeof(groups[g].backend), "%s", backend);
        groups[g].page_size = page_size;
        ngroups++;
    }
    groups[g].narenas++;
    if (nranges < MAX_RANGES) {
        ranges[nranges].start = (uintptr_t)start;
        ranges[nranges].end = (uintptr_t)start + len;
        ranges[nranges].group = g;
        nranges++;
    }
}

struct totals {
    uint64_t rss_kb, thp_kb, hugetlb_kb;
};

static int field(const char *line, const char *name, uint64_t *kb)
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) || line[n] != ':')
        return 0;
    *kb = strtoull(line + n + 1, NULL, 10);
    return 1;
}

/* One smaps line. cur is the arena group of the current mapping or -1. */
static void smaps_line(const char *line, int *cur, struct totals *t)
{
    uintptr_t lo, hi;
    uint64_t kb;
    char dash;
    if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
        *cur = -1;
        for (unsigned i = 0; i < nranges; i++)
            if (lo < ranges[i].end && hi > ranges[i].start) {
                *cur = (int)ranges[i].group;
                uintptr_t a = lo > ranges[i].start ? lo : ranges[i].start;
                uintptr_t b = hi < ranges[i].end ? hi : ranges[i].end;
                groups[*cur].mapped_kb += (b - a) >> 10;
            }
        return;
    }
    struct group *g = *cur >= 0 ? &groups[*cur] : NULL;
    if (field(line, "Rss", &kb)) {
        t->rss_kb += kb;
        if (g)
            g->rss_kb += kb;
    } else if (field(line, "AnonHugePages", &kb)) {
        t->thp_kb += kb;
        if (g)
            g->huge_kb += kb;
    } else if (field(line, "Private_Hugetlb", &kb) || field(line, "Shared_Hugetlb", &kb)) {
        t->hugetlb_kb += kb;
        if (g) {
            g->huge_kb += kb;
            g->rss_kb += kb;  /* hugetlb pages are not in Rss */
        }
    }
}

static void read_smaps(struct totals *t)
{
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[8192];
    size_t have = 0;
    int cur = -1;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            smaps_line(line, &cur, t);
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof(buf) - 1)
            have = 0;  /* a line longer than the buffer: drop it */
    }
    close(fd);
}

static void emit(int fd, const char *s)
{
    ssize_t w = write(fd, s, strlen(s));
    (void)w;
}

static unsigned long long mib(uint64_t kb)
{
    return (unsigned long long)((kb + 512) >> 10);
}

static void page_name(uint64_t page_size, char *buf, size_t cap)
{
    if (page_size >= (UINT64_C(1) << 30))
        snprintf(buf, cap, "%lluG", (unsigned long long)(page_size >> 30));
    else if (page_size >= (UINT64_C(1) << 20))
        snprintf(buf, cap, "%lluM", (unsigned long long)(page_size >> 20));
    else
        snprintf(buf, cap, "%lluK", (unsigned long long)(page_size >> 10));
}

void hpm_stats_atexit(void)
{
    if (!hpm_opt.stats)
        return;
    struct totals t = {0};
    read_smaps(&t);
    int fd = stats_fd >= 0 ? stats_fd : 2;
    if (hpm_opt.stats_path)
        fd = open(hpm_opt.stats_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[512], ps[16];
    unsigned long long lb = mib(atomic_load(&hpm_ctr.large_bytes) >> 10);
    /* The figures above are those at exit; the peak resident set (without
     * hugetlb pages, which getrusage does not count) says what was held. */
    struct rusage ru;
    uint64_t peak_kb = getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss : 0;
    if (hpm_opt.stats == 2) {
        int n = snprintf(line, sizeof(line), "libhp-malloc: pid %d: arenas", (int)getpid());
        for (unsigned g = 0; g < ngroups && n < (int)sizeof(line) - 100; g++) {
            page_name(groups[g].page_size, ps, sizeof(ps));
            n += snprintf(line + n, sizeof(line) - (size_t)n, "%s %s/%s %lluM (%lluM huge)",
                          g ? "," : "", groups[g].backend, ps, mib(groups[g].mapped_kb),
                          mib(groups[g].huge_kb));
        }
        snprintf(line + n, sizeof(line) - (size_t)n,
                 "; large blocks %llu (%lluM) via hp_alloc, %llu hp_realloc; "
                 "process huge now: hugetlb %lluM, thp %lluM, rss %lluM; peak rss %lluM\n",
                 (unsigned long long)atomic_load(&hpm_ctr.large_allocs), lb,
                 (unsigned long long)atomic_load(&hpm_ctr.remaps), mib(t.hugetlb_kb),
                 mib(t.thp_kb), mib(t.rss_kb), mib(peak_kb));
        emit(fd, line);
    } else {
        snprintf(line, sizeof(line), "libhp-malloc: stats at exit of pid %d, from /proc/self/smaps\n",
                 (int)getpid());
        emit(fd, line);
        emit(fd, "libhp-malloc:   what      backend       page  count  mapped  resident  huge\n");
        for (unsigned g = 0; g < ngroups; g++) {
            page_name(groups[g].page_size, ps, sizeof(ps));
            snprintf(line, sizeof(line),
                     "libhp-malloc:   arenas    %-12.31s  %-4s  %5u  %5lluM  %7lluM  %4lluM\n",
                     groups[g].backend, ps, groups[g].narenas, mib(groups[g].mapped_kb),
                     mib(groups[g].rss_kb), mib(groups[g].huge_kb));
            emit(fd, line);
        }
        snprintf(line, sizeof(line),
                 "libhp-malloc:   arenas mapped ahead by the helper thread: %llu\n",
                 (unsigned long long)atomic_load(&hpm_ctr.arenas_ahead));
        emit(fd, line);
        snprintf(line, sizeof(line),
                 "libhp-malloc:   large blocks: %llu served by hp_alloc (%lluM asked), %llu "
                 "resized by hp_realloc, %llu refused (served by arenas)\n",
                 (unsigned long long)atomic_load(&hpm_ctr.large_allocs), lb,
                 (unsigned long long)atomic_load(&hpm_ctr.remaps),
                 (unsigned long long)atomic_load(&hpm_ctr.large_refused));
        emit(fd, line);
        snprintf(line, sizeof(line),
                 "libhp-malloc:   whole process now: rss %lluM, hugetlb %lluM, thp %lluM; "
                 "peak rss %lluM (without hugetlb); foreign frees ignored %llu, bootstrap %llu "
                 "bytes\n",
                 mib(t.rss_kb), mib(t.hugetlb_kb), mib(t.thp_kb), mib(peak_kb),
                 (unsigned long long)atomic_load(&hpm_ctr.foreign_frees),
                 (unsigned long long)atomic_load(&hpm_ctr.boot_bytes));
        emit(fd, line);
    }
    close(fd);
}
