/*
 * What hp_realloc and the cache promise, one property per test:
 * realloc(NULL, n) and realloc(p, 0); the zeroing contract with and without
 * HP_F_NOZERO (fresh, reused, shrunk-then-grown, adopted memory); reused
 * memory that was sparse stays sparse; shrink drops RSS without moving;
 * small-block promotion rules; double-free detection through the cache; the
 * cache's limit and idle release; fork and threads.
 */
#include "rt.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void need(const char *backend)
{
    if (!rt_available(backend)) {
        print_message("# %s unavailable here\n", backend);
        skip();
    }
}

static int mapped(const void *p, size_t len)
{
    unsigned char v[64];
    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), len < 4096 * 64 ? len : 4096 * 64,
                   v) == 0;
}

static void null_and_zero(void **state)
{
    (void)state;
    rt_cache(64 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    unsigned char *p = hp_realloc(NULL, 10000, 0);
    RT_CHECK(p != NULL, "realloc(NULL, n) allocates");
    RT_CHECK(rt_nonzero(p, 0, 10000, 0) == 0, "realloc(NULL, n) is zeroed");
    memset(p, 7, 10000);
    /* A failing call leaves p untouched and valid. */
    RT_CHECK(hp_realloc(p, 20000, UINT64_C(1) << 40) == NULL, "bad flags fail");
    RT_CHECK(hp_last_error() == HP_EFLAGS, "bad flags: HP_EFLAGS");
    RT_CHECK(hp_realloc(p, (size_t)1 << 47, 0) == NULL, "huge size fails");
    RT_CHECK(hp_last_error() == HP_ESIZE, "huge size: HP_ESIZE");
    RT_CHECK(p[9999] == 7 && rt_info(p).usable_size >= 10000, "p still valid");
    RT_CHECK(hp_realloc(p, 0, 0) == NULL, "realloc(p, 0) returns NULL");
    RT_CHECK(hp_last_error() == HP_OK, "realloc(p, 0) succeeded");
    RT_CHECK(hp_free(p) == HP_EDOUBLEFREE, "p was freed by realloc(p, 0)");
    RT_CHECK(hp_realloc(p, 100, 0) == NULL && hp_last_error() == HP_EDOUBLEFREE,
             "realloc of a freed block");
    int x;
    RT_CHECK(hp_realloc(&x, 100, 0) == NULL && hp_last_error() == HP_EFOREIGN,
             "realloc of a foreign pointer");
    RT_CHECK(hp_realloc(NULL, 0, 0) == NULL && hp_last_error() == HP_ESIZE,
             "realloc(NULL, 0) is hp_alloc(0)");
    rt_expect_clean(before, "null_and_zero");
}

/* Reused memory reads as zero unless HP_F_NOZERO; with it, the same warm
 * pages come back as they were. */
static void zeroing_contract(void **state)
{
    (void)state;
    need("thp-madvise");
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    const uint64_t len = 6 * MIB;
    unsigned char *p = rt_alloc("thp-madvise", len, 0);
    RT_CHECK(p && rt_nonzero(p, 0, len, 0) == 0, "fresh block zeroed");
    memset(p, 0xab, len);
    RT_CHECK(hp_free(p) == HP_OK, "free");
    unsigned char *q = rt_alloc("thp-madvise", len, 0);
    RT_CHECK(q == p, "same size again reuses the cached range (%p, %p)", (void *)p, (void *)q);
    RT_CHECK(rt_nonzero(q, 0, len, 0) == 0, "reused block zeroed");
    memset(q, 0xcd, len);
    RT_CHECK(hp_free(q) == HP_OK, "free");
    unsigned char *r = rt_alloc("thp-madvise", len, HP_F_NOZERO);
    RT_CHECK(r == p && r[0] == 0xcd && r[len - 1] == 0xcd, "NOZERO hands the warm pages back");
    /* Shrink keeps the huge page the new end falls in; growing again must
     * clear what the caller wrote there before. */
    RT_CHECK(hp_realloc(r, MIB, 0) == r, "shrink in place");
    RT_CHECK(hp_realloc(r, 4 * MIB, 0) == r, "grow back in place");
    RT_CHECK(r[0] == 0xcd && r[MIB - 1] == 0xcd, "kept prefix");
    uint64_t bad = rt_nonzero(r, MIB, 4 * MIB, 0);
    RT_CHECK(bad == 0, "regrown tail not zero at %llu", (unsigned long long)(bad - 1));
    RT_CHECK(hp_free(r) == HP_OK, "free");
    /* Growth that takes over the cached rest of a range clears it. */
    hp_cache_flush(NULL, 0);
    unsigned char *big = rt_alloc("thp-madvise", 16 * MIB, 0);
    memset(big, 0xef, 16 * MIB);
    RT_CHECK(hp_free(big) == HP_OK, "free");
    unsigned char *small = rt_alloc("thp-madvise", 2 * MIB, 0);
    RT_CHECK(small == big, "carved from the start of the cached range");
    memset(small, 1, 2 * MIB);
    struct hp_cache_figures c0, c1;
    hp_cache_get_figures(&c0);
    unsigned char *grown = hp_realloc(small, 16 * MIB, 0);
    hp_cache_get_figures(&c1);
    RT_CHECK(grown == small, "grew in place into the cached rest");
    RT_CHECK(c1.adopted - c0.adopted == 14 * MIB, "adopted %llu bytes",
             (unsigned long long)(c1.adopted - c0.adopted));
    RT_CHECK(grown[0] == 1 && grown[2 * MIB - 1] == 1, "kept prefix");
    bad = rt_nonzero(grown, 2 * MIB, 16 * MIB, 0);
    RT_CHECK(bad == 0, "adopted tail not zero at %llu", (unsigned long long)(bad - 1));
    RT_CHECK(hp_free(grown) == HP_OK, "free");
    rt_expect_clean(before, "zeroing_contract");
}

/* A cached block that was mostly never touched must not come back fully
 * populated just to be cleared. */
static void sparse_reuse_stays_sparse(void **state)
{
    (void)state;
    need("thp-madvise");
    rt_cache(256 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    const uint64_t len = 64 * MIB;
    unsigned char *p = rt_alloc("thp-madvise", len, 0);
    memset(p, 3, 2 * MIB);
    memset(p + 40 * MIB, 3, 2 * MIB);
    RT_CHECK(hp_free(p) == HP_OK, "free");
    unsigned char *q = rt_alloc("thp-madvise", len, 0);
    RT_CHECK(q == p, "reused");
    long rss = smaps_field_kb(q, len, "Rss");
    RT_CHECK(rss <= 8 * 1024, "reused sparse block has %ld kB resident", rss);
    RT_CHECK(rt_nonzero(q, 0, 4 * MIB, 0) == 0 && rt_nonzero(q, 40 * MIB, 42 * MIB, 0) == 0,
             "touched parts cleared");
    RT_CHECK(hp_free(q) == HP_OK, "free");
    rt_expect_clean(before, "sparse");
}

static void shrink_releases_tail_in_place(void **state)
{
    (void)state;
    need("thp-madvise");
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    const uint64_t len = 32 * MIB;
    unsigned char *p = rt_alloc("thp-madvise", len, 0);
    memset(p, 9, len);
    long rss0 = smaps_field_kb(p, len, "Rss");
    unsigned char *q = hp_realloc(p, 3 * MIB + 123, 0);
    long rss1 = smaps_field_kb(p, len, "Rss");
    RT_CHECK(q == p, "shrink does not move");
    RT_CHECK(rss0 >= 32 * 1024 && rss1 <= 4 * 1024, "Rss %ld kB -> %ld kB", rss0, rss1);
    struct hp_block_info info = rt_info(q);
    RT_CHECK(info.usable_size == 3 * MIB + 4096 && info.page_size == 2 * MIB,
             "usable %llu page %llu", (unsigned long long)info.usable_size,
             (unsigned long long)info.page_size);
    RT_CHECK(q[3 * MIB] == 9, "kept bytes intact");
    RT_CHECK(hp_free(q) == HP_OK, "free");
    rt_expect_clean(before, "shrink");
}

static void small_block_rules(void **state)
{
    (void)state;
    need("thp-madvise");
    if (rt_available("anon-orders")) {
        print_message("# an mTHP size is enabled: base-page blocks go there first\n");
        skip();
    }
    rt_cache(64 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    /* Below a base page: one base page, resized in place up to it. */
    unsigned char *p = hp_alloc(100, 0);
    struct hp_block_info info = rt_info(p);
    RT_CHECK(!strcmp(info.backend, "fallback") && info.usable_size == 4096, "%s %llu",
             info.backend, (unsigned long long)info.usable_size);
    memset(p, 4, 100);
    RT_CHECK(hp_realloc(p, 4000, 0) == p, "in place within the page");
    RT_CHECK(hp_realloc(p, 10, 0) == p, "shrink within the page");
    /* Below the smallest huge page the selection would use: base pages. */
    p = hp_realloc(p, MIB + 5, 0);
    RT_CHECK(p && !strcmp(rt_info(p).backend, "fallback"), "1 MiB stays on base pages");
    RT_CHECK(p[0] == 4 && p[9] == 4, "kept");
    memset(p, 4, MIB + 5);
    /* Growing to where selection picks huge pages promotes the block: one
     * copy of at most one huge page. */
    p = hp_realloc(p, 3 * MIB, 0);
    info = rt_info(p);
    RT_CHECK(strcmp(info.backend, "fallback") && info.page_size >= 2 * MIB,
             "3 MiB promoted to huge pages, got %s", info.backend);
    RT_CHECK(p[0] == 4 && p[MIB + 4] == 4 && rt_nonzero(p, MIB + 5, 3 * MIB, 0) == 0,
             "contents moved, tail zero");
    RT_CHECK(hp_free(p) == HP_OK, "free");
    /* A block whose backend was named is not promoted. */
    p = rt_alloc("fallback", 100, 0);
    p = hp_realloc(p, 5 * MIB, 0);
    RT_CHECK(p && !strcmp(rt_info(p).backend, "fallback"), "named fallback stays");
    RT_CHECK(hp_free(p) == HP_OK, "free");
    /* A block whose allocation excluded every huge backend stays on base
     * pages: the exclusions hold for every resize, even one that requires
     * huge pages now (it fails, the block unchanged). */
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.exclude = "hugetlbfs,thp-madvise,anon-orders";
    p = hp_alloc_ex(4 * MIB, &o);
    RT_CHECK(p && !strcmp(rt_info(p).backend, "fallback"), "excluded huge backends");
    p = hp_realloc(p, 8 * MIB, 0);
    RT_CHECK(p && !strcmp(rt_info(p).backend, "fallback"), "4 MiB base-page block stays");
    p[0] = 42;
    RT_CHECK(hp_realloc(p, 8 * MIB, HP_F_REQUIRE_HUGE) == NULL && hp_last_error() == HP_ENOHUGE,
             "REQUIRE_HUGE with every huge backend excluded");
    RT_CHECK(p[0] == 42 && !strcmp(rt_info(p).backend, "fallback"), "unchanged");
    RT_CHECK(hp_free(p) == HP_OK, "free");
    /* A large base-page block is not copied to huge pages just for growing
     * (here it asked for 4 KiB pages, which its resizes keep) ... */
    p = hp_alloc(4 * MIB, HP_F_PAGE_4K);
    RT_CHECK(p && rt_info(p).page_size == 4 * KIB, "4 KiB pages");
    p = hp_realloc(p, 8 * MIB, 0);
    RT_CHECK(p && rt_info(p).page_size == 4 * KIB, "8 MiB stays on 4 KiB pages");
    /* ... unless the caller asks for huge pages now. */
    p[0] = 42;
    p = hp_realloc(p, 8 * MIB, HP_F_REQUIRE_HUGE | HP_F_PAGE_2M);
    RT_CHECK(p && rt_info(p).page_size >= 2 * MIB && p[0] == 42, "REQUIRE_HUGE moved it");
    RT_CHECK(hp_free(p) == HP_OK, "free");
    rt_expect_clean(before, "small blocks");
}

static void double_free_through_the_cache(void **state)
{
    (void)state;
    need("thp-madvise");
    rt_cache(64 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    void *p = rt_alloc("thp-madvise", 4 * MIB, 0);
    RT_CHECK(hp_free(p) == HP_OK, "free");
    RT_CHECK(hp_free(p) == HP_EDOUBLEFREE, "double free of a cached block");
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    RT_CHECK(hp_info(p, &info) == HP_EDOUBLEFREE, "hp_info of a cached block");
    /* Not page-aligned: no block ever started there. (p + 2 MiB may have
     * been an earlier block of this process, and then its double free.) */
    RT_CHECK(hp_free((char *)p + 2 * MIB + 64) == HP_EFOREIGN, "inside a cached range");
    void *q = rt_alloc("thp-madvise", 4 * MIB, 0);
    RT_CHECK(q == p, "reused");
    RT_CHECK(hp_free(q) == HP_OK, "the new block frees");
    RT_CHECK(hp_free(q) == HP_EDOUBLEFREE, "and only once");
    rt_expect_clean(before, "double free");
}

static void limit_and_idle_release(void **state)
{
    (void)state;
    need("thp-madvise");
    struct rt_snapshot before = rt_snap();
    struct hp_cache_figures st;
    rt_cache(8 * MIB, 0);
    /* Larger than the whole cache: released at once. */
    void *big = rt_alloc("thp-madvise", 16 * MIB, 0);
    RT_CHECK(hp_free(big) == HP_OK, "free");
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == 0 && !mapped(big, 4096), "16 MiB not cached (%llu bytes)",
             (unsigned long long)st.bytes);
    /* Above the limit, the least recently freed range goes first. */
    void *a = rt_alloc("thp-madvise", 4 * MIB, 0), *b = rt_alloc("thp-madvise", 4 * MIB, 0),
         *c = rt_alloc("thp-madvise", 4 * MIB, 0);
    RT_CHECK(hp_free(a) == HP_OK && hp_free(b) == HP_OK, "free a, b");
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == 8 * MIB, "a and b cached: %llu", (unsigned long long)st.bytes);
    struct timespec ms = {0, 20 * 1000 * 1000};
    nanosleep(&ms, NULL);
    RT_CHECK(hp_free(c) == HP_OK, "free c");
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes <= 8 * MIB, "at most the limit: %llu", (unsigned long long)st.bytes);
    RT_CHECK(!mapped(a, 4096) && mapped(c, 4096), "a (oldest) released, c kept");
    /* Idle ranges go at the next cache operation after the idle time. */
    rt_cache(64 * MIB, 50);
    void *d = rt_alloc("thp-madvise", 6 * MIB, 0);  /* fits no cached range */
    struct timespec idle = {0, 150 * 1000 * 1000};
    nanosleep(&idle, NULL);
    RT_CHECK(hp_free(d) == HP_OK, "free d");
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == 6 * MIB, "idle ranges released: %llu bytes left",
             (unsigned long long)st.bytes);
    RT_CHECK(!mapped(b, 4096) && !mapped(c, 4096) && mapped(d, 4096),
             "b and c released after idling, d kept");
    /* A limit of 0 turns the cache off. */
    rt_cache(0, 0);
    void *e = rt_alloc("thp-madvise", 2 * MIB, 0);
    RT_CHECK(hp_free(e) == HP_OK, "free");
    hp_cache_get_figures(&st);
    RT_CHECK(st.bytes == 0 && !mapped(e, 4096), "disabled cache keeps nothing");
    rt_expect_clean(before, "limit");
}

