/*
 * Growth keeps huge pages: a THP block keeps its PMD mappings
 * (AnonHugePages) through 20 growths of odd sizes, because every move lands
 * on a 2 MiB-aligned destination and every committed end is PMD-rounded; a
 * hugetlb block stays hugetlb through 20 growths although mremap cannot
 * expand hugetlb mappings; and when the pool runs dry mid-growth the block
 * either moves whole to another backend (one copy) or, with
 * HP_F_REQUIRE_HUGE, the call fails and the block is untouched. No mappings,
 * pool pages or reservations are left behind. A pool block that existed at
 * a fork grows by copy, so neither process loses its pages; the anonymous
 * backends grow by mremap, the old pages staying the same physical pages.
 */
#include "rt.h"

#include "os.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define POOL_PAGES 64

static long hugetlb_kb(const void *p, uint64_t len)
{
    /* Private 1 GiB mappings sometimes show as Shared_Hugetlb: sum both. */
    return smaps_field_kb(p, len, "Private_Hugetlb") + smaps_field_kb(p, len, "Shared_Hugetlb");
}

static void thp_keeps_pmds_through_20_growths(void **state)
{
    (void)state;
    if (!rt_available("thp-madvise"))
        skip();
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    int nb = numa_balancing_away(1);
    RT_CHECK(nb == 0 || nb == -ENOSYS, "set_mempolicy: %s", strerror(-nb));
    uint64_t rng = 2024, size = 4 * MIB;
    unsigned char *p = rt_alloc("thp-madvise", size, 0);
    RT_CHECK(p != NULL, "alloc");
    memset(p, 1, size);
    unsigned moved = 0;
    for (int i = 0; i < 20; i++) {
        uint64_t n = size + size * (5 + rt_rand(&rng) % 30) / 100 + rt_rand(&rng) % 4096;
        unsigned char *q = hp_realloc(p, n, 0);
        RT_CHECK(q != NULL, "growth %d to %llu", i, (unsigned long long)n);
        RT_CHECK((uintptr_t)q % (2 * MIB) == 0, "growth %d: %p is not 2 MiB aligned", i,
                 (void *)q);
        RT_CHECK(q[0] == 1 && q[size - 1] == 1, "growth %d lost contents", i);
        moved += q != p;
        memset(q + size, 1, n - size);
        p = q;
        size = n;
    }
    long ahp = smaps_field_kb(p, size, "AnonHugePages");
    long want = (long)((size & ~(2 * MIB - 1)) >> 10);
    struct hp_block_info info = rt_info(p);
    print_message("# 20 growths to %llu MiB (%u moves): AnonHugePages %ld kB of %ld kB "
                  "possible, hp_info huge_bytes %llu kB\n",
                  (unsigned long long)(size >> 20), moved, ahp, want,
                  (unsigned long long)(info.huge_bytes >> 10));
    /* At most the first block's last PMD (faulted before it could be whole)
     * may be small pages. */
    RT_CHECK(ahp >= want - 2048, "AnonHugePages %ld kB, expected about %ld kB", ahp, want);
    RT_CHECK(info.huge_bytes >= (uint64_t)(want - 2048) * 1024, "huge_bytes %llu",
             (unsigned long long)info.huge_bytes);
    numa_balancing_away(0);
    RT_CHECK(hp_free(p) == HP_OK, "free");
    rt_expect_clean(before, "thp growths");
}

static void hugetlb_stays_hugetlb_through_20_growths(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    uint64_t rng = 7, size = 2 * MIB;
    unsigned char *p = rt_alloc("hugetlbfs", size, 0);
    RT_CHECK(p != NULL, "alloc");
    rt_stamp(p, 0, size, 5);
    unsigned moved = 0;
    for (int i = 0; i < 20; i++) {
        uint64_t n = size + MIB + rt_rand(&rng) % (4 * MIB);
        unsigned char *q = hp_realloc(p, n, HP_F_REQUIRE_HUGE);
        RT_CHECK(q != NULL, "growth %d to %llu", i, (unsigned long long)n);
        RT_CHECK(rt_check(q, size, 5) == 0, "growth %d lost contents", i);
        struct hp_block_info info = rt_info(q);
        RT_CHECK(!strcmp(info.backend, "hugetlbfs") && info.usable_size % (2 * MIB) == 0,
                 "growth %d: %s, %llu bytes", i, info.backend,
                 (unsigned long long)info.usable_size);
        moved += q != p;
        rt_stamp(q, size, n, 5);
        p = q;
        size = n;
    }
    uint64_t usable = rt_info(p).usable_size;
    long kb = hugetlb_kb(p, usable);
    print_message("# 20 growths to %llu MiB (%u moves): %ld kB of hugetlb\n",
                  (unsigned long long)(size >> 20), moved, kb);
    RT_CHECK(kb == (long)(usable >> 10), "hugetlb %ld kB, usable %llu", kb,
             (unsigned long long)usable);
    RT_CHECK(smaps_kernel_page_kb(p) == 2048, "kernel page size");
    RT_CHECK(hp_free(p) == HP_OK, "free");
    rt_expect_clean(before, "hugetlb growths");
}

/* Fill the pool to `left` free pages with a hugetlb block of our own. */
static void *hog_pool(long left)
{
    long free_now = pool_get(2048, "free_hugepages") - pool_get(2048, "resv_hugepages");
    if (free_now <= left)
        return NULL;
    void *h = rt_alloc("hugetlbfs", (uint64_t)(free_now - left) * 2 * MIB, 0);
    RT_CHECK(h != NULL, "hog of %ld pages", free_now - left);
    return h;
}

