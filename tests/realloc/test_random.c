/*
 * Random grow/shrink/free sequences on every backend, thousands of steps
 * each: after every step the kept contents match their pattern, the grown
 * tail reads as zero (unless HP_F_NOZERO), hp_info agrees with what was
 * asked, and at the end nothing is left (maps lines, pool pages and
 * reservations). The cache is on with a small limit, so reuse, adoption and
 * eviction all happen along the way.
 */
#include "rt.h"

#include <stdint.h>

#define SLOTS 4
#define POOL_PAGES 48

struct slot {
    unsigned char *p;
    uint64_t size, usable, seed;
};

struct tally {
    unsigned allocs, grows, shrinks, frees, moved, nozero;
};

static void check_block(const char *backend, uint64_t ps, const struct slot *s)
{
    struct hp_block_info info = rt_info(s->p);
    uint64_t unit = !strcmp(info.backend, "hugetlbfs") ? info.page_size : 4096;
    if (backend) {
        RT_CHECK(!strcmp(info.backend, backend), "block of %llu bytes served by %s",
                 (unsigned long long)s->size, info.backend);
        RT_CHECK(info.page_size == ps, "page size %llu, expected %llu",
                 (unsigned long long)info.page_size, (unsigned long long)ps);
    }
    RT_CHECK(info.usable_size >= s->size && info.usable_size - s->size < unit,
             "usable %llu for %llu bytes", (unsigned long long)info.usable_size,
             (unsigned long long)s->size);
    RT_CHECK(info.mapped_size >= info.usable_size, "mapped %llu < usable %llu",
             (unsigned long long)info.mapped_size, (unsigned long long)info.usable_size);
    RT_CHECK((uintptr_t)s->p % info.page_size == 0, "block %p not aligned to %llu",
             (void *)s->p, (unsigned long long)info.page_size);
}

static void step(const char *backend, uint64_t ps, uint64_t max, struct slot *s, uint64_t *rng,
                 struct tally *t)
{
    uint64_t flags = rt_rand(rng) % 3 == 0 ? HP_F_NOZERO : 0;
    t->nozero += flags != 0;
    if (!s->p) {
        s->size = rt_size(rng, max);
        s->p = rt_alloc(backend, s->size, flags);
        RT_CHECK(s->p != NULL, "alloc of %llu bytes", (unsigned long long)s->size);
        if (!flags)
            RT_CHECK(rt_nonzero(s->p, 0, s->size, 1) == 0, "fresh block not zero");
        rt_stamp(s->p, 0, s->size, s->seed);
        s->usable = rt_info(s->p).usable_size;
        t->allocs++;
        return;
    }
    if (rt_rand(rng) % 10 == 0) {
        RT_CHECK(rt_check(s->p, s->size, s->seed) == 0, "contents before free");
        RT_CHECK(hp_free(s->p) == HP_OK, "free");
        s->p = NULL;
        t->frees++;
        return;
    }
    uint64_t size = rt_size(rng, max), keep = size < s->size ? size : s->size;
    unsigned char *q = hp_realloc(s->p, size, flags);
    RT_CHECK(q != NULL, "realloc %llu -> %llu", (unsigned long long)s->size,
             (unsigned long long)size);
    uint64_t bad = rt_check(q, keep, s->seed);
    RT_CHECK(bad == 0, "realloc %llu -> %llu lost the word at %llu (%p -> %p)",
             (unsigned long long)s->size, (unsigned long long)size,
             (unsigned long long)(bad - 1), (void *)s->p, (void *)q);
    if (!flags && size > s->usable) {
        bad = rt_nonzero(q, s->usable, size, 1);
        RT_CHECK(bad == 0, "grown tail not zero at %llu (usable was %llu, now %llu bytes)",
                 (unsigned long long)(bad - 1), (unsigned long long)s->usable,
                 (unsigned long long)size);
    }
    t->moved += q != s->p;
    t->grows += size > s->size;
    t->shrinks += size < s->size;
    rt_stamp(q, keep, size, s->seed);
    s->p = q;
    s->size = size;
    s->usable = rt_info(q).usable_size;
    (void)backend;
    (void)ps;
}

static void run(const char *backend, uint64_t ps, uint64_t max, unsigned steps, uint64_t seed)
{
    if (backend && !rt_available(backend)) {
        print_message("# %s unavailable here\n", backend);
        skip();
    }
    rt_cache(64 * MIB, 0);
    struct rt_snapshot before = rt_snap();
    struct slot s[SLOTS];
    struct tally t = {0};
    memset(s, 0, sizeof(s));
    uint64_t rng = seed;
    for (unsigned i = 0; i < SLOTS; i++)
        s[i].seed = seed * 31 + i + 1;
    /* HPTEST_OPS caps the steps (the ASan stage: memory errors, not
     * coverage of long sequences, are what it looks for). */
    unsigned long cap = env_count("HPTEST_OPS", steps);
    if (cap < steps)
        steps = (unsigned)cap;
    struct hp_cache_figures c0, c1;
    hp_cache_get_figures(&c0);
    for (unsigned i = 0; i < steps; i++) {
        struct slot *sl = &s[rt_rand(&rng) % SLOTS];
        step(backend, ps, max, sl, &rng, &t);
        if (sl->p)
            check_block(backend, ps, sl);
    }
    hp_cache_get_figures(&c1);
    for (unsigned i = 0; i < SLOTS; i++) {
        if (!s[i].p)
            continue;
        RT_CHECK(rt_check(s[i].p, s[i].size, s[i].seed) == 0, "contents at the end");
        RT_CHECK(hp_free(s[i].p) == HP_OK, "free at the end");
    }
    print_message("# %s: %u steps: %u allocs, %u grows (%u moved), %u shrinks, %u frees, %u "
                  "NOZERO; cache %llu hits, %llu MiB adopted\n",
                  backend ? backend : "any", steps, t.allocs, t.grows, t.moved, t.shrinks,
                  t.frees, t.nozero, (unsigned long long)(c1.hits - c0.hits),
                  (unsigned long long)((c1.adopted - c0.adopted) >> 20));
    rt_expect_clean(before, backend ? backend : "any");
}

static void random_fallback(void **state)
{
    (void)state;
    run("fallback", 4096, 8 * MIB, 3000, 11);
}

static void random_thp(void **state)
{
    (void)state;
    run("thp-madvise", 2 * MIB, 32 * MIB, 3000, 12);
}

static void random_mthp_64k(void **state)
{
    (void)state;
    run("anon-orders", 64 * KIB, 8 * MIB, 3000, 13);
}

static void random_hugetlb(void **state)
{
    (void)state;
    /* SLOTS blocks of at most 11 pages never drain a 48-page pool, so every
     * block stays hugetlb (the dry pool has its own test). */
    run("hugetlbfs", 2 * MIB, 22 * MIB, 2000, 14);
}

static void random_any_backend(void **state)
{
    (void)state;
    run(NULL, 0, 32 * MIB, 2000, 15);
}

int main(void)
{
    if (is_root()) {
        if (pool_set(2048, POOL_PAGES) != POOL_PAGES)
            fprintf(stderr, "# could not reserve %d pages of 2 MiB\n", POOL_PAGES);
        if (knob_set("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled", "madvise") != 0)
            fprintf(stderr, "# no 64 KiB mTHP control\n");
    } else {
        knob_lock();
    }
    hp_reprobe();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_fallback),
        cmocka_unit_test(random_thp),
        cmocka_unit_test(random_mthp_64k),
        cmocka_unit_test(random_hugetlb),
        cmocka_unit_test(random_any_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
