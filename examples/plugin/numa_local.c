/*
 * numa-local — a libhp backend plugin that places each block on the NUMA
 * node of the CPU that allocates it. Built outside the libhp tree with
 * nothing but the installed header (README.md in this directory):
 *
 *   cc -std=c11 -O2 -shared -fPIC -fvisibility=hidden \
 *      $(pkg-config --cflags libhp) numa_local.c -o numa-local.so
 *
 * Used only when named (kind HP_KIND_OTHER):
 *
 *   struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
 *   o.backend = "numa-local";
 *   void *p = hp_alloc_ex(size, &o);      // hp_info(p).numa_node says where
 *
 * Every system call goes through the host's upcalls (struct hp_host), so
 * libhp's fault injection reaches this file too; the plugin links no libnuma
 * and no libhp. Its state lives in the context that init allocates.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* MAP_ANONYMOUS, MAP_NORESERVE, MREMAP_* under -std=c11 */
#endif
#include <hp/backend.h>

#include <errno.h>
#include <linux/mempolicy.h>  /* MPOL_PREFERRED: the kernel's uapi, no libnuma */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25        /* Linux 6.1 */
#endif

#define NODE_ONLINE "/sys/devices/system/node/online"
#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define MAX_NODES 4096u  /* the most host->os_mbind takes (maxnode) */
#define LONG_BITS (8u * sizeof(unsigned long))

/* The per-plugin context: filled by init and read-only afterwards, so the
 * ops need no lock; only probe, which the core serialises, sets probe_page. */
struct numa_local {
    const struct hp_host *host;
    uint64_t base;                 /* base page size */
    int upcalls;                   /* the core provides os_mbind and os_getcpu */
    unsigned n_nodes;              /* online nodes; 0: the list was unreadable */
    void *probe_page;              /* PROT_NONE page that probe binds */
    char online_text[128];         /* the online list as sysfs wrote it, for reasons */
    unsigned long online[MAX_NODES / LONG_BITS];
};

static int fail(const struct numa_local *nl, int code, const char *what, int err)
{
    char msg[200];
    snprintf(msg, sizeof(msg), "numa-local: %s: %s", what, strerror(err));
    nl->host->set_detail(msg);
    return code;
}

static uint64_t round_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) / align * align;
}

