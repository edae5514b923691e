/*
 * An application of an installed libhp, built with pkg-config only, that
 * checks what a backend named in the request gives it. One check per run
 * (a fresh process, so the cache counters start at zero):
 *
 *   plugin_user serve   BACKEND  hp_alloc with opts.backend: served by it;
 *                                numa_node and /proc/self/numa_maps agree
 *   plugin_user cache   BACKEND  free then alloc of the same size is a hit
 *   plugin_user realloc BACKEND  growth stays in place while headroom lasts
 *   plugin_user stack   BACKEND  hp_stack_create through that backend (run with
 *                                HP_BACKENDS=BACKEND: a huge stack, its guard
 *                                faulting, smaps huge bytes, numa_maps)
 *   plugin_user exit    BACKEND  a process exits normally with a block of
 *                                BACKEND in libhp's cache (libhp's
 *                                destructors give it back through the
 *                                plugin's unmap, before its fini)
 *
 * The other checks end with _exit, so that each reports only its own
 * subject; "exit" is the one that runs libhp's destructors.
 *
 * BACKEND "numa-local" is the example plugin: its blocks must be bound
 * (numa_maps "prefer:<node>") and wholly on the allocating CPU's node. Any
 * other name is a built-in, run for comparison: same cache and realloc
 * behaviour, no binding. Exit 0 pass, 1 fail, 77 skip (the reason on
 * stdout).
 */
#define _GNU_SOURCE
#include <hp.h>
#include <hp/cache.h>
#include <hp/stack.h>

#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)

static const char *backend;
static int numa;           /* checking the NUMA plugin */
static unsigned my_node;   /* node of the CPU this process is pinned to */

static int failf(const char *what)
{
    printf("FAIL: %s (last error %s: %s)\n", what, hp_strerror(hp_last_error()),
           hp_last_error_detail());
    return 1;
}

/* Pin to the CPU we run on, so "the calling CPU's node" cannot change. */
static void pin(void)
{
    unsigned cpu = 0;
    if (getcpu(&cpu, &my_node) != 0)
        my_node = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
    getcpu(&cpu, &my_node);
}

/* The numa_maps line of the VMA holding addr: policy and pages per node. */
struct placement {
    char policy[64];
    uint64_t pages[64];  /* N<i>= counts, base pages */
    uint64_t total;
    uint64_t vma_start, vma_end;
};

static int vma_of(const void *addr, uint64_t *start, uint64_t *end)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f))
        if (sscanf(line, "%" SCNx64 "-%" SCNx64, start, end) == 2 &&
            (uint64_t)(uintptr_t)addr >= *start && (uint64_t)(uintptr_t)addr < *end)
            found = 1;
    if (f)
        fclose(f);
    return found ? 0 : -1;
}

static int placement_of(const void *addr, struct placement *pl)
{
    memset(pl, 0, sizeof(*pl));
    if (vma_of(addr, &pl->vma_start, &pl->vma_end) != 0)
        return -1;
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f)) {
        char *save, *tok = strtok_r(line, " \n", &save);
        if (!tok || strtoull(tok, NULL, 16) != pl->vma_start)
            continue;
        found = 1;
        tok = strtok_r(NULL, " \n", &save);
        snprintf(pl->policy, sizeof(pl->policy), "%s", tok ? tok : "?");
        while ((tok = strtok_r(NULL, " \n", &save))) {
            unsigned node;
            unsigned long long n;
            if (sscanf(tok, "N%u=%llu", &node, &n) == 2 && node < 64) {
                pl->pages[node] = n;
                pl->total += n;
            }
        }
    }
    if (f)
        fclose(f);
    return found ? 0 : -1;
}

/* Every touched page of the block's VMA on my_node, and the policy is the
 * plugin's (numa-local) or the default (built-ins). */