static void pool_dry_mid_growth_moves_the_block(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs") || !rt_available("thp-madvise"))
        skip();
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    /* Chosen by the selection, not named: a block whose backend was named
     * never moves to another one (tests/unit/test_loader.c). */
    unsigned char *p = hp_alloc(8 * MIB, HP_F_PAGE_2M);
    RT_CHECK(p != NULL && !strcmp(rt_info(p).backend, "hugetlbfs"), "alloc from hugetlbfs: %s",
             p ? rt_info(p).backend : "-");
    rt_stamp(p, 0, 8 * MIB, 9);
    void *hog = hog_pool(4);
    p = hp_realloc(p, 12 * MIB, 0);
    RT_CHECK(p && !strcmp(rt_info(p).backend, "hugetlbfs"), "12 MiB still hugetlb");
    rt_stamp(p, 8 * MIB, 12 * MIB, 9);
    /* 20 MiB needs 4 more pages; the pool has 2 left. */
    unsigned char *q = hp_realloc(p, 20 * MIB, 0);
    RT_CHECK(q != NULL, "growth past the pool");
    struct hp_block_info info = rt_info(q);
    RT_CHECK(strcmp(info.backend, "hugetlbfs") && info.usable_size >= 20 * MIB,
             "moved whole to %s", info.backend);
    RT_CHECK(rt_check(q, 12 * MIB, 9) == 0 && rt_nonzero(q, 12 * MIB, 20 * MIB, 1) == 0,
             "contents copied once, tail zero");
    struct hp_cache_figures st;
    hp_cache_get_figures(&st);
    RT_CHECK(hugetlb_kb(q, 20 * MIB) == 0, "no hugetlb left in the block");
    RT_CHECK(hp_free(q) == HP_OK && (!hog || hp_free(hog) == HP_OK), "free");
    rt_expect_clean(before, "dry pool, moved");
}

static void pool_dry_with_require_huge_fails_cleanly(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    unsigned char *p = rt_alloc("hugetlbfs", 8 * MIB, HP_F_REQUIRE_HUGE);
    RT_CHECK(p != NULL, "alloc");
    rt_stamp(p, 0, 8 * MIB, 10);
    void *hog = hog_pool(2);
    long free0 = pool_get(2048, "free_hugepages"), rsvd0 = pool_get(2048, "resv_hugepages");
    long maps0 = maps_count();
    RT_CHECK(hp_realloc(p, 20 * MIB, HP_F_REQUIRE_HUGE) == NULL, "growth past the pool fails");
    RT_CHECK(hp_last_error() == HP_ENOHUGE, "HP_ENOHUGE");
    RT_CHECK(strstr(hp_last_error_detail(), "hugetlbfs") != NULL, "detail names the backend: %s",
             hp_last_error_detail());
    RT_CHECK(pool_get(2048, "free_hugepages") == free0 &&
             pool_get(2048, "resv_hugepages") == rsvd0 && maps_count() == maps0,
             "the failed call took no pages, reservations or mappings");
    struct hp_block_info info = rt_info(p);
    RT_CHECK(!strcmp(info.backend, "hugetlbfs") && info.usable_size == 8 * MIB,
             "block unchanged: %s %llu", info.backend, (unsigned long long)info.usable_size);
    RT_CHECK(rt_check(p, 8 * MIB, 10) == 0, "contents intact");
    /* What the pool can still give, it gives. */
    unsigned char *q = hp_realloc(p, 12 * MIB, HP_F_REQUIRE_HUGE);
    RT_CHECK(q && !strcmp(rt_info(q).backend, "hugetlbfs") && rt_check(q, 8 * MIB, 10) == 0,
             "growth within the pool");
    RT_CHECK(hp_free(q) == HP_OK && (!hog || hp_free(hog) == HP_OK), "free");
    rt_expect_clean(before, "dry pool, require huge");
}

/* Pool pages held by the cache go back to the pool when a map or a growth
 * needs them, and the selection counts them as free. */
static void cached_pool_pages_come_back(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(1024 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    long avail = pool_get(2048, "free_hugepages") - pool_get(2048, "resv_hugepages");
    RT_CHECK(avail >= 16, "%ld pool pages", avail);
    /* Half the pool in two cached ranges of different lineage. */
    void *a = rt_alloc("hugetlbfs", (uint64_t)avail / 4 * 2 * MIB, 0);
    void *b = rt_alloc("hugetlbfs", (uint64_t)avail / 4 * 2 * MIB, 0);
    memset(a, 1, 2 * MIB);
    memset(b, 1, 2 * MIB);
    RT_CHECK(hp_free(a) == HP_OK && hp_free(b) == HP_OK, "free");
    struct hp_cache_figures st;
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == (uint64_t)(avail / 4 * 2) * 2 * MIB, "cached %llu",
             (unsigned long long)st.bytes);
    /* The whole pool, without naming the backend: selection must still pick
     * hugetlbfs (cached pages count as free), and the map gets them back. */
    uint64_t all = (uint64_t)avail * 2 * MIB;
    unsigned char *c = hp_alloc(all, HP_F_PAGE_2M | HP_F_REQUIRE_HUGE);
    RT_CHECK(c != NULL, "whole pool in one block");
    RT_CHECK(!strcmp(rt_info(c).backend, "hugetlbfs"), "whole pool from %s, not hugetlbfs",
             rt_info(c).backend);
    RT_CHECK(rt_nonzero(c, 0, all, 1) == 0, "zeroed");
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == 0, "cache gave its pages back (%llu left)",
             (unsigned long long)st.bytes);
    RT_CHECK(hp_free(c) == HP_OK, "free");
    rt_expect_clean(before, "cached pool pages");
}

/* Cached hugetlb pages are shared copy-on-write with a forked child, and
 * writing them needs pool pages nobody reserved (README, "Fork and
 * hugetlb"): the child starts with an empty cache and maps fresh, reserved
 * pages; the parent does not reuse its pre-fork range either (it is released,
 * and the next allocation gets fresh pages). */
static void fork_child_drops_cached_hugetlb(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    unsigned char *a = rt_alloc("hugetlbfs", 8 * MIB, 0);
    memset(a, 0x33, 8 * MIB);
    RT_CHECK(hp_free(a) == HP_OK, "free");
    struct hp_cache_figures st;
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == 8 * MIB, "cached");
    fflush(NULL);
    pid_t pid = fork();
    RT_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        struct hp_cache_figures cs, cs2;
        hp_cache_get_figures(&cs);
        unsigned char *c = rt_alloc("hugetlbfs", 8 * MIB, HP_F_NOZERO);
        hp_cache_get_figures(&cs2);
        /* Fresh pages (they may land at a's address, which the child freed). */
        int ok = cs.bytes == 0 && c && cs2.hits == cs.hits && rt_nonzero(c, 0, 8 * MIB, 1) == 0;
        if (c)
            memset(c, 1, 8 * MIB);
        _exit(ok && hp_free(c) == HP_OK ? 0 : 1);
    }
    int status = 0;
    RT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "child status %d", status);
    struct hp_cache_figures st2;
    hp_cache_get_figures(&st);
    unsigned char *b = rt_alloc("hugetlbfs", 8 * MIB, HP_F_NOZERO);
    hp_cache_get_figures(&st2);
    RT_CHECK(b && st2.hits == st.hits && b[0] == 0 && rt_nonzero(b, 0, 8 * MIB, 1) == 0,
             "parent maps fresh pages: %llu hits before, %llu after",
             (unsigned long long)st.hits, (unsigned long long)st2.hits);
    RT_CHECK(hp_free(b) == HP_OK, "free");
    rt_expect_clean(before, "fork hugetlb");
}