static void fork_keeps_both_sides_working(void **state)
{
    (void)state;
    need("thp-madvise");
    rt_cache(128 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    unsigned char *live = rt_alloc("thp-madvise", 8 * MIB, 0);
    rt_stamp(live, 0, 8 * MIB, 77);
    void *cached = rt_alloc("thp-madvise", 16 * MIB, 0);
    memset(cached, 0x11, 16 * MIB);
    RT_CHECK(hp_free(cached) == HP_OK, "free");
    struct hp_cache_figures st0, st1;
    hp_cache_get_figures(&st0);
    fflush(NULL);
    pid_t pid = fork();
    RT_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        alarm(20);
        unsigned char *c = rt_alloc("thp-madvise", 16 * MIB, 0);
        int ok = c == cached && rt_nonzero(c, 0, 16 * MIB, 0) == 0;
        memset(c, 0x22, 16 * MIB);
        unsigned char *g = hp_realloc(live, 40 * MIB, 0);
        ok = ok && g && rt_check(g, 8 * MIB, 77) == 0;
        ok = ok && hp_free(g) == HP_OK && hp_free(c) == HP_OK;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    RT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "child status %d", status);
    hp_cache_get_figures(&st1);
    RT_CHECK(st1.bytes == st0.bytes, "the parent's cache did not change");
    RT_CHECK(rt_check(live, 8 * MIB, 77) == 0, "parent's block intact");
    unsigned char *c = rt_alloc("thp-madvise", 16 * MIB, HP_F_NOZERO);
    RT_CHECK(c == cached && c[0] == 0x11, "parent still reuses its own pages");
    RT_CHECK(hp_free(c) == HP_OK && hp_free(live) == HP_OK, "free");
    rt_expect_clean(before, "fork");
}

