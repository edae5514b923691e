/* Arenas: large ranges from libhp's selection, handed to mimalloc.
 *
 * mimalloc carves arenas in 32 MiB segments and finds a segment's header by
 * masking a pointer (_mi_ptr_segment in mimalloc-internal.h), so an arena
 * must start on a 32 MiB boundary: each one is allocated one segment larger
 * and the tail past the aligned range is given back with hp_realloc (a
 * shrink releases the tail in place). The head stays mapped; for a hugetlb
 * arena it holds pool pages (at most 30 MiB per arena, which is why arenas
 * start at 64 MiB and double).
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
#include <sys/mman.h>

#define MAX_ARENAS 64  /* MI_MAX_ARENAS in mimalloc 2.0.9 src/arena.c */
#define MAX_DOUBLING ((size_t)1 << 30)

_Atomic uint64_t hpm_arena_map[HPM_GRANULES / 64];

static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned narenas;
static int libhp_refused;

unsigned hpm_arena_count(void)
{
    return atomic_load_explicit(&narenas, memory_order_acquire);
}

static void map_arena(uintptr_t start, size_t len)
{
    for (uint64_t g = start >> 25; g < (start + len) >> 25; g++)
        atomic_fetch_or_explicit(&hpm_arena_map[g / 64], UINT64_C(1) << (g % 64),
                                 memory_order_release);
}

static uintptr_t align_up(uintptr_t v, size_t a)
{
    return (v + a - 1) & ~(uintptr_t)(a - 1);
}

/* From libhp: returns the aligned start, or NULL. */
static void *from_libhp(size_t len, char *backend, size_t backend_cap, uint64_t *page_size,
                        void **block)
{
    size_t want = len + HPM_SEGMENT;
    char *p = hp_alloc(want, hpm_opt.page_flags);
    if (!p) {
        /* Out of memory is the caller's ENOMEM; anything else (a bad HP_*
         * value: HP_EENV) is said once. */
        if (hp_last_error() != HP_ENOMEM && !libhp_refused++)
            hpm_warn("hp_alloc refused a %zu MiB arena (%s: %s); arenas come from plain "
                     "mmap, on base pages", want >> 20, hp_error_name(hp_last_error()),
                     hp_last_error_detail());
        return NULL;
    }
    uintptr_t a = align_up((uintptr_t)p, HPM_SEGMENT);
    size_t keep = (size_t)(a - (uintptr_t)p) + len;
    if (keep < want) {
        char *q = hp_realloc(p, keep, HP_F_NOZERO | hpm_opt.page_flags);
        if (q && q != p) {  /* moved after all: realign inside what it kept */
            p = q;
            a = align_up((uintptr_t)p, HPM_SEGMENT);
            if (a + len > (uintptr_t)p + keep) {
                hp_free(p);
                return NULL;
            }
        }
    }
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
    char *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = align_up((uintptr_t)p, HPM_SEGMENT);
    size_t head = (size_t)(a - (uintptr_t)p);
    if (head)
        munmap(p, head);
    munmap((void *)(a + len), want - head - len);
    return (void *)a;
}

int hpm_arena_grow(size_t min_len, unsigned seen)
{
    pthread_mutex_lock(&grow_lock);
    unsigned n = atomic_load(&narenas);
    if (n != seen) {
        pthread_mutex_unlock(&grow_lock);
        return 0;
    }
    if (n == MAX_ARENAS) {
        pthread_mutex_unlock(&grow_lock);
        errno = ENOMEM;
        return -1;
    }
    size_t len = hpm_opt.arena_min;
    for (unsigned i = 0; i < n && len < MAX_DOUBLING; i++)
        len *= 2;
    /* mimalloc needs a whole segment plus its own header for one object. */
    size_t need = align_up(min_len + HPM_SEGMENT, HPM_SEGMENT);
    if (need > len)
        len = need;
    char backend[32] = "mmap";
    uint64_t page_size = 4096;
    void *block = NULL;
    void *a = from_libhp(len, backend, sizeof(backend), &page_size, &block);
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
