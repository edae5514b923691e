/* hp_stack_*: validation, the plan's use, mapping through the backends, threads. */
#include "abi_sizes.h"
#include "hp/stack.h"
#include "hp/errors.h"
#include "block.h"
#include "error.h"
#include "fork.h"
#include "loader.h"
#include "measure.h"
#include "numa.h"
#include "os.h"
#include "stack.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define HUGE_FLAGS (HP_STACK_HUGE | HP_STACK_HUGETLB | HP_STACK_THP)
#define KNOWN_FLAGS (HUGE_FLAGS | HP_STACK_ALLOW_LEAN | HP_STACK_POPULATE | HP_STACK_NOCACHE)

static uint64_t round_up(uint64_t len, uint64_t align)
{
    return (len + align - 1) / align * align;
}

static const char *mode_name(uint64_t page_size)
{
    return page_size > hp_os_page_size() ? "huge" : "lean";
}

/* ---- mapping ----
 *
 * A stack is one map request to the backend the plan chose: page_size
 * pages, aligned to the page, with the guard directly below (struct
 * hp_map_request). A lean request names the base page size in its flags
 * (hp_page_size_flag): a request for base pages must not be backed by
 * larger ones, whatever the THP setting (hp/backend.h), so a lean stack
 * stays lean under THP "always". The guard is below the aligned start,
 * outside every huge page: no mprotect ever splits one (split_huge_pmd()
 * on a VMA split, mm/huge_memory.c).
 */

int32_t hp_stack_unmap(const struct hp_stack_map *m)
{
    struct hp_backend *b = m->backend;
    /* munmap can fail once (ENOMEM when splitting would pass
     * vm.max_map_count) and succeed the next time. */
    if (hp_backend_unmap(b, &m->m) == HP_OK || hp_backend_unmap(b, &m->m) == HP_OK)
        return HP_OK;
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", hp_last_error_detail());
    hp_log("stack %p: backend %s could not unmap %llu bytes: %s", m->m.addr, b->name,
           (unsigned long long)m->m.map_len, detail);
    return hp_fail(HP_EOS, "backend %s could not unmap the stack at %p (%llu bytes)%s%s; it "
                   "stays mapped, lost", b->name, m->m.addr, (unsigned long long)m->m.map_len,
                   detail[0] ? ": " : "", detail);
}

/* HP_F_POPULATE and HP_F_COLLAPSE for a stack's mapping flags. */
static uint64_t populate_flags(uint64_t page_size)
{
    return HP_F_POPULATE | (page_size > hp_os_page_size() ? HP_F_COLLAPSE : 0);
}

/* Prefault a stack that exists already (one from the cache) through its
 * backend's advise; a THP stack also gets one collapse attempt. */
static int32_t populate(const struct hp_stack_map *m)
{
    struct hp_backend *b = m->backend;
    if (!HP_OP(b->ops, advise))
        return HP_OK;  /* the contract's advise is optional: faults do it */
    hp_set_detail("");
    int32_t rc = hp_backend_status(b, "advise",
                                   hp_backend_advise(b, &m->m, populate_flags(m->m.page_size)));
    int rw = rc == HP_OK && !b->own ? hp_os_check_rw(m->m.addr, m->m.len) : 0;
    if (rw == -EACCES || rw == -ENOMEM)
        rc = hp_fail(HP_EBACKEND, "advise left the stack not readable and writable");
    if (rc == HP_OK)
        return HP_OK;
    char detail[256];
    snprintf(detail, sizeof(detail), "%s", hp_last_error_detail());
    return hp_fail(rc, "%s stack: prefaulting %llu bytes through "
                   "backend %s failed: %s", mode_name(m->m.page_size),
                   (unsigned long long)m->usable, b->name, detail);
}

/* Map a stack the way plan entry p says. hugetlb-like pages (guaranteed:
 * reserved for the stack anyway) are prefaulted too: populating them now
 * turns a hugetlb cgroup limit into an error here, not a SIGBUS later. */
