/*
 * hugetlbfs — pages from the kernel's reserved hugetlb pools (MAP_HUGETLB),
 * every size under /sys/kernel/mm/hugepages.
 *
 * Safety: the mapping is made without MAP_NORESERVE, so the kernel reserves
 * every page at mmap time or fails it with ENOMEM; a block that was handed
 * out can never SIGBUS on first touch for lack of pool pages, even if another
 * process drains the pool after the probe. Reservations are not the whole
 * story, though: a hugetlb cgroup limit applies at fault time
 * (hugetlb.<size>.max), and on Linux 6.18 a freshly reserved private page
 * touched for the first time while another thread forks was seen to SIGBUS
 * (docs/robustness.md). So every block is populated at map time with
 * MADV_POPULATE_WRITE, which fails cleanly instead of raising SIGBUS. The
 * pages are reserved for us anyway; populating only moves their zeroing
 * from the first touch to the allocation.
 */
#include "backend_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif

#define POOL_DIR "/sys/kernel/mm/hugepages"

static const struct hp_host *host;

struct pool {
    uint64_t total, free, rsvd, surplus, overcommit;
};

static int read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    unsigned long long v;
    char extra;
    if (host->read_text(path, buf, sizeof(buf)) <= 0)
        return -1;
    if (sscanf(buf, "%llu%c", &v, &extra) < 1 || buf[0] < '0' || buf[0] > '9')
        return -1;
    *out = v;
    return 0;
}

static int read_pool(uint64_t page_size, struct pool *p)
{
    static const char *files[] = {"nr_hugepages", "free_hugepages", "resv_hugepages",
                                  "surplus_hugepages", "nr_overcommit_hugepages"};
    uint64_t *slots[] = {&p->total, &p->free, &p->rsvd, &p->surplus, &p->overcommit};
    char path[160];
    for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
        snprintf(path, sizeof(path), POOL_DIR "/hugepages-%llukB/%s",
                 (unsigned long long)(page_size >> 10), files[i]);
        if (read_u64(path, slots[i]) != 0)
            return -1;
    }
    return 0;
}

/* Pages a new mapping can still reserve: free ones not yet promised to
 * someone, plus what overcommit may add as surplus. resv_hugepages can
 * read below zero (a huge unsigned value): on Linux 6.18, while a fork
 * child still maps pages of a private mapping its parent unmapped, until
 * the child unmaps them. More reserved pages than the pool has is that
 * wrap, not a promise: it counts as none (mmap still reserves, or fails
 * with ENOMEM, so a wrong guess costs a fallback, never a SIGBUS). */
static uint64_t reservable(const struct pool *p)
{
    uint64_t rsvd = p->rsvd > p->total ? 0 : p->rsvd;  /* nr_hugepages counts surplus too */
    uint64_t free_now = p->free > rsvd ? p->free - rsvd : 0;
    uint64_t extra = p->overcommit > p->surplus ? p->overcommit - p->surplus : 0;
    return extra > UINT64_MAX - 1 - free_now ? UINT64_MAX - 1 : free_now + extra;  /* never "unpooled" */
}

/* cgroup v2 hugetlb controller name of a size: 2MB, 1GB, 64KB. */
static void cgroup_size_name(uint64_t ps, char *out, size_t cap)
{
    if (ps >= (UINT64_C(1) << 30))
        snprintf(out, cap, "%lluGB", (unsigned long long)(ps >> 30));
    else if (ps >= (UINT64_C(1) << 20))
        snprintf(out, cap, "%lluMB", (unsigned long long)(ps >> 20));
    else
        snprintf(out, cap, "%lluKB", (unsigned long long)(ps >> 10));
}

/* Pages left under this process's hugetlb cgroup fault-time limit, or
 * UINT64_MAX when no limit applies. */
static uint64_t cgroup_room(uint64_t ps)
{
    char buf[512], path[600], name[16];
    if (host->read_text("/proc/self/cgroup", buf, sizeof(buf)) <= 0)
        return UINT64_MAX;
    char *v2 = strstr(buf, "0::");
    if (!v2)
        return UINT64_MAX;
    v2 += 3;
    v2[strcspn(v2, "\n")] = '\0';
    cgroup_size_name(ps, name, sizeof(name));
    uint64_t max, current;
    snprintf(path, sizeof(path), "/sys/fs/cgroup%s/hugetlb.%s.max", v2, name);
    if (read_u64(path, &max) != 0)
        return UINT64_MAX;  /* no controller, or "max" */
    snprintf(path, sizeof(path), "/sys/fs/cgroup%s/hugetlb.%s.current", v2, name);
    if (read_u64(path, &current) != 0)
        current = 0;
    return max > current ? (max - current) / ps : 0;
}

