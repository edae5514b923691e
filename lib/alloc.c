/* hp_alloc, hp_realloc, hp_free, hp_info: validation, dispatch, fallback. */
#include "hp/alloc.h"
#include "hp/errors.h"
#include "error.h"
#include "loader.h"
#include "os.h"
#include "registry.h"
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest block: 2^46 bytes (64 TiB), well below the 47-bit user address
 * space, so rounding to any page size can never overflow. */
#define HP_MAX_LEN (UINT64_C(1) << 46)

#define KNOWN_FLAGS (HP_F_REQUIRE_HUGE | HP_F_POPULATE | HP_F_COLLAPSE | HP_F_NOZERO | \
                     HP_F_PAGE_SHIFT_MASK)

HP_EXTERN(uint64_t) hp_page_size_flag(uint64_t page_size)
{
    if (page_size < 4096 || (page_size & (page_size - 1)))
        return 0;
    uint64_t shift = (uint64_t)__builtin_ctzll(page_size);
    return shift << HP_F_PAGE_SHIFT_POS;
}

static int32_t check_flags(uint64_t flags)
{
    if (flags & ~KNOWN_FLAGS)
        return hp_fail(HP_EFLAGS, "unknown flag bits 0x%llx",
                       (unsigned long long)(flags & ~KNOWN_FLAGS));
    uint64_t ps = hp_flags_page_size(flags);
    if (ps && (ps < hp_os_page_size() || ps > (UINT64_C(1) << 40)))
        return hp_fail(HP_EFLAGS, "page size %llu bytes in flags is out of range",
                       (unsigned long long)ps);
    return HP_OK;
}

static int32_t check_size(size_t size)
{
    if (size == 0)
        return hp_fail(HP_ESIZE, "size 0: a block must hold at least one byte");
    if ((uint64_t)size > HP_MAX_LEN)
        return hp_fail(HP_ESIZE, "size %zu exceeds the limit of %llu bytes", size,
                       (unsigned long long)HP_MAX_LEN);
    return HP_OK;
}

static struct hp_core *ready_core(void)
{
    struct hp_core *c = hp_core();
    if (c->init_error != HP_OK) {
        hp_fail(c->init_error, "%s", c->init_detail);
        return NULL;
    }
    return c;
}

/* The backend result must describe memory we can hand out and unmap. */
static int sane_mapping(const struct hp_mapping *m, uint64_t len)
{
    uintptr_t base = hp_os_page_size() - 1;
    uintptr_t a = (uintptr_t)m->addr, ma = (uintptr_t)m->map_addr;
    return m->addr && !(a & base) && !(ma & base) && m->len >= len && m->map_len >= m->len &&
           a >= ma && a - ma <= m->map_len - m->len && m->page_size >= hp_os_page_size() &&
           !(m->page_size & (m->page_size - 1));
}

/* Ask one backend for a mapping; HP_OK fills *m. */
static int32_t map_with(struct hp_backend *b, uint64_t len, uint64_t flags, uint64_t page_size,
                        struct hp_mapping *m)
{
    struct hp_map_request req = {sizeof(req), 0, flags, len, page_size};
    memset(m, 0, sizeof(*m));
    m->size = sizeof(*m);
    hp_set_detail("");
    int rc = b->ops->map(&req, m);
    if (rc > 0)
        return hp_fail(HP_EBACKEND, "backend %s returned unknown status %d", b->name, rc);
    if (rc != HP_OK)
        return rc;
    if (!sane_mapping(m, len)) {
        /* Unmap only what looks like a real mapping; a wild pointer from a
         * broken plugin must never reach munmap. */
        if (m->map_addr && !((uintptr_t)m->map_addr & (hp_os_page_size() - 1)) && m->map_len &&
            m->map_len < HP_MAX_LEN * 2)
            b->ops->unmap(m);
        return hp_fail(HP_EBACKEND, "backend %s returned an invalid mapping (addr %p len %llu)",
                       b->name, m->addr, (unsigned long long)m->len);
    }
    if (hp_os_check_mapped(m->addr, m->len) != 0)
        return hp_fail(HP_EBACKEND, "backend %s returned memory that is not mapped (%p, %llu bytes)",
                       b->name, m->addr, (unsigned long long)m->len);
    return HP_OK;
}

struct request {
    uint64_t len, flags;
    const char *backend;
    char exclude[HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN];
    unsigned n_exclude;
};