static int32_t map_way(struct hp_backend *b, const struct hp_stack_plan *p,
                       const struct hp_stack_request *req, uint64_t guard,
                       const struct hp_placement *pl, struct hp_stack_map *m)
{
    int huge = p->page_size > req->base_page_size;
    uint64_t len = round_up(req->usable, p->page_size), flags = 0;
    if (!huge)
        flags |= hp_page_size_flag(p->page_size);
    if ((req->flags & HP_STACK_POPULATE) || p->guaranteed)
        flags |= populate_flags(p->page_size);
    int32_t rc = hp_backend_map_placed(b, len, flags, p->page_size, p->page_size, guard, pl,
                                       &m->m);
    if (rc != HP_OK) {
        char detail[256];
        snprintf(detail, sizeof(detail), "%s", hp_last_error_detail());
        return hp_fail(rc, "%s stack of %llu bytes from backend %s: %s", mode_name(p->page_size),
                       (unsigned long long)len, b->name, detail);
    }
    m->backend = b;
    m->usable = len;
    m->guard = guard;
    m->kind = b->kind;
    m->kept = 0;
    m->placed = pl->mode != HP_NUMA_DEFAULT;
    /* map may have prefaulted already or left it to advise (hp/backend.h). */
    if ((flags & HP_F_POPULATE) && (rc = populate(m)) != HP_OK)
        hp_stack_unmap(m);
    return rc;
}

/* ---- create ---- */

static int32_t check_flags(uint64_t flags)
{
    if (flags & ~KNOWN_FLAGS)
        return hp_fail(HP_EFLAGS, "unknown stack flag bits 0x%llx",
                       (unsigned long long)(flags & ~KNOWN_FLAGS));
    if ((flags & HP_STACK_HUGETLB) && (flags & HP_STACK_THP))
        return hp_fail(HP_EFLAGS, "HP_STACK_HUGETLB and HP_STACK_THP exclude each other");
    if ((flags & HP_STACK_ALLOW_LEAN) && !(flags & HUGE_FLAGS))
        return hp_fail(HP_EFLAGS, "HP_STACK_ALLOW_LEAN needs a huge mode flag "
                       "(HP_STACK_HUGE, HP_STACK_HUGETLB or HP_STACK_THP)");
    return HP_OK;
}

static int32_t check_request(size_t size, const struct hp_stack_opts *opts, uint64_t *guard)
{
    const size_t min_opts = HP_STACK_OPTS_SIZE_V1_0;
    if (opts->size < min_opts)
        return hp_fail(HP_EINVAL, "opts->size is %u, expected at least %zu", opts->size,
                       min_opts);
    if (opts->reserved)
        return hp_fail(HP_EINVAL, "opts->reserved must be 0");
    if (size == 0)
        return hp_fail(HP_ESIZE, "stack size 0: a stack must hold at least one byte");
    if ((uint64_t)size > HP_STACK_MAX_SIZE)
        return hp_fail(HP_ESIZE, "stack size %zu exceeds the limit of %llu bytes", size,
                       (unsigned long long)HP_STACK_MAX_SIZE);
    int32_t rc = check_flags(opts->flags);
    if (rc != HP_OK)
        return rc;
    if (opts->guard_size > HP_STACK_MAX_GUARD)
        return hp_fail(HP_EINVAL, "opts->guard_size %llu exceeds the limit of %llu bytes",
                       (unsigned long long)opts->guard_size,
                       (unsigned long long)HP_STACK_MAX_GUARD);
    uint64_t ps = hp_os_page_size();
    *guard = opts->guard_size ? round_up(opts->guard_size, ps) : ps;
    return HP_OK;
}

/* Map a new stack by the first way of the plan that works. size: the
 * caller's size rounded to the base page. */
