/*
 * Shared helpers of the realloc suite: content patterns, the knobs every
 * program sets up (under the machine-wide knob lock), and the checks that
 * nothing is left behind. The suite links the internal core for the cache's
 * test hooks (lib/cache.h).
 */
#ifndef HP_TEST_RT_H
#define HP_TEST_RT_H

#include <hp.h>

#include "cache.h"
#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define RT_STRIDE 4096u

#define RT_CHECK(cond, ...)                                                          \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, " [%s: %s]\n", hp_error_name(hp_last_error()),          \
                    hp_last_error_detail());                                         \
            fail();                                                                  \
        }                                                                            \
    } while (0)

static inline uint64_t rt_word(uint64_t seed, uint64_t off)
{
    uint64_t x = seed ^ (off * UINT64_C(0x9e3779b97f4a7c15));
    x ^= x >> 31;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 29;
    return x | 1;  /* never 0: a zeroed page never passes */
}

/* One word at every 4 KiB offset in [from, to) (whole words only). Depends
 * on (seed, offset) only, so the kept prefix of a resized block stays valid
 * and every page of a block is touched once. */
static inline void rt_stamp(void *p, uint64_t from, uint64_t to, uint64_t seed)
{
    unsigned char *c = p;
    uint64_t off = from / RT_STRIDE * RT_STRIDE;
    if (off + 8 <= from)
        off += RT_STRIDE;  /* that word is whole in the kept part already */
    for (; off + 8 <= to; off += RT_STRIDE) {
        uint64_t w = rt_word(seed, off);
        memcpy(c + off, &w, 8);
    }
}

/* Offset + 1 of the first stamp of [0, len) that is wrong, or 0. */
static inline uint64_t rt_check(const void *p, uint64_t len, uint64_t seed)
{
    const unsigned char *c = p;
    for (uint64_t off = 0; off + 8 <= len; off += RT_STRIDE) {
        uint64_t w;
        memcpy(&w, c + off, 8);
        if (w != rt_word(seed, off))
            return off + 1;
    }
    return 0;
}

/* Offset + 1 of the first non-zero byte of [from, to), or 0. With
 * sampled != 0 only one word per 4 KiB page is read. */
static inline uint64_t rt_nonzero(const void *p, uint64_t from, uint64_t to, int sampled)
{
    const unsigned char *c = p;
    if (sampled) {
        for (uint64_t off = from; off + 8 <= to; off += RT_STRIDE) {
            uint64_t w;
            memcpy(&w, c + off, 8);
            if (w)
                return off + 1;
        }
        return 0;
    }
    for (uint64_t off = from; off < to; off++)
        if (c[off])
            return off + 1;
    return 0;
}

static inline uint64_t rt_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Log-uniform in [1, max]. */
static inline uint64_t rt_size(uint64_t *s, uint64_t max)
{
    unsigned bits = 64 - (unsigned)__builtin_clzll(max);
    uint64_t v = rt_rand(s) & ((UINT64_C(1) << (1 + rt_rand(s) % bits)) - 1);
    return v == 0 ? 1 : v > max ? max : v;
}

static inline struct hp_block_info rt_info(const void *p)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    RT_CHECK(hp_info(p, &info) == HP_OK, "hp_info(%p)", p);
    return info;
}

static inline int rt_available(const char *name)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && !strcmp(bi.name, name))
            return (int)bi.available;
    }
    return 0;
}

/* A block from the named backend. */
static inline void *rt_alloc(const char *backend, uint64_t size, uint64_t flags)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = backend;
    o.flags = flags;
    return hp_alloc_ex(size, &o);
}

/* The cache on, with this limit and idle time. */
static inline void rt_cache(uint64_t max_bytes, uint64_t idle_ms)
{
    hp_cache_set_limits(max_bytes, idle_ms);
}

/* Every cached range back to the kernel, then the process must look as it
 * did before the test: no extra mappings, no pool pages or reservations. */
struct rt_snapshot {
    long maps, free2m, rsvd2m;
};

/* The cache's release thread (lib/cache.c) maps a stack the first time it
 * starts, and glibc keeps that stack for the next thread it creates: start
 * it once, before the first baseline, so every later snapshot sees the same
 * mappings whether or not the thread is running. */
static inline void rt_warm_release_thread(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    struct hp_cache_stats saved = HP_CACHE_STATS_INIT;
    hp_cache_get_stats(&saved);
    struct hp_cache_config on = HP_CACHE_CONFIG_INIT;
    on.max_bytes = 64 * MIB;
    hp_cache_configure(&on);
    void *p = rt_alloc("thp-madvise", 2 * MIB, 0);
    if (!p)
        p = hp_alloc(2 * MIB, 0);
    hp_free(p);
    struct hp_cache_config back = {sizeof(back), 0, saved.max_bytes, saved.idle_ms,
                                   saved.pool_idle_ms};
    hp_cache_configure(&back);
}

static inline struct rt_snapshot rt_snap(void)
{
    rt_warm_release_thread();
    hp_cache_flush(NULL, 0);
    /* The flush woke the release thread, which leaves now that the cache is
     * empty: count the mappings without it, as in every other snapshot. */
    for (int i = 0; i < 200; i++) {
        struct hp_cache_stats st = HP_CACHE_STATS_INIT;
        if (hp_cache_get_stats(&st) != HP_OK || !st.reaper_running)
            break;
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    struct rt_snapshot s = {maps_count(), pool_get(2048, "free_hugepages"),
                            pool_get(2048, "resv_hugepages")};
    return s;
}

static inline void rt_dump_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        fprintf(stderr, "#   %s", line);
    if (f)
        fclose(f);
}

static inline void rt_expect_clean(struct rt_snapshot before, const char *what)
{
    /* A flush wakes the release thread, which then leaves; its exit (and,
     * under ASan, its per-thread mappings) settles within milliseconds. A
     * leaked mapping stays: look again for up to 2 s before calling it one. */
    struct rt_snapshot now = rt_snap();
    for (int i = 0; i < 200 && now.maps != before.maps; i++) {
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
        now = rt_snap();
    }
    if (now.maps != before.maps)
        rt_dump_maps();
    RT_CHECK(now.maps == before.maps, "%s: %ld maps lines, %ld before", what, now.maps,
             before.maps);
    RT_CHECK(now.free2m == before.free2m && now.rsvd2m == before.rsvd2m,
             "%s: 2 MiB pool free %ld rsvd %ld, before free %ld rsvd %ld", what, now.free2m,
             now.rsvd2m, before.free2m, before.rsvd2m);
}

#endif
