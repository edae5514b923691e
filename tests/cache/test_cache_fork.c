/*
 * fork and the caches of freed huge pages (blocks and stacks), with the
 * default cache on and a 2 MiB hugetlb pool sized so that the parent uses
 * all of it. Private hugetlb memory after fork (Documentation/mm/
 * hugetlbfs_reserv.rst, mm/hugetlb.c hugetlb_wp / unmap_ref_private): the
 * reservations belong to the parent's VMAs; a write to a page shared with a
 * child needs a free pool page, and when there is none the child gets
 * SIGBUS (its own write) or loses the page (the parent's write: the child's
 * next access, a read included, is SIGBUS). The cache must never turn that
 * into a SIGBUS that the program's own use of its blocks would not cause:
 *
 *   1. a child frees an inherited hugetlb block and allocates again;
 *   2. the parent frees a block the child still reads, and allocates again;
 *   3. a child creates a hugetlb stack after the parent cached one;
 *   4. 8 threads allocate and resize while the main thread forks every
 *      2 ms (children do nothing): the parent must never die.
 *
 * Every check runs in a child of the test (run_in_child), so a SIGBUS is a
 * failed check, not a dead test. HPTEST_FORKS and HPTEST_RUNS size case 4.
 */
#include <hp.h>

#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MiB (UINT64_C(1) << 20)
#define HUGE_KB 2048ul

/* The fatal-signal restorers of tests/support write the pool back: only the
 * test process itself may do that, never one of its children. */
static void child_defaults(void)
{
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGTERM, SIGINT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
        signal(sigs[i], SIG_DFL);
}

static int status_of(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Exactly pages free 2 MiB pool pages, or skip. Pages that other processes
 * hold stay theirs: the pool is sized around them. */
static int pool_exactly(long pages)
{
    if (!is_root()) {
        print_message("# not root: no hugetlb pool to size\n");
        return 0;
    }
    long total = pool_get(HUGE_KB, "nr_hugepages"), free_now = pool_get(HUGE_KB, "free_hugepages");
    long others = total >= 0 && free_now >= 0 ? total - free_now : 0;
    long got = pool_set(HUGE_KB, (unsigned long)(others + pages));
    if (got != others + pages || pool_get(HUGE_KB, "free_hugepages") != pages) {
        print_message("# pool of %ld free pages not available (%ld in use elsewhere; got %ld, %ld "
                      "free)\n", pages, others, got, pool_get(HUGE_KB, "free_hugepages"));
        return 0;
    }
    return 1;
}

static void *hugetlb_block(size_t len)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "hugetlbfs";
    o.flags = HP_F_REQUIRE_HUGE;
    return hp_alloc_ex(len, &o);
}

static void fill(unsigned char *p, size_t len, unsigned char seed)
{
    for (size_t i = 0; i < len; i += 4096)
        p[i] = (unsigned char)(seed + i / 4096);
}

static int intact(const unsigned char *p, size_t len, unsigned char seed)
{
    for (size_t i = 0; i < len; i += 4096)
        if (p[i] != (unsigned char)(seed + i / 4096))
            return 0;
    return 1;
}

static void write_all(unsigned char *p, size_t len, unsigned char v)
{
    memset(p, v, len);
}

/* ---- case 1 ---- */

static int case1_child(void *arg)
{
    (void)arg;
    child_defaults();
    void *p = hugetlb_block(4 * MiB), *q = hugetlb_block(4 * MiB);
    CHILD_CHECK(p && q);
    CHILD_CHECK(pool_get(HUGE_KB, "free_hugepages") == 0);
    fill(p, 4 * MiB, 1);
    fill(q, 4 * MiB, 2);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child's own memory: what it frees it may reuse, safely. */
        if (hp_free(p) != HP_OK)
            _exit(2);
        unsigned char *r = hp_alloc(4 * MiB, 0);
        if (r) {
            write_all(r, 4 * MiB, 0x5a);
            hp_free(r);
        }
        _exit(intact(q, 4 * MiB, 2) ? 0 : 3);
    }
    CHILD_CHECK(pid > 0);
    int st = status_of(pid);
    if (st)
        fprintf(stderr, "# child exited with %d%s\n", st, st == 128 + SIGBUS ? " (SIGBUS)" : "");
    CHILD_CHECK(st == 0);
    CHILD_CHECK(intact(p, 4 * MiB, 1) && intact(q, 4 * MiB, 2));
    CHILD_CHECK(hp_free(p) == HP_OK && hp_free(q) == HP_OK);
    return 0;
}

