/*
 * libhp — allocating, resizing, freeing and inspecting blocks.
 *
 * A block is a page-aligned range of anonymous memory served by one backend
 * (see hp/introspect.h). Blocks are zero-filled unless HP_F_NOZERO is given.
 * Every function here is thread-safe; a block may be freed by a different
 * thread than the one that allocated it, and after fork() the child may use,
 * resize and free the blocks it inherited.
 *
 * Stack: a libhp call uses up to about 32 KiB of the calling thread's stack
 * (selection keeps every backend's capability record there): a thread whose
 * stack is smaller (PTHREAD_STACK_MIN is 16 KiB) must not call libhp.
 *
 * Async-signal safety: only hp_strerror, hp_error_name (hp/errors.h),
 * hp_version and hp_version_string (hp/version.h) may be called from a
 * signal handler; they read constant tables and never allocate or lock.
 * No other libhp function is async-signal-safe, like malloc: allocation,
 * resizing, freeing, hp_info, introspection and stacks take locks and
 * allocate, and hp_last_error / hp_last_error_detail read thread-local
 * storage, whose first use in a thread may allocate when libhp was
 * dlopen'd. (tests/unit/test_signal.c calls the four from a handler that
 * interrupts hp_alloc, hp_realloc, hp_info and hp_free.)
 *
 * Fork and hugetlb blocks (kernel rule, Documentation/mm/hugetlbfs_reserv.rst):
 * the pages of a private hugetlb block that exists at fork() are shared
 * copy-on-write and stay reserved for the parent only. A write to one, by
 * either process, needs a free unreserved pool page. With the pool empty,
 * the child's write gets SIGBUS, and the parent's write succeeds but takes
 * the page away from the child, whose next access to it (a read too) gets
 * SIGBUS. libhp never writes such pages itself: hugetlb memory from before
 * a fork is never reused from the cache (hp/cache.h) in either process, is
 * unmapped when freed, and grows by copying, not by moving its pages; a
 * fork() from another thread while hp_realloc moves a hugetlb block waits
 * until the move is done.
 */
#ifndef HP_ALLOC_H
#define HP_ALLOC_H

#include "common.h"

HP_BEGIN_DECLS

/* Allocation flags (uint64_t). Unknown bits are rejected with HP_EFLAGS. */
#define HP_F_REQUIRE_HUGE UINT64_C(0x1)   /* fail with HP_ENOHUGE instead of using base pages */
#define HP_F_POPULATE     UINT64_C(0x2)   /* prefault the whole block before returning */
#define HP_F_COLLAPSE     UINT64_C(0x4)   /* ask the kernel to collapse into huge pages now */
#define HP_F_NOZERO       UINT64_C(0x8)   /* contents may be left over from earlier use */
/* Never from a reserved pool (a page size whose backend reports pool
 * figures, hugetlb): the block has no fork rule (above), so after fork()
 * either process may write it whatever the pool holds. THP, mTHP or base
 * pages serve instead; HP_F_REQUIRE_HUGE then means THP or mTHP. hp_realloc
 * with it copies a pool block out of the pool (a pinned pool block cannot
 * leave its backend: hp_realloc fails, the block unchanged); once given, it
 * holds for every later hp_realloc of the block. Since 1.3 (an older libhp
 * refuses it: HP_EFLAGS). */
#define HP_F_NOPOOL       UINT64_C(0x10)

/* Bits 56..61 carry log2 of a requested page size; 0 means "libhp chooses".
 * hp_page_size_flag() builds them for any size; the common ones are here. */
#define HP_F_PAGE_SHIFT_POS 56
#define HP_F_PAGE_SHIFT_MASK (UINT64_C(0x3f) << HP_F_PAGE_SHIFT_POS)
#define HP_F_PAGE_4K  (UINT64_C(12) << HP_F_PAGE_SHIFT_POS)
#define HP_F_PAGE_64K (UINT64_C(16) << HP_F_PAGE_SHIFT_POS)
#define HP_F_PAGE_2M  (UINT64_C(21) << HP_F_PAGE_SHIFT_POS)
#define HP_F_PAGE_1G  (UINT64_C(30) << HP_F_PAGE_SHIFT_POS)

