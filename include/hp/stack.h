/*
 * libhp — thread and coroutine stacks that are either lean or truly huge.
 *
 * A stack is a usable range of anonymous memory with a guard below it (stacks
 * grow down). The guard is PROT_NONE address space, at least one base page,
 * and always sits outside every huge page: a guard inside a huge-page-aligned
 * stack would split the huge page and charge all of it to RSS (128 threads:
 * 256 MiB instead of 3 MiB under THP=always; bench/stacks/README.md). Two
 * modes:
 *
 *   lean (default)  never backed by huge pages, whatever the THP setting and
 *                   kernel version: the request names the base page size,
 *                   and a backend then advises MADV_NOHUGEPAGE on the whole
 *                   mapping, which also rules out every mTHP size
 *                   (hp/backend.h). RSS grows only with the base pages the
 *                   code touches.
 *   huge            the usable range is whole, aligned PMD-size huge pages
 *                   (2 MiB on x86-64), from the hugetlb pool or from THP,
 *                   whichever the backend probes say can serve (hugetlb
 *                   first: its pages are reserved when the stack is made).
 *                   The guard is a separate mapping just below them.
 *
 * Every stack is mapped by a backend (hp/backend.h): one map request with
 * the page size, align = the page size and the guard, chosen by the same
 * rules as blocks (README "Selection policy"): huge mode takes the backends
 * that offer the PMD page size, reserved pools first; lean mode those that
 * offer the base page (the built-in "fallback"). HP_BACKENDS applies as for
 * blocks: its order replaces the tiers, "-name" excludes, and a third-party
 * plugin (kind other) serves stacks only when HP_BACKENDS names it. A stack
 * is prefaulted and unmapped through the backend that mapped it.
 *                   Caveat for hugetlb (the fork rule of hp/alloc.h): after
 *                   fork() a write to a page of a hugetlb stack that existed
 *                   at the fork, by either process, needs a free unreserved
 *                   pool page; with the pool empty the child's write gets
 *                   SIGBUS, and the parent's write takes the page from the
 *                   child, whose next access (a read too) gets SIGBUS. The
 *                   stack cache never hands out a hugetlb stack from before a
 *                   fork, in the parent or the child (it is unmapped). A
 *                   thread that forks is better off on a THP stack
 *                   (HP_STACK_THP).
 *
 *   +-----------+---------------------------------------------+
 *   |  guard    |  usable: [base, base + size)                |
 *   | PROT_NONE |  grows down from base + size                |
 *   +-----------+---------------------------------------------+
 *   guard_addr  base (huge mode: aligned to the huge page)
 *
 * hp_stack_base() and hp_stack_size() are what pthread_attr_setstack() and
 * makecontext() (uc_stack.ss_sp / ss_size) take.
 *
 * Handles are opaque and validated: a NULL, foreign or destroyed handle
 * gives an error code, never a crash (handles are records in a table of
 * libhp's own; a pointer is checked against it before anything is read). A
 * destroyed handle is recognised as such (HP_EDOUBLEFREE) until its record is
 * reused: records are reused oldest-destroyed first, and only while more than
 * HP_STACK_HANDLE_QUARANTINE destroyed records wait, so a use after destroy
 * is caught unless about that many stacks were destroyed in between.
 *
 * Released stacks go to a bounded cache (see "Cache" below) so that creating
 * stacks of one size again is fast.
 */
#ifndef HP_STACK_H
#define HP_STACK_H

#include "common.h"
#include "introspect.h"

HP_BEGIN_DECLS

/* The opaque stack handle. */
struct hp_stack;

/* Stack flags (uint64_t). Unknown bits and conflicting combinations are
 * rejected with HP_EFLAGS. HP_STACK_LEAN (0) is the default mode. */
#define HP_STACK_LEAN       UINT64_C(0)
#define HP_STACK_HUGE       UINT64_C(0x1)   /* huge mode (hugetlb or THP) */
#define HP_STACK_HUGETLB    UINT64_C(0x2)   /* huge mode from a reserved pool only
                                               (page size HP_PAGE_GUARANTEED:
                                               hugetlb) */
#define HP_STACK_THP        UINT64_C(0x4)   /* huge mode from THP only (any page
                                               size not from a reserved pool) */
#define HP_STACK_ALLOW_LEAN UINT64_C(0x8)   /* huge mode if possible, else a lean
                                               stack instead of HP_ENOHUGE */
