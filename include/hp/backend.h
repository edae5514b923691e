/*
 * libhp — the backend plugin contract.
 *
 * STABILITY: this header is a promise to plugin authors, separate from the
 * application API. This is contract 2 (HP_BACKEND_ABI_VERSION 2, entry symbol
 * hp_backend_entry_v2). A plugin built against it keeps loading in every
 * later libhp 1.x: structs here only grow at their end, and the loader reads
 * each struct's size field before touching a member. An incompatible change
 * bumps HP_BACKEND_ABI_VERSION and the entry symbol name, so an old plugin is
 * rejected with a clear reason instead of misbehaving: a file that exports
 * only hp_backend_entry_v1 is refused with "built for backend ABI 1; this
 * libhp loads ABI 2 (hp_backend_entry_v2)".
 *
 * ONE DOOR: libhp's own backends (hugetlbfs, thp-madvise, anon-orders and the
 * fallback compiled into the core) use this header and nothing else. The
 * core never reads a plugin's cookie and never treats a backend differently
 * because of its name: what the core's cache of freed ranges and hp_realloc
 * need to know about a mapping is in struct hp_mapping (committed, flags)
 * and struct hp_backend_caps, which any plugin can fill. Stacks
 * (hp/stack.h) go through the same door: hp_stack_create is one map request
 * with align and guard, then advise (populate) and unmap; a plugin that
 * offers the PMD page size serves huge stacks, one that offers the base
 * page lean ones (kind HP_KIND_OTHER only when HP_BACKENDS names it).
 *
 * A plugin is a shared object in a directory of HP_BACKEND_PATH or in the
 * built-ins' directory (`pkg-config --variable=backenddir libhp`). It must not
 * link against libhp: everything it needs from the core — logging, the error
 * detail of the current call, and the OS calls (so that tests can inject
 * faults) — arrives in the struct hp_host passed to its entry point. It
 * exports exactly one symbol, HP_BACKEND_ENTRY, which returns a pointer to a
 * static const struct hp_backend_ops.
 *
 * Which files load (README "Plugin trust"): a plugin is a regular file, not
 * a symbolic link, named *.so, owned by root or the user running the
 * program, not writable by others and not writable by its group unless the
 * group is root's (gid 0); the directory it is in and every directory above
 * it, up to "/", obey the same owner and write rules (sticky bit or not).
 * The loader opens the file with O_NOFOLLOW, checks the open descriptor,
 * and dlopens that descriptor (/proc/self/fd/N, so /proc must be mounted):
 * constructors run only in files that passed. The descriptor is closed once
 * dlopen returns; libhp holds none open afterwards. Order: the directories of
 * HP_BACKEND_PATH (a colon-separated list of absolute paths) in list order,
 * then the built-ins' directory (HP_BACKEND_DIR, default the installed
 * one), always searched, last; within each, files in byte order of name.
 * The first file that provides a name wins; a later one is rejected with a
 * reason naming the winner. The built-in names (hugetlbfs, thp-madvise,
 * anon-orders, fallback) are reserved: only files of the built-ins'
 * directory may provide them, and without one there the fallback compiled
 * into libhp serves "fallback". At most 31 plugins load, a file past that
 * is refused with a reason, and the fallback always has a slot of its own;
 * the directories of HP_BACKEND_PATH get at most 28 of them, the slots of
 * the three built-in plugins being kept for the built-ins' directory (read
 * last), so that no number of plugins crowds libhp's own backends out.
 * Rejected files never take a slot and are all listed, with the reason
 * (hp_backend_get, hpctl status, HP_DEBUG).
 *
 * Kinds: HP_KIND_HUGETLB, _THP, _MTHP and _BASE are chosen automatically
 * by the selection tiers; HP_KIND_OTHER only when a request or HP_BACKENDS
 * names it; any other value is rejected at load.
 *
 * The core serialises nothing for the plugin: map, unmap, remap, advise,
 * huge_bytes, query and node_pool are called concurrently from many threads and must be
 * thread-safe. probe is called once at load — for a plugin of kind
 * HP_KIND_OTHER, only once a request (hp_alloc_opts.backend) or HP_BACKENDS
 * names it, never before — again (from any thread) before requests that
 * could use the backend when it sets HP_CAPS_REPROBE (at most every
 * 100 ms), and on hp_reprobe(); calls are serialised per backend. No
 * probe runs under a lock that requests for other backends take: a probe
 * that hangs blocks only the requests that name its backend while its
 * first probe runs (they wait for it); everyone else, hp_reprobe,
 * hp_backend_get and fork included, uses the figures of its last probe
 * meanwhile (a deferred backend: unavailable). A re-probe runs in the
 * thread whose call found it due (a request that could use the backend and
 * names no other one, hp_backend_get, hp_reprobe), which waits for it;
 * other threads go on with the last figures, so a re-probe that hangs
 * blocks that one call. The load-time probe and init run inside libhp's
 * start-up, which every thread's first libhp call waits for: an init or
 * probe that waits for another thread that calls libhp never returns, and
 * neither does that first call (a call back into libhp from the same
 * thread fails with HP_ENOTSUP instead, hp/errors.h). Under
 * HP_DEBUG=1 the core logs "probing <file> (<name>)" before each call to
 * probe, and "loading <file>" before dlopen runs the plugin's constructors:
 * a probe that crashes takes the process down (libhp catches no signal),
 * and that log's last line names the file.
 * Every op returns HP_OK or a negative hp_error code and may call
 * host->set_detail to explain a failure; the detail reaches the application
 * as hp_last_error_detail() of the call that failed. errno is not saved
 * around ops: what an op leaves there the application may see after a
 * successful call (libhp promises nothing about errno, hp/errors.h).
 * An op must leave the calling thread as it found it (signal mask,
 * cancellation state, errno excepted): the core does not restore them.
 * libhp's start-up and a plugin's probes run with cancellation disabled.
 * An op that takes a const mapping (unmap, advise, huge_bytes, query)
 * gets a copy: writing through it changes nothing of libhp's records.
 * The name is read only as far as the plugin's memory is readable (at most
 * 32 bytes): one that is not NUL-terminated there is refused.
 * Flag bits this header does not define (in caps->flags, page_flags,
 * hp_mapping.flags) are ignored: the core acts on none of them (and hands
 * hp_mapping.flags back to the plugin's ops as they were). A mapping whose
 * addr is not its map_addr is never carved, HP_MAP_CARVABLE or not, and a
 * remap does not change what a block is: the core keeps the block's flags
 * from its map.
 *
 * LIFETIME OF host: the entry point and init receive the same pointer,
 * valid (with every upcall in it) until fini returns; keep either.
 *
 * LIFETIME OF self: after the entry point returned a descriptor that passed
 * the loader's checks, init(host, &self) is called once (from the thread
 * that first uses libhp, before any probe). A plugin keeps its state there
 * instead of in file statics. init returning an error rejects the plugin,
 * with "init failed: <code>: <detail>" as the reason; fini is then not
 * called. A plugin rejected after a successful init (its probe at load
 * fails) gets fini(self) before it is rejected. Every later op receives that self as its
 * first argument (NULL when init is NULL). fini(self) is called at most
 * once, from libhp's destructor (at exit, or when libhp itself is
 * dlclose'd); plugins are never unloaded before. By then libhp has handed
 * every range its cache held back through unmap, and fini is called only if
 * the application holds no live block: a program that ends with blocks
 * allocated skips every fini, since a later destructor of the program may
 * still free them (the process is ending; the state goes with it). No op
 * is called after fini. fini must not call libhp: the core is shutting
 * down around it (a call is not refused, and may even reach this plugin's
 * own map).
 *
 * probe: a backend that works but cannot serve on this machine returns
 * HP_OK with available = 0 and says why in caps->reason. A probe that
 * returns an error is rejected at load (a later failing re-probe keeps the
 * last figures); its reason is shown as "probe failed: <code>: <detail>;
 * <caps->reason>", so say why in set_detail or caps->reason. The record
 * must hold n_page_sizes <= HP_MAX_PAGE_SIZES page sizes, each a power of
 * two no smaller than host->base_page_size, strictly ascending; a plugin
 * whose record breaks this is rejected with the reason.
 */
