#include "backend_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int hpb_fail(const struct hp_host *h, int code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    h->set_detail(msg);
    return code;
}

void hpb_reason(struct hp_backend_caps *caps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(caps->reason, sizeof(caps->reason), fmt, ap);
    va_end(ap);
}

static int map_aligned(const struct hp_host *h, uint64_t len, uint64_t align, int prot, int flags,
                       void **out)
{
    uint64_t base = h->base_page_size;
    uint64_t slack = align > base ? align - base : 0;
    void *raw;
    int rc = h->os_map(NULL, len + slack, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0, &raw);
    if (rc < 0)
        return hpb_fail(h, HP_ENOMEM, "mmap of %llu bytes failed: %s",
                        (unsigned long long)(len + slack), strerror(-rc));
    uintptr_t start = (uintptr_t)raw, aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    uintptr_t head = aligned - start, tail = slack - head;
    /* A trim splits the mapping, which fails at vm.max_map_count; then the
     * rest is one whole mapping again, and unmapping all of it needs no
     * split. */
    if (head && (rc = h->os_unmap(raw, head)) < 0) {
        hpb_discard(h, raw, len + slack);
        return hpb_fail(h, HP_ENOMEM, "trimming the mapping to alignment failed: %s", strerror(-rc));
    }
    if (tail && (rc = h->os_unmap((void *)(aligned + len), tail)) < 0) {
        hpb_discard(h, (void *)aligned, len + tail);
        return hpb_fail(h, HP_ENOMEM, "trimming the mapping to alignment failed: %s", strerror(-rc));
    }
    *out = (void *)aligned;
    return HP_OK;
}

int hpb_map_aligned(const struct hp_host *h, uint64_t len, uint64_t align, int extra_flags,
                    void **out)
{
    return map_aligned(h, len, align, PROT_READ | PROT_WRITE, extra_flags, out);
}

int hpb_reserve(const struct hp_host *h, uint64_t len, uint64_t align, void **out)
{
    return map_aligned(h, len, align, PROT_NONE, MAP_NORESERVE, out);
}

int hpb_reserve_guarded(const struct hp_host *h, uint64_t len, uint64_t align, uint64_t guard,
                        void **map_addr, void **addr)
{
    /* One reservation with room to slide to the alignment, trimmed at both
     * ends: one mmap and at most two munmaps. */
    uint64_t base = h->base_page_size, slack = align > base ? align - base : 0;
    uint64_t total = guard + len + slack;
    void *raw;
    int rc = h->os_map(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       0, &raw);
    if (rc < 0)
        return hpb_fail(h, HP_ENOMEM, "reserving %llu bytes of address space failed: %s",
                        (unsigned long long)total, strerror(-rc));
    char *at = (char *)hpb_round_up((uintptr_t)raw + guard, align), *start = at - guard;
    char *end = (char *)raw + total;
    uint64_t head = (uint64_t)(start - (char *)raw), tail = (uint64_t)(end - (at + len));
    if (head && (rc = h->os_unmap(raw, head)) < 0) {
        hpb_discard(h, raw, total);
        return hpb_fail(h, HP_ENOMEM, "trimming the reservation below the guard failed: %s",
                        strerror(-rc));
    }
    if (tail && (rc = h->os_unmap(at + len, tail)) < 0) {
        hpb_discard(h, start, total - head);
        return hpb_fail(h, HP_ENOMEM, "trimming the reservation above the block failed: %s",
                        strerror(-rc));
    }
    *map_addr = start;
    *addr = at;
    return HP_OK;
}

int hpb_map_guarded(const struct hp_host *h, const struct hp_map_request *req, uint64_t len,
                    uint64_t align, int extra_flags, struct hp_mapping *out)
{
    uint64_t guard = req->guard, want = req->align > align ? req->align : align;
    void *start, *at, *p;
    int rc = hpb_reserve_guarded(h, len, want, guard, &start, &at);
    if (rc != HP_OK)
        return rc;
    rc = h->os_map(at, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | extra_flags, -1, 0, &p);
    if (rc < 0) {
        hpb_discard(h, start, guard + len);
        return hpb_fail(h, HP_ENOMEM, "mmap of %llu bytes failed: %s", (unsigned long long)len,
                        strerror(-rc));
    }
    out->map_addr = start;
    out->map_len = guard + len;
    out->addr = at;
    out->len = out->committed = len;
    return HP_OK;
}

uint64_t hpb_headroom(uint64_t extent, uint64_t align)
{
    const uint64_t limit = UINT64_C(1) << 46;
    return extent >= limit / 4 ? extent : hpb_round_up(extent * 4, align);
}

static int shrink_anon(const struct hp_host *h, struct hp_mapping *m, uint64_t len,
                       uint64_t extent)
{
    if (extent < m->map_len) {
        uint64_t committed = hpb_committed(m);
        int rc = h->os_unmap((char *)m->map_addr + extent, m->map_len - extent);
        if (rc < 0)
            return hpb_fail(h, HP_ENOMEM, "munmap of the %llu tail bytes failed: %s",
                            (unsigned long long)(m->map_len - extent), strerror(-rc));
        m->map_len = extent;
        hpb_set_committed(m, committed < extent ? committed : extent);
    }
    m->len = len;
    return HP_OK;
}

