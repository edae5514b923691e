/*
 * thp-madvise — PMD-size transparent huge pages on demand.
 *
 * Blocks are mapped PMD-aligned so every whole PMD of the block can be a huge
 * page, then marked MADV_HUGEPAGE. Available when THP is not "never" for the
 * PMD size and the process has not disabled THP with prctl.
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
static _Atomic int collapse_unsupported;  /* remembered: kernel said EINVAL */

/* PMD-size mode: hugepages-<pmd>kB/enabled (Linux 6.8+) can say "inherit"
 * (use the top-level switch) or override it. */
static int pmd_mode(uint64_t pmd, char *mode, size_t cap)
{
    char path[160];
    snprintf(path, sizeof(path), THP_DIR "/hugepages-%llukB/enabled",
             (unsigned long long)(pmd >> 10));
    int rc = hpb_read_mode(host, path, mode, cap);
    if (rc == -ENOENT || (rc == 0 && !strcmp(mode, "inherit")))
        rc = hpb_read_mode(host, THP_DIR "/enabled", mode, cap);
    return rc;
}

static int thp_probe(void *self, struct hp_backend_caps *caps)
{
    char buf[64], mode[16], defrag[32] = "?";
    uint64_t pmd = 0;
    int64_t n = host->read_text(THP_DIR "/hpage_pmd_size", buf, sizeof(buf));
    if (n <= 0 || sscanf(buf, "%llu", (unsigned long long *)&pmd) != 1 || pmd == 0 ||
        (pmd & (pmd - 1)) || pmd <= host->base_page_size) {
        hpb_reason(caps, "no THP support: %s/hpage_pmd_size unreadable or invalid", THP_DIR);
        return HP_OK;
    }
    if (pmd_mode(pmd, mode, sizeof(mode)) != 0) {
        hpb_reason(caps, "THP enabled switch unreadable or invalid");
        return HP_OK;
    }
    if (hpb_read_mode(host, THP_DIR "/defrag", defrag, sizeof(defrag)) != 0)
        snprintf(defrag, sizeof(defrag), "?");
    caps->n_page_sizes = 1;
    caps->page_sizes[0] = pmd;
    caps->pool_free[0] = UINT64_MAX;
    caps->page_flags[0] = !strcmp(mode, "madvise") ? HP_PAGE_ADVISED : 0;
    if (!strcmp(mode, "never")) {
        hpb_reason(caps, "THP for %llu KiB pages is \"never\"", (unsigned long long)(pmd >> 10));
        return HP_OK;
    }
    int disabled = prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
    if (disabled > 0) {
        hpb_reason(caps, "THP disabled for this process (prctl PR_SET_THP_DISABLE)");
        return HP_OK;
    }
    caps->available = 1;
    hpb_reason(caps, "%llu KiB THP, enabled=%s, defrag=%s", (unsigned long long)(pmd >> 10),
               mode, defrag);
    return HP_OK;
}

static int thp_collapse(void *addr, uint64_t len, uint64_t pmd)
{
    if (atomic_load(&collapse_unsupported))
        return HP_OK;
    uintptr_t start = hpb_round_up((uintptr_t)addr, pmd), end = ((uintptr_t)addr + len) & ~(pmd - 1);
    if (end <= start)
        return HP_OK;
    int rc = host->os_advise((void *)start, end - start, MADV_COLLAPSE);
    /* EINVAL is ambiguous: kernels before 6.1 do not know the advice, but
     * 6.x also says EINVAL for a range with no page table yet (an untouched
     * PMD is SCAN_PMD_NULL, mapped to -EINVAL by madvise_collapse_errno).
     * A zero-length call checks only the advice itself. */
    if (rc == -EINVAL && host->os_advise((void *)start, 0, MADV_COLLAPSE) == -EINVAL)
        atomic_store(&collapse_unsupported, 1);  /* Linux < 6.1 */
    else if (rc < 0)
        host->log("thp-madvise", "MADV_COLLAPSE left some PMDs to faults");
    return HP_OK;
}

static int thp_apply(void *addr, uint64_t len, uint64_t pmd, uint64_t flags)
{
    if (flags & HP_F_POPULATE) {
        int rc = hpb_populate(host, addr, len);
        if (rc != HP_OK)
            return rc;
    }
    return (flags & HP_F_COLLAPSE) ? thp_collapse(addr, len, pmd) : HP_OK;
}

static int thp_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    uint64_t pmd = req->page_size, len = hpb_round_up(req->len, host->base_page_size);
    void *p;
    int rc;
    if (req->guard || req->align > pmd) {
        rc = hpb_map_guarded(host, req, len, pmd, 0, out);
        p = out->addr;
    } else {
        rc = hpb_map_aligned(host, len, pmd, 0, &p);
        out->addr = out->map_addr = p;
        out->len = out->map_len = out->committed = len;
        out->flags = HP_MAP_CARVABLE;
    }
    if (rc != HP_OK)
        return rc;
    rc = host->os_advise(p, len, MADV_HUGEPAGE);
    if (rc < 0) {
        hpb_discard(host, out->map_addr, out->map_len);
        return hpb_fail(host, HP_ENOMEM, "madvise(MADV_HUGEPAGE) failed: %s", strerror(-rc));
    }
    /* HP_F_POPULATE and HP_F_COLLAPSE are left to advise, which the core
     * calls after map. */
    out->page_size = pmd;
    return HP_OK;
}

static int thp_unmap(void *self, const struct hp_mapping *m)
{
    return hpb_unmap(host, m);
}

/* Growth commits reserved headroom or moves to an aligned destination, so
 * huge pages keep their mappings (backend_util.h). */
static int thp_remap(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags)
{
    (void)flags;
    return hpb_remap_anon(host, m, new_len, m->page_size);
}

static int thp_advise(void *self, const struct hp_mapping *m, uint64_t flags)
{
    return thp_apply(m->addr, m->len, m->page_size, flags);
}

/* The node of the block's first page; no descriptor. */
static int thp_query(void *self, const struct hp_mapping *m, struct hp_block_query *q)
{
    return hpb_query(host, m, q);
}

static const struct hp_backend_ops thp_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "thp-madvise",
    .description = "PMD-aligned anonymous memory with MADV_HUGEPAGE",
    .kind = HP_KIND_THP,
    .probe = thp_probe,
    .map = thp_map,
    .unmap = thp_unmap,
    .remap = thp_remap,
    .advise = thp_advise,
    .query = thp_query,
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h)
{
    host = h;
    return &thp_ops;
}