/* The flag bits that request page_size (a power of two from 4 KiB to 2^63),
 * or 0 if page_size is not such a power of two. Thread-safe. */
HP_EXTERN(uint64_t) hp_page_size_flag(uint64_t page_size);

/* NUMA placement of a block (hp_alloc_opts.numa_mode, since 1.4; the
 * kernel's rules and what libhp does with them: docs/numa.md). The nodes
 * are hp_alloc_opts.numa_nodes. libhp gives the calling thread that memory
 * policy while the backend maps the block (so a hugetlb reservation at mmap
 * and every page faulted in then follow it), sets it on the block's memory
 * with mbind(2) before returning (so later faults follow it too), and
 * keeps it for every hp_realloc of the block. */
#define HP_NUMA_DEFAULT    0u  /* no placement: the calling thread's own policy */
#define HP_NUMA_PREFER     1u  /* the nodes first (MPOL_PREFERRED, or MPOL_PREFERRED_MANY
                                  for several): when their pools are short, pages of
                                  other nodes serve, then another page kind */
#define HP_NUMA_BIND       2u  /* only the nodes (MPOL_BIND): a page kind they cannot
                                  supply is passed over (with HP_F_REQUIRE_HUGE and none
                                  left: HP_ENOHUGE); a block whose backend put pages
                                  elsewhere is refused (measured, HP_EBACKEND) */
#define HP_NUMA_INTERLEAVE 3u  /* pages round-robin over the nodes (MPOL_INTERLEAVE) */

/* Extended allocation options. Set size = sizeof(struct hp_alloc_opts), or
 * start from HP_ALLOC_OPTS_INIT; fields may only be appended. */
struct hp_alloc_opts {
    uint32_t size;          /* sizeof(struct hp_alloc_opts) as the caller knows it */
    uint32_t reserved;      /* must be 0 */
    uint64_t flags;         /* HP_F_* */
    const char *backend;    /* NULL, or the only backend allowed to serve */
    const char *exclude;    /* NULL, or comma-separated backend names never to use */
    /* Since 1.4 (read only when size reaches them; a libhp older than 1.4,
     * hp_version() < 10400, ignores them): */
    uint32_t numa_mode;     /* HP_NUMA_* */
    uint32_t numa_max_node; /* bits in numa_nodes (nodes 0 to numa_max_node - 1), 1 to 1024 */
    const uint64_t *numa_nodes;  /* node n is bit n % 64 of numa_nodes[n / 64]; NULL with
                                    HP_NUMA_DEFAULT. Every node must have memory and be
                                    allowed by the thread's cpuset */
};
#define HP_ALLOC_OPTS_INIT {sizeof(struct hp_alloc_opts), 0, 0, NULL, NULL, 0, 0, NULL}

/* Allocate size bytes (rounded up to whole pages), page aligned, from the
 * best backend for this request on this machine (README "Selection").
 * Returns NULL on failure with hp_last_error() set: HP_ESIZE (0 or too large),
 * HP_EFLAGS, HP_ENOHUGE (HP_F_REQUIRE_HUGE and no huge pages), HP_ENOBACKEND,
 * HP_ENOMEM, HP_EENV. Thread-safe. */
HP_EXTERN(void *) hp_alloc(size_t size, uint64_t flags);

/* hp_alloc with a backend choice: opts->backend restricts the request to
 * that backend; opts->exclude removes backends from consideration;
 * opts->numa_mode places the block on NUMA nodes (above). A placed block
 * never comes from the cache of freed huge pages and never goes back into
 * it. opts may be NULL (same as hp_alloc(size, 0)). Also HP_EINVAL: bad
 * options (an unknown numa_mode, numa_nodes NULL or empty with a mode, or
 * given without one, numa_max_node above 1024, a node without memory or
 * outside the thread's cpuset: the detail names it). Thread-safe. */
HP_EXTERN(void *) hp_alloc_ex(size_t size, const struct hp_alloc_opts *opts);

