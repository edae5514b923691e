/* The exported malloc family: small and medium requests go to mimalloc in
 * arenas from libhp (arena.c), requests of hpm_opt.large_min bytes and more
 * to hp_alloc, and realloc of those to hp_realloc (page tables move, bytes
 * do not). Pointer kinds are told apart as hpm.h describes.
 *
 * Recursion: libhp itself, the dynamic loader (dlopen of libhp's plugins)
 * and the C library allocate. While a thread is inside libhp for us
 * (hpm_busy), its allocations never call libhp again: mimalloc serves them
 * if an arena has room, else the bootstrap allocator (boot.c). */
#include "hpm.h"

#include <hp.h>
#include <mimalloc.h>

#include <errno.h>
#include <stddef.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define PAGE 4096u

/* initial-exec: a general-dynamic TLS access may itself call malloc
 * (__tls_get_addr allocating a dlopen'd module's block). */
__thread int hpm_busy __attribute__((tls_model("initial-exec")));

enum { UNINIT, READY };
static _Atomic int state;
_Atomic size_t hpm_fast_max;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static void prepare_grow(void) { hpm_arena_atfork_prepare(); }
static void release_grow(void) { hpm_arena_atfork_release(); }
static void child_grow(void) { hpm_arena_atfork_child(); }

static void init(void)
{
    pthread_mutex_lock(&init_lock);
    if (atomic_load(&state) != READY) {
        mi_option_set(mi_option_limit_os_alloc, 1);
        hpm_options_init();
        hpm_stats_init();
        /* The bootstrap lock is a leaf (libhp may allocate while holding its
         * own locks): its prepare handler must run last, so it goes first. */
        pthread_atfork(hpm_boot_atfork_prepare, hpm_boot_atfork_release,
                       hpm_boot_atfork_release);
        /* The first arena also initialises libhp, whose fork handlers must
         * run after this one takes the arena lock (prepare handlers run in
         * reverse order of registration): the arena lock is held while
         * calling into libhp, never the other way round. */
        hpm_arena_grow(0, 0);
        /* mimalloc counts the NUMA nodes when it takes its first segment
         * (access(2) on /sys/devices/system/node/node1, which leaves errno
         * ENOENT on a one-node machine): here, where the caller keeps
         * errno, rather than in the program's first malloc. */
        mi_free(mi_malloc(1));
        pthread_atfork(prepare_grow, release_grow, child_grow);
        atomic_store(&state, READY);
        atomic_store(&hpm_fast_max, hpm_opt.large_min);
    }
    pthread_mutex_unlock(&init_lock);
}

/* Set up when the library is loaded, before the program's own code runs.
 * Else a program whose first allocation is libhp's (hp_alloc before any
 * malloc) would start libhp-malloc from inside libhp's start-up, which
 * cannot call libhp back (hp_core in lib/loader.c refuses it), and its
 * first arena would come from plain mmap. An allocation made before this
 * runs (by the loader, or a constructor that runs first) sets up as ever. */
__attribute__((constructor)) static void init_at_load(void)
{
    int saved = errno;
    if (atomic_load_explicit(&state, memory_order_acquire) != READY) {
        hpm_busy++;
        init();
        hpm_busy--;
    }
    errno = saved;
}

static void *mi_any(size_t n, size_t align, int zero)
{
    if (align)
        return zero ? mi_zalloc_aligned(n, align) : mi_malloc_aligned(n, align);
    return zero ? mi_zalloc(n) : mi_malloc(n);
}

static void *large_alloc(size_t n, int zero)
{
    hpm_busy++;
    void *p = hp_alloc(n, (zero ? 0 : HP_F_NOZERO) | hpm_opt.large_flags);
    hpm_busy--;
    if (p)
        hpm_large_account(n);
    else
        atomic_fetch_add(&hpm_ctr.large_refused, 1);
    return p;
}

/* Everything but the fast path: initialisation, recursion, large blocks,
 * arena growth, and ENOMEM. */