/* "0", "0-3,8-11": the cpulist format of Documentation/ABI/stable/sysfs-devices-node. */
static unsigned parse_node_list(const char *s, unsigned long *mask)
{
    unsigned n = 0;
    while (*s && *s != '\n') {
        char *end;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;
        if (end == s)
            return 0;
        if (*end == '-') {
            s = end + 1;
            hi = strtoul(s, &end, 10);
            if (end == s || hi < lo)
                return 0;
        }
        if (hi >= MAX_NODES)
            return 0;
        for (unsigned long node = lo; node <= hi; node++, n++)
            mask[node / LONG_BITS] |= 1ul << (node % LONG_BITS);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int node_online(const struct numa_local *nl, unsigned node)
{
    return node < MAX_NODES && (nl->online[node / LONG_BITS] >> (node % LONG_BITS)) & 1;
}

static int nl_init(const struct hp_host *host, void **self)
{
    struct numa_local *nl = calloc(1, sizeof(*nl));
    if (!nl) {
        host->set_detail("numa-local: no memory for the context");
        return HP_ENOMEM;
    }
    nl->host = host;
    nl->base = host->base_page_size;
    /* Upcalls by the size the core passed, like every struct of the
     * contract: an older core's table ends before the newer upcalls. */
    nl->upcalls = host->size >= offsetof(struct hp_host, os_getcpu) + sizeof(host->os_getcpu) &&
                  host->os_mbind && host->os_getcpu;
    int64_t len = host->read_text(NODE_ONLINE, nl->online_text, sizeof(nl->online_text));
    /* Unreadable (a kernel without CONFIG_NUMA): probe says so; init only
     * fails for what would break every op. */
    if (len > 0)
        nl->n_nodes = parse_node_list(nl->online_text, nl->online);
    nl->online_text[strcspn(nl->online_text, "\n")] = '\0';
    *self = nl;
    return HP_OK;
}

static void nl_fini(void *self)
{
    struct numa_local *nl = self;
    if (nl->probe_page)
        nl->host->os_unmap(nl->probe_page, nl->base);
    free(nl);
}

/* Bind [addr, addr+len) to node. MPOL_PREFERRED: pages come from node while
 * it has free memory, else from another node. MPOL_BIND would turn a full
 * node into an OOM kill inside the node (mm/mempolicy.c, oom_kill.c
 * CONSTRAINT_MEMORY_POLICY) at a page fault the application cannot see
 * coming: a block libhp hands out must be safe to touch. */
static int bind_range(const struct numa_local *nl, void *addr, uint64_t len, unsigned node)
{
    unsigned long mask[MAX_NODES / LONG_BITS] = {0};
    mask[node / LONG_BITS] = 1ul << (node % LONG_BITS);
    /* The kernel reads maxnode - 1 bits (get_nodes() in mm/mempolicy.c). */
    return nl->host->os_mbind(addr, len, MPOL_PREFERRED, mask, node + 2, 0);
}

/* THP mode from an "enabled" file: "always [madvise] never" -> "madvise". */
static int thp_mode(const struct numa_local *nl, const char *path, char *mode, size_t cap)
{
    char buf[128];
    if (nl->host->read_text(path, buf, sizeof(buf)) <= 0)
        return -1;
    char *a = strchr(buf, '['), *b = a ? strchr(a, ']') : NULL;
    if (!b || (size_t)(b - a - 1) >= cap)
        return -1;
    memcpy(mode, a + 1, (size_t)(b - a - 1));
    mode[b - a - 1] = '\0';
    return 0;
}

/* The PMD size when THP can serve it to MADV_HUGEPAGE regions, else 0.
 * *advised is set when only advised regions get it ("madvise"). */
static uint64_t thp_pmd(const struct numa_local *nl, int *advised, char *mode, size_t cap)
{
    char buf[64], path[128];
    unsigned long long pmd = 0;
    if (nl->host->read_text(THP_DIR "/hpage_pmd_size", buf, sizeof(buf)) <= 0 ||
        sscanf(buf, "%llu", &pmd) != 1 || pmd <= nl->base || (pmd & (pmd - 1)))
        return 0;
    /* Linux 6.8+: a per-size switch that may say "inherit" (transhuge.rst). */
    snprintf(path, sizeof(path), THP_DIR "/hugepages-%llukB/enabled", pmd >> 10);
    if (thp_mode(nl, path, mode, cap) != 0 || !strcmp(mode, "inherit"))
        if (thp_mode(nl, THP_DIR "/enabled", mode, cap) != 0)
            return 0;
    if (strcmp(mode, "always") && strcmp(mode, "madvise"))
        return 0;
    if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0)
        return 0;
    *advised = !strcmp(mode, "madvise");
    return pmd;
}

static int nl_probe(void *self, struct hp_backend_caps *caps)
{
    struct numa_local *nl = self;
    const struct hp_host *host = nl->host;
    unsigned cpu, node;
    if (nl->n_nodes == 0) {
        snprintf(caps->reason, sizeof(caps->reason),
                 "no NUMA node list (%s unreadable or empty)", NODE_ONLINE);
        return HP_OK;
    }
    if (!nl->upcalls) {
        snprintf(caps->reason, sizeof(caps->reason),
                 "this libhp has no os_mbind/os_getcpu upcalls (struct hp_host too old)");
        return HP_OK;
    }
    int rc = host->os_getcpu(&cpu, &node);
    if (rc < 0) {
        snprintf(caps->reason, sizeof(caps->reason), "getcpu failed: %s", strerror(-rc));
        return HP_OK;
    }
    /* Probe behaviour, not configuration: bind a page for real. The page is
     * address space only (PROT_NONE), mapped once and kept until fini, so
     * a probe has nothing to undo (an munmap can fail, too). */
    if (!nl->probe_page) {
        rc = host->os_map(NULL, nl->base, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                          -1, 0, &nl->probe_page);
        if (rc < 0) {
            nl->probe_page = NULL;
            snprintf(caps->reason, sizeof(caps->reason), "mapping a test page failed: %s",
                     strerror(-rc));
            return HP_OK;
        }
    }
    rc = bind_range(nl, nl->probe_page, nl->base, node);
    if (rc < 0) {
        snprintf(caps->reason, sizeof(caps->reason), "mbind to node %u failed: %s%s", node,
                 strerror(-rc), rc == -ENOSYS ? " (kernel without NUMA support)" : "");
        return HP_OK;
    }
    caps->n_page_sizes = 1;
    caps->page_sizes[0] = nl->base;
    caps->pool_free[0] = UINT64_MAX;  /* not pool-limited */
    int advised = 0;
    char mode[16] = "never";
    uint64_t pmd = thp_pmd(nl, &advised, mode, sizeof(mode));
    if (pmd) {
        caps->n_page_sizes = 2;
        caps->page_sizes[1] = pmd;
        caps->pool_free[1] = UINT64_MAX;
        caps->page_flags[1] = advised ? HP_PAGE_ADVISED : 0;
    }
    caps->available = 1;
    snprintf(caps->reason, sizeof(caps->reason),
             "preferred on the allocating CPU's node (%u online: %s); THP %s", nl->n_nodes,
             nl->online_text, mode);
    return HP_OK;
}

/* Request fields by the size the core passed: a newer plugin on an older
 * core reads 0 for what that core did not know. */
#define REQ_FIELD(req, f) \
    ((req)->size >= offsetof(struct hp_map_request, f) + sizeof((req)->f) ? (req)->f : 0)

/* Place [addr, addr+len) of a block with page size page on node. */
static int place(const struct numa_local *nl, void *addr, uint64_t len, uint64_t page,
                 unsigned node)
{
    int rc;
    /* A THP page size needs MADV_HUGEPAGE in "madvise" mode; harmless in "always". */
    if (page > nl->base && (rc = nl->host->os_advise(addr, len, MADV_HUGEPAGE)) < 0)
        return fail(nl, HP_ENOMEM, "madvise(MADV_HUGEPAGE) failed", -rc);
    if ((rc = bind_range(nl, addr, len, node)) < 0)
        return fail(nl, HP_EOS, "mbind(MPOL_PREFERRED) failed", -rc);
    return HP_OK;
}

static int nl_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    struct numa_local *nl = self;
    const struct hp_host *host = nl->host;
    uint64_t page = req->page_size, base = nl->base;
    uint64_t align = REQ_FIELD(req, align), guard = REQ_FIELD(req, guard);
    if (align < page)
        align = page;
    unsigned node;
    int rc = host->os_getcpu(NULL, &node);
    if (rc < 0)
        return fail(nl, HP_EOS, "getcpu failed", -rc);
    if (!node_online(nl, node))
        return fail(nl, HP_EOS, "the calling CPU's node is not in " NODE_ONLINE, ENODEV);
    /* Whole pages of the chosen size, so no huge page straddles the end. */
    uint64_t len = round_up(req->len, page), slack = align - base, total = guard + len + slack;
    void *raw;
    rc = host->os_map(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0,
                      &raw);
    if (rc < 0)
        return fail(nl, HP_ENOMEM, "mmap failed", -rc);
    /* Trim to [addr - guard, addr + len) with addr aligned. A trim that
     * fails (vm.max_map_count) leaves the whole mapping to unmap. */
    char *addr = (char *)round_up((uintptr_t)raw + guard, align), *start = addr - guard;
    uint64_t head = (uint64_t)(start - (char *)raw), tail = slack - head;
    if ((head && (rc = host->os_unmap(raw, head)) < 0) ||
        (tail && (rc = host->os_unmap(addr + len, tail)) < 0)) {
        host->os_unmap(raw, total);
        return fail(nl, HP_ENOMEM, "trimming the mapping to its alignment failed", -rc);
    }
    if ((guard && (rc = host->os_protect(start, guard, PROT_NONE)) < 0)) {
        host->os_unmap(start, guard + len);
        return fail(nl, HP_ENOMEM, "mprotect of the guard failed", -rc);
    }
    if ((rc = place(nl, addr, len, page, node)) != HP_OK) {
        host->os_unmap(start, guard + len);
        return rc;
    }
    /* Base pages asked for by name (a lean stack): no THP either, even
     * with THP "always" (the rule of hp_map_request). */
    uint64_t shift = (req->flags & HP_F_PAGE_SHIFT_MASK) >> HP_F_PAGE_SHIFT_POS;
    if (page == base && shift && (UINT64_C(1) << shift) == base &&
        (rc = host->os_advise(start, guard + len, MADV_NOHUGEPAGE)) < 0) {
        host->os_unmap(start, guard + len);
        return fail(nl, HP_EOS, "madvise(MADV_NOHUGEPAGE) failed", -rc);
    }
    out->addr = addr;
    out->len = len;
    out->map_addr = start;
    out->map_len = guard + len;
    out->page_size = page;
    out->committed = len;
    /* Plain private anonymous memory: any page-aligned piece unmaps on its
     * own, so the core's cache may keep, carve and merge it. The flag also
     * promises addr == map_addr, so a guarded block (a stack) goes without. */
    out->flags = guard ? 0 : HP_MAP_CARVABLE;
    out->cookie = (uint64_t)node + 1;  /* ours: 0 means "node unknown" */
    return HP_OK;
}