#define HP_STACK_POPULATE   UINT64_C(0x10)  /* prefault the whole usable range now */
#define HP_STACK_NOCACHE    UINT64_C(0x20)  /* neither reuse a cached stack nor
                                               cache this one when destroyed */

/* Largest usable size and guard a stack may ask for, in bytes. */
#define HP_STACK_MAX_SIZE  (UINT64_C(1) << 40)
#define HP_STACK_MAX_GUARD (UINT64_C(1) << 30)
/* Most stack records at once (live handles, cached stacks and destroyed
 * handles in quarantine); the kernel's vm.max_map_count (65530 by default,
 * two mappings per stack) binds first. */
#define HP_STACK_MAX_HANDLES 131072u
/* Destroyed handles recognised as destroyed before their record is reused. */
#define HP_STACK_HANDLE_QUARANTINE 1024u

/* Extended options. Set size = sizeof(struct hp_stack_opts), or start from
 * HP_STACK_OPTS_INIT; fields may only be appended. */
struct hp_stack_opts {
    uint32_t size;          /* sizeof(struct hp_stack_opts) as the caller knows it */
    uint32_t reserved;      /* must be 0 */
    uint64_t flags;         /* HP_STACK_* */
    uint64_t guard_size;    /* bytes of guard below the stack, rounded up to the
                               base page; 0 means one base page. A frame bigger
                               than the guard can step over it: code with large
                               locals or alloca wants a larger guard */
    /* Since 1.4 (read only when size reaches them): NUMA placement of the
     * stack's memory, as in struct hp_alloc_opts (hp/alloc.h). A placed
     * stack is always mapped fresh, never taken from the stack cache. */
    uint32_t numa_mode;     /* HP_NUMA_* */
    uint32_t numa_max_node; /* bits in numa_nodes, 1 to 1024 */
    const uint64_t *numa_nodes;
};
#define HP_STACK_OPTS_INIT {sizeof(struct hp_stack_opts), 0, 0, 0, 0, 0, NULL}

/* Make a stack of at least size usable bytes: rounded up to the base page
 * (lean) or to whole huge pages (huge). A cached stack of the same mode,
 * rounded size and guard is reused when there is one (see "Cache"). The
 * contents of a new stack are unspecified: zero, unless it is a cached stack
 * that kept its pages. hugetlb stacks are prefaulted (their pages are
 * reserved for the stack anyway; a hugetlb cgroup limit then fails here with
 * HP_ENOMEM instead of raising SIGBUS later). Returns NULL on failure
 * with hp_last_error() set: HP_ESIZE (0 or above HP_STACK_MAX_SIZE),
 * HP_EFLAGS, HP_ENOHUGE (huge mode and no backend can serve; the detail says
 * why for each), HP_ENOBACKEND (lean mode and HP_BACKENDS allows no backend
 * with base pages), HP_ENOMEM (out of memory, address space or mappings),
 * HP_EOS, HP_EBACKEND (a plugin broke the rules of its mapping), HP_EENV.
 * Thread-safe. */
HP_EXTERN(struct hp_stack *) hp_stack_create(size_t size, uint64_t flags);

/* hp_stack_create with options; opts may be NULL (same as flags 0).
 * Also HP_EINVAL (opts->size too small, reserved not 0, guard_size above
 * HP_STACK_MAX_GUARD, bad placement as for hp_alloc_ex). Thread-safe. */
HP_EXTERN(struct hp_stack *) hp_stack_create_ex(size_t size, const struct hp_stack_opts *opts);

/* Release a stack: into the cache, or unmapped (guard included). No thread
 * or fiber may still run on it. Returns HP_OK, or HP_EINVAL (s NULL, or s
 * hosts a thread of hp_stack_thread_create: join it instead), HP_EFOREIGN
 * (not a stack handle), HP_EDOUBLEFREE (destroyed already); such a failed
 * destroy changes nothing. HP_EOS: the stack was not cached and its
 * backend could not unmap it (a plugin whose unmap failed twice): the
 * handle is gone all the same, and the memory stays mapped, lost (the
 * detail names the backend). Thread-safe. */
HP_EXTERN(int32_t) hp_stack_destroy(struct hp_stack *s);

/* Lowest usable address (the stack's limit; it grows down from
 * base + size), page aligned; huge mode: aligned to the huge page. NULL on a
 * bad handle, with hp_last_error() as for hp_stack_destroy. Thread-safe. */
