/*
 * fallback — plain base pages. Always available; the last resort of every
 * selection. Built both as a plugin and into the core (HP_BUILTIN_BACKEND),
 * so hp_alloc works with no plugin directory at all.
 */
#include "backend_util.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_STACK
#define MAP_STACK 0x20000
#endif

static const struct hp_host *host;

static int fallback_probe(void *self, struct hp_backend_caps *caps)
{
    caps->available = 1;
    caps->n_page_sizes = 1;
    caps->page_sizes[0] = host->base_page_size;
    caps->pool_free[0] = UINT64_MAX;
    hpb_reason(caps, "base pages (%llu KiB), always available",
               (unsigned long long)(host->base_page_size >> 10));
    return HP_OK;
}

/* A guarded mapping that needs no alignment (a lean stack): one PROT_NONE
 * mapping, the usable part made writable, as glibc maps thread stacks. The
 * guard is never charged to the commit limit (PROT_NONE private memory is
 * not accounted, mm/mmap.c accountable_mapping), the usable part is when it
 * becomes writable. base_only: MADV_NOHUGEPAGE before any page exists
 * (MAP_STACK means VM_NOHUGEPAGE only since Linux 6.7; the advice also keeps
 * every mTHP size away: thp_vma_allowable_orders checks VM_NOHUGEPAGE). */
static int map_with_guard(uint64_t guard, uint64_t len, int base_only, struct hp_mapping *out)
{
    void *p;
    int rc = host->os_map(NULL, guard + len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                          -1, 0, &p);
    if (rc < 0)
        return hpb_fail(host, HP_ENOMEM, "mmap of %llu bytes failed: %s",
                        (unsigned long long)(guard + len), strerror(-rc));
    const char *what = "madvise(MADV_NOHUGEPAGE)";
    if (base_only)
        rc = host->os_advise(p, guard + len, MADV_NOHUGEPAGE);
    if (rc == 0) {
        what = "mprotect of the usable part";
        rc = host->os_protect((char *)p + guard, len, PROT_READ | PROT_WRITE);
    }
    if (rc < 0) {
        hpb_discard(host, p, guard + len);
        return hpb_fail(host, rc == -ENOMEM ? HP_ENOMEM : HP_EOS, "%s failed: %s", what,
                        strerror(-rc));
    }
    out->map_addr = p;
    out->map_len = guard + len;
    out->addr = (char *)p + guard;
    out->len = out->committed = len;
    return HP_OK;
}

static int fallback_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    uint64_t len = hpb_round_up(req->len, host->base_page_size);
    int base_only = hpb_wants_base_pages(host, req);
    int stack_like = req->guard && req->align <= host->base_page_size;
    void *p;
    int rc;
    if (stack_like) {
        rc = map_with_guard(req->guard, len, base_only, out);
        if (rc != HP_OK)
            return rc;
        p = out->addr;
    } else if (req->guard || req->align > host->base_page_size) {
        rc = hpb_map_guarded(host, req, len, host->base_page_size, 0, out);
        if (rc != HP_OK)
            return rc;
        p = out->addr;
    } else {
        rc = hpb_map_aligned(host, len, host->base_page_size, 0, &p);
        if (rc != HP_OK)
            return rc;
        out->addr = out->map_addr = p;
        out->len = out->map_len = out->committed = len;
        out->flags = HP_MAP_CARVABLE;
    }
    /* Base pages asked for by name: no THP either, whatever the system
     * setting (hp/backend.h); map_with_guard advised already. */
    if (base_only && !stack_like &&
        (rc = host->os_advise(out->map_addr, out->map_len, MADV_NOHUGEPAGE)) < 0) {
        hpb_discard(host, out->map_addr, out->map_len);
        return hpb_fail(host, rc == -ENOMEM ? HP_ENOMEM : HP_EOS,
                        "madvise(MADV_NOHUGEPAGE) failed: %s", strerror(-rc));
    }
    /* HP_F_POPULATE is left to advise, which the core calls after map. */
    out->page_size = host->base_page_size;
    return HP_OK;
}

static int fallback_unmap(void *self, const struct hp_mapping *m)
{
    return hpb_unmap(host, m);
}

/* mremap moves page tables, never bytes; base pages need no alignment. */
static int fallback_remap(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags)
{
    (void)flags;
    uint64_t len = hpb_round_up(new_len, host->base_page_size);
    void *p;
    int rc = host->os_remap(m->map_addr, m->map_len, len, MREMAP_MAYMOVE, NULL, &p);
    if (rc < 0)
        return hpb_fail(host, HP_ENOMEM, "mremap to %llu bytes failed: %s",
                        (unsigned long long)len, strerror(-rc));
    m->addr = m->map_addr = p;
    m->len = m->map_len = m->committed = len;
    return HP_OK;
}

static int fallback_advise(void *self, const struct hp_mapping *m, uint64_t flags)
{
    return hpb_advise_populate(host, m, flags);
}

/* The node of the block's first page; no descriptor. */
static int fallback_query(void *self, const struct hp_mapping *m, struct hp_block_query *q)
{
    return hpb_query(host, m, q);
}

static const struct hp_backend_ops fallback_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "fallback",
    .description = "base pages: plain anonymous mmap",
    .kind = HP_KIND_BASE,
    .probe = fallback_probe,
    .map = fallback_map,
    .unmap = fallback_unmap,
    .remap = fallback_remap,
    .advise = fallback_advise,
    .query = fallback_query,
};

#ifdef HP_BUILTIN_BACKEND
#include "loader.h"
const struct hp_backend_ops *hp_builtin_backend(const struct hp_host *h)
#else
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h)
#endif
{
    host = h;
    return &fallback_ops;
}
