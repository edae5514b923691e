/*
 * A plugin that breaks one rule of hp/backend.h at a time: HP_BROKEN_CASE
 * names the case (broken_cases.h). With "none" it is a working backend of
 * base pages and 2 MiB THP pages, kind other, with every optional op; each
 * other case changes one op or one returned field. It calls the host's OS
 * functions like any plugin, and libc's getenv to read its case.
 */
#include <hp/alloc.h>
#include <hp/backend.h>

#include "broken_cases.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PMD (UINT64_C(2) << 20)

/* Clears the screen, forges a line of its own, rings the bell, and
 * returns to the start of the line to hide what came before. */
#define TERMINAL_TRICKS "\x1b[2J\x1b[31m\nlibhp: all fine\a\r"

static const struct hp_host *host;
static enum broken_case bcase;
static struct hp_backend_ops *rewrite; /* ops-rewrite: the table handed to the host */
static struct hp_mapping first;  /* the first mapping handed out */
static int maps_fail;             /* map fails from now on */

static uint64_t round_up(uint64_t v, uint64_t unit)
{
    return (v + unit - 1) / unit * unit;
}

static int b_init(const struct hp_host *h, void **self)
{
    *self = NULL;
    const char *c = getenv("HP_BROKEN_CASE");
    for (int i = 0; c && i < BC_COUNT; i++)
        if (!strcmp(c, broken_case_names[i]))
            bcase = (enum broken_case)i;
    if (bcase == BC_INIT_SLOW)
        usleep(300000);
    if (bcase == BC_INIT_CLOSES_FDS)  /* the daemon idiom, inside the loader's walk */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    if (bcase == BC_INIT_FAILS) {
        h->set_detail("broken: init refuses");
        return HP_EINVAL;
    }
    return HP_OK;
}

static int b_probe(void *self, struct hp_backend_caps *caps)
{
    (void)self;
    while (bcase == BC_PROBE_HANGS)
        pause();
    if (bcase == BC_PROBE_NAMES_SELF) {
        /* A request naming this backend from inside its own first probe
         * (as the program's code would, reached through a callback). */
        void *(*alloc_ex)(size_t, const struct hp_alloc_opts *) = NULL;
        void *sym = dlsym(RTLD_DEFAULT, "hp_alloc_ex");
        memcpy(&alloc_ex, &sym, sizeof(sym));  /* POSIX: a function's address */
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = "broken";
        if (alloc_ex && alloc_ex(4096, &o))
            return HP_EINVAL;  /* served by a backend that was never probed */
    }
    if (rewrite) {
        rewrite->map = NULL;  /* const broken: the host must not see it */
        rewrite->size = 8;
    }
    if (bcase == BC_UPCALLS_WILD) {
        /* Each gets -errno at once: no walk of 128 TiB, no file outside
         * /proc and /sys, no write through NULL. */
        char buf[64];
        int64_t huge = host->measure_huge_bytes((void *)0x1000, (size_t)1 << 47);
        int64_t text = host->read_text("/proc/../etc/passwd", buf, sizeof(buf));
        int node = host->os_page_node(&huge, NULL);
        int map = host->os_map(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, NULL);
        int remap = host->os_remap(&huge, 4096, 8192, MREMAP_MAYMOVE, NULL, NULL);
        host->set_detail((const char *)0x10);  /* wild: must not crash */
        host->log("broken", (const char *)0x10);
        if (huge >= 0 || text >= 0 || node >= 0 || map >= 0 || remap >= 0) {
            host->set_detail("broken: an upcall answered a wild call");
            return HP_EINVAL;
        }
    }
    caps->available = bcase == BC_AVAILABLE_7 ? 7 : 1;
    caps->n_page_sizes = bcase == BC_MAP_FAKE_1G ? 3 : bcase == BC_AVAILABLE_NO_SIZES ? 0 : 2;
    caps->page_sizes[0] = host->base_page_size;
    caps->page_sizes[1] = PMD;
    caps->page_sizes[2] = UINT64_C(1) << 30;  /* map-fake-1g: base pages, said to be 1 GiB */
    caps->pool_free[0] = caps->pool_free[1] = caps->pool_free[2] = UINT64_MAX;
    caps->page_flags[1] = HP_PAGE_ADVISED;
    snprintf(caps->reason, sizeof(caps->reason), "broken plugin, case %s%s",
             broken_case_names[bcase], bcase == BC_TEXT_ESCAPES ? TERMINAL_TRICKS : "");
    return HP_OK;
}