/* Move the committed part to a new reservation of cap bytes and commit it up
 * to extent. mremap with growth and MREMAP_FIXED does both at once; the part
 * past extent is then closed again. The headroom stays one VMA with the block
 * (same anon_vma and page offsets), so committing it later merges back. */
static int move_anon(const struct hp_host *h, struct hp_mapping *m, uint64_t len,
                     uint64_t extent, uint64_t align)
{
    uint64_t committed = hpb_committed(m);
    uint64_t caps[2] = {hpb_headroom(extent, align), extent};
    int rc = -ENOMEM;
    for (int i = 0; i < 2; i++) {
        uint64_t cap = caps[i];
        if (i == 1 && cap == caps[0])
            break;
        void *dst, *p;
        if (hpb_reserve(h, cap, align, &dst) != HP_OK)
            continue;
        /* A large cap can fail the commit charge of the growth (overcommit
         * heuristics), hence the second try with no headroom. */
        rc = h->os_remap(m->map_addr, committed, cap, MREMAP_MAYMOVE | MREMAP_FIXED, dst, &p);
        if (rc < 0) {
            hpb_discard(h, dst, cap);
            continue;
        }
        uint64_t now = cap;
        if (cap > extent &&
            h->os_protect((char *)dst + extent, cap - extent, PROT_NONE) == 0)
            now = extent;
        if (m->map_len > committed)
            hpb_discard(h, (char *)m->map_addr + committed, m->map_len - committed);
        m->addr = m->map_addr = dst;
        m->len = len;
        m->map_len = cap;
        hpb_set_committed(m, now);
        return HP_OK;
    }
    return hpb_fail(h, HP_ENOMEM, "cannot move %llu bytes to grow them to %llu: %s",
                    (unsigned long long)committed, (unsigned long long)extent, strerror(-rc));
}

int hpb_remap_anon(const struct hp_host *h, struct hp_mapping *m, uint64_t new_len,
                   uint64_t align)
{
    uint64_t base = h->base_page_size;
    if (m->addr != m->map_addr || align < base)
        return hpb_fail(h, HP_ENOTSUP, "mapping not in the layout remap expects");
    uint64_t len = hpb_round_up(new_len, base), extent = hpb_round_up(len, align);
    uint64_t committed = hpb_committed(m);
    if (len <= m->len)
        return shrink_anon(h, m, len, extent);
    if (extent <= m->map_len) {
        if (extent > committed) {
            int rc = h->os_protect((char *)m->map_addr + committed, extent - committed,
                                   PROT_READ | PROT_WRITE);
            if (rc < 0)
                return hpb_fail(h, HP_ENOMEM, "mprotect of %llu reserved bytes failed: %s",
                                (unsigned long long)(extent - committed), strerror(-rc));
            hpb_set_committed(m, extent);
        }
        m->len = len;
        return HP_OK;
    }
    void *p;
    if (committed == m->map_len &&
        h->os_remap(m->map_addr, committed, extent, 0, NULL, &p) == 0) {
        m->len = len;
        m->map_len = extent;
        m->committed = m->map_len;
        return HP_OK;
    }
    return move_anon(h, m, len, extent, align);
}

int hpb_populate(const struct hp_host *h, void *addr, uint64_t len)
{
    int rc = h->os_advise(addr, len, MADV_POPULATE_WRITE);
    if (rc == 0)
        return HP_OK;
    if (rc != -EINVAL)
        return hpb_fail(h, HP_ENOMEM, "MADV_POPULATE_WRITE of %llu bytes failed: %s",
                        (unsigned long long)len, strerror(-rc));
    volatile char *p = addr;
    for (uint64_t off = 0; off < len; off += h->base_page_size)
        p[off] = p[off];
    return HP_OK;
}

int hpb_read_mode(const struct hp_host *h, const char *path, char *mode, size_t cap)
{
    char buf[256];
    int64_t n = h->read_text(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    const char *start = strchr(buf, '[');
    if (!start)
        return -EINVAL;
    start++;
    const char *stop = strchr(start, ']');
    if (!stop || stop == start || (size_t)(stop - start) >= cap)
        return -EINVAL;
    memcpy(mode, start, (size_t)(stop - start));
    mode[stop - start] = '\0';
    static const char *known[] = {"always", "madvise", "never", "inherit"};
    for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
        if (!strcmp(mode, known[i]))
            return 0;
    return -EINVAL;
}

int hpb_unmap(const struct hp_host *h, const struct hp_mapping *m)
{
    int rc = h->os_unmap(m->map_addr, m->map_len);
    return rc == 0 ? HP_OK : hpb_fail(h, HP_EINVAL, "munmap failed: %s", strerror(-rc));
}

int hpb_advise_populate(const struct hp_host *h, const struct hp_mapping *m, uint64_t flags)
{
    return (flags & HP_F_POPULATE) ? hpb_populate(h, m->addr, m->len) : HP_OK;
}

void hpb_discard(const struct hp_host *h, void *addr, uint64_t len)
{
    if (h->os_unmap(addr, len) < 0)
        h->os_unmap(addr, len);
}

int hpb_query(const struct hp_host *h, const struct hp_mapping *m, struct hp_block_query *q)
{
    int node = -1;
    if (h->size > offsetof(struct hp_host, os_page_node) && h->os_page_node &&
        h->os_page_node(m->addr, &node) == 0 && node >= 0)
        q->numa_node = node;
    return HP_OK;
}