#ifndef HP_BACKEND_H
#define HP_BACKEND_H

#include "common.h"
#include "errors.h"
#include "alloc.h"
#include "introspect.h"

HP_BEGIN_DECLS

#define HP_BACKEND_ABI_VERSION 2u
#define HP_BACKEND_ENTRY hp_backend_entry_v2
#define HP_BACKEND_ENTRY_NAME "hp_backend_entry_v2"

#if defined(__GNUC__)
#define HP_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define HP_BACKEND_EXPORT
#endif

/*
 * Upcalls from a plugin into the core. Each OS wrapper is one system call
 * made by the core's OS layer (lib/os.c), so the tests can make it fail on
 * demand; a plugin that calls them instead of libc gets its failure paths
 * tested too. They return 0 (or the length, for read_text) or -errno and set
 * nothing else. All are thread-safe and may be called from any op, init and
 * fini.
 */
struct hp_host {
    uint32_t abi_version;       /* HP_BACKEND_ABI_VERSION of the core */
    uint32_t size;              /* sizeof(struct hp_host) of the core */
    /* Debug log line (shown under HP_DEBUG=1); msg has no newline. Shown
     * cut to 511 bytes, anything but printable ASCII (ESC, CR, LF, BEL, ...)
     * replaced by '?', as for set_detail, caps->reason and description. */
    void (*log)(const char *backend, const char *msg);
    /* Set the detail message of the failing call on this thread (cut to
     * 511 bytes, anything but printable ASCII replaced by '?'). */
    void (*set_detail)(const char *msg);
    /* mmap(2): *out gets the address. len > 0; flags must include
     * MAP_PRIVATE or MAP_SHARED; out NULL is -EINVAL (nothing mapped). */
    int (*os_map)(void *hint, size_t len, int prot, int flags, int fd, int64_t off, void **out);
    /* munmap(2). addr aligned to the base page (hugetlb: to its page size). */
    int (*os_unmap)(void *addr, size_t len);
    /* mremap(2): *out gets the new address. new_addr is read only with
     * MREMAP_FIXED. */
    int (*os_remap)(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
                    void **out);
    /* madvise(2). addr aligned to the base page. */
    int (*os_advise)(void *addr, size_t len, int advice);
    /* mprotect(2). addr aligned to the base page. */
    int (*os_protect)(void *addr, size_t len, int prot);
    /* Read a /proc or /sys file into buf (NUL-terminated, truncated to
     * cap - 1). Returns the length or -errno. Paths are absolute, start
     * with /proc/ or /sys/ and have no "." or ".." component: any other
     * gets -EACCES (under HP_SYSFS_ROOT, a path never leaves that tree). */
    int64_t (*read_text)(const char *path, char *buf, size_t cap);
    /* Bytes of [addr, addr+len) that the kernel backs with pages larger than
     * the base page right now (smaps, or page flags for mTHP), or -errno:
     * -ENOMEM at once when some page of the range is not mapped, -EINVAL
     * when it wraps. */
    int64_t (*measure_huge_bytes)(const void *addr, size_t len);
    /* Base page size of the machine. */
    uint64_t base_page_size;
    /* memfd_create(2): *fd gets a new descriptor. name is a NUL-terminated
     * string of at most 249 bytes (shown in /proc/self/maps as memfd:name);
     * flags are MFD_* (MFD_CLOEXEC is always added; MFD_HUGETLB with a
     * MFD_HUGE_* size selects a hugetlb pool). */
    int (*os_memfd)(const char *name, unsigned flags, int *fd);
    /* ftruncate(2). fd open for writing, len >= 0; for a hugetlb memfd len
     * must be a multiple of its page size. */
    int (*os_ftruncate)(int fd, int64_t len);
    /* close(2). fd is closed even when -EINTR is returned (Linux). */
    int (*os_close)(int fd);
    /* mbind(2) (no libnuma needed): mode is MPOL_* (with MPOL_F_* bits),
     * nodemask holds maxnode bits (maxnode <= 4096; NULL with MPOL_DEFAULT
     * or MPOL_LOCAL), flags are MPOL_MF_*. addr aligned to the base page.
     * -ENOSYS where the kernel has no NUMA support. */
    int (*os_mbind)(void *addr, uint64_t len, int mode, const unsigned long *nodemask,
                    uint64_t maxnode, unsigned flags);
    /* getcpu(2): the CPU and NUMA node the calling thread runs on now (either
     * pointer may be NULL). A hint: the thread may migrate right after. */
    int (*os_getcpu)(unsigned *cpu, unsigned *node);
    /* get_mempolicy(2) with MPOL_F_NODE | MPOL_F_ADDR: *node gets the NUMA
     * node of the page holding addr (on a one-node machine, 0). addr lies
     * in a mapping of this process. Never faults a page in: -ENOENT when
     * the base page at addr is not resident (mincore(2)), so the node is
     * not known yet; -ENOSYS where the kernel has no NUMA support; -ENOMEM
     * when addr is not mapped; -EINVAL when node is NULL. Appended
     * after os_getcpu: a plugin that may run on a core whose host->size
     * ends before this field checks host->size first. */
    int (*os_page_node)(const void *addr, int *node);
};