/* A mapping as the contract wants it: aligned, guarded, read-write. */
static int good_map(const struct hp_map_request *req, struct hp_mapping *out)
{
    uint64_t base = host->base_page_size, ps = req->page_size;
    uint64_t align = req->align > ps ? req->align : ps;
    uint64_t len = round_up(req->len, ps), guard = req->guard;
    uint64_t slack = align > base ? align : 0;
    void *p;
    if (host->os_map(NULL, guard + len + slack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &p))
        return HP_ENOMEM;
    uintptr_t start = round_up((uintptr_t)p + guard, align);
    char *map = (char *)(start - guard), *end = (char *)start + len;
    if (map > (char *)p)
        host->os_unmap(p, (size_t)(map - (char *)p));
    if ((char *)p + guard + len + slack > end)
        host->os_unmap(end, (size_t)((char *)p + guard + len + slack - end));
    if (guard)
        host->os_protect(map, guard, PROT_NONE);
    if (ps > base && ps <= PMD)
        host->os_advise((void *)start, len,
                        bcase == BC_CLAIMS_THP_FAKE ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
    out->addr = (void *)start;
    out->len = out->committed = len;
    out->map_addr = map;
    out->map_len = guard + len;
    out->page_size = ps;
    if (bcase == BC_REMAP_FORK_POOL)
        out->flags = HP_MAP_POOL;  /* so that its remap runs inside the fork fence */
    return HP_OK;
}

static int b_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    (void)self;
    switch (bcase) {
    case BC_MAP_POSITIVE:
        return 5;
    case BC_MAP_NEGATIVE:
        return -999;
    case BC_TEXT_ESCAPES:
        host->log("broken", "log line" TERMINAL_TRICKS);
        host->set_detail("broken: no memory" TERMINAL_TRICKS);
        return HP_ENOMEM;
    case BC_MAP_ALIAS:
    case BC_MAP_ALIAS_SIZE:
        if (first.addr && req->len <= first.len && req->page_size == first.page_size &&
            !req->guard) {
            *out = first;  /* a live block's memory, handed out twice */
            if (bcase == BC_MAP_ALIAS_SIZE)  /* and a rule broken that unmaps a result */
                out->page_size = out->page_size == PMD ? host->base_page_size : PMD;
            return HP_OK;
        }
        break;
    default:
        break;
    }
    if (bcase == BC_MAP_RECURSES) {
        /* A request for a block of its own backend, from inside map. */
        void *(*alloc_ex)(size_t, const struct hp_alloc_opts *) = NULL;
        void *sym = dlsym(RTLD_DEFAULT, "hp_alloc_ex");
        memcpy(&alloc_ex, &sym, sizeof(sym));
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = "broken";
        if (alloc_ex && alloc_ex(req->len, &o))
            return HP_EINVAL;  /* served from inside its own map: never */
    }
    if (maps_fail)
        return HP_ENOMEM;
    if (bcase == BC_MAP_LEN_DOUBLE && !req->guard) {
        /* A map_len twice too long, over read-write memory right above the
         * block (here its own; in a program, as like as not someone
         * else's). */
        struct hp_map_request twice = *req;
        twice.len = 2 * req->len;
        int rc = good_map(&twice, out);
        if (rc == HP_OK)
            out->len = out->committed = round_up(req->len, req->page_size);
        return rc;
    }
    int rc = good_map(req, out);
    if (rc == HP_OK && !first.addr)
        first = *out;
    if (rc == HP_OK && (bcase == BC_MAP_READONLY || (bcase == BC_MAP_READONLY_STACK && req->guard)))
        host->os_protect(out->addr, out->len, PROT_READ);
    if (rc == HP_OK && bcase == BC_MAP_LEN_WRAP)
        out->map_len = UINT64_MAX - (uintptr_t)out->map_addr + 1 + 4096;
    if (rc == HP_OK && bcase == BC_MAP_LEN_TOP)
        out->map_len = 0x7ffffffff000u - (uintptr_t)out->map_addr;
    return rc;
}

static int b_unmap(void *self, const struct hp_mapping *m)
{
    (void)self;
    if (bcase == BC_UNMAP_WRITES_FAILS) {
        struct hp_mapping *w = (struct hp_mapping *)m;  /* const broken */
        w->map_len += UINT64_C(1) << 30;
        w->addr = (char *)w->addr + 4096;
        host->set_detail("broken: wrote its mapping, unmapped nothing");
        return HP_EOS;
    }
    if (bcase == BC_STACK_UNMAP_FAILS && m->addr != m->map_addr) {  /* a guarded one: a stack */
        host->set_detail("broken: refuses to unmap a stack");
        return HP_EOS;
    }
    if (bcase == BC_UNMAP_FAILS) {
        host->set_detail("broken: refuses to unmap");
        return HP_EINVAL;
    }
    if (bcase == BC_UNMAP_GONE) {
        host->os_unmap(m->map_addr, m->map_len);
        host->set_detail("broken: unmapped, then failed");
        return HP_EINVAL;
    }
    if (bcase == BC_UNMAP_PARTIAL) {
        host->os_unmap(m->map_addr, round_up(m->map_len / 2, host->base_page_size));
        host->set_detail("broken: unmapped half, then failed");
        return HP_EOS;
    }
    if (bcase == BC_UNMAP_POSITIVE) {
        host->os_unmap(m->map_addr, m->map_len);
        return 3;
    }
    if (bcase == BC_UNMAP_NOOP)
        return HP_OK;
    return host->os_unmap(m->map_addr, m->map_len) ? HP_EINVAL : HP_OK;
}

