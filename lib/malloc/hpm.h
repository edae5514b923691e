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
#include <stdint.h>

/* mimalloc arenas are carved in 32 MiB segments that must be aligned to
 * their size (MI_SEGMENT_SIZE and MI_SEGMENT_ALIGN in mimalloc-types.h,
 * 2.0.9): an arena's start is aligned to this. */
#define HPM_SEGMENT ((size_t)32 << 20)

/* ---- options (options.c): read once at init, never fail ---- */
struct hpm_options {
    size_t large_min;        /* HP_MALLOC_LARGE: requests this big go to hp_alloc */
    size_t arena_min;        /* HP_MALLOC_ARENA: first arena size; later ones double */
    int stats;               /* HP_MALLOC_STATS: 0 off, 1 table, 2 one line */
    uint64_t page_flags;     /* HP_MALLOC_PAGE_SIZE as hp_page_size_flag(), or 0 */
    const char *stats_path;  /* HP_MALLOC_STATS_FILE, or NULL for stderr */
};
extern struct hpm_options hpm_opt;
void hpm_options_init(void);
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
 * with hpm_busy set. Returns 0 or -1 (errno ENOMEM). */
int hpm_arena_grow(size_t min_len, unsigned seen);
/* Is p inside an arena? Lock-free. */
int hpm_arena_owns(const void *p);
/* Arenas added so far (a generation count for retry loops). */
unsigned hpm_arena_count(void);
void hpm_arena_atfork_prepare(void);
void hpm_arena_atfork_release(void);

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
    _Atomic uint64_t large_fallback;   /* large requests hp_alloc refused */
    _Atomic uint64_t remaps;           /* realloc served by hp_realloc */
    _Atomic uint64_t foreign_frees;    /* free() of pointers not ours (ignored) */
    _Atomic uint64_t boot_bytes;       /* bytes handed out by the bootstrap */
};
extern struct hpm_counters hpm_ctr;
void hpm_large_account(size_t bytes);
/* One arena as the stats know it: its range and who served it. */
void hpm_stats_arena(const void *start, size_t len, const char *backend, uint64_t page_size);
void hpm_stats_init(void);  /* after the options */
void hpm_stats_atexit(void);

#endif /* HPM_H */