/* Another thread's fork during a growth: a hugetlb block grows by moving
 * its pages into a larger mapping (mremap cannot expand hugetlb), and pages
 * moved after a fork, while a child still shares them, cannot be
 * copied-on-write by their owner once the pool is empty: on Linux 6.18 the
 * write loops in the kernel (mm/hugetlb.c hugetlb_wp -> unmap_ref_private
 * looks for the child's copy at the moved address). The fork comes from
 * another thread, asked by a hook on the backend's mremap: it falls between
 * hp_realloc's checks and the move unless libhp holds it back until the move
 * is done. Either way the parent must then be able to write its block with
 * the pool empty. */
static int race_pipe[2] = {-1, -1};
static _Atomic pid_t race_child = -1;
static _Atomic int race_asked;
static _Atomic int race_forked_first;  /* the fork finished before the move */

static void *forker(void *arg)
{
    (void)arg;
    while (!atomic_load(&race_asked)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* The child only holds the shared pages until the parent is done. */
        char c;
        alarm(30);
        while (read(race_pipe[0], &c, 1) < 0)
            ;
        _exit(0);
    }
    atomic_store(&race_child, pid);
    return NULL;
}

static void fork_before_remap(void)
{
    hp_os_set_hook(HP_OS_REMAP, NULL);
    atomic_store(&race_asked, 1);
    for (int i = 0; i < 200 && atomic_load(&race_child) < 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    atomic_store(&race_forked_first, atomic_load(&race_child) > 0);
}

/* Free 2 MiB pool pages nobody holds a reservation on. While a fork child
 * still maps the pages of a private hugetlb mapping that its owner has
 * unmapped, resv_hugepages reads as a negative count wrapped to unsigned
 * (measured on Linux 6.18: -2 after unmapping 2 such pages, 0 again when
 * the child exits), which pool_get clamps to LONG_MAX: no reservation then. */
static long pool_unreserved(void)
{
    long rsvd = pool_get(2048, "resv_hugepages");
    return pool_get(2048, "free_hugepages") - (rsvd == LONG_MAX ? 0 : rsvd);
}

/* Take the 2 MiB pool down to exactly left free pages (not reserved, not in
 * use). *drain is the block that took the rest (NULL if nothing was taken).
 * 0, or -1 if the pool had fewer than left or could not be taken. */
static int drain_pool_to(unsigned char **drain, long left)
{
    long free_now = pool_unreserved();
    if (free_now < left)
        return -1;
    *drain = free_now > left ? rt_alloc("hugetlbfs", (uint64_t)(free_now - left) * 2 * MIB,
                                        HP_F_PAGE_2M | HP_F_NOZERO) : NULL;
    if (free_now > left && !*drain)
        return -1;
    return pool_unreserved() == left ? 0 : -1;
}

/* Empty the 2 MiB pool: every page is reserved or in use afterwards. *drain
 * is the block that took what was free (NULL if nothing was). 0 or -1. */
static int drain_pool(unsigned char **drain)
{
    return drain_pool_to(drain, 0);
}

static int grow_across_fork(void *arg)
{
    (void)arg;
    signal(SIGALRM, SIG_DFL);
    alarm(20);  /* a write that loops in the kernel ends the test as a failure */
    CHILD_CHECK(pipe(race_pipe) == 0);
    pthread_t t;
    CHILD_CHECK(pthread_create(&t, NULL, forker, NULL) == 0);
    unsigned char *a = rt_alloc("hugetlbfs", 4 * MIB, HP_F_PAGE_2M);
    CHILD_CHECK(a != NULL);
    rt_stamp(a, 0, 4 * MIB, 11);
    hp_os_set_hook(HP_OS_REMAP, fork_before_remap);
    unsigned char *q = hp_realloc(a, 8 * MIB, 0);
    hp_os_set_hook(HP_OS_REMAP, NULL);
    CHILD_CHECK(pthread_join(t, NULL) == 0);
    CHILD_CHECK(atomic_load(&race_asked));  /* the growth went through mremap */
    CHILD_CHECK(atomic_load(&race_child) > 0);
    CHILD_CHECK(q != NULL);
    CHILD_CHECK(rt_check(q, 4 * MIB, 11) == 0);
    CHILD_CHECK(rt_nonzero(q, 4 * MIB, 8 * MIB, 0) == 0);
    unsigned char *drain;
    CHILD_CHECK(drain_pool(&drain) == 0);
    struct hp_block_info info = rt_info(q);
    fprintf(stderr, "# grown %s the fork: %s, %llu kB pages; pool free %ld, reserved %ld; "
            "writing the block\n", atomic_load(&race_forked_first) ? "after" : "before",
            info.backend, (unsigned long long)(info.page_size >> 10),
            pool_get(2048, "free_hugepages"), pool_get(2048, "resv_hugepages"));
    rt_stamp(q, 0, 8 * MIB, 12);
    CHILD_CHECK(rt_check(q, 8 * MIB, 12) == 0);
    CHILD_CHECK(write(race_pipe[1], "x", 1) == 1);
    int st = 0;
    CHILD_CHECK(waitpid(race_child, &st, 0) == race_child);
    CHILD_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHILD_CHECK(hp_free(q) == HP_OK);
    CHILD_CHECK(!drain || hp_free(drain) == HP_OK);
    return 0;
}

/* Run fn(arg) in a child process (run_in_child) and fail the test unless
 * it exits 0; a child its own alarm ended is said to have hung. */
static void child_exits_0(int (*fn)(void *), void *arg, const char *what)
{
    int st = run_in_child(fn, arg);
    if (st == 128 + SIGALRM)
        fprintf(stderr, "# %s hung writing its block (killed by its alarm)\n", what);
    RT_CHECK(st == 0, "%s exited with %d", what, st);
}

static void fork_during_growth_leaves_a_writable_block(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    child_exits_0(grow_across_fork, NULL, "the process that grew its block across a fork");
    rt_expect_clean(before, "fork during growth");
}

/* A pool block that existed at a fork grows by copy, never by moving or
 * extending its own mapping (README, "Fork and hugetlb"; lib/select.c,
 * hp_realloc_plan). Its pages are shared with the child, and the pool
 * reservations stay with the parent (Documentation/mm/hugetlbfs_reserv.rst):
 * once the pool is empty, the parent's write to pages it moved loops in the
 * kernel or gets SIGBUS (mm/hugetlb.c hugetlb_wp -> unmap_ref_private looks
 * for the child's copy at the new address), and its write to pages it kept
 * in place takes them away from the child, whose next read is SIGBUS. Here
 * the fork comes first and the growth after it, with no other thread.
 * arg NULL: the pool is empty before the growth, which copies out of the
 * pool or fails with the block unchanged. Else the pool keeps the 4 pages a
 * growth to 8 MiB could use in place or by a move, and is emptied after it.
 * Then the parent writes every page of its block, and the child, which kept
 * the old block mapped throughout, reads and writes its own copy. */
static int grow_after_fork(void *arg)
{
    signal(SIGALRM, SIG_DFL);
    alarm(20);  /* a write that loops in the kernel ends the test as a failure */
    unsigned char *a = hp_alloc(4 * MIB, HP_F_PAGE_2M);
    CHILD_CHECK(a != NULL);
    CHILD_CHECK(!strcmp(rt_info(a).backend, "hugetlbfs") && hugetlb_kb(a, 4 * MIB) == 4096);
    rt_stamp(a, 0, 4 * MIB, 51);
    int fds[2];
    CHILD_CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHILD_CHECK(pid >= 0);
    if (pid == 0) {
        /* Holds the old block until the parent is done or gone; then its
         * copy must still be there, readable and writable. */
        char ch;
        close(fds[1]);
        signal(SIGBUS, SIG_DFL);
        alarm(30);
        while (read(fds[0], &ch, 1) < 0)
            ;
        if (rt_check(a, 4 * MIB, 51) != 0)
            _exit(2);
        rt_stamp(a, 0, 4 * MIB, 53);
        _exit(rt_check(a, 4 * MIB, 53) == 0 ? 0 : 3);
    }
    close(fds[0]);
    unsigned char *drain, *rest = NULL;
    CHILD_CHECK(drain_pool_to(&drain, arg ? 4 : 0) == 0);
    unsigned char *q = hp_realloc(a, 8 * MIB, 0);
    int32_t err = hp_last_error();
    CHILD_CHECK(drain_pool(&rest) == 0);
    if (q) {
        struct hp_block_info info = rt_info(q);
        fprintf(stderr, "# grown after the fork (pool %s): %s at %s address, %llu kB pages, "
                "%ld kB hugetlb; pool empty, writing every page\n",
                arg ? "with room" : "empty", info.backend, q == a ? "the same" : "a new",
                (unsigned long long)(info.page_size >> 10), hugetlb_kb(q, 8 * MIB));
        CHILD_CHECK(info.usable_size >= 8 * MIB);
        CHILD_CHECK(rt_check(q, 4 * MIB, 51) == 0);
        rt_stamp(q, 0, 8 * MIB, 52);
        CHILD_CHECK(rt_check(q, 8 * MIB, 52) == 0);
        CHILD_CHECK(hp_free(q) == HP_OK);
    } else {
        /* Failed cleanly: the block is the caller's, as it was. Writing it
         * now would be the caller's own write under the kernel rule (it
         * takes the pages from the child), so it is only read and freed. */
        fprintf(stderr, "# growth after the fork failed (%s: %s)\n", hp_error_name(err),
                hp_last_error_detail());
        CHILD_CHECK(err != HP_OK);
        struct hp_block_info info = rt_info(a);
        CHILD_CHECK(!strcmp(info.backend, "hugetlbfs") && info.usable_size == 4 * MIB);
        CHILD_CHECK(rt_check(a, 4 * MIB, 51) == 0);
        CHILD_CHECK(hp_free(a) == HP_OK);
    }
    close(fds[1]);
    int st = 0;
    CHILD_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "# the fork child lost its copy of the block (status %d)\n", st);
    CHILD_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHILD_CHECK(!drain || hp_free(drain) == HP_OK);
    CHILD_CHECK(!rest || hp_free(rest) == HP_OK);
    return 0;
}

