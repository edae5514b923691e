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
 * The first arena is HP_MALLOC_ARENA (32 MiB, one segment, by default: a
 * hugetlb arena is populated in the constructor, before main). Later ones
 * grow in steps of a quarter of what the arenas hold (at least two
 * segments, at most 1 GiB), so that little of a populated arena stays
 * unused.
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
 *
 * Mapping ahead: once a program has needed a second arena it is growing,
 * and each later arena would be mapped (and, from the pool, zeroed page by
 * page) inside the malloc call that ran out, on the program's own thread.
 * So after that growth and every later one, a helper thread maps the next
 * arena in the background (HP_MALLOC_AHEAD, default on); the next growth
 * takes it (waiting for the helper if it is still mapping) instead of
 * mapping one itself. Only that one arena is ever ahead, not yet handed to
 * mimalloc: at most a quarter of what the arenas hold (or one first
 * arena's size), which stays mapped if the program stops growing.
 */
#include "hpm.h"

#include <hp.h>
#include <mimalloc.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
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

/* The arena mapped ahead (under ahead_lock; taken after grow_lock, never
 * before it). The helper thread runs from_libhp with no lock held. */
enum { AHEAD_IDLE, AHEAD_MAPPING, AHEAD_READY, AHEAD_OFF };
static pthread_mutex_t ahead_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ahead_cond = PTHREAD_COND_INITIALIZER;
static int ahead_state, ahead_thread;
static struct arena {
    void *a, *block;  /* the segment-aligned arena, the hp_alloc block that holds it */
    size_t len;       /* usable bytes from a */
    char backend[32];
    uint64_t page_size;
} ahead;
static size_t ahead_want;

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

/* The arena after one of total bytes: a quarter of what the arenas hold,
 * at least arena_min, at most MAX_GROWTH: every arena byte is populated
 * when it comes from the hugetlb pool, so growing in small steps leaves
 * less of it unused, while the arena count (MAX_ARENAS) still reaches
 * about 60 GiB. */
static size_t next_len(size_t total)
{
    size_t len = align_up(total / 4, HPM_SEGMENT);
    if (len < hpm_opt.arena_min)
        len = hpm_opt.arena_min;
    return len > MAX_GROWTH ? MAX_GROWTH : len;
}

/* An arena of len bytes (at least need) from libhp, else, unless
 * libhp_only, from plain mmap. 0, or -1. */
static int map_new(struct arena *r, size_t len, size_t need, int libhp_only)
{
    snprintf(r->backend, sizeof(r->backend), "mmap");
    r->page_size = 4096;
    r->block = NULL;
    r->len = len;
    r->a = from_libhp(&r->len, need, r->backend, sizeof(r->backend), &r->page_size, &r->block);
    if (!r->a && !libhp_only) {
        snprintf(r->backend, sizeof(r->backend), "mmap");
        r->page_size = 4096;
        r->len = len;
        r->block = r->a = from_mmap(len);
    }
    return r->a ? 0 : -1;
}

static void *ahead_main(void *arg)
{
    (void)arg;
    hpm_busy++;  /* for good: this thread's allocations never call libhp */
    pthread_mutex_lock(&ahead_lock);
    for (;;) {
        while (ahead_state != AHEAD_MAPPING)
            pthread_cond_wait(&ahead_cond, &ahead_lock);
        size_t len = ahead_want;
        pthread_mutex_unlock(&ahead_lock);
        struct arena r;
        int rc = map_new(&r, len, len, 1);
        pthread_mutex_lock(&ahead_lock);
        if (rc == 0)
            ahead = r;
        ahead_state = rc == 0 ? AHEAD_READY : AHEAD_IDLE;
        pthread_cond_broadcast(&ahead_cond);
    }
    return NULL;
}

/* The arena mapped ahead, into *r if it holds need bytes: 1, else 0 (it
 * stays for a later growth). Waits while the helper is mapping it: that
 * costs no more than mapping one here, and never two at once. */
static int take_ahead(struct arena *r, size_t need)
{
    int took = 0;
    pthread_mutex_lock(&ahead_lock);
    while (ahead_state == AHEAD_MAPPING)
        pthread_cond_wait(&ahead_cond, &ahead_lock);
    if (ahead_state == AHEAD_READY && ahead.len >= need) {
        *r = ahead;
        ahead_state = AHEAD_IDLE;
        took = 1;
    }
    pthread_mutex_unlock(&ahead_lock);
    return took;
}

/* Have the helper map an arena of len bytes, unless one is there or on its
 * way (the helper is started on first need, every signal blocked). */
static void start_ahead(size_t len)
{
    if (!hpm_opt.ahead)
        return;
    pthread_mutex_lock(&ahead_lock);
    if (ahead_state == AHEAD_IDLE && !ahead_thread) {
        pthread_t t;
        pthread_attr_t attr;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, ahead_main, NULL) == 0) {
            ahead_thread = 1;
            pthread_setname_np(t, "hpm-ahead");
        }
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (ahead_state == AHEAD_IDLE && ahead_thread) {
        ahead_want = len;
        ahead_state = AHEAD_MAPPING;
        pthread_cond_broadcast(&ahead_cond);
    }
    pthread_mutex_unlock(&ahead_lock);
}