/* Per page size flags in struct hp_backend_caps. */
#define HP_PAGE_GUARANTEED 0x1u  /* reserved at map time; touching never fails */
#define HP_PAGE_ADVISED    0x2u  /* the kernel needs madvise(MADV_HUGEPAGE) for it */

/* caps->flags */
#define HP_CAPS_REPROBE 0x1u     /* pool figures change: re-probe before choosing */

/* What a backend can do on this machine, filled by probe. */
struct hp_backend_caps {
    uint32_t size;               /* set by the core before probe */
    uint32_t available;          /* 1 if it can serve at least one page size,
                                    else 0 (any other value is an invalid
                                    record) */
    uint32_t flags;              /* HP_CAPS_* */
    uint32_t n_page_sizes;       /* <= HP_MAX_PAGE_SIZES (checked) */
    uint64_t page_sizes[HP_MAX_PAGE_SIZES];  /* powers of two >= base page,
                                                strictly ascending (checked) */
    uint64_t pool_free[HP_MAX_PAGE_SIZES];   /* free pool pages, UINT64_MAX if unpooled */
    uint32_t page_flags[HP_MAX_PAGE_SIZES];  /* HP_PAGE_* */
    char reason[256];            /* why unavailable, or a one-line summary;
                                    shown with anything but printable ASCII
                                    replaced by '?' */
};