static void growth_after_fork_copies_pool_pages(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    child_exits_0(grow_after_fork, NULL, "the process that grew its block after a fork "
                  "(pool empty)");
    int room = 1;
    child_exits_0(grow_after_fork, &room, "the process that grew its block after a fork "
                  "(pool with room)");
    rt_expect_clean(before, "growth after fork");
}

/* The cache carves blocks out of one freed mapping. If two live blocks
 * shared a VMA, moving one (mremap) would take the reservation owner mark
 * off the other (lib/cache.c, cut_front, has the kernel's path): after a
 * fork, with the pool empty, the parent's write to it would be SIGBUS. The
 * growth of one carved block must leave its neighbour writable. */
static int remaps;

static void count_remap(void)
{
    remaps++;
}

/* 1 if one mremap moves a range of two hugetlb VMAs (Linux 6.17 and
 * later); 0 if the kernel refuses it with EFAULT, as older ones do
 * (mm/mremap.c: the old range had to lie within one VMA), else -errno. The
 * pages are MAP_NORESERVE and never touched: the pool gives none. */
static int kernel_moves_two_vmas(void)
{
    size_t len = 4 * MIB;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    unsigned char *room = mmap(NULL, len + 2 * MIB, PROT_NONE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (room == MAP_FAILED) {
        munmap(p, len);
        return -errno;
    }
    uintptr_t align = 2 * MIB;
    unsigned char *dst = (unsigned char *)(((uintptr_t)room + align - 1) & ~(align - 1));
    int rc = madvise(p + 2 * MIB, 2 * MIB, MADV_RANDOM) == 0 ? 0 : -errno;  /* two VMAs */
    if (rc == 0) {
        void *q = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        rc = q != MAP_FAILED ? 1 : errno == EFAULT ? 0 : -errno;
        if (q != MAP_FAILED)
            p = q;
    }
    munmap(p, len);
    munmap(room, len + 2 * MIB);  /* and whatever of it the move left */
    return rc;
}

/* arg NULL: b and c are carved by two allocations. Else b takes part of
 * the rest of a's mapping over by growing into it (hp_cache_adopt) and c
 * gets what is left. Then b grows again, by moving. */
static int grow_carved_then_fork(void *arg)
{
    signal(SIGALRM, SIG_DFL);
    alarm(20);
    unsigned char *a = rt_alloc("hugetlbfs", 6 * MIB, HP_F_PAGE_2M);
    CHILD_CHECK(a != NULL);
    memset(a, 1, 6 * MIB);
    CHILD_CHECK(hp_free(a) == HP_OK);
    uint64_t blen = 2 * MIB, clen = 4 * MIB;
    unsigned char *b = rt_alloc("hugetlbfs", blen, HP_F_PAGE_2M);
    CHILD_CHECK(b == a);
    if (arg) {
        blen = 4 * MIB;
        clen = 2 * MIB;
        CHILD_CHECK(hp_realloc(b, blen, 0) == a);  /* grown into the cached rest */
    }
    unsigned char *c = rt_alloc("hugetlbfs", clen, HP_F_PAGE_2M);
    CHILD_CHECK(c == a + blen);  /* both carved from a's mapping */
    rt_stamp(b, 0, blen, 21);
    rt_stamp(c, 0, clen, 22);
    hp_os_set_hook(HP_OS_REMAP, count_remap);
    unsigned char *q = hp_realloc(b, blen + 2 * MIB, 0);
    hp_os_set_hook(HP_OS_REMAP, NULL);
    CHILD_CHECK(q != NULL && q != b);
    /* The growth moved b's pages with mremap: a copy would have freed b
     * into the cache, which a's carving left empty. Grown into its
     * neighbour, b is two VMAs: a kernel that cannot move them with one
     * mremap gets the documented alternative, a copy (the hugetlbfs
     * backend's remap says HP_ENOTSUP, the core copies) and b's pages are
     * cached. */
    struct hp_cache_figures fig;
    hp_cache_get_figures(&fig);
    int moves = arg ? kernel_moves_two_vmas() : 1;
    CHILD_CHECK(moves >= 0);
    if (!moves)
        fprintf(stderr, "# this kernel cannot move two VMAs with one mremap (Linux < 6.17): "
                "the block was copied, %llu bytes cached\n", (unsigned long long)fig.bytes);
    CHILD_CHECK(remaps > 0 && fig.bytes == (moves ? 0 : blen));
    if (!moves)
        CHILD_CHECK(hp_cache_trim() == HP_OK);  /* b's pages back to the pool, to be drained */
    CHILD_CHECK(rt_check(q, blen, 21) == 0);
    int fds[2];
    CHILD_CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHILD_CHECK(pid >= 0);
    if (pid == 0) {
        /* Holds the shared pages until the parent is done or gone. */
        char ch;
        close(fds[1]);
        while (read(fds[0], &ch, 1) < 0)
            ;
        _exit(0);
    }
    close(fds[0]);
    unsigned char *drain;
    CHILD_CHECK(drain_pool(&drain) == 0);
    fprintf(stderr, "# pool empty; writing the block left behind at %p\n", (void *)c);
    rt_stamp(c, 0, clen, 23);
    CHILD_CHECK(rt_check(c, clen, 23) == 0);
    rt_stamp(q, 0, blen + 2 * MIB, 24);
    CHILD_CHECK(rt_check(q, blen + 2 * MIB, 24) == 0);
    close(fds[1]);
    int st = 0;
    CHILD_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHILD_CHECK(hp_free(q) == HP_OK && hp_free(c) == HP_OK);
    CHILD_CHECK(!drain || hp_free(drain) == HP_OK);
    return 0;
}

static void growth_of_a_carved_block_spares_its_neighbour(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    for (int adopt = 0; adopt < 2; adopt++) {
        int st = run_in_child(grow_carved_then_fork, adopt ? &adopt : NULL);
        RT_CHECK(st == 0, "the process that grew a block carved by %s exited with %d",
                 adopt ? "growth" : "allocation", st);
    }
    rt_expect_clean(before, "growth of a carved block");
}

/* The physical page under addr (/proc/self/pagemap: bits 0-54 when bit 63,
 * present, is set; Documentation/admin-guide/mm/pagemap.rst). 0 if not
 * present or not visible (the PFN needs CAP_SYS_ADMIN). */
static uint64_t pfn_of(const void *addr)
{
    FILE *f = fopen("/proc/self/pagemap", "re");
    uint64_t e = 0;
    if (!f)
        return 0;
    if (fseek(f, (long)((uintptr_t)addr / 4096 * 8), SEEK_SET) != 0 || fread(&e, 8, 1, f) != 1)
        e = 0;
    fclose(f);
    return e >> 63 ? e & ((UINT64_C(1) << 55) - 1) : 0;
}

#define PFN_SAMPLES 64

/* PFNs at PFN_SAMPLES offsets spread over [0, len) of p. */
static void pfns(const unsigned char *p, uint64_t len, uint64_t out[PFN_SAMPLES])
{
    for (unsigned i = 0; i < PFN_SAMPLES; i++)
        out[i] = pfn_of(p + len / PFN_SAMPLES * i / 4096 * 4096);
}

/* README: hp_realloc grows a block through its backend's remap, which
 * moves page tables, never bytes. A block named to each anonymous backend
 * (so pinned: a base-page block is never promoted) grows 3 times, every
 * time past all the address space it has (hp_info mapped_size), so that no
 * growth can be served by committing reserved headroom (mprotect): each
 * must call mremap (HP_OS_REMAP), keep the contents, and leave the same
 * physical pages under the old part (/proc/self/pagemap), where a copy
 * would have written new ones. */
static void growth_moves_page_tables_not_bytes(void **state)
{
    (void)state;
    if (!rt_available("thp-madvise"))
        skip();
    rt_cache(0, 0);  /* no cached range to adopt: every growth is the backend's */
    struct rt_snapshot before = rt_snap();
    const char *backends[] = {"thp-madvise", "anon-orders", "fallback"};
    for (unsigned k = 0; k < sizeof(backends) / sizeof(*backends); k++) {
        if (!rt_available(backends[k])) {
            fprintf(stderr, "# %s unavailable here: not checked\n", backends[k]);
            continue;
        }
        uint64_t size = 4 * MIB;
        unsigned char *p = rt_alloc(backends[k], size, 0);
        RT_CHECK(p != NULL, "%s: alloc", backends[k]);
        rt_stamp(p, 0, size, 61);
        unsigned moved = 0, pfn_seen = 0;
        for (int i = 0; i < 3; i++) {
            struct hp_block_info info = rt_info(p);
            uint64_t n = info.mapped_size + 2 * MIB + 12 * KIB;
            uint64_t old_pfn[PFN_SAMPLES], new_pfn[PFN_SAMPLES];
            pfns(p, size, old_pfn);
            uint64_t remaps0 = hp_os_calls(HP_OS_REMAP);
            unsigned char *q = hp_realloc(p, n, 0);
            RT_CHECK(q != NULL, "%s: growth %d to %llu", backends[k], i, (unsigned long long)n);
            uint64_t calls = hp_os_calls(HP_OS_REMAP) - remaps0;
            RT_CHECK(calls > 0, "%s: growth %d from %llu to %llu (mapped %llu) made no mremap",
                     backends[k], i, (unsigned long long)size, (unsigned long long)n,
                     (unsigned long long)info.mapped_size);
            RT_CHECK(!strcmp(rt_info(q).backend, backends[k]), "%s: growth %d moved to %s",
                     backends[k], i, rt_info(q).backend);
            RT_CHECK(rt_check(q, size, 61) == 0, "%s: growth %d lost contents at %llu",
                     backends[k], i, (unsigned long long)(rt_check(q, size, 61) - 1));
            pfns(q, size, new_pfn);
            for (unsigned j = 0; j < PFN_SAMPLES; j++) {
                if (!old_pfn[j])
                    continue;  /* not visible: no PFNs without CAP_SYS_ADMIN */
                pfn_seen++;
                RT_CHECK(new_pfn[j] == old_pfn[j], "%s: growth %d put offset %llu on "
                         "another page (pfn %#llx, was %#llx): bytes were copied",
                         backends[k], i, (unsigned long long)(size / PFN_SAMPLES * j),
                         (unsigned long long)new_pfn[j], (unsigned long long)old_pfn[j]);
            }
            moved += q != p;
            rt_stamp(q, size, n, 61);
            p = q;
            size = n;
        }
        struct hp_block_info info = rt_info(p);
        print_message("# %s: 3 growths to %llu MiB, %u moves, %llu kB pages, %u page "
                      "identities checked\n", backends[k], (unsigned long long)(size >> 20),
                      moved, (unsigned long long)(info.page_size >> 10), pfn_seen);
        RT_CHECK(hp_free(p) == HP_OK, "free");
    }
    rt_expect_clean(before, "growth by remap");
}

/* hp_free undoes the caller's mprotect and madvise(MADV_DONTFORK) on the
 * block's pages: a block reused from the cache is writable, zeroed and
 * inherited by a child, like a fresh one. Where the kernel cannot undo
 * MADV_DONTFORK (MADV_DOFORK is EINVAL: Linux 7.3 on hugetlb VMAs) the
 * block must not be cached at all: the next one is fresh, and inherited. */
static int reuse_after_user_changes(void *arg)
{
    const char *be = arg;
    unsigned char *p = rt_alloc(be, 4 * MIB, 0);
    CHILD_CHECK(p != NULL);
    memset(p, 7, 4 * MIB);
    CHILD_CHECK(mprotect(p, 4 * MIB, PROT_READ) == 0);
    CHILD_CHECK(hp_free(p) == HP_OK);
    struct hp_cache_figures c0, c1;
    hp_cache_get_figures(&c0);
    unsigned char *q = rt_alloc(be, 4 * MIB, 0);
    hp_cache_get_figures(&c1);
    CHILD_CHECK(q == p && c1.hits == c0.hits + 1);  /* the cached range came back */
    CHILD_CHECK(rt_nonzero(q, 0, 4 * MIB, 0) == 0);
    memset(q, 8, 4 * MIB);  /* read-only before: SIGSEGV */
    int undo = madvise(q, 4 * MIB, MADV_DOFORK) == 0;
    CHILD_CHECK(undo || errno == EINVAL);
    fprintf(stderr, "# %s: the kernel %s MADV_DOFORK\n", be, undo ? "accepts" : "refuses");
    CHILD_CHECK(madvise(q, 4 * MIB, MADV_DONTFORK) == 0);
    CHILD_CHECK(hp_free(q) == HP_OK);
    hp_cache_get_figures(&c0);
    unsigned char *r = rt_alloc(be, 4 * MIB, 0);
    hp_cache_get_figures(&c1);
    CHILD_CHECK(r != NULL);
    if (undo)
        CHILD_CHECK(r == q && c1.hits == c0.hits + 1);
    else
        CHILD_CHECK(c0.bytes == 0 && c1.hits == c0.hits);  /* released, not cached */
    memset(r, 9, 4 * MIB);
    fflush(NULL);
    pid_t pid = fork();
    CHILD_CHECK(pid >= 0);
    if (pid == 0)
        _exit(r[0] == 9 && r[4 * MIB - 1] == 9 ? 0 : 1);  /* not inherited: SIGSEGV */
    int st = 0;
    CHILD_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "# the fork child could not read the reused block (status %d)\n", st);
    CHILD_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHILD_CHECK(hp_free(r) == HP_OK);
    return 0;
}

