/* Arenas: large ranges from libhp's selection, handed to mimalloc.
 *
 * mimalloc carves arenas in 32 MiB segments and finds a segment's header by
 * masking a pointer (_mi_ptr_segment in mimalloc-internal.h), so an arena
 * must start on a 32 MiB boundary. hp_alloc takes no alignment, so the
 * arena's mapping is steered onto one: a hole of the right size is made at
 * an aligned address just before hp_alloc maps (fences_set), which is where
 * the kernel puts the next mapping of that size. When it lands elsewhere
 * all the same (another thread mapped first), the aligned part of the block
 * is used if it is large enough, else the block is asked one segment larger
 * and the tail past the aligned range is given back with hp_realloc; the
 * head then stays mapped, unused. Every byte of a hugetlb arena is
 * populated when it is mapped, so the slack is populated too: steering the
 * mapping avoids that cost (up to 30 MiB per arena).
 *
 * Arenas grow in steps of a quarter of what they hold (at least
 * HP_MALLOC_ARENA, 64 MiB by default, at most 1 GiB), so that little of a
 * populated arena stays unused.
 *
 * Arenas are handed over as committed, zeroed and not "large"
 * (mi_manage_os_memory): committed memory is pinned (mimalloc never
 * decommits it, so hugetlb pages are never dropped and refaulted), and
 * mimalloc refuses "large" arenas to a thread's first, lazily committed
 * segment (mi_segment_os_alloc, eager_delay), which with
 * mi_option_limit_os_alloc would be an allocation failure.
 *
 * hugetlb arenas are reserved and populated by libhp when they are mapped,
 * so touching them can never SIGBUS. Arenas are never unmapped: freed
 * memory goes back to mimalloc, not to the kernel.
 */
#include "hpm.h"

#include <hp.h>
#include <mimalloc.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#define MAX_ARENAS 64  /* MI_MAX_ARENAS in mimalloc 2.0.9 src/arena.c */
#define MAX_GROWTH ((size_t)1 << 30)

_Atomic unsigned char hpm_arena_map[HPM_GRANULES];

static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned narenas;
static int libhp_refused;
static size_t arena_total;  /* bytes of all arenas, under grow_lock */

unsigned hpm_arena_count(void)
{
    return atomic_load_explicit(&narenas, memory_order_acquire);
}

static void map_arena(uintptr_t start, size_t len)
{
    for (uint64_t g = start >> 25; g < (start + len) >> 25; g++)
        atomic_store_explicit(&hpm_arena_map[g], 1, memory_order_release);
}

static uintptr_t align_up(uintptr_t v, size_t a)
{
    return (v + a - 1) & ~(uintptr_t)(a - 1);
}

/* An aligned hole for the next mapping of len bytes. The kernel places a
 * new mapping at the top of the highest free gap that holds len plus the
 * alignment it needs (unmapped_area_topdown in mm/mmap.c adds align_mask to
 * the length it searches for: nearly 2 MiB for a hugetlb or THP-aligned
 * mapping). So: a PROT_NONE reservation, and in it a gap of HOLE_PAD + len
 * unmapped that ends on len past a segment boundary. Every free gap above
 * the reservation was too small for the reservation, so unless one of them
 * still holds the mapping or another thread maps first, hp_alloc's mapping
 * lands on the boundary: a segment-aligned arena with no slack to
 * populate. Returns the reservation (for fences_drop), or NULL. */
#define HOLE_PAD ((size_t)2 << 20)

static char *fences_set(size_t len, uintptr_t *hole)
{
    size_t rlen = len + HPM_SEGMENT + HOLE_PAD;
    char *r = hpm_os_reserve(rlen);
    if (!r)
        return NULL;
    *hole = align_up((uintptr_t)r + HOLE_PAD, HPM_SEGMENT);
    hpm_os_unmap((void *)(*hole - HOLE_PAD), HOLE_PAD + len);
    return r;
}

/* Unmap what is left of the reservation around the hole. */
static void fences_drop(char *r, size_t len, uintptr_t hole)
{
    uintptr_t lo = hole - HOLE_PAD, hi = hole + len;
    if (lo > (uintptr_t)r)
        hpm_os_unmap(r, lo - (uintptr_t)r);
    uintptr_t top = (uintptr_t)r + len + HPM_SEGMENT + HOLE_PAD;
    if (top > hi)
        hpm_os_unmap((void *)hi, top - hi);
}

static int refused(void)
{
    /* Out of memory is the caller's ENOMEM; anything else (a bad HP_*
     * value: HP_EENV) is said once. */
    if (hp_last_error() != HP_ENOMEM && !libhp_refused++)
        hpm_warn("hp_alloc refused an arena (%s: %s); arenas come from plain mmap, on base "
                 "pages", hp_error_name(hp_last_error()), hp_last_error_detail());
    return 0;
}

/* From libhp: *len usable bytes (may come back smaller, never below
 * min_len) at a segment-aligned start, or NULL. */