static void child_reuses_inherited_block(void **state)
{
    (void)state;
    if (!pool_exactly(4))
        skip();
    assert_int_equal(run_in_child(case1_child, NULL), 0);
}

/* ---- case 2 ---- */

static int case2_child(void *arg)
{
    (void)arg;
    child_defaults();
    unsigned char *p = hugetlb_block(4 * MiB), *q = hugetlb_block(4 * MiB);
    CHILD_CHECK(p && q);
    CHILD_CHECK(pool_get(HUGE_KB, "free_hugepages") == 0);
    fill(p, 4 * MiB, 7);
    int go[2];
    CHILD_CHECK(pipe(go) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        /* Only reads: the child never writes its inherited block. */
        _exit(intact(p, 4 * MiB, 7) ? 0 : 3);
    }
    CHILD_CHECK(pid > 0);
    close(go[0]);
    CHILD_CHECK(hp_free(p) == HP_OK);
    unsigned char *r = hp_alloc(4 * MiB, 0);
    if (r)
        write_all(r, 4 * MiB, 0x33);
    CHILD_CHECK(write(go[1], "g", 1) == 1);
    int st = status_of(pid);
    if (st)
        fprintf(stderr, "# child exited with %d%s\n", st, st == 128 + SIGBUS ? " (SIGBUS)" : "");
    CHILD_CHECK(st == 0);
    close(go[1]);
    hp_free(r);
    CHILD_CHECK(hp_free(q) == HP_OK);
    return 0;
}

static void parent_reuse_keeps_child_reads(void **state)
{
    (void)state;
    if (!pool_exactly(4))
        skip();
    assert_int_equal(run_in_child(case2_child, NULL), 0);
}

/* ---- case 3 ---- */

static int case3_child(void *arg)
{
    (void)arg;
    child_defaults();
    const uint64_t huge = HP_STACK_HUGE | HP_STACK_HUGETLB;
    struct hp_stack *s = hp_stack_create(2 * MiB, huge);
    CHILD_CHECK(s);
    void *q = hugetlb_block(2 * MiB);
    CHILD_CHECK(q);
    CHILD_CHECK(pool_get(HUGE_KB, "free_hugepages") == 0);
    write_all(hp_stack_base(s), hp_stack_size(s), 0x11);
    CHILD_CHECK(hp_stack_destroy(s) == HP_OK);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct hp_stack *c = hp_stack_create(2 * MiB, huge);
        if (c) {
            write_all(hp_stack_base(c), hp_stack_size(c), 0x22);
            hp_stack_destroy(c);
        }
        _exit(0);
    }
    CHILD_CHECK(pid > 0);
    int st = status_of(pid);
    if (st)
        fprintf(stderr, "# child exited with %d%s\n", st, st == 128 + SIGBUS ? " (SIGBUS)" : "");
    CHILD_CHECK(st == 0);
    /* The parent's cached stack is from before the fork too: never handed
     * out again (it was unmapped), so a new one needs a pool page, and the
     * pool has none unless that unmap gave it back. Either way no SIGBUS. */
    struct hp_stack_cache_stats ss = HP_STACK_CACHE_STATS_INIT;
    CHILD_CHECK(hp_stack_cache_get_stats(&ss) == HP_OK);
    s = hp_stack_create(2 * MiB, huge);
    if (s) {
        struct hp_stack_info si = HP_STACK_INFO_INIT;
        CHILD_CHECK(hp_stack_get_info(s, &si) == HP_OK && !si.from_cache);
        write_all(hp_stack_base(s), hp_stack_size(s), 0x33);
        CHILD_CHECK(hp_stack_destroy(s) == HP_OK);
    }
    CHILD_CHECK(hp_free(q) == HP_OK);
    return 0;
}