/*
 * A request handed to map. The core fills every field; a plugin built
 * against an older, shorter struct reads only what it knows (size).
 *
 * THE BLOCK RULES. The memory map returns must be:
 *   - zero-filled, unless flags has HP_F_NOZERO (then it may hold old data of
 *     this process, never another process's);
 *   - readable and writable for [addr, addr + len), and for the committed
 *     range (struct hp_mapping);
 *   - private to this process and copy-on-write across fork(), unless the
 *     mapping sets HP_MAP_SHARED;
 *   - of the page size asked for: page_size equal to the request's;
 *   - aligned: addr a multiple of max(page_size, align);
 *   - guarded when asked: [addr - guard, addr) is PROT_NONE address space
 *     inside [map_addr, map_addr + map_len);
 *   - safe to touch: no SIGBUS on access to [addr, addr + committed), as long
 *     as the block's rules of fork (HP_MAP_POOL, HP_MAP_SHARED) are obeyed.
 *     Pool pages must be reserved at map time: an mmap of hugetlb memory
 *     (MAP_HUGETLB, or a hugetlb memfd or hugetlbfs file, MAP_SHARED or
 *     MAP_PRIVATE) reserves them unless MAP_NORESERVE, and fails with
 *     ENOMEM when the pool cannot (hugetlb_reserve_pages,
 *     Documentation/mm/hugetlbfs_reserv.rst); with MAP_NORESERVE a fault
 *     can SIGBUS.
 *   - on base pages only when flags names the base page size
 *     (HP_F_PAGE_SHIFT_MASK bits equal to the base page's shift, as
 *     hp_page_size_flag(base page) sets them): then no part of the mapping
 *     may be backed by a larger page, whatever the THP setting ("always"
 *     included) — advise MADV_NOHUGEPAGE on [map_addr, map_addr + map_len),
 *     which also rules out every mTHP size. Lean stacks ask this way;
 *     without the page-size bits a base-page mapping may get THP where the
 *     system setting gives it.
 * The core checks the returned mapping (addr aligned to max(page_size,
 * align), the guard and len inside [map_addr, map_addr + map_len), len >= the
 * request's len, committed within the mapping); a mapping that breaks a rule
 * is unmapped with unmap and the request fails with HP_EBACKEND and a detail
 * naming the rule (a map_addr + map_len that wraps past the end of the
 * address space is refused and left alone). For a plugin that is not one of
 * libhp's own, the core also refuses, leaving it alone (no unmap: it may
 * reach memory that is not the plugin's), a mapping whose
 * [map_addr, map_addr + map_len) has unmapped address space in it or,
 * outside the guard and [addr, addr + committed), accessible memory (the
 * layout below wants PROT_NONE there: a map_len too long reaches the
 * program's memory); and it refuses
 * (HP_EBACKEND) a mapping that overlaps a live block, stack or
 * cached range of libhp's (left alone, not unmapped: it is its owner's; a
 * block being resized in another thread at that moment is not counted) and
 * one whose [addr, addr + len) is not readable and writable (unmapped), and
 * one whose page_size is above the PMD size (no THP is larger) when smaps'
 * KernelPageSize for addr says otherwise (unmapped);
 * remap results are checked for all of these but the page size (the
 * layout past the committed bytes, overlap, read and write access), and a
 * remap, huge_bytes or query that leaves a block's pages, readable and
 * writable before, without that access has it restored by the core
 * (logged under HP_DEBUG). The contents are not checked (reading every byte would
 * cost what the block saves): a plugin that hands out memory that is not
 * zero, or not private, or that can SIGBUS (a MAP_SHARED object shrunk
 * later, a reservation it never made), or an advise that replaces the
 * block's pages (the core checks only that the block stays mapped, read
 * and write), breaks its callers' blocks without an error; nor
 * can the core tell memory the plugin mapped from memory of the program's
 * that a plugin reports as its committed bytes or its guard. The core makes the guard
 * PROT_NONE itself (one mprotect, which changes nothing when the plugin did
 * it), so a plugin that forgot cannot leave a stack without its guard. The
 * core keeps a copy of the
 * descriptor (struct hp_backend_ops) made at load: a plugin that writes to
 * its table later changes nothing. Population: with HP_F_POPULATE in flags, map prefaults the
 * memory itself or leaves it to advise; the core calls advise(self, m, flags)
 * after a successful map when flags has HP_F_POPULATE or HP_F_COLLAPSE,
 * after hp_realloc grew a block with them, and on a cached stack handed out
 * again with HP_STACK_POPULATE.
 */