/* Move the mapping of m to a new address, always (a fresh reservation
 * taken over with MREMAP_FIXED), at new_len usable bytes; m describes the
 * new place. The old addresses are unmapped by the move. */
static int move(struct hp_mapping *m, uint64_t new_len)
{
    uint64_t off = (uint64_t)((char *)m->addr - (char *)m->map_addr);
    uint64_t len = off + new_len, slack = m->page_size;
    void *r, *p;
    if (host->os_map(NULL, len + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0, &r))
        return HP_ENOMEM;
    /* The block start keeps its page-size alignment at the new place. */
    char *to = (char *)round_up((uintptr_t)r + off, m->page_size) - off;
    if (host->os_remap(m->map_addr, m->map_len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to, &p)) {
        host->os_unmap(r, len + slack);
        return HP_ENOMEM;
    }
    if (to > (char *)r)
        host->os_unmap(r, (size_t)(to - (char *)r));
    if ((char *)r + len + slack > to + len)
        host->os_unmap(to + len, (size_t)((char *)r + len + slack - (to + len)));
    m->map_addr = p;
    m->map_len = len;
    m->addr = (char *)p + off;
    m->len = m->committed = new_len;
    return HP_OK;
}

static int b_remap(void *self, struct hp_mapping *m, uint64_t new_len, uint64_t flags)
{
    (void)self;
    (void)flags;
    uint64_t base = host->base_page_size, len = round_up(new_len, m->page_size);
    struct hp_mapping old = *m;
    int rc;
    if (bcase == BC_REMAP_FORK_POOL) {
        /* fork from inside the op (the fork fence is held: pool block). */
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    switch (bcase) {
    case BC_REMAP_POSITIVE:
        return 5;
    case BC_REMAP_NEGATIVE:
        return -999;
    case BC_REMAP_FAIL_READONLY:
        host->os_protect(m->addr, m->len, PROT_NONE);
        host->set_detail("broken: took the block's access away, then failed");
        return HP_ENOMEM;
    case BC_REMAP_FAIL_UNMAPPED:
        host->os_unmap(m->map_addr, m->map_len);
        host->set_detail("broken: unmapped the block, then failed");
        return HP_ENOMEM;
    case BC_REMAP_SHRINK_SHORT:
    case BC_REMAP_INPLACE_TOP:
    case BC_REMAP_GROW_SHORT: {
        /* The kernel's choice: in place if it can (a shrink always is). */
        void *p;
        uint64_t off = (uint64_t)((char *)m->addr - (char *)m->map_addr);
        if (host->os_remap(m->map_addr, m->map_len, off + len, MREMAP_MAYMOVE, NULL, &p))
            return HP_ENOMEM;
        m->map_addr = p;
        m->addr = (char *)p + off;
        m->map_len = off + len;
        m->len = m->committed = len - base;
        if (bcase == BC_REMAP_INPLACE_TOP)
            m->map_len = 0x7ffffffff000u - (uintptr_t)m->map_addr;
        return HP_OK;
    }
    case BC_REMAP_MAP_DOUBLE:
        /* Twice the room, every page of it read-write: map_len over
         * accessible memory past the committed bytes (here its own; in a
         * program, as like as not someone else's). */
        if ((rc = move(m, 2 * len)) != HP_OK)
            return rc;
        m->len = m->committed = len;
        return HP_OK;
    default:
        break;
    }
    if ((rc = move(m, len)) != HP_OK)
        return rc;
    switch (bcase) {
    case BC_REMAP_SHORT:
        m->len = m->committed = len - base;
        break;
    case BC_REMAP_MISALIGNED:
        m->addr = (char *)m->addr + 8;
        break;
    case BC_REMAP_ADDR_NULL:
        m->addr = NULL;
        break;
    case BC_REMAP_PAGE_SIZE:
        m->page_size = m->page_size == PMD ? base : PMD;
        break;
    case BC_REMAP_COMMITTED:
        m->committed = m->map_len + base;
        break;
    case BC_REMAP_MAP_SHORT:
        m->map_len = base;
        break;
    case BC_REMAP_STALE:
        *m = old;  /* the old place, unmapped by the move */
        break;
    case BC_REMAP_MOVED_NOMEM:
        maps_fail = 1;
        /* fall through */
    case BC_REMAP_MOVED_BLOCKED: {
        /* A page of its own where the block started, so the pages cannot
         * move back, and a result that is short. */
        void *p;
        if (host->os_map(old.addr, base, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0, &p) == 0 &&
            p != old.addr)
            host->os_unmap(p, base);
        m->len = m->committed = len - base;
        break;
    }
    case BC_REMAP_OTHER_BLOCK:
        *m = first;  /* another live block, too short for new_len */
        break;
    case BC_REMAP_READONLY:
        host->os_protect(m->addr, m->len, PROT_READ);
        break;
    case BC_REMAP_MAP_TOP:
        m->map_len = 0x7ffffffff000u - (uintptr_t)m->map_addr;
        break;
    case BC_REMAP_FAIL_MOVED:
        host->set_detail("broken: moved the block, then failed");
        return HP_ENOMEM;
    default:
        break;
    }
    return HP_OK;
}

static int b_advise(void *self, const struct hp_mapping *m, uint64_t flags)
{
    (void)self;
    if (bcase == BC_ADVISE_WRITES) {
        struct hp_mapping *w = (struct hp_mapping *)m;  /* const broken */
        w->map_len += UINT64_C(1) << 30;
        w->committed += UINT64_C(1) << 30;
    }
    if (bcase == BC_ADVISE_NEGATIVE)
        return -999;
    if (bcase == BC_ADVISE_READONLY && (flags & HP_F_POPULATE))
        return host->os_protect(m->addr, m->len, PROT_READ) ? HP_EINVAL : HP_OK;
    if (flags & HP_F_POPULATE)
        return host->os_advise(m->addr, m->len, MADV_POPULATE_WRITE) ? HP_ENOMEM : HP_OK;
    return HP_OK;
}

static int64_t b_huge_bytes(void *self, const struct hp_mapping *m)
{
    (void)self;
    if (bcase == BC_HUGE_BYTES_OVER)
        return (int64_t)(2 * m->map_len);
    if (bcase == BC_HUGE_BYTES_LIE)
        return (int64_t)m->map_len;
    return host->measure_huge_bytes(m->addr, m->len);
}

static int b_query(void *self, const struct hp_mapping *m, struct hp_block_query *q)
{
    (void)self;
    int node;
    if (bcase == BC_QUERY_GARBAGE) {
        q->numa_node = 5000;
        q->fd = 9999;
        q->fd_offset = 4096;
        return HP_OK;
    }
    if (bcase == BC_QUERY_READONLY)
        host->os_protect(m->addr, m->len, PROT_READ);
    if (host->size >= offsetof(struct hp_host, os_page_node) + sizeof(host->os_page_node) &&
        host->os_page_node(m->addr, &node) == 0)
        q->numa_node = node;
    return HP_OK;
}

static const struct hp_backend_ops ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "broken",
    .description = "breaks one rule of the plugin contract (HP_BROKEN_CASE)",
    .kind = HP_KIND_OTHER,
    .init = b_init,
    .probe = b_probe,
    .map = b_map,
    .unmap = b_unmap,
    .remap = b_remap,
    .advise = b_advise,
    .huge_bytes = b_huge_bytes,
    .query = b_query,
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h)
{
    /* The cases that break a rule of the descriptor itself. */
    static struct hp_backend_ops changed;
    const char *c = getenv("HP_BROKEN_CASE");
    host = h;
    changed = ops;
    if (c && !strcmp(c, "ops-rewrite"))
        rewrite = &changed;  /* the first probe, after loading, breaks it */
    if (c && !strncmp(c, "claims-thp", 10))
        changed.kind = HP_KIND_THP;
    if (c && !strcmp(c, "name-dash"))
        changed.name = "-broken";
    if (c && !strcmp(c, "entry-null"))
        return NULL;
    if (c && !strcmp(c, "desc-unmapped")) {
        /* 8 letters, then memory it unmapped: no NUL, nothing readable. */
        char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (two != MAP_FAILED) {
            memset(two + 4096 - 8, 'd', 8);
            munmap(two + 4096, 4096);
            changed.description = two + 4096 - 8;
        }
    }
    if (c && !strcmp(c, "name-unterminated")) {
        /* 20 letters that end where readable memory does: no NUL. */
        char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (two != MAP_FAILED) {
            memset(two + 4096 - 20, 'a', 20);
            mprotect(two + 4096, 4096, PROT_NONE);
            changed.name = two + 4096 - 20;
        }
    }
    return &changed;
}