static int32_t map_fresh(struct hp_core *c, const struct hp_stack_request *req, uint64_t size,
                         uint64_t guard, const struct hp_placement *pl, struct hp_stack_map *m)
{
    struct hp_backend_caps caps[HP_MAX_BACKENDS];
    struct hp_select_backend view[HP_MAX_BACKENDS] = {{0}};
    int huge = (req->flags & HUGE_FLAGS) != 0;
    struct hp_nodes nodes;
    int numa = huge && (pl->mode ? hp_numa_placed_pool_nodes(pl, &nodes)
                                 : hp_numa_pool_nodes(&nodes));
    unsigned n_backends = c->n;
    for (unsigned i = 0; i < n_backends; i++) {
        struct hp_backend *b = &c->backends[i];
        /* A lean stack asks for base pages only: pools of huge pages are
         * not re-probed for it. */
        hp_backend_caps_now(b, huge ? req->usable : req->base_page_size,
                            huge ? req->huge_page_size : req->base_page_size, &caps[i]);
        if (numa)
            hp_numa_limit_caps(b, &nodes, pl->mode != 0, &caps[i]);
        view[i] = (struct hp_select_backend){b->name, b->kind, &caps[i], hp_backend_unproven(b)};
    }
    struct hp_stack_plan plan[HP_STACK_PLAN_MAX];
    char why[400];
    unsigned n = hp_stack_plan(req, view, n_backends, plan, HP_STACK_PLAN_MAX, why, sizeof(why));
    if (n == 0 && huge)
        return hp_fail(HP_ENOHUGE, "no huge pages for a %llu-byte stack: %s",
                       (unsigned long long)req->usable, why);
    if (n == 0)
        return hp_fail(HP_ENOBACKEND, "no backend for a %llu-byte lean stack: %s",
                       (unsigned long long)size, why);
    char tried[400] = "";
    int32_t rc = HP_ENOMEM;
    int broken = n > 0;  /* every candidate's backend broke the rules of its mapping */
    uint64_t gen = hp_fork_gen();  /* before the map: see lib/fork.h */
    for (unsigned i = 0; i < n; i++) {
        struct hp_backend *b = &c->backends[plan[i].backend];
        struct hp_stack_request one = *req;
        one.usable = size;
        rc = map_way(b, &plan[i], &one, guard, pl, m);
        if (rc == HP_OK) {
            m->gen = gen;
            return HP_OK;
        }
        hp_backend_mark_stale(b);  /* its figures were wrong: re-read them next time */
        broken &= rc == HP_EBACKEND;
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? "; " : "",
                 hp_last_error_detail());
    }
    /* A plugin that broke the rules is HP_EBACKEND (hp/stack.h), huge or
     * lean: the detail names it and the rule. */
    if (huge && !(req->flags & HP_STACK_ALLOW_LEAN) && !broken)
        return hp_fail(HP_ENOHUGE, "no huge pages for a %llu-byte stack: %s%s%s",
                       (unsigned long long)req->usable, tried, why[0] ? "; " : "", why);
    return hp_fail(rc, "%s", tried);
}

/* A cached stack for the request, as a live handle; NULL on a miss, and on
 * a failed prefault (with the error set, *failed = 1). */
static struct hp_stack *from_cache(const struct hp_stack_request *req, uint64_t guard,
                                   int *failed)
{
    uint64_t flags = req->flags;
    uint32_t need = (flags & HP_STACK_HUGETLB) ? HP_MAP_POOL : 0;
    uint32_t refuse = (flags & HP_STACK_THP) ? HP_MAP_POOL : 0;
    struct hp_stack *s;
    *failed = 0;
    if (hp_stack_cache_take(req->huge_page_size, need, refuse, req->usable, guard, flags, &s) != 1)
        return NULL;
    if (!(flags & HP_STACK_POPULATE))
        return s;
    struct hp_stack copy;
    if (hp_stack_table_get(s, "hp_stack_create", &copy) == HP_OK && populate(&copy.m) == HP_OK)
        return s;
    int32_t err = hp_last_error();
    char detail[512];
    snprintf(detail, sizeof(detail), "%s", hp_last_error_detail());
    hp_stack_table_retire(s, HP_STACK_LIVE, "hp_stack_create", &copy);
    hp_stack_unmap(&copy.m);
    hp_fail(err, "%s", detail);
    *failed = 1;
    return NULL;
}