/* Free a block. Returns HP_OK, or HP_EFOREIGN (not a libhp block),
 * HP_EINTERIOR (inside a block), HP_EDOUBLEFREE (freed already); with a
 * plugin's backend also HP_EOS (its unmap failed: the block stays the
 * caller's) and HP_EBACKEND (its unmap failed after taking the memory: the
 * block is gone; hp/backend.h). NULL is a
 * no-op returning HP_OK. A failed free leaves the block's bytes as they
 * were (its protection may have been reset, below). The memory of
 * a block served with huge pages by libhp's own backends (or a plugin's
 * HP_MAP_CARVABLE mappings, hp/cache.h) stays mapped in
 * this process's cache of freed huge pages for the next hp_alloc/hp_realloc
 * to reuse, and goes back to the kernel by itself after an idle bound (1 s
 * for hugetlb pool pages, 10 s otherwise), above HP_CACHE_MAX, or on
 * hp_cache_trim() (hp/cache.h); any other block is unmapped at once.
 * hp_free undoes two things the caller may have done to the block's pages:
 * mprotect (cached memory is made read-write) and madvise(MADV_DONTFORK)
 * (inherited by fork again; where the kernel cannot undo it, as Linux 7.3
 * on hugetlb pages, such a block is unmapped, not cached). Other advice or policy on the pages
 * (MADV_WIPEONFORK, MADV_NOHUGEPAGE, mlock, mbind) stays with the memory
 * and would reach the next block served from it: undo it before hp_free.
 * Freeing a block again is HP_EDOUBLEFREE (docs/robustness.md gives the
 * bound). Thread-safe. */
HP_EXTERN(int32_t) hp_free(void *p);

/* Resize a block to new_size bytes, preserving min(old, new) bytes of
 * contents; the block may move. hp_realloc(NULL, n, f) is hp_alloc(n, f).
 * hp_realloc(p, 0, f) frees p and returns NULL with hp_last_error() == HP_OK.
 * On failure, returns NULL and p is untouched and still valid.
 * The options a block was allocated with govern every later resize:
 * - hp_alloc_opts.exclude: no resize ever moves the block to a backend the
 *   allocation excluded (HP_BACKENDS applies to every call anyway);
 * - hp_alloc_opts.backend pins the block (below);
 * - HP_F_NOPOOL and HP_F_REQUIRE_HUGE are sticky: given at allocation or at
 *   any resize, they hold for every later resize whatever its flags say
 *   (to drop them, allocate a new block and copy);
 * - the requested page size (HP_F_PAGE_*) is kept unless flags name another;
 * - HP_F_NOZERO, HP_F_POPULATE and HP_F_COLLAPSE apply to this call only.
 * hp_block_info.flags reports the flags in force after the call.
 * Bytes past the old usable size read as zero unless flags has HP_F_NOZERO.
 * Large blocks move page tables, never bytes: they grow in place (reserved
 * headroom, or the cached range right after them) or move whole to an
 * address aligned to their page size; shrinking releases the tail in place.
 * Bytes are copied only (a) when a base-page block of at most one huge page
 * grows to a size the selection serves with huge pages, unless the block
 * is pinned (below); (b) when flags ask for another page size, or
 * HP_F_REQUIRE_HUGE for a base-page block, or HP_F_NOPOOL for a block of
 * pool pages; (c) when the block's backend
 * cannot grow it (hugetlb pool exhausted, or no remap op): it moves to the
 * backend the selection picks for new_size — with HP_F_REQUIRE_HUGE it fails
 * with HP_ENOHUGE instead. A pinned block — its backend named in
 * hp_alloc_opts.backend, or allocated while HP_BACKENDS listed exactly one
 * backend and the caller named none (hp_block_info.pin) — never leaves
 * that backend: it is resized by the backend's remap, or copied into a new
 * block of the same backend, or hp_realloc fails with the backend's own
 * detail and the block unchanged. With several backends in HP_BACKENDS a
 * block may move among them.
 * Every move to another backend is logged under HP_DEBUG=1, and hp_info's
 * backend field names the new backend. Thread-safe, but one block must not
 * be resized and freed concurrently. */
HP_EXTERN(void *) hp_realloc(void *p, size_t new_size, uint64_t flags);

/* What a block really is. Set size = sizeof(struct hp_block_info) or start
 * from HP_BLOCK_INFO_INIT; libhp fills at most that many bytes. */