struct hp_map_request {
    uint32_t size;               /* sizeof(struct hp_map_request) */
    uint32_t reserved;           /* 0 */
    uint64_t flags;              /* HP_F_* of the caller (POPULATE, COLLAPSE, NOZERO ...) */
    uint64_t len;                /* bytes the caller asked for, > 0, a multiple
                                    of the base page */
    uint64_t page_size;          /* page size the core chose from this backend's caps */
    uint64_t align;              /* addr must be a multiple of max(align, page_size);
                                    a power of two >= the base page; 0 means
                                    page_size */
    uint64_t guard;              /* bytes of PROT_NONE address space directly below
                                    addr, a multiple of the base page, part of
                                    [map_addr, map_addr + map_len); 0 for none
                                    (stacks ask for one, with align = page_size) */
};

/* hp_mapping.flags: what the core may do with a mapping. A plugin sets only
 * what it implements; 0 is always safe. */
/* The mapping has addr == map_addr (no guard), aligned to page_size, and
 * every page_size-aligned piece of [map_addr, map_addr + map_len) can be
 * unmapped on its own, by unmap() on a mapping describing that piece
 * (addr = map_addr = the piece's start, map_len its length, committed and
 * len its usable bytes, the same flags, page_size and cookie); two adjacent
 * pieces of one mapping may be described by one mapping again. The core's
 * cache of freed ranges then keeps such memory when a block is freed,
 * carves new blocks of the same backend and page size out of it (remap may
 * then see them), merges the pieces back, and hp_realloc grows a block in
 * place into the freed range right after it. Reused bytes are cleared by
 * the core unless HP_F_NOZERO. Before it caches a freed block the core
 * makes its committed bytes read-write (mprotect) and inherited by fork
 * (MADV_DOFORK) again, whatever the caller or the plugin set; if that
 * fails the block goes to unmap. Where the kernel refuses MADV_DOFORK on
 * the mapping (Linux 7.3, hugetlb), a block some part of which is marked
 * MADV_DONTFORK goes to unmap too; an unmarked one is cached. In a child after fork(), cached ranges it
 * inherited are dropped with munmap, without a call into the plugin.
 * Without the flag, a freed block is unmapped at once and never reused.
 * The cache keeps only mappings whose page_size is above the base page.
 * The core cannot check the promise: a plugin that sets the flag but
 * unmaps more than the piece it is given (its whole original mapping, found
 * by cookie, say) unmaps the live blocks carved from the same mapping. */