static int memfd_usable(void)
{
    int fd;
    if (host->os_memfd("hp-probe", MFD_HUGETLB, &fd) != 0)
        return 0;
    host->os_close(fd);
    return 1;
}

static int hugetlbfs_mounted(void)
{
    char buf[8192];
    return host->read_text("/proc/mounts", buf, sizeof(buf)) > 0 && strstr(buf, " hugetlbfs ");
}

/* What does not change while we run is looked up once: which sizes the
 * kernel has, and whether memfd and a mount are usable. The core re-probes
 * before every large allocation, and only the pool counters move. */
static uint64_t size_shifts;   /* bit n: 2^n pages exist */
static int fixed_probed, memfd_ok, mounted;

static void probe_fixed(void)
{
    for (unsigned shift = 16; shift <= 34; shift++) {
        char path[160];
        uint64_t ps = UINT64_C(1) << shift, v;
        snprintf(path, sizeof(path), POOL_DIR "/hugepages-%llukB/nr_hugepages",
                 (unsigned long long)(ps >> 10));
        if (ps > host->base_page_size && read_u64(path, &v) == 0)
            size_shifts |= UINT64_C(1) << shift;
    }
    memfd_ok = memfd_usable();
    mounted = hugetlbfs_mounted();
    fixed_probed = 1;
}

static int hugetlb_probe(void *self, struct hp_backend_caps *caps)
{
    char list[160] = "";
    size_t used = 0;
    unsigned found = 0;
    if (!fixed_probed)
        probe_fixed();
    if (size_shifts)
        caps->flags = HP_CAPS_REPROBE;  /* pools change under us */
    for (unsigned shift = 16; shift <= 34 && caps->n_page_sizes < HP_MAX_PAGE_SIZES; shift++) {
        uint64_t ps = UINT64_C(1) << shift;
        struct pool pool;
        if (!(size_shifts >> shift & 1) || read_pool(ps, &pool) != 0)
            continue;
        found++;
        uint64_t room = reservable(&pool), limit = cgroup_room(ps);
        if (limit < room)
            room = limit;
        int n = snprintf(list + used, sizeof(list) - used, "%s%lluK %llu/%llu free", used ? ", " : "",
                         (unsigned long long)(ps >> 10), (unsigned long long)room,
                         (unsigned long long)pool.total);
        if (n > 0 && (size_t)n < sizeof(list) - used)
            used += (size_t)n;
        /* Listed even when empty, so the core re-probes when a request
         * could use the size and sees a pool grown since. */
        unsigned i = caps->n_page_sizes++;
        caps->page_sizes[i] = ps;
        caps->pool_free[i] = room;
        caps->page_flags[i] = HP_PAGE_GUARANTEED;
    }
    if (!found) {
        hpb_reason(caps, "no hugetlb support (%s missing)", POOL_DIR);
        return HP_OK;
    }
    for (unsigned i = 0; i < caps->n_page_sizes; i++)
        caps->available |= caps->pool_free[i] > 0;
    hpb_reason(caps, "%s%s; memfd %s, hugetlbfs %s", caps->available ? "" : "no free pool pages: ",
               list, memfd_ok ? "usable" : "unusable", mounted ? "mounted" : "not mounted");
    return HP_OK;
}

static int map_guarded(const struct hp_map_request *req, uint64_t len, struct hp_mapping *out);
static int map_pages_at(char *at, uint64_t len, uint64_t ps, int fixed);
static int pool_dry(uint64_t ps, uint64_t len, int rc);

static int hugetlb_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    uint64_t ps = req->page_size, len = hpb_round_up(req->len, ps);
    int shift = __builtin_ctzll(ps);
    void *p;
    if (req->guard || req->align > ps)
        return map_guarded(req, len, out);
    int rc = host->os_map(NULL, len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1,
                          0, &p);
    if (rc < 0)
        return hpb_fail(host, HP_ENOMEM, "hugetlb pool of %llu KiB pages cannot reserve %llu pages: %s",
                        (unsigned long long)(ps >> 10), (unsigned long long)(len / ps),
                        strerror(-rc));
    rc = hpb_populate(host, p, len);
    if (rc != HP_OK) {
        hpb_discard(host, p, len);
        return rc;
    }
    out->addr = out->map_addr = p;
    out->len = out->map_len = out->committed = len;
    out->flags = HP_MAP_CARVABLE | HP_MAP_POOL;
    out->page_size = ps;
    return HP_OK;
}

/* Pool pages at an address aligned to max(align, ps), guard bytes of
 * PROT_NONE below: a reservation, then the pages over its top (MAP_FIXED). */