static void *allocate(struct hp_core *c, const struct request *r)
{
    const struct hp_options *o = hp_options();
    struct hp_backend_caps caps[HP_MAX_BACKENDS];
    struct hp_select_backend view[HP_MAX_BACKENDS];
    for (unsigned i = 0; i < c->n; i++) {
        struct hp_backend *b = &c->backends[i];
        view[i].name = b->ops ? b->name : NULL;
        view[i].kind = b->kind;
        view[i].caps = NULL;
        if (b->ops) {
            hp_backend_caps_now(b, r->len, hp_flags_page_size(r->flags), &caps[i]);
            view[i].caps = &caps[i];
        }
    }
    struct hp_select_request sr = {
        .len = r->len, .flags = r->flags, .base_page_size = hp_os_page_size(),
        .backend = r->backend, .n_exclude = r->n_exclude, .exclude = r->exclude,
        .n_only = o->n_only, .only = o->only,
    };
    /* HP_BACKENDS exclusions join the caller's. */
    char excl[2 * HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN];
    memcpy(excl, r->exclude, sizeof(r->exclude));
    memcpy(excl + r->n_exclude, o->never, o->n_never * sizeof(*o->never));
    sr.exclude = (const char(*)[HP_OPT_NAME_LEN])excl;
    sr.n_exclude = r->n_exclude + o->n_never;

    struct hp_candidate cand[HP_SELECT_MAX];
    unsigned n = hp_select(&sr, view, c->n, cand, HP_SELECT_MAX);
    if (n == 0) {
        if (r->flags & HP_F_REQUIRE_HUGE) {
            hp_fail(HP_ENOHUGE, "no backend can serve %llu bytes with huge pages%s%s",
                    (unsigned long long)r->len, r->backend ? " from backend " : "",
                    r->backend ? r->backend : "");
        } else {
            hp_fail(HP_ENOBACKEND, "no available backend can serve %llu bytes%s%s",
                    (unsigned long long)r->len, r->backend ? " from backend " : "",
                    r->backend ? r->backend : "");
        }
        return NULL;
    }
    int32_t last = HP_ENOMEM;
    char tried[256] = "";
    for (unsigned i = 0; i < n; i++) {
        struct hp_backend *b = &c->backends[cand[i].backend];
        struct hp_block *blk = calloc(1, sizeof(*blk));
        if (!blk) {
            hp_fail(HP_ENOMEM, "out of memory for the block record");
            return NULL;
        }
        int32_t rc = map_with(b, r->len, r->flags, cand[i].page_size, &blk->m);
        if (rc == HP_OK) {
            blk->backend = b;
            blk->flags = r->flags;
            blk->requested_page_size = hp_flags_page_size(r->flags);
            if (hp_registry_insert(blk) == HP_OK)
                return blk->m.addr;
            b->ops->unmap(&blk->m);
            free(blk);
            hp_fail(HP_ENOMEM, "out of memory for the block registry");
            return NULL;
        }
        free(blk);
        hp_backend_mark_stale(b);
        last = rc;
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof(tried) - used, "%s%s/%lluK: %s (%s)", used ? "; " : "",
                 b->name, (unsigned long long)(cand[i].page_size >> 10), hp_error_name(rc),
                 hp_last_error_detail());
        hp_log("%s could not map %llu bytes, trying the next candidate", b->name,
               (unsigned long long)r->len);
    }
    if (r->flags & HP_F_REQUIRE_HUGE)
        hp_fail(HP_ENOHUGE, "huge pages required for %llu bytes; tried %s",
                (unsigned long long)r->len, tried);
    else
        hp_fail(last == HP_EBACKEND ? HP_EBACKEND : HP_ENOMEM, "every backend failed: %s", tried);
    return NULL;
}

static int32_t build_request(size_t size, const struct hp_alloc_opts *opts, struct request *r)
{
    static const struct hp_alloc_opts none = HP_ALLOC_OPTS_INIT;
    const size_t min_opts = offsetof(struct hp_alloc_opts, exclude) + sizeof(opts->exclude);
    if (!opts)
        opts = &none;
    if (opts->size < min_opts)
        return hp_fail(HP_EINVAL, "opts->size is %u, expected at least %zu", opts->size,
                       min_opts);
    if (opts->reserved)
        return hp_fail(HP_EINVAL, "opts->reserved must be 0");
    int32_t rc = check_size(size);
    if (rc == HP_OK)
        rc = check_flags(opts->flags);
    if (rc != HP_OK)
        return rc;
    memset(r, 0, sizeof(*r));
    r->len = size;
    r->flags = opts->flags;
    r->backend = opts->backend;
    if (opts->backend && !hp_valid_backend_name(opts->backend))
        return hp_fail(HP_EINVAL, "opts->backend \"%.40s\" is not a backend name",
                       opts->backend);
    if (opts->exclude) {
        char why[160];
        int n = hp_parse_name_list(opts->exclude, r->exclude, HP_OPT_MAX_NAMES, why,
                                   sizeof(why));
        if (n < 0)
            return hp_fail(HP_EINVAL, "opts->exclude: %s", why);
        r->n_exclude = (unsigned)n;
    }
    return HP_OK;
}

HP_EXTERN(void *) hp_alloc_ex(size_t size, const struct hp_alloc_opts *opts)
{
    struct request r;
    if (build_request(size, opts, &r) != HP_OK)
        return NULL;
    struct hp_core *c = ready_core();
    if (!c)
        return NULL;
    if (r.backend) {
        struct hp_backend *b = hp_backend_by_name(c, r.backend);
        if (!b) {
            hp_fail(HP_ENOBACKEND, "no loaded backend named \"%s\"", r.backend);
            return NULL;
        }
        if (!b->caps.available) {
            hp_fail(HP_ENOBACKEND, "backend %s is unavailable: %s", r.backend, b->caps.reason);
            return NULL;
        }
    }
    return allocate(c, &r);
}