static void *alloc_slow(size_t n, size_t align, int zero)
{
    int saved = errno;
    void *p;
    if (hpm_busy) {
        /* Before the first arena mimalloc has nothing to serve from, and
         * each of its refusals walks its whole slow path (thousands of
         * instructions for every allocation of libhp's start-up). */
        p = hpm_arena_count() ? mi_any(n, align, zero) : NULL;
        if (!p)
            p = hpm_boot_alloc(n, align);  /* fresh mmap memory: zero */
        errno = p ? saved : ENOMEM;
        return p;
    }
    if (atomic_load_explicit(&state, memory_order_acquire) != READY) {
        hpm_busy++;
        init();
        hpm_busy--;
    }
    if (n >= hpm_opt.large_min && align <= PAGE && (p = large_alloc(n, zero))) {
        errno = saved;
        return p;
    }
    /* A small request that still fails after an arena was added lost the
     * new space to other threads (each mimalloc thread heap takes segments
     * of its own): it retries for as long as arenas can be added (the arena
     * count, MAX_ARENAS, bounds that). A large or over-aligned request
     * that a fresh arena of its own size cannot serve (an alignment
     * mimalloc only takes from the OS) must not eat one arena after
     * another: it gets two arenas of its own. */
    int odd = align > PAGE || n >= HPM_SEGMENT / 2;
    for (int grown = 0;;) {
        unsigned gen = hpm_arena_count();
        p = mi_any(n, align, zero);
        if (p) {
            errno = saved;
            return p;
        }
        if ((odd && grown == 2) || n > ((size_t)1 << 46) - 2 * HPM_SEGMENT)
            break;
        hpm_busy++;
        int rc = hpm_arena_grow(n + align, gen);
        hpm_busy--;
        if (rc < 0)
            break;
        grown += rc == 0;
    }
    errno = ENOMEM;
    return NULL;
}

static inline void *alloc(size_t n, size_t align, int zero)
{
    if (LIKELY(n < atomic_load_explicit(&hpm_fast_max, memory_order_relaxed))) {
        void *p = mi_any(n, align, zero);
        if (LIKELY(p != NULL))
            return p;
    }
    return alloc_slow(n, align, zero);
}

EXPORT void *malloc(size_t n)
{
    return alloc(n, 0, 0);
}

EXPORT void *calloc(size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return alloc(n, 0, 1);
}

static int page_aligned(const void *p)
{
    return ((uintptr_t)p & (PAGE - 1)) == 0;
}

__attribute__((noinline)) static void free_slow(void *p)
{
    if (!p)
        return;
    if (hpm_boot_owns(p))
        return;
    if (page_aligned(p)) {
        int saved = errno;
        hpm_busy++;
        int32_t rc = hp_free(p);
        hpm_busy--;
        errno = saved;
        if (rc == HP_OK)
            return;
    }
    /* Not ours (the loader's start-up allocator, or a stray pointer):
     * giving it to anyone would corrupt their heap; leave it. */
    atomic_fetch_add(&hpm_ctr.foreign_frees, 1);
}

/* NULL takes the slow path: granule 0 is never an arena's. */
static inline void free_impl(void *p)
{
    if (LIKELY(hpm_arena_owns(p))) {
        mi_free(p);
        return;
    }
    free_slow(p);
}

EXPORT void free(void *p)
{
    free_impl(p);
}

/* Usable size of a libhp block, or 0 if p is not one. */
static size_t large_usable(const void *p)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    /* Stop before the NUMA fields: filling them walks the block's pages
     * with move_pages(2), one address per page (hp/alloc.h). */
    info.size = (uint32_t)offsetof(struct hp_block_info, numa_mode);
    int saved = errno;
    hpm_busy++;
    int32_t rc = hp_info(p, &info);
    hpm_busy--;
    errno = saved;
    return rc == HP_OK ? (size_t)info.usable_size : 0;
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (hpm_arena_owns(p))
        return mi_usable_size(p);
    if (hpm_boot_owns(p))
        return hpm_boot_usable(p);
    return page_aligned(p) ? large_usable(p) : 0;
}