static void *from_libhp(size_t *len, size_t min_len, char *backend, size_t backend_cap,
                        uint64_t *page_size, void **block)
{
    size_t want = *len;
    uintptr_t hole = 0;
    /* libhp's first call loads its plugins (mappings of their own): load
     * them before the hole is made. */
    (void)hp_backend_count();
    char *r = fences_set(want, &hole);
    char *p = hp_alloc(want, hpm_opt.arena_flags);
    if (r)
        fences_drop(r, want, hole);
    if (!p)
        return refused(), NULL;
    uintptr_t a = align_up((uintptr_t)p, HPM_SEGMENT);
    size_t usable = (size_t)((uintptr_t)p + want - a) & ~(HPM_SEGMENT - 1);
    if (a != (uintptr_t)p && usable < min_len) {
        /* Placed elsewhere and too little of it aligned: one segment more,
         * the tail past the aligned range given back (a shrink releases it
         * in place); the head stays mapped, unused. */
        hp_free(p);
        want = *len + HPM_SEGMENT;
        p = hp_alloc(want, hpm_opt.arena_flags);
        if (!p)
            return refused(), NULL;
        a = align_up((uintptr_t)p, HPM_SEGMENT);
        size_t keep = (size_t)(a - (uintptr_t)p) + *len;
        if (keep < want) {
            char *q = hp_realloc(p, keep, HP_F_NOZERO | hpm_opt.arena_flags);
            if (q && q != p) {  /* moved after all: realign inside what it kept */
                p = q;
                a = align_up((uintptr_t)p, HPM_SEGMENT);
                if (a + *len > (uintptr_t)p + keep) {
                    hp_free(p);
                    return NULL;
                }
            }
        }
        usable = *len;
    }
    *len = usable;
    /* hp_info measures the block's huge pages from the kernel (pagemap or
     * smaps), which costs a read over the whole arena: only the stats want
     * the backend's name and page size. */
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (hpm_opt.stats && hp_info(p, &info) == HP_OK) {
        snprintf(backend, backend_cap, "%s", info.backend);
        *page_size = info.page_size;
    }
    *block = p;
    return (void *)a;
}

static void *from_mmap(size_t len)
{
    size_t want = len + HPM_SEGMENT;
    char *p = hpm_os_map_rw(want);
    if (!p)
        return NULL;
    uintptr_t a = align_up((uintptr_t)p, HPM_SEGMENT);
    size_t head = (size_t)(a - (uintptr_t)p);
    if (head)
        hpm_os_unmap(p, head);
    hpm_os_unmap((void *)(a + len), want - head - len);
    return (void *)a;
}

int hpm_arena_grow(size_t min_len, unsigned seen)
{
    pthread_mutex_lock(&grow_lock);
    unsigned n = atomic_load(&narenas);
    if (n != seen) {
        pthread_mutex_unlock(&grow_lock);
        return 1;
    }
    if (n == MAX_ARENAS) {
        pthread_mutex_unlock(&grow_lock);
        errno = ENOMEM;
        return -1;
    }
    /* A quarter of what the arenas hold so far, at least arena_min, at
     * most MAX_GROWTH: every arena byte is populated when it comes from
     * the hugetlb pool, so growing in small steps leaves less of it
     * unused, while the arena count (MAX_ARENAS) still reaches about
     * 60 GiB. */
    size_t len = align_up(arena_total / 4, HPM_SEGMENT);
    if (len < hpm_opt.arena_min)
        len = hpm_opt.arena_min;
    if (len > MAX_GROWTH)
        len = MAX_GROWTH;
    /* mimalloc needs a whole segment plus its own header for one object. */
    size_t need = align_up(min_len + HPM_SEGMENT, HPM_SEGMENT);
    if (need > len)
        len = need;
    char backend[32] = "mmap";
    uint64_t page_size = 4096;
    void *block = NULL;
    void *a = from_libhp(&len, need, backend, sizeof(backend), &page_size, &block);
    if (!a) {
        strcpy(backend, "mmap");
        page_size = 4096;
        block = a = from_mmap(len);
    }
    if (!a || !mi_manage_os_memory(a, len, true, false, true, -1)) {
        /* The range stays mapped but unused: it cannot be told apart from a
         * half-registered arena inside mimalloc, so it is not unmapped. */
        pthread_mutex_unlock(&grow_lock);
        errno = ENOMEM;
        return -1;
    }
    map_arena((uintptr_t)a, len);
    arena_total += len;
    atomic_store_explicit(&narenas, n + 1, memory_order_release);
    /* The stats count the whole block, alignment slack included. */
    hpm_stats_arena(block, (size_t)((char *)a + len - (char *)block), backend, page_size);
    pthread_mutex_unlock(&grow_lock);
    return 0;
}

void hpm_arena_atfork_prepare(void)
{
    pthread_mutex_lock(&grow_lock);
}

void hpm_arena_atfork_release(void)
{
    pthread_mutex_unlock(&grow_lock);
}