static void freed_block_forgets_protection_and_fork_flag(void **state)
{
    (void)state;
    rt_cache(64 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    const char *backends[] = {"thp-madvise", "hugetlbfs"};
    unsigned checked = 0;
    for (unsigned i = 0; i < 2; i++) {
        if (!rt_available(backends[i])) {
            fprintf(stderr, "# %s unavailable here: not checked\n", backends[i]);
            continue;
        }
        checked++;
        int st = run_in_child(reuse_after_user_changes, (void *)backends[i]);
        RT_CHECK(st == 0, "%s: reuse after mprotect / MADV_DONTFORK exited with %d",
                 backends[i], st);
    }
    if (!checked)
        skip();
    rt_expect_clean(before, "reuse after user changes");
}

/* Where the kernel refuses MADV_DOFORK (as Linux 7.3 does on hugetlb
 * VMAs), hp_free caches a block only if none of its pages is marked
 * MADV_DONTFORK, which it reads from /proc/self/smaps ("dc"). The refusal
 * is injected here (the free's madvise fails with EINVAL), so this runs on
 * every kernel: a clean block is cached and comes back, a marked one is
 * unmapped, and the next block is inherited by a fork child. */
static int renew_where_dofork_is_refused(void *arg)
{
    const char *be = arg;
    struct hp_cache_figures c0, c1;
    for (int marked = 0; marked < 2; marked++) {
        unsigned char *p = rt_alloc(be, 4 * MIB, 0);
        CHILD_CHECK(p != NULL);
        memset(p, 5, 4 * MIB);
        if (marked)
            CHILD_CHECK(madvise(p, 4 * MIB, MADV_DONTFORK) == 0);
        uint64_t advised = hp_os_calls(HP_OS_ADVISE);
        hp_os_inject_fault(HP_OS_ADVISE, 1, EINVAL, 0);  /* hp_os_renew's MADV_DOFORK */
        CHILD_CHECK(hp_free(p) == HP_OK);
        hp_os_clear_faults();
        CHILD_CHECK(hp_os_calls(HP_OS_ADVISE) > advised);
        hp_cache_get_figures(&c0);
        CHILD_CHECK(c0.bytes == (marked ? 0 : 4 * MIB));
        unsigned char *q = rt_alloc(be, 4 * MIB, 0);
        hp_cache_get_figures(&c1);
        CHILD_CHECK(q != NULL && c1.hits == c0.hits + !marked && (marked || q == p));
        CHILD_CHECK(rt_nonzero(q, 0, 4 * MIB, 1) == 0);
        memset(q, 6, 4 * MIB);
        fflush(NULL);
        pid_t pid = fork();
        CHILD_CHECK(pid >= 0);
        if (pid == 0)
            _exit(q[0] == 6 && q[4 * MIB - 1] == 6 ? 0 : 1);  /* not inherited: SIGSEGV */
        int st = 0;
        CHILD_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        CHILD_CHECK(hp_free(q) == HP_OK);
    }
    /* The smaps reader itself: a flag of a range, and a hole in it. */
    unsigned char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    CHILD_CHECK(m != MAP_FAILED);
    CHILD_CHECK(hp_os_vma_flag(m, 3 * 4096, "dc") == 0);
    CHILD_CHECK(madvise(m + 2 * 4096, 4096, MADV_DONTFORK) == 0);
    CHILD_CHECK(hp_os_vma_flag(m, 2 * 4096, "dc") == 0);
    CHILD_CHECK(hp_os_vma_flag(m + 4096, 2 * 4096, "dc") == 1);
    CHILD_CHECK(munmap(m + 4096, 4096) == 0);
    CHILD_CHECK(hp_os_vma_flag(m, 3 * 4096, "dc") == -ENOMEM);
    CHILD_CHECK(hp_os_vma_flag(m, 4096, "d") == -EINVAL);
    munmap(m, 3 * 4096);
    return 0;
}

static void renew_checks_smaps_where_dofork_is_refused(void **state)
{
    (void)state;
    rt_cache(64 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    const char *backends[] = {"thp-madvise", "hugetlbfs"};
    unsigned checked = 0;
    for (unsigned i = 0; i < 2; i++) {
        if (!rt_available(backends[i])) {
            fprintf(stderr, "# %s unavailable here: not checked\n", backends[i]);
            continue;
        }
        checked++;
        int st = run_in_child(renew_where_dofork_is_refused, (void *)backends[i]);
        RT_CHECK(st == 0, "%s: free with MADV_DOFORK refused exited with %d", backends[i], st);
    }
    if (!checked)
        skip();
    rt_expect_clean(before, "renew where MADV_DOFORK is refused");
}

/* When the cache cannot split a pool range (madvise fails) it releases the
 * range and the allocation maps fresh pages; when it cannot undo the
 * caller's changes on a free (mprotect fails) the block is unmapped, not
 * cached. Either way nothing is lost or leaked. */
static void failed_split_or_renew_loses_nothing(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    struct hp_cache_figures fig;
    unsigned char *a = rt_alloc("hugetlbfs", 6 * MIB, HP_F_PAGE_2M);
    RT_CHECK(a && hp_free(a) == HP_OK, "6 MiB block");
    hp_cache_get_figures(&fig);
    RT_CHECK(fig.bytes == 6 * MIB, "cached: %llu bytes", (unsigned long long)fig.bytes);
    uint64_t advised = hp_os_calls(HP_OS_ADVISE);
    hp_os_inject_fault(HP_OS_ADVISE, 1, ENOMEM, 0);  /* the split's first madvise */
    unsigned char *b = rt_alloc("hugetlbfs", 2 * MIB, HP_F_PAGE_2M);
    hp_os_clear_faults();
    hp_cache_get_figures(&fig);
    RT_CHECK(hp_os_calls(HP_OS_ADVISE) > advised, "the carve tried to split");
    RT_CHECK(b != NULL && rt_info(b).page_size == 2 * MIB, "fresh 2 MiB block: %s",
             hp_last_error_detail());
    RT_CHECK(fig.bytes == 0, "the unsplittable range was released: %llu bytes cached",
             (unsigned long long)fig.bytes);
    memset(b, 3, 2 * MIB);
    RT_CHECK(hp_free(b) == HP_OK, "free b");
    hp_cache_trim();
    hp_cache_get_figures(&fig);
    uint64_t cached = fig.bytes;
    unsigned char *c = rt_alloc("hugetlbfs", 4 * MIB, HP_F_PAGE_2M);
    RT_CHECK(c != NULL, "4 MiB block");
    hp_os_inject_fault(HP_OS_PROTECT, 1, ENOMEM, 0);  /* hp_os_renew's mprotect */
    int32_t rc = hp_free(c);
    hp_os_clear_faults();
    hp_cache_get_figures(&fig);
    RT_CHECK(rc == HP_OK && fig.bytes == cached, "free without renew: %d, %llu bytes cached",
             rc, (unsigned long long)fig.bytes);
    rt_expect_clean(before, "failed split or renew");
}

/* A range for write_all. */
struct span {
    unsigned char *p;
    uint64_t len;
};

/* run_in_child body: write a stamp on every page of the span and read it
 * back; dies of SIGBUS (not cmocka's handler) if the kernel refuses. */
static int write_all(void *arg)
{
    const struct span *sp = arg;
    signal(SIGBUS, SIG_DFL);
    rt_stamp(sp->p, 0, sp->len, 31);
    return rt_check(sp->p, sp->len, 31) == 0 ? 0 : 1;
}

/* The exit status of a child that writes every page of [p, p + len). */
static int child_writes(unsigned char *p, uint64_t len)
{
    struct span sp = {p, len};
    return run_in_child(write_all, &sp);
}

/* HP_F_NOPOOL keeps a block out of the pool, so a fork child may write it
 * with the pool empty; hp_realloc with it copies a pool block out. The
 * same write to a pool block kills the child (the kernel rule the flag
 * avoids), which shows the pool really was empty. */
static int nopool_after_fork(void *arg)
{
    (void)arg;
    unsigned char *pool = hp_alloc(4 * MIB, 0);
    CHILD_CHECK(pool != NULL);
    CHILD_CHECK(hugetlb_kb(pool, 4 * MIB) == 4096);  /* the default takes the pool */
    rt_stamp(pool, 0, 4 * MIB, 41);
    unsigned char *n = hp_alloc(4 * MIB, HP_F_NOPOOL);
    CHILD_CHECK(n != NULL && hugetlb_kb(n, 4 * MIB) == 0);
    unsigned char *m = hp_alloc(4 * MIB, 0);
    CHILD_CHECK(m != NULL && hugetlb_kb(m, 4 * MIB) == 4096);
    rt_stamp(m, 0, 4 * MIB, 42);
    m = hp_realloc(m, 6 * MIB, HP_F_NOPOOL);  /* copied out of the pool */
    CHILD_CHECK(m != NULL && hugetlb_kb(m, 6 * MIB) == 0);
    CHILD_CHECK(rt_check(m, 4 * MIB, 42) == 0);
    struct hp_block_info info = rt_info(m);
    CHILD_CHECK(info.flags & HP_F_NOPOOL);
    fprintf(stderr, "# without a pool: %s, %llu kB pages\n", info.backend,
            (unsigned long long)(info.page_size >> 10));
    m = hp_realloc(m, 10 * MIB, HP_F_NOPOOL);  /* and grows where no pool is */
    CHILD_CHECK(m != NULL && hugetlb_kb(m, 10 * MIB) == 0);
    /* A block pinned to the pool backend cannot leave it: refused, unchanged. */
    unsigned char *pin = rt_alloc("hugetlbfs", 2 * MIB, HP_F_PAGE_2M);
    CHILD_CHECK(pin != NULL);
    rt_stamp(pin, 0, 2 * MIB, 43);
    CHILD_CHECK(hp_realloc(pin, 4 * MIB, HP_F_NOPOOL) == NULL);
    CHILD_CHECK(strstr(hp_last_error_detail(), "HP_F_NOPOOL") != NULL);
    CHILD_CHECK(rt_check(pin, 2 * MIB, 43) == 0 && hugetlb_kb(pin, 2 * MIB) == 2048);
    CHILD_CHECK(hp_free(pin) == HP_OK);
    unsigned char *drain;
    CHILD_CHECK(drain_pool(&drain) == 0);
    int st_n = child_writes(n, 4 * MIB), st_m = child_writes(m, 10 * MIB);
    int st_pool = child_writes(pool, 4 * MIB);
    fprintf(stderr, "# pool empty; children writing: no-pool block %d, resized block %d, "
            "pool block %d\n", st_n, st_m, st_pool);
    CHILD_CHECK(st_n == 0 && st_m == 0);
    CHILD_CHECK(st_pool == 128 + SIGBUS);
    CHILD_CHECK(rt_check(pool, 4 * MIB, 41) == 0);  /* the parent's copy is intact */
    CHILD_CHECK(hp_free(pool) == HP_OK && hp_free(n) == HP_OK && hp_free(m) == HP_OK);
    CHILD_CHECK(!drain || hp_free(drain) == HP_OK);
    return 0;
}

static void nopool_blocks_are_writable_after_fork_with_pool_empty(void **state)
{
    (void)state;
    if (!rt_available("hugetlbfs"))
        skip();
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    child_exits_0(nopool_after_fork, NULL, "the process with HP_F_NOPOOL blocks");
    rt_expect_clean(before, "HP_F_NOPOOL across fork");
}

int main(void)
{
    if (!is_root() || pool_set(2048, POOL_PAGES) < 32) {
        fprintf(stderr, "# no 2 MiB hugetlb pool here: hugetlb tests skip\n");
        knob_lock();
    }
    hp_reprobe();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thp_keeps_pmds_through_20_growths),
        cmocka_unit_test(hugetlb_stays_hugetlb_through_20_growths),
        cmocka_unit_test(pool_dry_mid_growth_moves_the_block),
        cmocka_unit_test(pool_dry_with_require_huge_fails_cleanly),
        cmocka_unit_test(cached_pool_pages_come_back),
        cmocka_unit_test(fork_child_drops_cached_hugetlb),
        cmocka_unit_test(fork_during_growth_leaves_a_writable_block),
        cmocka_unit_test(growth_after_fork_copies_pool_pages),
        cmocka_unit_test(growth_of_a_carved_block_spares_its_neighbour),
        cmocka_unit_test(growth_moves_page_tables_not_bytes),
        cmocka_unit_test(freed_block_forgets_protection_and_fork_flag),
        cmocka_unit_test(renew_checks_smaps_where_dofork_is_refused),
        cmocka_unit_test(failed_split_or_renew_loses_nothing),
        cmocka_unit_test(nopool_blocks_are_writable_after_fork_with_pool_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