static int map_guarded(const struct hp_map_request *req, uint64_t len, struct hp_mapping *out)
{
    uint64_t ps = req->page_size, align = req->align > ps ? req->align : ps;
    void *start, *at;
    int rc = hpb_reserve_guarded(host, len, align, req->guard, &start, &at);
    if (rc != HP_OK)
        return rc;
    rc = map_pages_at(at, len, ps, MAP_FIXED);
    if (rc < 0) {
        hpb_discard(host, start, req->guard + len);
        return pool_dry(ps, len, rc);
    }
    out->map_addr = start;
    out->map_len = req->guard + len;
    out->addr = at;
    out->len = out->committed = len;
    out->flags = HP_MAP_POOL;
    out->page_size = ps;
    return HP_OK;
}

static int hugetlb_unmap(void *self, const struct hp_mapping *m)
{
    return hpb_unmap(host, m);
}

/* Map pool pages at exactly `at` (MAP_FIXED over our own reservation, or
 * MAP_FIXED_NOREPLACE past the end of a mapping). Returns 0 or -errno:
 * -ENOMEM when the pool cannot reserve them, -EEXIST when the address space
 * is taken. */
static int map_pages_at(char *at, uint64_t len, uint64_t ps, int fixed)
{
    int shift = __builtin_ctzll(ps);
    void *p;
    int rc = host->os_map(at, len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT) |
                              fixed, -1, 0, &p);
    if (rc < 0)
        return rc;
    if (p != at) {  /* a kernel before 4.17 took NOREPLACE as a hint */
        hpb_discard(host, p, len);
        return -EEXIST;
    }
    if (hpb_populate(host, at, len) != HP_OK) {
        /* Give the pages back but keep the address space ours. */
        if (fixed == MAP_FIXED)
            host->os_map(at, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                         -1, 0, &p);
        else
            hpb_discard(host, at, len);
        return -ENOMEM;
    }
    return 0;
}

static int pool_dry(uint64_t ps, uint64_t len, int rc)
{
    return hpb_fail(host, HP_ENOMEM, "hugetlb pool of %llu KiB pages cannot add %llu pages: %s",
                    (unsigned long long)(ps >> 10), (unsigned long long)(len / ps),
                    strerror(-rc));
}

/* Address space to reserve when a block moves: the whole pool (every page
 * it could ever get), so a block grows in place until the pool runs dry. */
static uint64_t move_headroom(uint64_t extent, uint64_t ps)
{
    struct pool pool;
    uint64_t cap = hpb_headroom(extent, ps);
    if (read_pool(ps, &pool) == 0 && pool.total + pool.overcommit < (UINT64_C(1) << 46) / ps) {
        uint64_t all = (pool.total + pool.overcommit) * ps;
        if (all > cap)
            cap = all;
    }
    return cap;
}

/* hugetlb mappings cannot be expanded by mremap (EINVAL), but may be moved
 * whole. So the new pages come first, mapped into a fresh reservation just
 * past where the old ones will land; then the old pages move in front of
 * them with MREMAP_FIXED. Pool exhaustion fails the first step, before
 * anything moved. Since Linux 6.17 the move may span several of our VMAs
 * (earlier growth pieces); older kernels refuse that (EFAULT). */
static int move_grow(struct hp_mapping *m, uint64_t extent)
{
    uint64_t ps = m->page_size, committed = hpb_committed(m);
    uint64_t caps[2] = {move_headroom(extent, ps), extent};
    int rc = -ENOMEM;
    for (int i = 0; i < 2; i++) {
        uint64_t cap = caps[i];
        if (i == 1 && cap == caps[0])
            break;
        void *dst, *p;
        if (hpb_reserve(host, cap, ps, &dst) != HP_OK)
            continue;
        rc = map_pages_at((char *)dst + committed, extent - committed, ps, MAP_FIXED);
        if (rc < 0) {
            hpb_discard(host, dst, cap);
            return pool_dry(ps, extent - committed, rc);
        }
        rc = host->os_remap(m->map_addr, committed, committed, MREMAP_MAYMOVE | MREMAP_FIXED, dst,
                            &p);
        if (rc < 0) {
            hpb_discard(host, dst, cap);
            /* Not a dry pool: the core copies instead, without releasing
             * the cached pool pages first. */
            if (rc == -EFAULT)
                return hpb_fail(host, HP_ENOTSUP, "the block spans several VMAs, which this "
                                "kernel cannot move at once (Linux < 6.17)");
            return hpb_fail(host, HP_ENOMEM, "cannot move the block's %llu bytes: %s",
                            (unsigned long long)committed, strerror(-rc));
        }
        if (m->map_len > committed)
            hpb_discard(host, (char *)m->map_addr + committed, m->map_len - committed);
        m->addr = m->map_addr = dst;
        m->len = extent;
        m->map_len = cap;
        hpb_set_committed(m, extent);
        return HP_OK;
    }
    return hpb_fail(host, HP_ENOMEM, "cannot reserve address space to grow to %llu bytes",
                    (unsigned long long)extent);
}