static int check_placement(const char *what, const void *p, uint64_t touched)
{
    struct placement pl;
    if (placement_of(p, &pl) != 0) {
        printf("FAIL: %s: no /proc/self/numa_maps line for %p\n", what, p);
        return 1;
    }
    char want[32];
    snprintf(want, sizeof(want), "prefer:%u", my_node);
    printf("# %s: VMA %#" PRIx64 "-%#" PRIx64 " policy %s, N%u=%" PRIu64 " of %" PRIu64
           " pages\n", what, pl.vma_start, pl.vma_end, pl.policy, my_node, pl.pages[my_node],
           pl.total);
    if (numa && strcmp(pl.policy, want)) {
        printf("FAIL: %s: policy %s, want %s (mbind not applied)\n", what, pl.policy, want);
        return 1;
    }
    if (!numa && strcmp(pl.policy, "default")) {
        printf("FAIL: %s: a built-in block has policy %s\n", what, pl.policy);
        return 1;
    }
    if (pl.pages[my_node] != pl.total || pl.total * 4096 < touched) {
        printf("FAIL: %s: %" PRIu64 " of %" PRIu64 " pages on node %u, %" PRIu64
               " bytes touched\n", what, pl.pages[my_node], pl.total, my_node, touched);
        return 1;
    }
    return 0;
}

/* A backend that cannot serve on this machine (THP "never" for the
 * comparison) skips the check, saying why. */
static void *alloc_named(uint64_t size)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = backend;
    void *p = hp_alloc_ex(size, &o);
    if (!p && hp_last_error() == HP_ENOBACKEND) {
        printf("SKIP: %s cannot serve here: %s\n", backend, hp_last_error_detail());
        fflush(stdout);
        _exit(77);
    }
    return p;
}

static int check_info(const char *what, void *p, struct hp_block_info *info)
{
    *info = (struct hp_block_info)HP_BLOCK_INFO_INIT;
    if (hp_info(p, info) != HP_OK)
        return failf(what);
    printf("# %s: backend %s, page size %" PRIu64 ", %" PRIu64 " of %" PRIu64
           " bytes huge\n", what, info->backend, info->page_size, info->huge_bytes,
           info->usable_size);
    if (strcmp(info->backend, backend)) {
        printf("FAIL: %s: served by %s, not %s\n", what, info->backend, backend);
        return 1;
    }
#ifdef HP_TEST_INFO_NUMA
    printf("# %s: hp_info numa_node %d\n", what, info->numa_node);
    if (numa && info->numa_node != (int32_t)my_node) {
        printf("FAIL: %s: hp_info numa_node %d, the allocating CPU is on node %u\n", what,
               info->numa_node, my_node);
        return 1;
    }
#else
    printf("# struct hp_block_info has no numa_node: the query op is not surfaced by hp_info\n");
#endif
    return 0;
}

static int serve(void)
{
    uint64_t size = 64 * MIB;
    char *p = alloc_named(size);
    if (!p)
        return failf("hp_alloc_ex");
    memset(p, 0x5a, size);
    struct hp_block_info info;
    if (check_info("64 MiB block", p, &info) || check_placement("64 MiB block", p, size))
        return 1;
    /* THP in "madvise" mode serves the plugin's 2 MiB page size only because
     * it advises MADV_HUGEPAGE; the bytes are measured (smaps). */
    if (info.page_size > 4096 && info.huge_bytes == 0) {
        printf("FAIL: page size %" PRIu64 " but no huge-backed byte\n", info.page_size);
        return 1;
    }
    return hp_free(p) == HP_OK ? 0 : failf("hp_free");
}

static int get_stats(struct hp_cache_stats *st)
{
    *st = (struct hp_cache_stats)HP_CACHE_STATS_INIT;
    return hp_cache_get_stats(st);
}