#define THREADS 4

struct worker {
    pthread_t t;
    uint64_t seed;
    unsigned iters;
    char fail[300];
};

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->seed;
    unsigned char *p[3] = {0};
    uint64_t size[3] = {0}, seed[3] = {1, 2, 3};
    for (unsigned i = 0; i < w->iters && !w->fail[0]; i++) {
        int k = (int)(rt_rand(&rng) % 3);
        uint64_t n = 64 * KIB + rt_rand(&rng) % (12 * MIB);
        if (!p[k]) {
            p[k] = hp_alloc(n, 0);
            if (!p[k] || rt_nonzero(p[k], 0, n, 1)) {
                snprintf(w->fail, sizeof(w->fail), "alloc %llu", (unsigned long long)n);
                break;
            }
            rt_stamp(p[k], 0, n, seed[k]);
            size[k] = n;
        } else if (rt_rand(&rng) % 4 == 0) {
            if (rt_check(p[k], size[k], seed[k]) || hp_free(p[k]) != HP_OK)
                snprintf(w->fail, sizeof(w->fail), "free");
            p[k] = NULL;
        } else {
            unsigned char *q = hp_realloc(p[k], n, 0);
            uint64_t keep = n < size[k] ? n : size[k], bad = q ? rt_check(q, keep, seed[k]) : 0;
            if (!q || bad) {
                snprintf(w->fail, sizeof(w->fail), "realloc %p %llu -> %p %llu: %s (%s), bad word %llu",
                         (void *)p[k], (unsigned long long)size[k], (void *)q,
                         (unsigned long long)n, hp_error_name(hp_last_error()),
                         hp_last_error_detail(), (unsigned long long)bad);
                if (q)
                    p[k] = q;
                break;
            }
            rt_stamp(q, keep, n, seed[k]);
            p[k] = q;
            size[k] = n;
        }
    }
    for (int k = 0; k < 3; k++)
        if (p[k])
            hp_free(p[k]);
    return NULL;
}