#define HP_MAP_CARVABLE 0x1u
/* The memory is shared with another process or across fork (MAP_SHARED, a
 * memfd): not private copy-on-write. The core never caches such a mapping
 * (a freed block is unmapped at once). Fork rule: after fork() parent and
 * child see the same bytes; unmap must release only the calling process's
 * view (munmap, close its descriptor), never shrink or destroy an object
 * another process may still map; once a fork() happened after the block was
 * mapped, the core never calls remap for it again, in the parent or the
 * child (it copies into a new block instead), so a child resizing a block
 * cannot take memory away from its parent. */
#define HP_MAP_SHARED   0x2u
/* The pages come from a finite reserved pool (hugetlb-like). The fork rules
 * of hp/alloc.h apply: pages of a range that existed at fork() are never
 * reused from the cache in either process, are unmapped when freed, and
 * such a block grows by copying, not by remap. With HP_MAP_SHARED the
 * block is never cached and never remapped after a fork anyway; POOL then
 * still marks its pages as pool pages for HP_F_NOPOOL (hp_alloc refuses
 * them, hp_realloc copies the block out) and has the pool figures read
 * again after unmap. A piece the cache carves
 * out of such a range is first split off as VMAs of its own (madvise
 * MADV_RANDOM then MADV_NORMAL over the piece; hugetlb VMAs stay split,
 * plain anonymous ones merge back): on Linux, moving part of a private
 * hugetlb VMA with mremap takes the reservation owner mark off all of it,
 * and a write to the rest after a fork, with the pool empty, would then be
 * SIGBUS. If the split fails, the range is released. */
#define HP_MAP_POOL     0x4u

/* A mapping produced by map. The core owns the struct; the backend fills it.
 * Layout: [map_addr, map_addr + map_len) is everything unmap releases;
 * guard bytes below addr are PROT_NONE; [addr, addr + committed) is usable
 * memory; the rest up to map_addr + map_len is PROT_NONE address space kept
 * for growth in place (remap may commit it). */
struct hp_mapping {
    uint32_t size;               /* sizeof(struct hp_mapping) */
    uint32_t flags;              /* HP_MAP_* */
    void *addr;                  /* usable start, a multiple of max(page_size, align) */
    uint64_t len;                /* usable bytes, >= request len */
    void *map_addr;              /* whole mapping (for unmap) */
    uint64_t map_len;
    uint64_t page_size;          /* page size the mapping is set up for */
    uint64_t committed;          /* usable bytes from addr, >= len; 0 means len */
    uint64_t cookie;             /* backend private: the core copies it with the
                                    mapping and never reads it */
};

/* What the optional query op tells about one block (hp_info shows it in
 * struct hp_block_info). The core sets size and every other field to
 * "unknown" (flags 0, numa_node -1, fd -1, fd_offset 0) before the call. */
