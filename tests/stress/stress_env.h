/*
 * Shared set-up of the stress programs: a small 2 MiB hugetlb pool and one
 * mTHP size in "madvise" mode, so that every backend can serve (both knobs
 * are restored at exit or on a fatal signal by tests/support), and the list
 * of backends that are available after that.
 */
#ifndef HP_STRESS_ENV_H
#define HP_STRESS_ENV_H

#include <hp.h>

#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cache keeps freed huge-page memory for reuse; what it holds is not a
 * leak, so it is emptied before anything is counted. */
#if __has_include("cache.h")
#include "cache.h"
#define HP_TEST_HAVE_CACHE 1
static inline void drop_caches(void)
{
    hp_cache_flush(NULL, 0);
}

/* The stress and fault tests want the cache's locks and reuse paths under
 * load with nothing released behind their back: a fixed limit, no idle
 * release (the release thread then has nothing to do). */
static inline void enable_cache(void)
{
    hp_cache_set_limits(UINT64_C(256) << 20, 0);
}
#else
static inline void drop_caches(void)
{
}

static inline void enable_cache(void)
{
}
#endif

#define STRESS_POOL_PAGES 8
#define STRESS_MAX_BACKENDS 8

/* NULL first: "libhp chooses". */
static const char *stress_backends[STRESS_MAX_BACKENDS];
static unsigned stress_n_backends;

/* Under memcheck (the valgrind test setup sets HPTEST_VALGRIND) and TSan,
 * the tool's own mappings come and go in /proc/self/maps: line counts
 * prove nothing there, and only the registry and the pool are checked. */
#if defined(__SANITIZE_THREAD__)
#define HP_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HP_TEST_TSAN 1
#endif
#endif

static inline int maps_unreliable(void)
{
#ifdef HP_TEST_TSAN
    return 1;
#else
    return getenv("HPTEST_VALGRIND") != NULL;
#endif
}

static inline int under_valgrind(void)
{
    return getenv("HPTEST_VALGRIND") != NULL;
}

/* Ops per thread: HPTEST_OPS overrides (the valgrind setup lowers it). */
static inline unsigned long stress_ops(unsigned long dflt)
{
    return env_count("HPTEST_OPS", dflt);
}

/* Call before the first libhp call of the process: anon-orders probes once. */
static inline void stress_knobs(void)
{
    if (!is_root()) {
        fprintf(stderr, "# not root: no hugetlb pool, no mTHP; the backends that are there\n");
        knob_lock();
        return;
    }
    /* memcheck does not follow hugetlb mappings (2 MiB granularity, MAP_FIXED
     * and mremap over them): its address-space map drifts from the kernel's
     * and its memcpy then faults on memory libhp never unmapped. Under
     * valgrind the pool is empty, so hugetlbfs only ever refuses. */
    long got = pool_set(2048, under_valgrind() ? 0 : STRESS_POOL_PAGES);
    fprintf(stderr, "# 2 MiB hugetlb pool: %ld pages\n", got);
    if (knob_set("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled", "madvise") != 0)
        fprintf(stderr, "# no 64 KiB mTHP control: anon-orders may be unavailable\n");
}

/* Fill stress_backends with NULL and every available backend's name. */
static inline void stress_list_backends(void)
{
    static char names[STRESS_MAX_BACKENDS][32];
    stress_n_backends = 0;
    stress_backends[stress_n_backends++] = NULL;
    for (int32_t i = 0; i < hp_backend_count() && stress_n_backends < STRESS_MAX_BACKENDS; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK || !bi.available ||
            bi.kind == HP_KIND_OTHER)
            continue;
        snprintf(names[stress_n_backends], sizeof(names[0]), "%s", bi.name);
        stress_backends[stress_n_backends] = names[stress_n_backends];
        stress_n_backends++;
        fprintf(stderr, "# backend %s: %s\n", bi.name, bi.reason);
    }
}

/* xorshift64*: one generator per thread. */
static inline uint64_t stress_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(0x2545f4914f6cdd1d);
}

/* Mostly small blocks, some up to 1 MiB, a few up to 4 MiB (THP and
 * hugetlb sizes): keeps the run inside its time budget. */
static inline size_t stress_size(uint64_t *s)
{
    uint64_t r = stress_rand(s);
    unsigned bucket = (unsigned)(r % 100);
    r >>= 8;
    if (bucket < 60)
        return 1 + (size_t)(r % (64 << 10));
    if (bucket < 92)
        return (64 << 10) + (size_t)(r % (960 << 10));
    return (2u << 20) + (size_t)(r % (2u << 20));
}

#endif