HP_EXTERN(struct hp_stack *) hp_stack_create_ex(size_t size, const struct hp_stack_opts *opts)
{
    static const struct hp_stack_opts none = HP_STACK_OPTS_INIT;
    uint64_t guard = 0;
    if (!opts)
        opts = &none;
    if (check_request(size, opts, &guard) != HP_OK)
        return NULL;
    struct hp_core *c = hp_core();
    if (c->init_error != HP_OK) {
        hp_fail(c->init_error, "%s", c->init_detail);
        return NULL;
    }
    const struct hp_options *o = hp_options();
    uint64_t flags = opts->flags, ps = hp_os_page_size();
    int huge = (flags & HUGE_FLAGS) != 0;
    struct hp_stack_request req = {
        .flags = flags, .base_page_size = ps,
        .huge_page_size = huge ? hp_os_pmd_page_size() : ps,
        .n_only = o->n_only, .only = o->only, .n_never = o->n_never, .never = o->never,
    };
    req.usable = round_up(size, req.huge_page_size);
    struct hp_stack *s;
    struct hp_nodes nodes;
    struct hp_placement pl = {0};
    if (opts->size >= offsetof(struct hp_stack_opts, numa_nodes) + sizeof(opts->numa_nodes) &&
        hp_numa_placement(opts->numa_mode, opts->numa_max_node, opts->numa_nodes, "opts",
                          &pl) != HP_OK)
        return NULL;
    /* A placed stack, or one for a thread held to some nodes, is mapped
     * fresh: cached ones may lie on any node. */
    if (!(flags & HP_STACK_NOCACHE) && !pl.mode && !(huge && hp_numa_pool_nodes(&nodes))) {
        int failed;
        s = from_cache(&req, guard, &failed);
        if (s || failed)
            return s;
    }
    struct hp_stack_map m;
    if (map_fresh(c, &req, round_up(size, ps), guard, &pl, &m) != HP_OK)
        return NULL;
    if (hp_stack_table_add(&m, flags, 0, &s) != HP_OK) {
        hp_stack_unmap(&m);
        return NULL;
    }
    return s;
}

HP_EXTERN(struct hp_stack *) hp_stack_create(size_t size, uint64_t flags)
{
    struct hp_stack_opts opts = HP_STACK_OPTS_INIT;
    opts.flags = flags;
    return hp_stack_create_ex(size, &opts);
}

HP_EXTERN(int32_t) hp_stack_destroy(struct hp_stack *s)
{
    struct hp_stack copy;
    int32_t rc = hp_stack_table_retire(s, HP_STACK_LIVE, "hp_stack_destroy", &copy);
    if (rc != HP_OK)
        return rc;
    return hp_stack_cache_put(&copy.m, copy.flags);
}

HP_EXTERN(void *) hp_stack_base(const struct hp_stack *s)
{
    struct hp_stack copy;
    return hp_stack_table_get(s, "hp_stack_base", &copy) == HP_OK ? copy.m.m.addr : NULL;
}

HP_EXTERN(size_t) hp_stack_size(const struct hp_stack *s)
{
    struct hp_stack copy;
    return hp_stack_table_get(s, "hp_stack_size", &copy) == HP_OK ? (size_t)copy.m.usable : 0;
}

/* ---- introspection ---- */

