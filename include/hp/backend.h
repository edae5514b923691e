/*
 * libhp — the backend plugin contract.
 *
 * STABILITY: this header is a promise to plugin authors, separate from the
 * application API. A plugin built against HP_BACKEND_ABI_VERSION 1 keeps
 * loading in every libhp 1.x: structs here only grow at their end, and the
 * loader reads each struct's size field before touching a member. An
 * incompatible change bumps HP_BACKEND_ABI_VERSION and the entry symbol name,
 * so an old plugin is rejected with a clear reason instead of misbehaving.
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
 * constructors run only in files that passed. Order: the directories of
 * HP_BACKEND_PATH (a colon-separated list of absolute paths) in list order,
 * then the built-ins' directory (HP_BACKEND_DIR, default the installed
 * one), always searched, last; within each, files in byte order of name.
 * The first file that provides a name wins; a later one is rejected with a
 * reason naming the winner. The built-in names (hugetlbfs, thp-madvise,
 * anon-orders, fallback) are reserved: only files of the built-ins'
 * directory may provide them, and without one there the fallback compiled
 * into libhp serves "fallback". At most 31 plugins load, a file past that
 * is refused with a reason, and the fallback always has a slot of its own.
 * Rejected files never take a slot and are all listed, with the reason
 * (hp_backend_get, hpctl status, HP_DEBUG).
 *
 * Kinds: HP_KIND_HUGETLB, _THP, _MTHP and _BASE are chosen automatically
 * by the selection tiers; HP_KIND_OTHER only when a request or HP_BACKENDS
 * names it; any other value is rejected at load.
 *
 * The core serialises nothing for the plugin: map, unmap, remap, advise and
 * huge_bytes are called concurrently from many threads and must be
 * thread-safe. probe is called once at load — for a plugin of kind
 * HP_KIND_OTHER, only once a request (hp_alloc_opts.backend) or HP_BACKENDS
 * names it, never before — again (from any thread) before requests that
 * could use the backend when it sets HP_CAPS_REPROBE (at most every
 * 100 ms), and on hp_reprobe(); calls are serialised per backend. Under
 * HP_DEBUG=1 the core logs "probing <file> (<name>)" before each call to
 * probe, and "loading <file>" before dlopen runs the plugin's constructors:
 * a probe that crashes takes the process down (libhp catches no signal),
 * and that log's last line names the file.
 * Every op returns HP_OK or a negative hp_error code and may call
 * host->set_detail to explain a failure.
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

#define HP_BACKEND_ABI_VERSION 1u
#define HP_BACKEND_ENTRY hp_backend_entry_v1
#define HP_BACKEND_ENTRY_NAME "hp_backend_entry_v1"

#if defined(__GNUC__)
#define HP_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define HP_BACKEND_EXPORT
#endif

/* Upcalls from a plugin into the core. OS wrappers return 0 or -errno. */
struct hp_host {
    uint32_t abi_version;       /* HP_BACKEND_ABI_VERSION of the core */
    uint32_t size;              /* sizeof(struct hp_host) of the core */
    /* Debug log line (shown under HP_DEBUG=1); msg has no newline. */
    void (*log)(const char *backend, const char *msg);
    /* Set the detail message of the failing call on this thread. */
    void (*set_detail)(const char *msg);
    int (*os_map)(void *hint, size_t len, int prot, int flags, int fd, int64_t off, void **out);
    int (*os_unmap)(void *addr, size_t len);
    int (*os_remap)(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
                    void **out);
    int (*os_advise)(void *addr, size_t len, int advice);
    int (*os_protect)(void *addr, size_t len, int prot);
    /* Read a /proc or /sys file into buf (NUL-terminated, truncated to
     * cap - 1). Returns the length or -errno. Paths are absolute. */
    int64_t (*read_text)(const char *path, char *buf, size_t cap);
    /* Bytes of [addr, addr+len) that the kernel backs with pages larger than
     * the base page right now (smaps, or page flags for mTHP), or -errno. */
    int64_t (*measure_huge_bytes)(const void *addr, size_t len);
    /* Base page size of the machine. */
    uint64_t base_page_size;
};