/* Copy up to n bytes from a foreign block of unknown size: stop at the
 * first unreadable byte instead of faulting (process_vm_readv on ourselves
 * reports a partial copy). Bytes past the old block's end are unspecified
 * after realloc anyway. */
static void copy_foreign(void *dst, const void *src, size_t n)
{
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)src, n};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got < 0) {
        /* Not permitted (seccomp, ptrace policy): at least what is in the
         * source's own page is always readable. */
        size_t in_page = PAGE - ((uintptr_t)src & (PAGE - 1));
        memcpy(dst, src, n < in_page ? n : in_page);
    }
}

static void *move_to_new(void *p, size_t old, size_t n)
{
    void *q = alloc(n, 0, 0);
    if (q)
        memcpy(q, p, old < n ? old : n);
    return q;
}

static void *realloc_large(void *p, size_t n)
{
    int saved = errno;
    if (n >= hpm_opt.large_min / 2) {
        hpm_busy++;
        void *q = hp_realloc(p, n, HP_F_NOZERO | hpm_opt.large_flags);
        int32_t err = q ? HP_OK : hp_last_error();
        hpm_busy--;
        if (q) {
            atomic_fetch_add(&hpm_ctr.remaps, 1);
            errno = saved;
            return q;
        }
        if (err != HP_EFOREIGN && err != HP_EINTERIOR && err != HP_EDOUBLEFREE) {
            errno = ENOMEM;
            return NULL;  /* p is untouched (hp_realloc's contract) */
        }
    } else {
        size_t old = large_usable(p);
        if (old) {
            void *q = move_to_new(p, old, n);
            if (q)
                free_slow(p);
            return q;
        }
    }
    errno = saved;
    void *q = alloc(n, 0, 0);
    if (q) {
        copy_foreign(q, p, n);
        atomic_fetch_add(&hpm_ctr.foreign_frees, 1);
    }
    return q;
}

/* Everything but an arena block that stays below the large threshold. */
__attribute__((noinline)) static void *realloc_slow(void *p, size_t n)
{
    if (!p)
        return alloc(n, 0, 0);
    if (n == 0) {  /* glibc's behaviour: free and return NULL */
        free(p);
        return NULL;
    }
    if (hpm_arena_owns(p)) {
        if (n < hpm_opt.large_min) {
            void *q = mi_realloc(p, n);
            if (q)
                return q;
        }
        void *q = move_to_new(p, mi_usable_size(p), n);
        if (q)
            mi_free(p);
        return q;
    }
    if (hpm_boot_owns(p))
        return move_to_new(p, hpm_boot_usable(p), n);
    if (page_aligned(p))
        return realloc_large(p, n);
    void *q = alloc(n, 0, 0);
    if (q) {
        copy_foreign(q, p, n);
        atomic_fetch_add(&hpm_ctr.foreign_frees, 1);
    }
    return q;
}

EXPORT void *realloc(void *p, size_t n)
{
    /* 1 <= n < large_min (n - 1 wraps for 0, which frees); an arena
     * pointer means the options are read. */
    if (LIKELY(hpm_arena_owns(p) && n - 1 < hpm_opt.large_min - 1)) {
        void *q = mi_realloc(p, n);
        if (LIKELY(q != NULL))
            return q;
    }
    return realloc_slow(p, n);
}

EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

/* mimalloc aligns inside its segments up to half a segment
 * (MI_ALIGNMENT_MAX, 16 MiB in 2.0.9) and takes larger alignments from the
 * OS only, which the arenas forbid. */
#define MAX_ALIGN (HPM_SEGMENT / 2)

/* Everything but the fast path of aligned(): alignments mimalloc cannot
 * serve from an arena, initialisation, large blocks, arena growth. */
