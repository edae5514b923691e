/*
 * Helpers shared by libhp's own backend plugins (linked statically into each
 * plugin; not part of the plugin contract). Everything goes through the
 * host's OS upcalls so fault injection reaches the backends too.
 */
#ifndef HP_BACKEND_UTIL_H
#define HP_BACKEND_UTIL_H

#include "hp/backend.h"

/* MADV_* values newer than some libc headers. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static inline uint64_t hpb_round_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) / align * align;
}

/* Does the request name the base page size in its flags (HP_F_PAGE_SHIFT)?
 * Then the mapping must not be backed by larger pages (hp/backend.h). */
static inline int hpb_wants_base_pages(const struct hp_host *h, const struct hp_map_request *req)
{
    uint64_t shift = (req->flags & HP_F_PAGE_SHIFT_MASK) >> HP_F_PAGE_SHIFT_POS;
    return shift && (UINT64_C(1) << shift) == h->base_page_size;
}

/* Map len bytes of private anonymous read-write memory whose start is
 * aligned to align (a power of two >= the base page). extra_flags are or-ed
 * into the mmap flags. Returns HP_OK or HP_ENOMEM (detail set). */
int hpb_map_aligned(const struct hp_host *h, uint64_t len, uint64_t align, int extra_flags,
                    void **out);

/*
 * The mapping layout of libhp's own backends, which the core's cache of freed
 * ranges (lib/cache.h) relies on to carve and merge them:
 *   - addr == map_addr, aligned to page_size;
 *   - [map_addr, map_addr + committed) is usable memory (read-write; for
 *     hugetlbfs, pool pages); committed >= len;
 *   - [map_addr + committed, map_addr + map_len) is PROT_NONE address space
 *     reserved for growth in place;
 *   - committed is hp_mapping.committed, always set (never 0);
 *   - unmap is munmap(map_addr, map_len), so every page-aligned piece of a
 *     mapping is itself a mapping the backend can unmap: the mappings say
 *     so with HP_MAP_CARVABLE, and the core's cache carves and merges them
 *     like any plugin's that sets the flag. The cookie is unused.
 */
static inline uint64_t hpb_committed(const struct hp_mapping *m)
{
    return m->committed ? m->committed : m->len;
}

static inline void hpb_set_committed(struct hp_mapping *m, uint64_t committed)
{
    m->committed = committed;
}

/* For a request with a guard or an alignment above the page size: reserve
 * guard + len bytes of PROT_NONE address space such that *addr, guard bytes
 * above *map_addr, is aligned to align. The caller maps its memory at *addr
 * with MAP_FIXED; [*map_addr, *addr) stays the guard. HP_OK or HP_ENOMEM. */
int hpb_reserve_guarded(const struct hp_host *h, uint64_t len, uint64_t align, uint64_t guard,
                        void **map_addr, void **addr);

/* hpb_reserve_guarded, then private anonymous read-write memory at addr
 * (extra_flags or-ed in), aligned to max(req->align, align), with
 * req->guard bytes below: fills out's addresses, len and committed. Such a
 * mapping is not HP_MAP_CARVABLE (addr != map_addr when guarded). */
int hpb_map_guarded(const struct hp_host *h, const struct hp_map_request *req, uint64_t len,
                    uint64_t align, int extra_flags, struct hp_mapping *out);

/* Reserve len bytes of PROT_NONE address space (no memory, no commit charge)
 * aligned to align. Returns HP_OK or HP_ENOMEM (detail set). */
int hpb_reserve(const struct hp_host *h, uint64_t len, uint64_t align, void **out);

/* Address space to reserve when a block of extent bytes must move: room to
 * grow 4x in place, so geometric growth moves O(log) times. */
uint64_t hpb_headroom(uint64_t extent, uint64_t align);

/* The remap op for anonymous memory (THP, mTHP) in the layout above. Growth
 * commits reserved headroom (mprotect), else extends the mapping in place
 * (mremap without MAYMOVE), else moves it with MREMAP_FIXED to a reservation
 * aligned to align, so huge pages keep their PMD (or folio) mappings. The
 * committed end is rounded up to align so no huge page straddles it. Shrink
 * unmaps whole align-sized pages past the new end, without moving. On failure
 * m and the memory are unchanged. */
int hpb_remap_anon(const struct hp_host *h, struct hp_mapping *m, uint64_t new_len,
                   uint64_t align);

/* Fault in [addr, addr+len) for writing. Uses MADV_POPULATE_WRITE, which
 * reports failure instead of raising SIGBUS (Linux 5.14). Returns HP_OK or
 * HP_ENOMEM. Kernels without it get the pages touched one by one. */
int hpb_populate(const struct hp_host *h, void *addr, uint64_t len);

/* Unmap [addr, addr+len) on a clean-up path, trying twice: munmap can fail
 * once (ENOMEM when splitting would pass vm.max_map_count) and succeed next
 * time, and a clean-up that gives up leaks the range for good. */
void hpb_discard(const struct hp_host *h, void *addr, uint64_t len);

/* The unmap op every anonymous backend shares: munmap the whole mapping. */
int hpb_unmap(const struct hp_host *h, const struct hp_mapping *m);

/* The advise op of backends whose only advice is HP_F_POPULATE. */
int hpb_advise_populate(const struct hp_host *h, const struct hp_mapping *m, uint64_t flags);

/* The query op of libhp's own backends: numa_node is the node of the page
 * at m->addr (host->os_page_node; -1 while it is not resident or the host
 * has no such upcall); no fd. Always HP_OK. */
int hpb_query(const struct hp_host *h, const struct hp_mapping *m, struct hp_block_query *q);

/* THP mode from a sysfs "enabled" file: "always", "madvise", "never", or
 * "inherit" (per-size files only). Writes it into mode; returns 0 or -errno. */
int hpb_read_mode(const struct hp_host *h, const char *path, char *mode, size_t cap);

/* Format into caps->reason. */
void hpb_reason(struct hp_backend_caps *caps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Set the host's error detail with printf formatting; returns code. */
int hpb_fail(const struct hp_host *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