HP_EXTERN(void *) hp_alloc(size_t size, uint64_t flags)
{
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    opts.flags = flags;
    return hp_alloc_ex(size, &opts);
}

static int32_t pointer_error(int32_t code, const void *p, const char *what)
{
    switch (code) {
    case HP_EDOUBLEFREE:
        return hp_fail(code, "%s(%p): the block was already freed", what, p);
    case HP_EINTERIOR:
        return hp_fail(code, "%s(%p): pointer is inside a block, not at its start", what, p);
    default:
        return hp_fail(code, "%s(%p): not a pointer returned by libhp", what, p);
    }
}

static void release(struct hp_block *b)
{
    int rc = b->backend->ops->unmap(&b->m);
    if (rc != HP_OK)
        hp_log("%s: unmap of %p failed (%s)", b->backend->name, b->m.addr, hp_error_name(rc));
    free(b);
}

HP_EXTERN(int32_t) hp_free(void *p)
{
    if (!p)
        return HP_OK;
    int32_t code;
    struct hp_block *b = hp_registry_take(p, 1, &code);
    if (!b)
        return pointer_error(code, p, "hp_free");
    release(b);
    return HP_OK;
}

/* Resize through the backend's remap; HP_OK updates b->m. */
static int32_t try_remap(struct hp_block *b, uint64_t new_len, uint64_t flags)
{
    int (*remap)(struct hp_mapping *, uint64_t, uint64_t) = HP_OP(b->backend->ops, remap);
    if (!remap)
        return HP_ENOTSUP;
    uint64_t wanted = hp_flags_page_size(flags);
    if (wanted && wanted != b->m.page_size)
        return HP_ENOTSUP;
    struct hp_mapping m = b->m;
    int rc = remap(&m, new_len, flags);
    if (rc != HP_OK)
        return rc;
    if (!sane_mapping(&m, new_len))
        return hp_fail(HP_EBACKEND, "backend %s remap returned an invalid mapping",
                       b->backend->name);
    b->m = m;
    return HP_OK;
}

HP_EXTERN(void *) hp_realloc(void *p, size_t new_size, uint64_t flags)
{
    if (!p)
        return hp_alloc(new_size, flags);
    if (new_size == 0) {
        if (hp_free(p) != HP_OK)
            return NULL;
        hp_clear_error();
        return NULL;
    }
    if (check_size(new_size) != HP_OK || check_flags(flags) != HP_OK)
        return NULL;
    int32_t code;
    struct hp_block *b = hp_registry_take(p, 0, &code);
    if (!b) {
        pointer_error(code, p, "hp_realloc");
        return NULL;
    }
    if (try_remap(b, new_size, flags) == HP_OK) {
        b->flags = flags;
        b->requested_page_size = hp_flags_page_size(flags);
        if (hp_registry_insert(b) == HP_OK)
            return b->m.addr;
        /* Only possible if the registry never got its first bucket array;
         * the caller's p is gone, so the memory must not leak either. */
        release(b);
        hp_fail(HP_ENOMEM, "hp_realloc: the block registry is out of memory");
        return NULL;
    }
    /* Copy path: a new block, the contents, then the old block goes. */
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    opts.flags = flags;
    void *q = hp_alloc_ex(new_size, &opts);
    if (!q) {
        hp_registry_insert(b);  /* p stays valid, as realloc promises */
        return NULL;
    }
    memcpy(q, b->m.addr, b->m.len < new_size ? b->m.len : new_size);
    release(b);
    return q;
}

HP_EXTERN(int32_t) hp_info(const void *p, struct hp_block_info *info)
{
    const size_t min_info = offsetof(struct hp_block_info, flags) + sizeof(info->flags);
    if (!info)
        return hp_fail(HP_EINVAL, "hp_info: info is NULL");
    if (info->size < min_info)
        return hp_fail(HP_EINVAL, "hp_info: info->size is %u, expected at least %zu",
                       info->size, min_info);
    if (!p)
        return hp_fail(HP_EFOREIGN, "hp_info(NULL): not a pointer returned by libhp");
    struct hp_block b;
    int32_t code = hp_registry_peek(p, &b);
    if (code != HP_OK)
        return pointer_error(code, p, "hp_info");
    int64_t (*measure)(const struct hp_mapping *) = HP_OP(b.backend->ops, huge_bytes);
    int64_t huge = measure ? measure(&b.m) : hp_core()->host.measure_huge_bytes(b.m.addr, b.m.len);
    uint32_t size = info->size;
    struct hp_block_info full = {.size = size};
    snprintf(full.backend, sizeof(full.backend), "%s", b.backend->name);
    full.requested_page_size = b.requested_page_size;
    full.page_size = b.m.page_size;
    full.usable_size = b.m.len;
    full.mapped_size = b.m.map_len;
    full.huge_bytes = huge > 0 ? (uint64_t)huge : 0;
    full.flags = b.flags;
    memcpy(info, &full, size < sizeof(full) ? size : sizeof(full));
    return HP_OK;
}