struct hp_block_query {
    uint32_t size;               /* sizeof(struct hp_block_query) of the core */
    uint32_t flags;              /* 0; reserved for later fields */
    int32_t numa_node;           /* node the block's memory is bound to or on; -1 unknown */
    int32_t fd;                  /* descriptor backing the block (a memfd), -1 none;
                                    owned by the plugin, valid until the block is freed */
    uint64_t fd_offset;          /* offset of addr in fd */
};

/*
 * The descriptor a plugin returns. Mandatory: name, probe, map, unmap. Every
 * op takes the plugin's self (from init) first.
 *
 * remap: resize m in place or by moving it, keeping contents, and update
 *   addr, len, map_addr, map_len, committed (and cookie); new_len > 0, a
 *   multiple of the base page. Growth must keep the block rules (new bytes
 *   zero unless flags has HP_F_NOZERO). On failure m and its memory are
 *   unchanged. NULL, or a failure: the core copies within the same backend
 *   (a new map of this backend), or moves the block to another backend only
 *   when the application did not name this one; hp_realloc fails with the
 *   plugin's detail otherwise. The core checks a result like a map result
 *   (the rules above, for new_len, at the block's page size, and that it
 *   is mapped) before it uses it. One that breaks a rule, or a failure
 *   after which the block is no longer mapped where it was, is a broken
 *   contract: the result is not used, HP_EBACKEND names the backend and
 *   the rule, and the core finds the block's pages first — at its old
 *   address, or at the result's map_addr plus the block's old offset in
 *   its mapping (where mremap leaves them), and only where no other block,
 *   stack or cached range of libhp's lies; the mapping found there
 *   reaches no further than the size asked for and PROT_NONE reserve
 *   after it (accessible memory further on may be the program's, so it is
 *   never unmapped). A shrink found there is used
 *   as it is; for growth the core moves the pages back to the caller's
 *   address (onto free address space only) and goes on with a copy. Pages
 *   found nowhere make hp_realloc fail and the block is lost (its memory
 *   is gone): never a copy from memory that is not there. remap of a block
 *   with HP_MAP_POOL or HP_MAP_SHARED runs inside the fork fence (the pages
 *   must not be moved while a fork copies the address space): fork() in
 *   other threads, and resizes of other such blocks, wait until it returns,
 *   so a remap that hangs stops them too. A fork() from inside that remap
 *   (its own thread holds the fence) is not held back, which would wait
 *   for ever: it goes on, and so does the remap, in both processes,
 *   without the fence's protection.
 * Every op returns HP_OK or a code of hp/errors.h; any other value is
 *   taken as HP_EBACKEND ("<op> returned unknown status N").
 * advise: apply HP_F_POPULATE / HP_F_COLLAPSE to an existing mapping. A
 *   failure after map fails that candidate (the mapping goes to unmap, and
 *   hp_alloc tries the next one); on a stack, hp_stack_create fails with
 *   the plugin's error and detail; after hp_realloc grew a block it
 *   is only logged (HP_DEBUG), and the grown block is returned, its pages
 *   to come from faults.
 * unmap: release [map_addr, map_addr + map_len). When it fails at
 *   hp_free, hp_free returns HP_EOS naming the backend and the block stays
 *   the caller's (a later hp_free may succeed); when the block's memory is
 *   gone all the same, hp_free returns HP_EBACKEND ("the block is gone";
 *   "after unmapping part of it ... what is left of its mapping stays
 *   mapped, lost" when the plugin released only part: the rest is not
 *   unmapped by the core, as those addresses may be another mapping's by
 *   then) and the address is no block of libhp's any more. An unmap that
 *   returns HP_OK is believed; one that left the whole mapping in place
 *   is logged under HP_DEBUG ("still mapped"), not undone. A cached range whose unmap
 *   fails twice is lost: logged under HP_DEBUG, and hp_cache_trim still
 *   returns HP_OK (nobody can use the range again).
 * huge_bytes: huge-backed bytes of m now, for memory the kernel cannot
 *   measure: hp_info reports host->measure_huge_bytes (the kernel's
 *   figures) and calls huge_bytes only when that fails; a negative value
 *   there, or one above map_len, counts as 0 (HP_DEBUG logs an oversized
 *   one). A plugin cannot make hp_info claim huge pages the kernel does
 *   not show.
 * query: fill q about m (see struct hp_block_query); NULL: all unknown.
 *   A query that fails is as one that knows nothing: hp_info still returns
 *   HP_OK, with numa_node and fd -1 (its detail is not kept).
 *   hp_info reports a numa_node outside 0..1023 (Linux's largest
 *   MAX_NUMNODES) and an fd that is not an open descriptor as -1; an open
 *   descriptor and its fd_offset are reported as given (the core cannot
 *   tell whose descriptor it is).
 *   libhp's own backends fill numa_node with host->os_page_node of addr
 *   (-1 until the first page is touched) and leave fd at -1.
 * node_pool (since libhp 1.4; read only when size reaches it): a pooled
 *   backend's per-node figures. *free_pages gets how many pages of
 *   page_size (one of its caps' pooled sizes) the pools of the NUMA nodes in
 *   nodes can give a new mapping now; nodes is a bitmap of n_nodes bits
 *   (node n is bit n % 64 of word n / 64, the layout of mbind(2)). Returns
 *   HP_OK, or HP_ENOTSUP when it keeps no per-node figures (then the core
 *   uses caps' pool_free). The core calls it before choosing, only on a
 *   machine with two or more nodes with memory, and only when the calling
 *   thread's memory policy (MPOL_BIND) or cpuset leaves some of them out:
 *   their faults can take pages from those nodes alone (mm/hugetlb.c), so
 *   the core caps pool_free at this figure, and a pool the allowed nodes
 *   cannot serve is passed over as short. Called concurrently; a hint like
 *   pool_free (map must still reserve or fail). NULL: pool_free is used.
 *   hugetlbfs sums free_hugepages of
 *   /sys/devices/system/node/node<N>/hugepages/hugepages-<size>kB over the
 *   nodes, plus the room overcommit leaves (surplus pages come from the
 *   allowed nodes too).
 */