__attribute__((noinline)) static void *aligned_slow(size_t align, size_t n)
{
    if (align > MAX_ALIGN) {
        errno = ENOMEM;
        return NULL;
    }
    return alloc_slow(n, align <= 8 ? 0 : align, 0);
}

/* align: a power of two. mimalloc gives blocks of 8 bytes or less only
 * 8-byte alignment, so any larger alignment asks for it. Large blocks with
 * at most page alignment are libhp blocks (page aligned); larger
 * alignments stay in the arenas, aligned by mimalloc. */
static inline void *aligned(size_t align, size_t n)
{
    if (LIKELY(align <= MAX_ALIGN &&
               n < atomic_load_explicit(&hpm_fast_max, memory_order_relaxed))) {
        void *p = align <= 8 ? mi_malloc(n) : mi_malloc_aligned(n, align);
        if (LIKELY(p != NULL))
            return p;
    }
    return aligned_slow(align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    /* glibc rounds an alignment that is not a power of two up to one. */
    if (align & (align - 1)) {
        size_t a = 1;
        while (a < align && a)
            a <<= 1;
        if (!a) {
            errno = EINVAL;
            return NULL;
        }
        align = a;
    }
    return aligned(align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (!align || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    return aligned(align, n);
}

/* posix_memalign reports through its result only: errno is kept, which
 * only the slow path can change. */
__attribute__((noinline)) static int posix_memalign_slow(void **out, size_t align, size_t n)
{
    int saved = errno;
    void *p = aligned_slow(align, n);
    errno = saved;
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (!align || (align & (align - 1)) || align % sizeof(void *))
        return EINVAL;
    if (LIKELY(align <= MAX_ALIGN &&
               n < atomic_load_explicit(&hpm_fast_max, memory_order_relaxed))) {
        void *p = align <= 8 ? mi_malloc(n) : mi_malloc_aligned(n, align);
        if (LIKELY(p != NULL)) {
            *out = p;
            return 0;
        }
    }
    return posix_memalign_slow(out, align, n);
}

EXPORT void *valloc(size_t n)
{
    return aligned(PAGE, n);
}

EXPORT void *pvalloc(size_t n)
{
    size_t r;
    if (__builtin_add_overflow(n, PAGE - 1, &r)) {
        errno = ENOMEM;
        return NULL;
    }
    r &= ~(size_t)(PAGE - 1);
    return aligned(PAGE, r ? r : PAGE);
}

/* C++ operator delete, every form (Itanium C++ ABI names; operator new is
 * in cxx.c): free(), whose sizes and alignments the allocator knows
 * already, inlined, so a delete is not libstdc++'s extra call to free. The
 * unused parameters are -Wno-unused-parameter's business (meson.build). */
EXPORT void _ZdlPv(void *p);
EXPORT void _ZdaPv(void *p);
EXPORT void _ZdlPvm(void *p, size_t n);
EXPORT void _ZdaPvm(void *p, size_t n);
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt);
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt);
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al);
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t al);
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al);
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al);
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt);
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt);

EXPORT void _ZdlPv(void *p)
{
    free_impl(p);
}

EXPORT void _ZdaPv(void *p)
{
    free_impl(p);
}

EXPORT void _ZdlPvm(void *p, size_t n)
{
    free_impl(p);
}

EXPORT void _ZdaPvm(void *p, size_t n)
{
    free_impl(p);
}

EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt)
{
    free_impl(p);
}

EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt)
{
    free_impl(p);
}

EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al)
{
    free_impl(p);
}

EXPORT void _ZdaPvSt11align_val_t(void *p, size_t al)
{
    free_impl(p);
}

EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al)
{
    free_impl(p);
}

EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al)
{
    free_impl(p);
}

EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt)
{
    free_impl(p);
}

EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt)
{
    free_impl(p);
}

__attribute__((destructor)) static void at_exit(void)
{
    if (atomic_load(&state) == READY)
        hpm_stats_atexit();
}