static int nl_unmap(void *self, const struct hp_mapping *m)
{
    struct numa_local *nl = self;
    int rc = nl->host->os_unmap(m->map_addr, m->map_len);
    return rc < 0 ? fail(nl, HP_EINVAL, "munmap failed", -rc) : HP_OK;
}

/* Move the committed part of m to a fresh reservation of cap bytes, of
 * which extent are usable; the rest stays PROT_NONE headroom to grow into. */
static int move(struct numa_local *nl, struct hp_mapping *m, uint64_t len, uint64_t extent,
                uint64_t cap)
{
    const struct hp_host *host = nl->host;
    uint64_t committed = m->committed ? m->committed : m->len, page = m->page_size;
    uint64_t slack = page - nl->base;
    void *raw, *p;
    int rc = host->os_map(NULL, cap + slack, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &raw);
    if (rc < 0)
        return rc;
    char *dst = (char *)round_up((uintptr_t)raw, page);
    uint64_t head = (uint64_t)(dst - (char *)raw);
    if (head)
        host->os_unmap(raw, head);
    if (slack - head)
        host->os_unmap(dst + cap, slack - head);
    /* mremap keeps the pages (and a huge page its PMD mapping: dst is
     * aligned) and the VMA's policy (mm/mremap.c copy_vma). */
    rc = host->os_remap(m->addr, committed, extent, MREMAP_MAYMOVE | MREMAP_FIXED, dst, &p);
    if (rc < 0) {
        host->os_unmap(dst, cap);
        return rc;
    }
    if (m->map_len > committed)
        host->os_unmap((char *)m->addr + committed, m->map_len - committed);
    unsigned node = (unsigned)(m->cookie - 1);
    /* The headroom is bound too, so growing into it needs no second mbind. */
    if (m->cookie && place(nl, dst, cap, page, node) != HP_OK)
        host->log("numa-local", "could not bind a moved block's headroom");
    m->addr = m->map_addr = dst;
    m->len = len;
    m->map_len = cap;
    m->committed = extent;
    return 0;
}