HP_EXTERN(void *) hp_stack_base(const struct hp_stack *s);

/* Usable bytes from base (a multiple of the page size the stack is mapped
 * for). 0 on a bad handle, with hp_last_error() set. Thread-safe. */
HP_EXTERN(size_t) hp_stack_size(const struct hp_stack *s);

/* Modes in struct hp_stack_info. */
#define HP_STACK_MODE_LEAN 0u
#define HP_STACK_MODE_HUGE 1u

/* What a stack really is. Set size = sizeof(struct hp_stack_info) or start
 * from HP_STACK_INFO_INIT; libhp fills at most that many bytes. */
struct hp_stack_info {
    uint32_t size;            /* in: sizeof as the caller knows it */
    uint32_t mode;            /* HP_STACK_MODE_* actually obtained */
    uint32_t kind;            /* enum hp_backend_kind of the backend that
                                 mapped it: HP_KIND_BASE (lean, "fallback"),
                                 HP_KIND_THP, HP_KIND_HUGETLB, or a
                                 plugin's kind */
    uint32_t from_cache;      /* 1 if this stack was reused from the cache */
    char source[32];          /* the backend that mapped it ("hugetlbfs",
                                 "thp-madvise", "fallback", a plugin's name) */
    uint64_t flags;           /* HP_STACK_* given at creation */
    uint64_t base_addr;       /* == hp_stack_base() */
    uint64_t usable_size;     /* == hp_stack_size() */
    uint64_t guard_addr;      /* guard is [guard_addr, base_addr) */
    uint64_t guard_size;
    uint64_t page_size;       /* page size the usable range is mapped for */
    uint64_t resident_bytes;  /* usable bytes in memory now (measured) */
    uint64_t huge_bytes;      /* usable bytes in pages larger than the base
                                 page now (measured, as hp_info) */
};
#define HP_STACK_INFO_INIT {sizeof(struct hp_stack_info), 0, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0}

/* Describe stack s, measuring residency now. Returns HP_OK, HP_EINVAL (info
 * NULL or info->size too small, or s NULL), HP_EFOREIGN, HP_EDOUBLEFREE.
 * Thread-safe. */
HP_EXTERN(int32_t) hp_stack_get_info(const struct hp_stack *s, struct hp_stack_info *info);

/* Convenience: make a stack (as hp_stack_create_ex(size, opts)) and start a
 * joinable pthread on it running start(arg). *out receives the stack handle,
 * which hp_stack_get_info() and the accessors accept; the stack is released
 * by hp_stack_thread_join() (hp_stack_destroy() refuses it). size must leave
 * room for the thread's TLS (at least PTHREAD_STACK_MIN). Returns HP_OK, or
 * HP_EINVAL (out or start NULL; the stack too small for the thread), any
 * error of hp_stack_create_ex, HP_ENOMEM or HP_EOS (pthread_create failed;
 * the detail gives its errno). On failure *out is NULL (if out is not NULL)
 * and the stack was released as by hp_stack_destroy(). Thread-safe. */
HP_EXTERN(int32_t) hp_stack_thread_create(struct hp_stack **out, size_t size,
                                          const struct hp_stack_opts *opts,
                                          void *(*start)(void *arg), void *arg);

/* Wait for the thread on s to finish, store its return value in *retval
 * (if retval is not NULL) and release s as hp_stack_destroy() would. Call it
 * exactly once per thread, never from the thread itself (nor, after fork,
 * from a child for a thread of its parent). Returns HP_OK, or
 * HP_EINVAL (s NULL, no thread on s, already being joined, or joining
 * itself), HP_EFOREIGN, HP_EDOUBLEFREE. Thread-safe. */
HP_EXTERN(int32_t) hp_stack_thread_join(struct hp_stack *s, void **retval);