/* Per page size flags in struct hp_backend_caps. */
#define HP_PAGE_GUARANTEED 0x1u  /* reserved at map time; touching never fails */
#define HP_PAGE_ADVISED    0x2u  /* the kernel needs madvise(MADV_HUGEPAGE) for it */

/* caps->flags */
#define HP_CAPS_REPROBE 0x1u     /* pool figures change: re-probe before choosing */

/* What a backend can do on this machine, filled by probe. */
struct hp_backend_caps {
    uint32_t size;               /* set by the core before probe */
    uint32_t available;          /* 1 if it can serve at least one page size */
    uint32_t flags;              /* HP_CAPS_* */
    uint32_t n_page_sizes;       /* <= HP_MAX_PAGE_SIZES (checked) */
    uint64_t page_sizes[HP_MAX_PAGE_SIZES];  /* powers of two >= base page,
                                                strictly ascending (checked) */
    uint64_t pool_free[HP_MAX_PAGE_SIZES];   /* free pool pages, UINT64_MAX if unpooled */
    uint32_t page_flags[HP_MAX_PAGE_SIZES];  /* HP_PAGE_* */
    char reason[256];            /* why unavailable, or a one-line summary */
};

/* A request handed to map. */
struct hp_map_request {
    uint32_t size;               /* sizeof(struct hp_map_request) */
    uint32_t reserved;
    uint64_t flags;              /* HP_F_* of the caller (POPULATE, COLLAPSE, ...) */
    uint64_t len;                /* bytes the caller asked for, > 0 */
    uint64_t page_size;          /* page size the core chose from this backend's caps */
};

/* A mapping produced by map. The core owns the struct; the backend fills it
 * and may keep private state in cookie. */
struct hp_mapping {
    uint32_t size;               /* sizeof(struct hp_mapping) */
    uint32_t reserved;
    void *addr;                  /* usable start, aligned to the base page */
    uint64_t len;                /* usable bytes, >= request len */
    void *map_addr;              /* whole mapping (for unmap) */
    uint64_t map_len;
    uint64_t page_size;          /* page size the mapping is set up for */
    uint64_t cookie;             /* backend private */
};

/* The descriptor a plugin returns. Mandatory: name, probe, map, unmap. */
struct hp_backend_ops {
    uint32_t abi_version;        /* HP_BACKEND_ABI_VERSION */
    uint32_t size;               /* sizeof(struct hp_backend_ops); at least up to unmap */
    const char *name;            /* unique, 1 to 31 chars of [a-z0-9_-] */
    const char *description;     /* one line, printable ASCII; may be NULL */
    uint32_t kind;               /* enum hp_backend_kind, 0 to 4 */
    uint32_t reserved;
    int (*probe)(struct hp_backend_caps *caps);
    int (*map)(const struct hp_map_request *req, struct hp_mapping *out);
    int (*unmap)(const struct hp_mapping *m);
    /* Optional. Resize m in place or by moving it, keeping contents; on
     * failure m and its memory are unchanged. NULL: the core copies. */
    int (*remap)(struct hp_mapping *m, uint64_t new_len, uint64_t flags);
    /* Optional. Apply HP_F_POPULATE / HP_F_COLLAPSE to an existing mapping. */
    int (*advise)(const struct hp_mapping *m, uint64_t flags);
    /* Optional. Huge-backed bytes of m now; NULL: host->measure_huge_bytes. */
    int64_t (*huge_bytes)(const struct hp_mapping *m);
};

typedef const struct hp_backend_ops *(*hp_backend_entry_fn)(const struct hp_host *host);

HP_END_DECLS

#endif /* HP_BACKEND_H */