struct hp_backend_ops {
    uint32_t abi_version;        /* HP_BACKEND_ABI_VERSION */
    uint32_t size;               /* sizeof(struct hp_backend_ops); at least up to unmap */
    const char *name;            /* unique, 1 to 31 chars of [a-z0-9_-], not
                                    starting with '-' (HP_BACKENDS reads "-name"
                                    as "never name") */
    const char *description;     /* one line, printable ASCII; may be NULL */
    uint32_t kind;               /* enum hp_backend_kind, 0 to 4. A claim of
                                    HP_KIND_HUGETLB or HP_KIND_THP is earned:
                                    the plugin ranks just below libhp's own
                                    backend of that kind until huge bytes are
                                    measured (by the kernel's figures, never
                                    huge_bytes) in a block of its when it is
                                    freed; only blocks mapped at a page size
                                    above the base page are measured, at most
                                    16 per plugin (HP_DEBUG logs the outcome) */
    uint32_t reserved;
    /* Optional; see LIFETIME OF self above. */
    int (*init)(const struct hp_host *host, void **self);
    void (*fini)(void *self);
    int (*probe)(void *self, struct hp_backend_caps *caps);
    int (*map)(void *self, const struct hp_map_request *req, struct hp_mapping *out);
    int (*unmap)(void *self, const struct hp_mapping *m);
    /* Optional. */
    int (*remap)(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags);
    int (*advise)(void *self, const struct hp_mapping *m, uint64_t flags);
    int64_t (*huge_bytes)(void *self, const struct hp_mapping *m);
    int (*query)(void *self, const struct hp_mapping *m, struct hp_block_query *q);
    /* Optional, since libhp 1.4. */
    int (*node_pool)(void *self, uint64_t page_size, const uint64_t *nodes, uint32_t n_nodes,
                     uint64_t *free_pages);
};

typedef const struct hp_backend_ops *(*hp_backend_entry_fn)(const struct hp_host *host);

HP_END_DECLS

#endif /* HP_BACKEND_H */
