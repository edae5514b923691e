/*
 * The cache of freed huge-page ranges (TCMalloc's hugepage cache in spirit):
 * hp_free of a huge-page block keeps its memory, pages already faulted in,
 * so the next allocation or growth of the same backend and page size reuses
 * it instead of paying the kernel (and, in a VM, the host) for fresh pages.
 *
 * What is cached: blocks whose mapping says the cache may carve it
 * (HP_MAP_CARVABLE, hp/backend.h: addr == map_addr, aligned to its page
 * size, usable up to committed, every page-aligned piece unmappable on its
 * own), of any backend, built in or not. Base-page blocks and mappings that
 * are HP_MAP_SHARED are never cached. A range keeps the flags and cookie of
 * the mapping it came from, and only ranges with equal ones merge; a piece
 * goes back through the backend's unmap. HP_MAP_POOL ranges (finite pool
 * pages) follow the fork rule below and the pool idle bound.
 *
 * Reuse: an allocation takes the best-fitting cached range of a candidate
 * backend (selection order) before mapping anything; a block carved from a
 * range may grow in place into the rest of it (hp_cache_adopt). Carving
 * happens in whole pages from page-aligned starts, so huge pages are never
 * shared by two blocks, and an HP_MAP_POOL piece is split off as VMAs of
 * its own, so no two blocks share a hugetlb VMA (cache.c, cut_front).
 *
 * Limit and release policy (the public contract is hp/cache.h):
 *   - at most HP_CACHE_MAX bytes are kept (default 1 GiB, at most an eighth
 *     of the RAM; 0 disables the cache); a put above the limit releases the
 *     least recently freed ranges first, and a block larger than the limit
 *     is released at once;
 *   - a range idle (not freed into or merged) for HP_CACHE_POOL_IDLE_MS
 *     (HP_MAP_POOL ranges, default 1 s) or HP_CACHE_IDLE_MS (others,
 *     default 10 s) is
 *     released by the release thread (cache.c, reap), which runs only while
 *     the cache holds memory, and by any cache operation;
 *   - a map or growth that fails with HP_ENOMEM first releases the cached
 *     ranges of that backend and page size (pool pages go back to the pool)
 *     and tries once more, and the selection counts cached pages of a
 *     hugetlb-kind backend as free pool pages.
 * Zeroing contract (hp/alloc.h): reused memory is cleared before it is handed
 * out unless the caller passed HP_F_NOZERO (hp_zero_reused).
 *
 * Thread-safety: one lock per backend, held across a syscall only to
 * split a carved HP_MAP_POOL piece off (two madvise calls, which no fork
 * may see half done); ranges are released after the lock is dropped.
 * Fork-safety: pthread_atfork holds every lock across fork. hugetlb memory
 * from before a fork (fork generation, lib/fork.h) is never reused in
 * either process: see cache.c, stale. The child unmaps everything it
 * inherited and starts with an empty cache.
 */
#ifndef HP_LIB_CACHE_H
#define HP_LIB_CACHE_H

#include "block.h"

struct hp_backend;

/* 1 if a block of backend be with mapping m may go to the cache. */
int hp_cache_accepts(const struct hp_backend *be, const struct hp_mapping *m);

/* Take a freed block: its memory and the record itself (freed here).
 * Returns 1 if taken; 0 means the caller still owns b and must release it
 * (not cacheable, or larger than the limit). */
int hp_cache_put(struct hp_block *b);

/* Carve a block of len bytes for backend be and page size page_size: fills
 * b->m and b->origin (backend and flags are the caller's). *dirty is set to
 * the bytes from b->m.addr that may hold old contents. Returns HP_OK or
 * HP_ENOMEM when nothing cached fits. */
int32_t hp_cache_take(struct hp_backend *be, uint64_t page_size, uint64_t len,
                      struct hp_block *b, uint64_t *dirty);

/* Grow b's mapping in place (b->m.map_len, and its committed end) with the
 * cached range of the same lineage that starts where b's mapping ends, up
 * to what len needs. b->m.len is left alone. Returns the bytes adopted (all
 * may hold old contents), 0 if there was none. */
uint64_t hp_cache_adopt(struct hp_block *b, uint64_t len);

/* Release every cached range of backend be with page size page_size (be
 * NULL: every range; page_size 0: every size). Returns the bytes released. */
uint64_t hp_cache_flush(const struct hp_backend *be, uint64_t page_size);

/* At unload or exit: stop the release thread (bounded wait) and unmap every
 * cached range without waiting for a lock. Called by libhp's destructor
 * before the backends' fini. */
void hp_cache_shutdown(void);

/* 1 if a cached range (its reservation included) overlaps [addr, addr +
 * len), else 0. */
int hp_cache_overlaps(const void *addr, uint64_t len);

/* Bytes cached for be and page_size (0: every size). */
uint64_t hp_cache_bytes(const struct hp_backend *be, uint64_t page_size);

/* Clear [addr, addr+len) of reused memory (base-page aligned), the cheapest
 * way measured here: memset of the resident pages (a warm 512 MiB THP range
 * clears in ~6 ms, against ~37 ms for MADV_DONTNEED and faulting it again,
 * and ~1.2 s for fresh pages from the host), and no memset of pages that are
 * not resident, so a sparse block stays sparse: anonymous ones are dropped
 * with MADV_DONTNEED (a swapped-out page is not resident but not zero
 * either); hugetlb pages are never swapped and fault in zeroed. */
void hp_zero_reused(void *addr, uint64_t len, int hugetlb);

/* Figures for tests and hpctl. */
struct hp_cache_figures {
    uint64_t bytes;       /* committed bytes cached now */
    uint64_t ranges;      /* cached ranges now */
    uint64_t hits;        /* allocations served from the cache */
    uint64_t misses;      /* allocations of a cacheable backend that mapped fresh memory */
    uint64_t adopted;     /* bytes taken over by in-place growth */
    uint64_t released;    /* bytes given back to the kernel */
    uint64_t limit;       /* bytes */
    uint64_t idle_ms;
};
void hp_cache_get_figures(struct hp_cache_figures *out);

/* Override HP_CACHE_MAX / HP_CACHE_IDLE_MS (tests); trims at once. */
void hp_cache_set_limits(uint64_t max_bytes, uint64_t idle_ms);

/* Count an allocation that could have used the cache but mapped fresh. */
void hp_cache_count_miss(void);

#endif