static int cache(void)
{
    uint64_t size = 8 * MIB;
    struct hp_cache_stats before, after;
    char *p = alloc_named(size);
    if (!p)
        return failf("hp_alloc_ex");
    memset(p, 1, size);
    struct hp_block_info first;
    if (check_info("first block", p, &first))
        return 1;
    if (first.page_size <= 4096) {
        printf("SKIP: served with base pages here (THP off for the PMD size?), and the cache "
               "keeps only mappings of larger pages\n");
        return 77;
    }
    if (hp_free(p) != HP_OK || get_stats(&before) != HP_OK)
        return failf("hp_free");
    printf("# after free: %" PRIu64 " bytes cached, %" PRIu64 " hits, %" PRIu64 " misses\n",
           before.bytes, before.hits, before.misses);
    char *q = alloc_named(size);
    if (!q || get_stats(&after) != HP_OK)
        return failf("second hp_alloc_ex");
    printf("# after alloc: %" PRIu64 " bytes cached, %" PRIu64 " hits, %" PRIu64 " misses\n",
           after.bytes, after.hits, after.misses);
    struct hp_block_info info;
    if (check_info("reused block", q, &info))
        return 1;
    if (after.hits <= before.hits) {
        printf("FAIL: free then alloc of %" PRIu64 " bytes from %s was not a cache hit\n", size,
               backend);
        return 1;
    }
    for (uint64_t i = 0; i < size; i += 4096)
        if (q[i]) {
            printf("FAIL: reused memory not zero at %" PRIu64 "\n", i);
            return 1;
        }
    memset(q, 2, size);
    if (check_placement("reused block", q, size))
        return 1;
    return hp_free(q) == HP_OK ? 0 : failf("hp_free");
}

static int grow(void)
{
    uint64_t sizes[] = {4 * MIB, 8 * MIB, 12 * MIB, 16 * MIB, 24 * MIB};
    char *p = alloc_named(sizes[0]);
    if (!p)
        return failf("hp_alloc_ex");
    memset(p, 0x11, sizes[0]);
    /* The first growth may move the block (to a place with room to grow
     * 4x); the next ones must fit in that room. */
    for (size_t i = 1; i < sizeof(sizes) / sizeof(*sizes); i++) {
        char *q = hp_realloc(p, sizes[i], 0);
        if (!q)
            return failf("hp_realloc");
        printf("# realloc %" PRIu64 " -> %" PRIu64 " MiB: %s\n", sizes[i - 1] >> 20,
               sizes[i] >> 20, q == p ? "in place" : "moved");
        if (q != p && i > 1) {
            printf("FAIL: moved at %" PRIu64 " MiB; the headroom of the first move should "
                   "have lasted\n", sizes[i] >> 20);
            return 1;
        }
        for (uint64_t j = 0; j < sizes[i - 1]; j += 4096)
            if (q[j] != 0x11) {
                printf("FAIL: contents lost at %" PRIu64 "\n", j);
                return 1;
            }
        for (uint64_t j = sizes[i - 1]; j < sizes[i]; j += 4096)
            if (q[j]) {
                printf("FAIL: grown bytes not zero at %" PRIu64 "\n", j);
                return 1;
            }
        memset(q + sizes[i - 1], 0x11, sizes[i] - sizes[i - 1]);
        p = q;
    }
    uint64_t last = sizes[sizeof(sizes) / sizeof(*sizes) - 1];
    struct hp_block_info info;
    if (check_info("grown block", p, &info) || check_placement("grown block start", p, 0) ||
        check_placement("grown block end", p + last - 4096, 0))
        return 1;
    return hp_free(p) == HP_OK ? 0 : failf("hp_free");
}

/* The VMA holding addr in /proc/self/smaps: its permissions and its
 * AnonHugePages bytes. */
static int smaps_of(const void *addr, char perms[8], uint64_t *huge)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, found = 0;
    *huge = 0;
    while (f && fgets(line, sizeof(line), f)) {
        uint64_t lo, hi;
        char p[8];
        unsigned long long kb;
        /* Only a VMA's first line has "start-end perms". */
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &lo, &hi, p) == 3) {
            if (in)
                break;
            in = (uint64_t)(uintptr_t)addr >= lo && (uint64_t)(uintptr_t)addr < hi;
            if (in) {
                snprintf(perms, 8, "%s", p);
                found = 1;
            }
        } else if (in && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) {
            *huge = (uint64_t)kb * 1024;
        }
    }
    if (f)
        fclose(f);
    return found ? 0 : -1;
}

/* Stacks go through backends like blocks: with HP_BACKENDS naming only
 * BACKEND (check-install.sh sets it), a huge stack is mapped by it,
 * aligned, with a PROT_NONE guard right below that faults, its memory
 * huge (smaps) and placed (numa_maps). */