static void run_threads(struct worker *w, unsigned iters)
{
    memset(w, 0, sizeof(*w) * THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i].seed = 1000 + (uint64_t)i + iters;
        w[i].iters = iters;
        RT_CHECK(pthread_create(&w[i].t, NULL, work, &w[i]) == 0, "thread");
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].t, NULL);
        RT_CHECK(!w[i].fail[0], "thread %d: %s", i, w[i].fail);
    }
}

static void threads_share_the_cache(void **state)
{
    (void)state;
    rt_cache(48 * MIB, 0);
    struct worker w[THREADS];
    /* glibc keeps thread stacks and malloc arenas: a short round first. */
    run_threads(w, 50);
    struct rt_snapshot before = rt_snap();
    struct hp_cache_figures st0, st;
    hp_cache_get_figures(&st0);
    run_threads(w, 1500);
    hp_cache_get_figures(&st);
    print_message("# %d threads: cache %llu hits, %llu misses, %llu MiB adopted, %llu MiB "
                  "released\n", THREADS, (unsigned long long)(st.hits - st0.hits),
                  (unsigned long long)(st.misses - st0.misses),
                  (unsigned long long)((st.adopted - st0.adopted) >> 20),
                  (unsigned long long)((st.released - st0.released) >> 20));
    rt_expect_clean(before, "threads");
}

int main(void)
{
    /* The small-block rules below assume no mTHP size between the base page
     * and the PMD (restored at exit). */
    if (!is_root() || knob_set("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled",
                               "never") != 0)
        knob_lock();
    hp_reprobe();  /* plugins loaded (and mTHP probed) before any maps count */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_and_zero),
        cmocka_unit_test(zeroing_contract),
        cmocka_unit_test(sparse_reuse_stays_sparse),
        cmocka_unit_test(shrink_releases_tail_in_place),
        cmocka_unit_test(small_block_rules),
        cmocka_unit_test(double_free_through_the_cache),
        cmocka_unit_test(limit_and_idle_release),
        cmocka_unit_test(fork_keeps_both_sides_working),
        cmocka_unit_test(threads_share_the_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
