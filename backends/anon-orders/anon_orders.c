/*
 * anon-orders — multi-size THP (mTHP, Linux 6.8+): anonymous folios of the
 * orders between the base page and the PMD, each switched on under
 * /sys/kernel/mm/transparent_hugepage/hugepages-<size>kB/enabled.
 *
 * The kernel picks the largest enabled order that fits an aligned, empty
 * range at fault time, so the block is aligned to the largest enabled order
 * that fits it, and marked MADV_HUGEPAGE when an order in use is in
 * "madvise" mode. This is the only backend that gives larger pages when the
 * PMD size is switched off.
 */
#include "backend_util.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"

static const struct hp_host *host;
static _Atomic uint64_t advised_sizes;  /* bit per size (bytes) in madvise mode */

static uint64_t pmd_size(void)
{
    char buf[64];
    unsigned long long v = 0;
    if (host->read_text(THP_DIR "/hpage_pmd_size", buf, sizeof(buf)) <= 0 ||
        sscanf(buf, "%llu", &v) != 1 || !v || (v & (v - 1)))
        return 0;
    return v;
}

static int orders_probe(void *self, struct hp_backend_caps *caps)
{
    char top[16], mode[16], path[160], list[200] = "";
    size_t used = 0;
    uint64_t pmd = pmd_size();
    if (!pmd) {
        hpb_reason(caps, "no THP support (%s/hpage_pmd_size unreadable)", THP_DIR);
        return HP_OK;
    }
    if (hpb_read_mode(host, THP_DIR "/enabled", top, sizeof(top)) != 0)
        snprintf(top, sizeof(top), "never");
    if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0) {
        hpb_reason(caps, "THP disabled for this process (prctl PR_SET_THP_DISABLE)");
        return HP_OK;
    }
    int found = 0;
    uint64_t advised = 0;
    for (uint64_t size = host->base_page_size * 2; size < pmd; size *= 2) {
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%llukB/enabled",
                 (unsigned long long)(size >> 10));
        if (hpb_read_mode(host, path, mode, sizeof(mode)) != 0)
            continue;
        found = 1;
        if (!strcmp(mode, "inherit"))
            snprintf(mode, sizeof(mode), "%s", top);
        if (!strcmp(mode, "never") || caps->n_page_sizes == HP_MAX_PAGE_SIZES)
            continue;
        unsigned i = caps->n_page_sizes++;
        caps->page_sizes[i] = size;
        caps->pool_free[i] = UINT64_MAX;
        caps->page_flags[i] = !strcmp(mode, "madvise") ? HP_PAGE_ADVISED : 0;
        advised |= caps->page_flags[i] ? size : 0;
        int n = snprintf(list + used, sizeof(list) - used, "%s%lluK=%s", used ? " " : "",
                         (unsigned long long)(size >> 10), mode);
        if (n > 0 && (size_t)n < sizeof(list) - used)
            used += (size_t)n;
    }
    if (!found) {
        hpb_reason(caps, "no per-size THP controls (mTHP needs Linux 6.8+)");
        return HP_OK;
    }
    if (!caps->n_page_sizes) {
        hpb_reason(caps, "every mTHP size below %llu KiB is \"never\"",
                   (unsigned long long)(pmd >> 10));
        return HP_OK;
    }
    caps->available = 1;
    atomic_store(&advised_sizes, advised);
    hpb_reason(caps, "mTHP %s", list);
    return HP_OK;
}

/* MADV_HUGEPAGE is needed if any order up to page_size is in madvise mode;
 * the answer comes from the last probe, not from sysfs on every map. */
static int needs_advice(uint64_t page_size)
{
    return (atomic_load(&advised_sizes) & ((page_size << 1) - 1)) != 0;
}

static int orders_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    uint64_t len = hpb_round_up(req->len, host->base_page_size);
    void *p;
    int rc;
    if (req->guard || req->align > req->page_size) {
        rc = hpb_map_guarded(host, req, len, req->page_size, 0, out);
        p = out->addr;
    } else {
        rc = hpb_map_aligned(host, len, req->page_size, 0, &p);
        out->addr = out->map_addr = p;
        out->len = out->map_len = out->committed = len;
        out->flags = HP_MAP_CARVABLE;
    }
    if (rc != HP_OK)
        return rc;
    if (needs_advice(req->page_size)) {
        rc = host->os_advise(p, len, MADV_HUGEPAGE);
        if (rc < 0) {
            hpb_discard(host, out->map_addr, out->map_len);
            return hpb_fail(host, HP_ENOMEM, "madvise(MADV_HUGEPAGE) failed: %s",
                            strerror(-rc));
        }
    }
    /* HP_F_POPULATE is left to advise, which the core calls after map. */
    out->page_size = req->page_size;
    return HP_OK;
}

static int orders_unmap(void *self, const struct hp_mapping *m)
{
    return hpb_unmap(host, m);
}

/* Growth commits reserved headroom or moves to an aligned destination, so
 * huge pages keep their mappings (backend_util.h). */
static int orders_remap(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags)
{
    (void)flags;
    return hpb_remap_anon(host, m, new_len, m->page_size);
}

static int orders_advise(void *self, const struct hp_mapping *m, uint64_t flags)
{
    return hpb_advise_populate(host, m, flags);
}

/* The node of the block's first page; no descriptor. */
static int orders_query(void *self, const struct hp_mapping *m, struct hp_block_query *q)
{
    return hpb_query(host, m, q);
}

static const struct hp_backend_ops orders_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "anon-orders",
    .description = "multi-size THP: anonymous folios between the base page and the PMD",
    .kind = HP_KIND_MTHP,
    .probe = orders_probe,
    .map = orders_map,
    .unmap = orders_unmap,
    .remap = orders_remap,
    .advise = orders_advise,
    .query = orders_query,
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h)
{
    host = h;
    return &orders_ops;
}