static int stack(void)
{
    /* A backend without a huge page size here (THP "never") cannot serve a
     * huge stack: a skip. One that has one must serve it. */
    int huge_size = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && !strcmp(bi.name, backend))
            for (uint32_t k = 0; k < bi.n_page_sizes && k < HP_MAX_PAGE_SIZES; k++)
                huge_size |= bi.available && bi.page_sizes[k] == 2 * MIB;
    }
    if (!huge_size) {
        printf("SKIP: %s offers no 2 MiB pages here (hpctl status)\n", backend);
        return 77;
    }
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.flags = HP_STACK_HUGE | HP_STACK_POPULATE;
    struct hp_stack *s = hp_stack_create_ex(4 * MIB, &o);
    if (!s)
        return failf("hp_stack_create_ex");
    struct hp_stack_info si = HP_STACK_INFO_INIT;
    if (hp_stack_get_info(s, &si) != HP_OK)
        return failf("hp_stack_get_info");
    printf("# stack: source %s, page size %" PRIu64 ", guard %" PRIu64 " bytes at %#" PRIx64
           ", base %#" PRIx64 ", %" PRIu64 " of %" PRIu64 " bytes huge (hp_stack_get_info)\n",
           si.source, si.page_size, si.guard_size, si.guard_addr, si.base_addr, si.huge_bytes,
           si.usable_size);
    if (strcmp(si.source, backend) || si.mode != HP_STACK_MODE_HUGE || si.page_size <= 4096 ||
        si.base_addr % si.page_size || si.guard_addr + si.guard_size != si.base_addr ||
        si.guard_size == 0) {
        printf("FAIL: stack not a huge one from %s, misaligned or without its guard\n", backend);
        return 1;
    }
    char *base = (char *)(uintptr_t)si.base_addr;
    memset(base, 3, si.usable_size);
    char perms[8] = "", guard_perms[8] = "";
    uint64_t huge = 0, guard_huge = 0;
    if (smaps_of(base, perms, &huge) || smaps_of(base - 1, guard_perms, &guard_huge)) {
        printf("FAIL: no smaps entry for the stack or its guard\n");
        return 1;
    }
    printf("# smaps: stack %s, AnonHugePages %" PRIu64 " bytes; guard %s\n", perms, huge,
           guard_perms);
    if (strncmp(guard_perms, "---", 3) || strncmp(perms, "rw", 2)) {
        printf("FAIL: the guard is %s (want ---), the stack %s (want rw)\n", guard_perms, perms);
        return 1;
    }
    /* Populated with a collapse attempt: at least one whole huge page. */
    if (huge < si.page_size) {
        printf("FAIL: %" PRIu64 " huge bytes in smaps for a populated huge stack\n", huge);
        return 1;
    }
    if (check_placement("stack", base, si.usable_size))
        return 1;
    /* One byte below the base is the guard: a write there kills. */
    pid_t pid = fork();
    if (pid == 0) {
        base[-1] = 1;
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status) ||
        WTERMSIG(status) != SIGSEGV) {
        printf("FAIL: a write below the stack base did not fault (status %#x)\n", status);
        return 1;
    }
    printf("# a write below the base: the child died of SIGSEGV\n");
    return hp_stack_destroy(s) == HP_OK ? 0 : failf("hp_stack_destroy");
}

static int at_exit(void)
{
    uint64_t size = 8 * MIB;
    char *p = alloc_named(size);
    if (!p)
        return failf("hp_alloc_ex");
    memset(p, 1, size);
    if (hp_free(p) != HP_OK)
        return failf("hp_free");
    struct hp_cache_stats st;
    get_stats(&st);
    printf("# exiting with %" PRIu64 " bytes cached\n", st.bytes);
    return 0;  /* a crash in libhp's destructors shows as a signal, not 0 */
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s serve|cache|realloc|stack BACKEND\n", argv[0]);
        return 2;
    }
    backend = argv[2];
    numa = !strcmp(backend, "numa-local");
    pin();
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = 2;
    if (!strcmp(argv[1], "serve"))
        rc = serve();
    else if (!strcmp(argv[1], "cache"))
        rc = cache();
    else if (!strcmp(argv[1], "realloc"))
        rc = grow();
    else if (!strcmp(argv[1], "stack"))
        rc = stack();
    else if (!strcmp(argv[1], "exit"))
        return at_exit();
    fflush(stdout);
    _exit(rc);
}
