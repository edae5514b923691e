/*
 * libhp — which backends exist on this machine and what they can do.
 *
 * The list holds every backend libhp found: first the backends that loaded
 * (plugins in load order — the directories of HP_BACKEND_PATH in order, then
 * the built-ins' directory, files in byte order of name within each — and
 * last the fallback built into libhp), then every file or directory the
 * loader rejected, with the reason (no limit). It is fixed after
 * initialisation.
 */
#ifndef HP_INTROSPECT_H
#define HP_INTROSPECT_H

#include "common.h"

HP_BEGIN_DECLS

#define HP_MAX_PAGE_SIZES 16

/* Kinds of backend, used by the selection policy. */
enum hp_backend_kind {
    HP_KIND_OTHER = 0,    /* third-party plugin: never chosen automatically */
    HP_KIND_HUGETLB = 1,  /* reserved pool pages (MAP_HUGETLB) */
    HP_KIND_THP = 2,      /* PMD-size transparent huge pages */
    HP_KIND_MTHP = 3,     /* multi-size THP (anonymous folio orders) */
    HP_KIND_BASE = 4      /* base pages only */
};

struct hp_backend_info {
    uint32_t size;                 /* in: sizeof as the caller knows it */
    uint32_t available;            /* 1 if the backend can serve requests */
    uint32_t kind;                 /* enum hp_backend_kind */
    uint32_t n_page_sizes;         /* valid entries in page_sizes */
    char name[32];                 /* "" if a rejected plugin had no readable name */
    char path[256];                /* plugin file, or "builtin" (cut to 255 bytes
                                      for display; never used to load) */
    char reason[256];              /* why unavailable or rejected, else a summary */
    uint64_t page_sizes[HP_MAX_PAGE_SIZES];  /* ascending, bytes */
    uint64_t pool_free[HP_MAX_PAGE_SIZES];   /* pages free in a pool for that
                                                size, UINT64_MAX if unpooled */
    /* Since 1.1 (filled only when size reaches it): */
    char description[128];         /* the plugin's own description, printable
                                      ASCII, cut to 127 bytes; "" if it gave none
                                      or the file was rejected */
};
#define HP_BACKEND_INFO_INIT {sizeof(struct hp_backend_info), 0, 0, 0, {0}, {0}, {0}, {0}, {0}, {0}}

/* Number of entries in the backend list (>= 1; 0 when called from inside
 * libhp's start-up, by a plugin's init or first probe: hp/errors.h).
 * Thread-safe. */
HP_EXTERN(int32_t) hp_backend_count(void);

/* Fill info for entry index (0 <= index < hp_backend_count()). Pool figures
 * are at most 100 ms old (hp_reprobe() refreshes everything at once).
 * Returns HP_OK, HP_ERANGE or HP_EINVAL. Thread-safe. */
HP_EXTERN(int32_t) hp_backend_get(uint32_t index, struct hp_backend_info *info);

/* Probe every backend again now. libhp reads pool counters again at most
 * every 100 ms, and THP/mTHP switches only at load; call this after
 * changing kernel settings (nr_hugepages, THP enabled) to see them at once.
 * The probes run in the calling thread, one after another: a plugin's
 * probe that hangs hangs this call (other threads use the last figures).
 * Returns HP_OK or HP_EENV (HP_ENOTSUP when called from inside libhp's
 * start-up, as every call: hp/errors.h). Thread-safe. */
HP_EXTERN(int32_t) hp_reprobe(void);

HP_END_DECLS

#endif /* HP_INTROSPECT_H */