/* Resize in place when the reservation allows, else move (blocks without
 * a guard only: a stack is never resized). New bytes are fresh anonymous
 * memory, zero, and bound to the block's node. */
static int nl_remap(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags)
{
    (void)flags;
    struct numa_local *nl = self;
    const struct hp_host *host = nl->host;
    uint64_t page = m->page_size, len = round_up(new_len, nl->base), extent = round_up(len, page);
    uint64_t committed = m->committed ? m->committed : m->len;
    uint64_t guard = (uint64_t)((char *)m->addr - (char *)m->map_addr);
    uint64_t room = m->map_len - guard;  /* usable plus reserved bytes from addr */
    unsigned node = (unsigned)(m->cookie - 1);
    int rc;
    if (extent <= committed) {
        /* Shrink: whole pages past the new end go back to the kernel. */
        if (extent < committed) {
            if ((rc = host->os_unmap((char *)m->addr + extent, room - extent)) < 0)
                return fail(nl, HP_ENOMEM, "munmap of the tail failed", -rc);
            m->map_len = guard + extent;
            m->committed = extent;
        }
        m->len = len;
        return HP_OK;
    }
    if (extent <= room) {  /* commit reserved headroom */
        char *from = (char *)m->addr + committed;
        if ((rc = host->os_protect(from, extent - committed, PROT_READ | PROT_WRITE)) < 0)
            return fail(nl, HP_ENOMEM, "mprotect of the headroom failed", -rc);
        m->committed = extent;
        m->len = len;
        return HP_OK;
    }
    void *p;
    if (committed == room &&  /* no headroom, but maybe the next pages are free */
        host->os_remap(m->addr, committed, extent, 0, NULL, &p) == 0) {
        char *from = (char *)m->addr + committed;
        if (m->cookie && (rc = place(nl, from, extent - committed, page, node)) != HP_OK)
            host->log("numa-local", "could not bind the grown part of a block");
        m->map_len = guard + extent;
        m->committed = extent;
        m->len = len;
        return HP_OK;
    }
    if (guard)
        return fail(nl, HP_ENOTSUP, "a block with a guard does not move", EINVAL);
    /* Room to grow 4x in place, so geometric growth moves O(log n) times;
     * without it if the commit charge of that much is refused. */
    rc = move(nl, m, len, extent, round_up(extent * 4, page));
    if (rc < 0)
        rc = move(nl, m, len, extent, extent);
    return rc < 0 ? fail(nl, HP_ENOMEM, "cannot move the block to grow it", -rc) : HP_OK;
}