static void child_never_gets_cached_hugetlb_stack(void **state)
{
    (void)state;
    if (!pool_exactly(2))
        skip();
    assert_int_equal(run_in_child(case3_child, NULL), 0);
}

/* ---- case 4 ---- */

#define STORM_THREADS 8
#define STORM_SLOTS 4

static atomic_int storm_stop;
static atomic_ulong storm_ops;

static uint64_t next_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(0x2545f4914f6cdd1d);
}

/* 1 to 8 MiB: every block is a huge-page candidate. */
static size_t storm_size(uint64_t *s)
{
    return (size_t)(MiB + next_rand(s) % (7 * MiB));
}

static void touch(unsigned char *p, size_t len, unsigned char v)
{
    for (size_t i = 0; i < len; i += 64 << 10)
        p[i] = v;
    p[len - 1] = v;
}

static void *storm_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg * UINT64_C(0x9e3779b97f4a7c15) + 1;
    unsigned char *slot[STORM_SLOTS] = {0};
    size_t len[STORM_SLOTS] = {0};
    while (!atomic_load(&storm_stop)) {
        unsigned k = (unsigned)(next_rand(&seed) % STORM_SLOTS);
        unsigned op = (unsigned)(next_rand(&seed) % 3);
        if (!slot[k] || op == 0) {
            hp_free(slot[k]);
            len[k] = storm_size(&seed);
            slot[k] = hp_alloc(len[k], 0);
        } else if (op == 1) {
            size_t n = storm_size(&seed);
            unsigned char *q = hp_realloc(slot[k], n, 0);
            if (q)
                slot[k] = q, len[k] = n;
        } else {
            hp_free(slot[k]);
            slot[k] = NULL;
        }
        if (slot[k])
            touch(slot[k], len[k], (unsigned char)seed);
        atomic_fetch_add(&storm_ops, 1);
    }
    for (unsigned k = 0; k < STORM_SLOTS; k++)
        hp_free(slot[k]);
    return NULL;
}

static int case4_child(void *arg)
{
    unsigned long forks = *(unsigned long *)arg;
    child_defaults();
    pthread_t t[STORM_THREADS];
    for (uintptr_t i = 0; i < STORM_THREADS; i++)
        CHILD_CHECK(pthread_create(&t[i], NULL, storm_thread, (void *)(i + 1)) == 0);
    unsigned long failed = 0, died = 0;
    for (unsigned long i = 0; i < forks; i++) {
        struct timespec two_ms = {0, 2000000};
        nanosleep(&two_ms, NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid < 0) {
            failed++;
            continue;
        }
        died += status_of(pid) != 0;
    }
    atomic_store(&storm_stop, 1);
    for (int i = 0; i < STORM_THREADS; i++)
        pthread_join(t[i], NULL);
    fprintf(stderr, "# %lu forks (%lu failed, %lu children died), %lu operations\n", forks,
            failed, died, atomic_load(&storm_ops));
    CHILD_CHECK(died == 0);
    return 0;
}

static void parent_survives_fork_storm(void **state)
{
    (void)state;
    if (!pool_exactly(32))
        skip();
    unsigned long forks = env_count("HPTEST_FORKS", 300), runs = env_count("HPTEST_RUNS", 1);
    for (unsigned long r = 0; r < runs; r++) {
        int st = run_in_child(case4_child, &forks);
        if (st)
            print_message("# run %lu: the parent exited with %d%s\n", r + 1, st,
                          st == 128 + SIGBUS ? " (SIGBUS)" : "");
        assert_int_equal(st, 0);
    }
}

int main(void)
{
    /* The default cache, whatever the suite's environment says. */
    unsetenv("HP_CACHE_MAX");
    unsetenv("HP_CACHE_IDLE_MS");
    if (knob_lock() != 0)
        print_message("# cannot take the knob lock; running anyway\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(child_reuses_inherited_block),
        cmocka_unit_test(parent_reuse_keeps_child_reads),
        cmocka_unit_test(child_never_gets_cached_hugetlb_stack),
        cmocka_unit_test(parent_survives_fork_storm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
