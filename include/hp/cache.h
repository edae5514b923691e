/*
 * libhp — the cache of freed huge pages.
 *
 * What hp_free does with memory: a block served with huge pages by one of
 * libhp's own huge-page backends (hugetlbfs, thp-madvise, anon-orders), or
 * by a plugin whose mappings say they can be carved (HP_MAP_CARVABLE,
 * hp/backend.h), is not unmapped at once. Its memory, pages still faulted
 * in, goes to this cache, so that the next hp_alloc or growing hp_realloc of
 * the same backend and page size reuses it without asking the kernel (and,
 * in a VM, the host) for fresh pages; reused memory is zeroed unless
 * HP_F_NOZERO. Every other block (base pages, shared memory, plugins'
 * mappings without HP_MAP_CARVABLE, blocks larger than the limit) is
 * unmapped by hp_free itself.
 *
 * Cached memory goes back to the kernel, with no further libhp call:
 *   - hugetlb pool pages idle for pool_idle_ms (HP_CACHE_POOL_IDLE_MS,
 *     default 1000 ms), so another process can have the pool pages soon;
 *   - other memory (THP, mTHP) idle for idle_ms (HP_CACHE_IDLE_MS, default
 *     10000 ms);
 *   both by a background thread that libhp starts when the cache first holds
 *   memory and that ends when the cache is empty (it blocks every signal,
 *   is never joined at exit, and holds the cache's locks only to pick what
 *   to release). Also:
 *   - least recently freed first whenever the cache would hold more than
 *     max_bytes (HP_CACHE_MAX, default 1 GiB and at most RAM/8);
 *   - a hugetlb request that finds the pool empty first releases the cached
 *     pages of that pool;
 *   - everything at once on hp_cache_trim().
 * "Idle" means not freed into the cache or merged with a neighbour since.
 *
 * Fork: hugetlb memory that existed when the process forked is shared
 * copy-on-write with the child, and writing it needs pool pages nobody
 * reserved; so the cache never reuses it, in the parent or in the child: a
 * cached hugetlb range from before a fork is released, and a hugetlb block
 * from before a fork is unmapped when it is freed. A child starts with an
 * empty cache. (README, "Fork".)
 *
 * Stacks have their own cache (hp/stack.h); hp_cache_trim empties both.
 */
#ifndef HP_CACHE_H
#define HP_CACHE_H

#include "common.h"

HP_BEGIN_DECLS

#define HP_CACHE_DEFAULT_IDLE_MS 10000u
#define HP_CACHE_DEFAULT_POOL_IDLE_MS 1000u
#define HP_CACHE_MAX_IDLE_MS 86400000u         /* one day */
#define HP_CACHE_MAX_BYTES (UINT64_C(1) << 46) /* the largest block */

/* Cache limits. Start from HP_CACHE_CONFIG_INIT and set every field: the
 * _INIT values are not the defaults in force (those come from the
 * environment; hp_cache_get_stats reports them). Fields may only be
 * appended. */
struct hp_cache_config {
    uint32_t size;          /* sizeof(struct hp_cache_config) as the caller knows it */
    uint32_t reserved;      /* must be 0 */
    uint64_t max_bytes;     /* bytes the cache may hold, <= HP_CACHE_MAX_BYTES; 0 turns
                               the cache off (hp_free unmaps at once) */
    uint64_t idle_ms;       /* non-hugetlb memory idle this long is released; 0: never
                               for being idle (only max_bytes); <= HP_CACHE_MAX_IDLE_MS */
    uint64_t pool_idle_ms;  /* the same for hugetlb pool pages */
};
#define HP_CACHE_CONFIG_INIT {sizeof(struct hp_cache_config), 0, UINT64_C(1) << 30, \
    HP_CACHE_DEFAULT_IDLE_MS, HP_CACHE_DEFAULT_POOL_IDLE_MS}

/* Replace the cache limits (until the process ends; the environment is not
 * read again) and apply them at once: what is over max_bytes or already
 * idle for longer than the new bounds is released before the call returns.
 * Returns HP_OK, HP_EINVAL (cfg NULL, cfg->size too small, reserved not 0)
 * or HP_ERANGE (a field above its maximum). Thread-safe. */
HP_EXTERN(int32_t) hp_cache_configure(const struct hp_cache_config *cfg);

/* Release every cached range (and every cached stack, hp_stack_cache_trim)
 * back to the kernel now; hugetlb pages go back to their pool. Blocks still
 * allocated are not touched. Returns HP_OK. Thread-safe. */
HP_EXTERN(int32_t) hp_cache_trim(void);

/* Bytes held for one backend and page size. */
struct hp_cache_stats_entry {
    char backend[32];       /* backend name, NUL-terminated */
    uint64_t page_size;     /* bytes */
    uint64_t bytes;         /* usable bytes cached now */
    uint64_t ranges;        /* separate ranges they form */
};
#define HP_CACHE_STATS_ENTRY_INIT {{0}, 0, 0, 0}
#define HP_CACHE_STATS_MAX_ENTRIES 16

/* The cache now, and counters since the process started (a child starts
 * from its parent's counters). Set size = sizeof(struct hp_cache_stats), or
 * start from HP_CACHE_STATS_INIT; libhp fills at most that many bytes. */
struct hp_cache_stats {
    uint32_t size;          /* in: sizeof as the caller knows it */
    uint32_t n_entries;     /* entries[] filled, one per backend and page size held */
    uint64_t bytes;         /* usable bytes cached now, every backend */
    uint64_t ranges;        /* ranges cached now */
    uint64_t hits;          /* allocations served from the cache */
    uint64_t misses;        /* allocations of a cacheable backend that mapped fresh memory */
    uint64_t releases;      /* ranges given back to the kernel (idle, limit, pool, trim, fork) */
    uint64_t released_bytes;/* their usable bytes */
    uint64_t adopted_bytes; /* bytes taken over by hp_realloc growing in place */
    uint64_t max_bytes;     /* the limits in force */
    uint64_t idle_ms;
    uint64_t pool_idle_ms;
    uint32_t reaper_running;/* 1 while the background release thread exists */
    uint32_t reserved;
    struct hp_cache_stats_entry entries[HP_CACHE_STATS_MAX_ENTRIES];
};
#define HP_CACHE_STATS_INIT {sizeof(struct hp_cache_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
    0, {HP_CACHE_STATS_ENTRY_INIT}}

/* Fill stats. Returns HP_OK or HP_EINVAL (stats NULL or stats->size too
 * small). Thread-safe; the figures are a snapshot taken one backend at a
 * time. */
HP_EXTERN(int32_t) hp_cache_get_stats(struct hp_cache_stats *stats);

HP_END_DECLS

#endif /* HP_CACHE_H */