HP_EXTERN(int32_t) hp_stack_get_info(const struct hp_stack *s, struct hp_stack_info *info)
{
    const size_t min_info = HP_STACK_INFO_SIZE_V1_0;
    if (!info)
        return hp_fail(HP_EINVAL, "hp_stack_get_info: info is NULL");
    if (info->size < min_info)
        return hp_fail(HP_EINVAL, "hp_stack_get_info: info->size is %u, expected at least %zu",
                       info->size, min_info);
    struct hp_stack r;
    int32_t rc = hp_stack_table_get(s, "hp_stack_get_info", &r);
    if (rc != HP_OK)
        return rc;
    int64_t resident = hp_measure_resident_bytes(r.m.m.addr, r.m.usable);
    int64_t huge = hp_measure_huge_bytes(r.m.m.addr, r.m.usable);
    uint32_t size = info->size;
    struct hp_stack_info full = {
        .size = size,
        .mode = r.m.m.page_size > hp_os_page_size() ? HP_STACK_MODE_HUGE : HP_STACK_MODE_LEAN,
        .kind = r.m.kind,
        .from_cache = r.from_cache,
        .flags = r.flags,
        .base_addr = (uintptr_t)r.m.m.addr,
        .usable_size = r.m.usable,
        .guard_addr = (uintptr_t)r.m.m.addr - r.m.guard,
        .guard_size = r.m.guard,
        .page_size = r.m.m.page_size,
        .resident_bytes = resident >= 0 ? (uint64_t)resident : UINT64_MAX,
        .huge_bytes = huge >= 0 ? (uint64_t)huge : UINT64_MAX,
    };
    snprintf(full.source, sizeof(full.source), "%s", r.m.backend->name);
    memcpy(info, &full, size < sizeof(full) ? size : sizeof(full));
    return HP_OK;
}

/* ---- threads ---- */

HP_EXTERN(int32_t) hp_stack_thread_create(struct hp_stack **out, size_t size,
                                          const struct hp_stack_opts *opts,
                                          void *(*start)(void *arg), void *arg)
{
    if (!out)
        return hp_fail(HP_EINVAL, "hp_stack_thread_create: out is NULL");
    *out = NULL;
    if (!start)
        return hp_fail(HP_EINVAL, "hp_stack_thread_create: start is NULL");
    struct hp_stack *s = hp_stack_create_ex(size, opts);
    if (!s)
        return hp_last_error();
    struct hp_stack r;
    hp_stack_table_get(s, "hp_stack_thread_create", &r);
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (!err)
        err = pthread_attr_setstack(&attr, r.m.m.addr, (size_t)r.m.usable);
    pthread_t t;
    if (!err) {
        err = pthread_create(&t, &attr, start, arg);
        pthread_attr_destroy(&attr);
    }
    if (err) {
        hp_stack_destroy(s);
        if (err == EINVAL)
            return hp_fail(HP_EINVAL, "hp_stack_thread_create: a %llu-byte stack is too small "
                           "for a thread (its TLS and PTHREAD_STACK_MIN)",
                           (unsigned long long)r.m.usable);
        return hp_fail(err == EAGAIN ? HP_ENOMEM : HP_EOS,
                       "hp_stack_thread_create: pthread_create failed: %s", strerror(err));
    }
    hp_stack_table_set_thread(s, t);
    *out = s;
    return HP_OK;
}

HP_EXTERN(int32_t) hp_stack_thread_join(struct hp_stack *s, void **retval)
{
    pthread_t t;
    int32_t rc = hp_stack_table_begin_join(s, "hp_stack_thread_join", &t);
    if (rc != HP_OK)
        return rc;
    if (pthread_equal(t, pthread_self())) {
        hp_stack_table_end_join(s);
        return hp_fail(HP_EINVAL, "hp_stack_thread_join(%p): a thread cannot join itself",
                       (void *)s);
    }
    int err = pthread_join(t, retval);
    if (err) {
        hp_stack_table_end_join(s);
        return hp_fail(HP_EINVAL, "hp_stack_thread_join(%p): pthread_join failed: %s",
                       (void *)s, strerror(err));
    }
    struct hp_stack copy;
    hp_stack_table_retire(s, HP_STACK_JOINING, "hp_stack_thread_join", &copy);
    hp_stack_cache_put(&copy.m, copy.flags);
    return HP_OK;
}