/* At exit, before libhp's own teardown (this library's destructors run
 * first: it depends on libhp): no helper may be inside hp_alloc then. An
 * arena mapped ahead stays mapped, as every arena does. */
__attribute__((destructor)) static void ahead_stop(void)
{
    pthread_mutex_lock(&ahead_lock);
    while (ahead_state == AHEAD_MAPPING)
        pthread_cond_wait(&ahead_cond, &ahead_lock);
    ahead_state = AHEAD_OFF;
    pthread_mutex_unlock(&ahead_lock);
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
    /* mimalloc needs a whole segment plus its own header for one object. */
    size_t len = next_len(arena_total), need = align_up(min_len + HPM_SEGMENT, HPM_SEGMENT);
    if (need > len)
        len = need;
    struct arena r;
    int ahead_used = take_ahead(&r, need);
    if ((!ahead_used && map_new(&r, len, need, 0) < 0) ||
        !mi_manage_os_memory(r.a, r.len, true, false, true, -1)) {
        /* The range stays mapped but unused: it cannot be told apart from a
         * half-registered arena inside mimalloc, so it is not unmapped. */
        pthread_mutex_unlock(&grow_lock);
        errno = ENOMEM;
        return -1;
    }
    map_arena((uintptr_t)r.a, r.len);
    arena_total += r.len;
    atomic_store_explicit(&narenas, n + 1, memory_order_release);
    if (ahead_used)
        atomic_fetch_add(&hpm_ctr.arenas_ahead, 1);
    /* The stats count the whole block, alignment slack included. */
    hpm_stats_arena(r.block, (size_t)((char *)r.a + r.len - (char *)r.block), r.backend,
                    r.page_size);
    /* Ahead: what the next growth for a small object would map (it needs
     * two segments, see need). */
    if (n + 1 >= 2) {
        size_t next = next_len(arena_total);
        start_ahead(next > 2 * HPM_SEGMENT ? next : 2 * HPM_SEGMENT);
    }
    pthread_mutex_unlock(&grow_lock);
    return 0;
}

void hpm_arena_atfork_prepare(void)
{
    pthread_mutex_lock(&grow_lock);
    pthread_mutex_lock(&ahead_lock);
}

void hpm_arena_atfork_release(void)
{
    pthread_mutex_unlock(&ahead_lock);
    pthread_mutex_unlock(&grow_lock);
}

void hpm_arena_atfork_child(void)
{
    /* The helper is not in the child. An arena it had mapped is the
     * child's as well; one it was mapping is left to the parent (the
     * child's copy of it, if the mapping was made before the fork, stays
     * mapped, unused). */
    ahead_thread = 0;
    if (ahead_state == AHEAD_MAPPING)
        ahead_state = AHEAD_IDLE;
    pthread_cond_init(&ahead_cond, NULL);
    hpm_arena_atfork_release();
}
