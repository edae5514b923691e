/*
 * libhp-malloc internals: the pieces behind the exported malloc family
 * (malloc.c). Nothing here is exported; the .so exports only the malloc
 * family itself (see meson.build, the version script hpmalloc.map).
 *
 * Three kinds of pointers reach free/realloc/malloc_usable_size:
 *   - arena pointers: inside an arena handed to mimalloc (hpm_arena_owns);
 *   - large blocks: returned by hp_alloc/hp_realloc (hpm_large_*), page
 *     aligned, never inside an arena;
 *   - everything else is foreign (ld.so's start-up allocator, the bootstrap
 *     allocator below): never freed, copied safely on realloc.
 */
#ifndef HPM_H
#define HPM_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

/* mimalloc arenas are carved in 32 MiB segments that must be aligned to
 * their size (MI_SEGMENT_SIZE and MI_SEGMENT_ALIGN in mimalloc-types.h,
 * 2.0.9): an arena's start is aligned to this. */
#define HPM_SEGMENT ((size_t)32 << 20)

/* ---- options (options.c): read once at init, never fail ---- */
struct hpm_options {
    size_t large_min;        /* HP_MALLOC_LARGE: requests this big go to hp_alloc */
    size_t arena_min;        /* HP_MALLOC_ARENA: first arena size; later ones a quarter
                                of all arenas so far, at least this */
    int stats;               /* HP_MALLOC_STATS: 0 off, 1 table, 2 one line */
    uint64_t large_flags;    /* added to every large block's hp_alloc/hp_realloc:
                                HP_MALLOC_PAGE_SIZE as hp_page_size_flag() (or 0), and
                                HP_F_NOPOOL with HPM_POOL_OFF */
    uint64_t arena_flags;    /* the same for arenas: HP_F_NOPOOL unless HPM_POOL_ALL */
    int pool;                /* HP_MALLOC_POOL: one of the below */
    int ahead;               /* HP_MALLOC_AHEAD: map the next arena ahead (arena.c) */
    const char *stats_path;  /* HP_MALLOC_STATS_FILE, or NULL for stderr */
};
/* What the hugetlb pool may serve (HP_MALLOC_POOL): nothing ("0"), large
 * blocks ("1"), or large blocks, arenas and HP_STACKS=huge stacks ("all"). */
enum { HPM_POOL_OFF, HPM_POOL_LARGE, HPM_POOL_ALL };
extern struct hpm_options hpm_opt;
/* 0 until initialised, then hpm_opt.large_min: the fast paths serve
 * n < hpm_fast_max, one compare against memory. A variable of its own (not
 * a member of hpm_opt) so that the compare addresses it directly. */
extern _Atomic size_t hpm_fast_max;
void hpm_options_init(void);

/* ---- the OS layer (os.c): raw mappings, no allocation ---- */
/* Fresh zeroed read-write memory, or NULL. */
void *hpm_os_map_rw(size_t len);
/* PROT_NONE address space, nothing committed, or NULL. */
void *hpm_os_reserve(size_t len);
void hpm_os_unmap(void *addr, size_t len);
/* One warning line on stderr, "libhp-malloc: ..." (write(2), no malloc). */
void hpm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- per-thread reentrancy guard (malloc.c) ---- */
/* Nonzero while this thread is inside libhp or arena set-up: any malloc
 * it makes meanwhile must not call libhp again. */
extern __thread int hpm_busy;

/* ---- arenas (arena.c) ---- */
/* Add an arena of at least min_len usable bytes, unless the arena count
 * is no longer seen (another thread added one meanwhile: retry first), from libhp's selection
 * (base pages from mmap if libhp cannot serve). Serialised inside; call
 * with hpm_busy set. Returns 0 (added one), 1 (another thread added one
 * since seen: nothing done) or -1 (errno ENOMEM). */
int hpm_arena_grow(size_t min_len, unsigned seen);
/* One byte per 32 MiB granule of the 47-bit user address space, set when
 * an arena is added: "is this an arena pointer?" is one bounds compare and
 * one byte compare, which operator delete does for every node it frees. The
 * 4 MiB of .bss cost nothing until written: a read of an untouched page maps
 * the shared zero page, and only the pages that hold an arena's granules
 * are ever written (one 4 KiB page covers 128 GiB of address space).
 * Arenas are segment aligned, so a granule is wholly inside one arena or
 * outside all. NULL is granule 0, never an arena. */
#define HPM_GRANULES ((uint64_t)1 << (47 - 25))
extern _Atomic unsigned char hpm_arena_map[HPM_GRANULES];

/* Is p inside an arena? Lock-free. */
static inline int hpm_arena_owns(const void *p)
{
    uint64_t g = (uint64_t)(uintptr_t)p >> 25;
    if (g >= HPM_GRANULES)
        return 0;
    return atomic_load_explicit(&hpm_arena_map[g], memory_order_acquire);
}
/* Arenas added so far (a generation count for retry loops). */
unsigned hpm_arena_count(void);
void hpm_arena_atfork_prepare(void);
void hpm_arena_atfork_release(void);  /* in the parent */
void hpm_arena_atfork_child(void);

/* ---- bootstrap allocator (boot.c) ---- */
/* For allocations made while hpm_busy is set and no arena can serve them
 * (libhp's own start-up, dlopen of its plugins). mmap-backed bump chunks;
 * memory is never reused. Thread-safe. */
void *hpm_boot_alloc(size_t size, size_t align);
int hpm_boot_owns(const void *p);
size_t hpm_boot_usable(const void *p);
void hpm_boot_atfork_prepare(void);
void hpm_boot_atfork_release(void);

/* ---- statistics (stats.c) ---- */
struct hpm_counters {
    _Atomic uint64_t large_allocs;     /* blocks served by hp_alloc */
    _Atomic uint64_t large_bytes;      /* bytes asked of hp_alloc, in total */
    _Atomic uint64_t large_refused;   /* large requests hp_alloc refused */
    _Atomic uint64_t remaps;           /* realloc served by hp_realloc */
    _Atomic uint64_t foreign_frees;    /* free() of pointers not ours (ignored) */
    _Atomic uint64_t boot_bytes;       /* bytes handed out by the bootstrap */
    _Atomic uint64_t arenas_ahead;     /* arenas the helper had mapped ahead */
};
extern struct hpm_counters hpm_ctr;
void hpm_large_account(size_t bytes);
/* One arena as the stats know it: its range and who served it. */
void hpm_stats_arena(const void *start, size_t len, const char *backend, uint64_t page_size);
void hpm_stats_init(void);  /* after the options */
void hpm_stats_atexit(void);

#endif /* HPM_H */