/*
 * Cache. One per process, shared by all threads. Destroyed stacks go in at
 * the most-recently-used end; a create takes a cached stack of exactly its
 * page size, rounded size and guard size (HP_STACK_HUGETLB: of pool pages;
 * HP_STACK_THP: not of pool pages), a kept one first, then the most recent;
 * when max_stacks or max_bytes (usable bytes of all cached stacks) is
 * exceeded, the least recently used stacks are unmapped.
 *
 * Memory policy — whether a cached stack keeps its pages:
 *   - A stack entering the cache KEEPS its pages if the usable bytes of the
 *     kept stacks stay within keep_bytes. Reusing it then costs no syscall and
 *     no page fault, and a huge stack still has its huge pages; its contents
 *     are whatever the last user left.
 *   - Otherwise its pages are RELEASED with MADV_DONTNEED as it enters the
 *     cache: it holds address space only, and comes back zero-filled.
 *     A stack of pool pages (hugetlb, HP_MAP_POOL) is never released that
 *     way (the dropped page would stay reserved for the mapping, so the pool
 *     would get nothing back): if it cannot be kept it is unmapped at once.
 *     A stack of shared memory (a plugin's HP_MAP_SHARED) is never cached.
 *   keep_bytes = 0 gives every byte of memory back at destroy; keep_bytes >=
 *   max_bytes never drops anything. The memory the cache can hold is at most
 *   keep_bytes (only touched pages count toward RSS).
 *
 * Defaults: 64 stacks, 1 GiB of address space, 8 MiB kept. Lowering a bound
 * trims the cache at once; hp_stack_cache_trim() empties it.
 */
#define HP_STACK_CACHE_DEFAULT_STACKS 64u
#define HP_STACK_CACHE_DEFAULT_BYTES (UINT64_C(1) << 30)
#define HP_STACK_CACHE_DEFAULT_KEEP_BYTES (UINT64_C(8) << 20)
#define HP_STACK_CACHE_MAX_STACKS 16384u

/* Cache settings. Set size = sizeof(struct hp_stack_cache_config), or start
 * from HP_STACK_CACHE_CONFIG_INIT (the defaults); fields may only be
 * appended. */
struct hp_stack_cache_config {
    uint32_t size;          /* sizeof(struct hp_stack_cache_config) as the caller knows it */
    uint32_t reserved;      /* must be 0 */
    uint64_t max_stacks;    /* cached stacks at most, <= HP_STACK_CACHE_MAX_STACKS;
                               0 turns the cache off */
    uint64_t max_bytes;     /* usable bytes the cached stacks may total */
    uint64_t keep_bytes;    /* of those, usable bytes whose pages are kept */
};
#define HP_STACK_CACHE_CONFIG_INIT {sizeof(struct hp_stack_cache_config), 0, \
    HP_STACK_CACHE_DEFAULT_STACKS, HP_STACK_CACHE_DEFAULT_BYTES, HP_STACK_CACHE_DEFAULT_KEEP_BYTES}

/* Apply a cache configuration, trimming the cache to it at once. Returns
 * HP_OK, HP_EINVAL (cfg NULL, cfg->size too small, reserved not 0) or
 * HP_ERANGE (max_stacks above HP_STACK_CACHE_MAX_STACKS). Thread-safe. */
HP_EXTERN(int32_t) hp_stack_cache_configure(const struct hp_stack_cache_config *cfg);

/* The cache's settings, its contents now, and counters since the process
 * started. Set size as for the config, or start from
 * HP_STACK_CACHE_STATS_INIT; libhp fills at most that many bytes. */
struct hp_stack_cache_stats {
    uint32_t size;          /* in: sizeof as the caller knows it */
    uint32_t reserved;
    uint64_t max_stacks;    /* the configuration in force */
    uint64_t max_bytes;
    uint64_t keep_bytes;
    uint64_t cached_stacks; /* in the cache now */
    uint64_t cached_bytes;  /* their usable bytes */
    uint64_t kept_bytes;    /* usable bytes of those that kept their pages */
    uint64_t hits;          /* creates served from the cache */
    uint64_t misses;        /* creates that mapped a new stack */
    uint64_t released;      /* stacks whose pages were dropped entering the cache */
    uint64_t evictions;     /* cached stacks unmapped for a bound or a trim */
};
#define HP_STACK_CACHE_STATS_INIT {sizeof(struct hp_stack_cache_stats), 0, 0, 0, 0, 0, 0, 0, \
    0, 0, 0, 0}

/* Fill stats. Returns HP_OK or HP_EINVAL (stats NULL or stats->size too
 * small). Thread-safe. */
HP_EXTERN(int32_t) hp_stack_cache_get_stats(struct hp_stack_cache_stats *stats);

/* Unmap every cached stack now. Returns HP_OK (a stack whose plugin's
 * unmap fails twice is lost: logged under HP_DEBUG, as hp_cache_trim does
 * with ranges). Thread-safe. */
HP_EXTERN(int32_t) hp_stack_cache_trim(void);

HP_END_DECLS

#endif /* HP_STACK_H */