static int nl_advise(void *self, const struct hp_mapping *m, uint64_t flags)
{
    struct numa_local *nl = self;
    const struct hp_host *host = nl->host;
    int rc;
    if (flags & HP_F_POPULATE) {
        /* Faults the pages in under the block's policy, and reports failure
         * instead of raising SIGBUS later (Linux 5.14). */
        rc = host->os_advise(m->addr, m->len, MADV_POPULATE_WRITE);
        if (rc == -EINVAL) {  /* older kernel: touch each page */
            for (uint64_t off = 0; off < m->len; off += nl->base)
                ((volatile char *)m->addr)[off] = ((volatile char *)m->addr)[off];
        } else if (rc < 0) {
            return fail(nl, HP_ENOMEM, "MADV_POPULATE_WRITE failed", -rc);
        }
    }
    if ((flags & HP_F_COLLAPSE) && m->page_size > nl->base &&
        host->os_advise(m->addr, m->len, MADV_COLLAPSE) < 0)
        host->log("numa-local", "MADV_COLLAPSE left some pages to khugepaged");
    return HP_OK;
}

static int nl_query(void *self, const struct hp_mapping *m, struct hp_block_query *q)
{
    (void)self;
    /* The node the block is bound to (preferred): the cookie travels with
     * every piece the core's cache carves from the block. */
    q->numa_node = m->cookie ? (int32_t)(m->cookie - 1) : -1;
    return HP_OK;
}

static const struct hp_backend_ops numa_local_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "numa-local",
    .description = "anonymous memory (THP where enabled) preferring the allocating CPU's NUMA node",
    .kind = HP_KIND_OTHER,
    .init = nl_init,
    .fini = nl_fini,
    .probe = nl_probe,
    .map = nl_map,
    .unmap = nl_unmap,
    .remap = nl_remap,
    .advise = nl_advise,
    .query = nl_query,
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *host);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *host)
{
    (void)host;  /* init receives it again, with a place to keep it */
    return &numa_local_ops;
}