struct hp_block_info {
    uint32_t size;                 /* in: sizeof as the caller knows it */
    uint32_t reserved;
    char backend[32];              /* name of the backend serving the block */
    uint64_t requested_page_size;  /* page size asked for by flags, 0 if none */
    uint64_t page_size;            /* page size the backend mapped the block for */
    uint64_t usable_size;          /* bytes the caller may use */
    uint64_t mapped_size;          /* bytes of address space the block holds */
    uint64_t huge_bytes;           /* bytes of the block backed by pages larger
                                      than the base page right now (measured) */
    uint64_t flags;                /* HP_F_* in force: those of the hp_alloc or the last
                                      hp_realloc call, with the sticky ones kept and the
                                      page size carried (hp_realloc) */
    /* From the backend's query op (hp/backend.h), when it has one: */
    int32_t numa_node;             /* NUMA node the memory is bound to or on; -1 unknown */
    int32_t fd;                    /* descriptor backing the block (a memfd), owned by the
                                      backend and valid until the block is freed; -1 none */
    uint64_t fd_offset;            /* offset of the block's start in fd; 0 without fd */
    /* Since 1.2 (filled only when size reaches it): */
    uint32_t pin;                  /* HP_BLOCK_PIN_*: whether hp_realloc keeps the block
                                      in its backend, and why */
    uint32_t reserved2;            /* 0 */
    /* Since 1.4 (filled only when size reaches it): */
    uint32_t numa_mode;            /* HP_NUMA_* the block was placed with (hp_alloc_opts) */
    uint32_t numa_count;           /* nodes holding the block's resident pages now, measured
                                      (move_pages(2) at one address per page of page_size;
                                      nothing is faulted in); 0: none resident, or no NUMA
                                      support. Above 1: the block spans several nodes */
    uint64_t numa_mask;            /* bit n: node n holds some of them (nodes 0 to 63;
                                      hp_block_nodes for all) */
};
#define HP_BLOCK_INFO_INIT {sizeof(struct hp_block_info), 0, {0}, 0, 0, 0, 0, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0}

/* hp_block_info.pin */
#define HP_BLOCK_PIN_NONE  0u  /* hp_realloc may move it to another allowed backend */
#define HP_BLOCK_PIN_NAMED 1u  /* hp_alloc_opts.backend named its backend: it stays there */
#define HP_BLOCK_PIN_ENV   2u  /* HP_BACKENDS listed only its backend when it was
                                  allocated: it stays there */

/* Describe the block starting at p. Returns HP_OK, HP_EINVAL (info NULL or
 * info->size too small), HP_EFOREIGN, HP_EINTERIOR or HP_EDOUBLEFREE.
 * huge_bytes is read from the kernel now: page flags (/proc/self/pagemap and
 * /proc/kpageflags, exact for hugetlb, THP and mTHP) where they are readable,
 * else smaps; only where neither can be read, the backend's own measure
 * (hp/backend.h, huge_bytes). numa_node, fd and fd_offset are
 * the backend's answer to its query op (-1, -1, 0 without one; a caller
 * whose struct ends before them, as in libhp 1.0, gets the rest).
 * backend names the backend serving the block now: hp_realloc may have
 * moved it to another one (hp_realloc above), unless pin says it stays.
 * Thread-safe. */
HP_EXTERN(int32_t) hp_info(const void *p, struct hp_block_info *info);

/* Where the block at p is now: bytes[n] gets the bytes of its resident
 * pages on NUMA node n, for n < n_nodes, measured as hp_block_info's
 * numa_count (move_pages(2) with no target nodes, one address per page of
 * the block's page size; nothing is faulted in or moved). Returns how many
 * nodes hold some (0: nothing resident, or no NUMA support; nodes at or
 * above n_nodes are counted but not reported), or HP_EINVAL (bytes NULL
 * with n_nodes > 0), HP_EFOREIGN, HP_EINTERIOR, HP_EDOUBLEFREE. Since 1.4
 * (node HP_1.4). Thread-safe. */
HP_EXTERN(int32_t) hp_block_nodes(const void *p, uint64_t *bytes, uint32_t n_nodes);

HP_END_DECLS

#endif /* HP_ALLOC_H */