/* Layout of backend_util.h: pool pages up to the committed end, PROT_NONE
 * reservation after it. Growth maps pool pages into the reservation, else
 * right after the mapping, else moves (move_grow). Shrink unmaps whole pages
 * past the new end: they go back to the pool at once. */
static int hugetlb_remap(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags)
{
    (void)flags;
    uint64_t ps = m->page_size, extent = hpb_round_up(new_len, ps), committed = hpb_committed(m);
    char *start = m->map_addr;
    if (m->addr != m->map_addr)
        return hpb_fail(host, HP_ENOTSUP, "mapping not in the layout remap expects");
    if (extent <= committed) {
        if (extent < m->map_len) {
            int rc = host->os_unmap(start + extent, m->map_len - extent);
            if (rc < 0)
                return hpb_fail(host, HP_ENOMEM, "munmap of the tail failed: %s", strerror(-rc));
            m->map_len = extent;
            m->committed = m->map_len;
        }
        m->len = extent;
        return HP_OK;
    }
    if (extent <= m->map_len) {
        int rc = map_pages_at(start + committed, extent - committed, ps, MAP_FIXED);
        if (rc < 0)
            return pool_dry(ps, extent - committed, rc);
        hpb_set_committed(m, extent);
        m->len = extent;
        return HP_OK;
    }
    if (committed == m->map_len) {
        int rc = map_pages_at(start + committed, extent - committed, ps, MAP_FIXED_NOREPLACE);
        if (rc == 0) {
            m->len = m->map_len = extent;
            m->committed = m->map_len;
            return HP_OK;
        }
        if (rc != -EEXIST)
            return pool_dry(ps, extent - committed, rc);
    }
    return move_grow(m, extent);
}

/* Every page of a mapping this backend hands out was populated when it was
 * mapped or grown (map_pages_at, hugetlb_map), so HP_F_POPULATE has nothing
 * left to do, and HP_F_COLLAPSE nothing to collapse. */
static int hugetlb_advise(void *self, const struct hp_mapping *m, uint64_t flags)
{
    (void)self, (void)m, (void)flags;
    return HP_OK;
}

/* The node of the block's first page; no descriptor. */
static int hugetlb_query(void *self, const struct hp_mapping *m, struct hp_block_query *q)
{
    return hpb_query(host, m, q);
}

/* Free pages of the pools of the given nodes. The reservation at mmap
 * counts exactly these (mm/hugetlb.c allowed_mems_nr, free_huge_pages_node)
 * when the task is bound, and surplus pages that overcommit allows are
 * allocated on them too (gather_surplus_pages). */
static int hugetlb_node_pool(void *self, uint64_t page_size, const uint64_t *nodes,
                             uint32_t n_nodes, uint64_t *free_pages)
{
    uint64_t sum = 0;
    unsigned readable = 0;
    for (uint32_t n = 0; n < n_nodes; n++) {
        if (!(nodes[n / 64] >> (n % 64) & 1u))
            continue;
        char path[160];
        uint64_t v;
        snprintf(path, sizeof(path),
                 "/sys/devices/system/node/node%u/hugepages/hugepages-%llukB/free_hugepages", n,
                 (unsigned long long)(page_size >> 10));
        if (read_u64(path, &v) != 0)
            continue;
        readable++;
        sum = v > UINT64_MAX - 1 - sum ? UINT64_MAX - 1 : sum + v;
    }
    if (!readable)
        return hpb_fail(host, HP_ENOTSUP, "no per-node pool figures for %llu KiB pages",
                        (unsigned long long)(page_size >> 10));
    struct pool pool;
    if (read_pool(page_size, &pool) == 0 && pool.overcommit > pool.surplus) {
        uint64_t extra = pool.overcommit - pool.surplus;
        sum = extra > UINT64_MAX - 1 - sum ? UINT64_MAX - 1 : sum + extra;
    }
    *free_pages = sum;
    return HP_OK;
}

static const struct hp_backend_ops hugetlb_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "hugetlbfs",
    .description = "reserved hugetlb pool pages (MAP_HUGETLB), every size the kernel offers",
    .kind = HP_KIND_HUGETLB,
    .probe = hugetlb_probe,
    .map = hugetlb_map,
    .unmap = hugetlb_unmap,
    .remap = hugetlb_remap,
    .advise = hugetlb_advise,
    .query = hugetlb_query,
    .node_pool = hugetlb_node_pool,
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h)
{
    host = h;
    return &hugetlb_ops;
}
