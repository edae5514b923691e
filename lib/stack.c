/* hp_stack_*: validation, the mode plan, the two mapping layouts, threads. */
#include "abi_sizes.h"
#include "hp/stack.h"
#include "hp/errors.h"
#include "error.h"
#include "loader.h"
#include "measure.h"
#include "os.h"
#include "stack.h"
#include "cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_STACK
#define MAP_STACK 0x20000
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE_FLAGS (HP_STACK_HUGE | HP_STACK_HUGETLB | HP_STACK_THP)
#define KNOWN_FLAGS (HUGE_FLAGS | HP_STACK_ALLOW_LEAN | HP_STACK_POPULATE | HP_STACK_NOCACHE)
#define PM_PRESENT (UINT64_C(1) << 63)

static uint64_t round_up(uint64_t len, uint64_t align)
{
    return (len + align - 1) / align * align;
}

static const char *kind_name(uint32_t kind)
{
    return kind == HP_KIND_HUGETLB ? "hugetlb" : kind == HP_KIND_THP ? "THP" : "lean";
}

/* ---- the plan ---- */

static int listed(const char *name, const char (*list)[HP_OPT_NAME_LEN], unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(name, list[i]))
            return (int)i;
    return -1;
}

static void note(char *why, size_t cap, const char *fmt, const char *name, const char *what)
{
    size_t used = strlen(why);
    if (used + 3 >= cap)
        return;
    snprintf(why + used, cap - used, "%s", used ? "; " : "");
    used = strlen(why);
    snprintf(why + used, cap - used, fmt, name, what);
}

/* Can backend b serve req with whole huge pages? NULL if yes, else why not. */
static const char *unfit(const struct hp_stack_request *req, const struct hp_select_backend *b,
                         char *buf, size_t cap)
{
    if (req->n_only && listed(b->name, req->only, req->n_only) < 0)
        return "not listed in HP_BACKENDS";
    if (listed(b->name, req->never, req->n_never) >= 0)
        return "excluded by HP_BACKENDS";
    if (!b->caps || !b->caps->available) {
        snprintf(buf, cap, "unavailable (%.120s)", b->caps ? b->caps->reason : "not probed");
        return buf;
    }
    unsigned n = b->caps->n_page_sizes < HP_MAX_PAGE_SIZES ? b->caps->n_page_sizes
                                                             : HP_MAX_PAGE_SIZES;
    for (unsigned i = 0; i < n; i++) {
        if (b->caps->page_sizes[i] != req->huge_page_size)
            continue;
        uint64_t need = req->usable / req->huge_page_size, room = b->caps->pool_free[i];
        if (room != UINT64_MAX && room < need) {
            snprintf(buf, cap, "pool can reserve %llu pages of %llu KiB, the stack needs %llu",
                     (unsigned long long)room, (unsigned long long)(req->huge_page_size >> 10),
                     (unsigned long long)need);
            return buf;
        }
        return NULL;
    }
    snprintf(buf, cap, "no %llu KiB pages", (unsigned long long)(req->huge_page_size >> 10));
    return buf;
}

unsigned hp_stack_plan(const struct hp_stack_request *req, const struct hp_select_backend *bk,
                       unsigned n_backends, struct hp_stack_plan *out, unsigned max, char *why,
                       size_t why_cap)
{
    static const uint32_t tiers[] = {HP_KIND_HUGETLB, HP_KIND_THP};
    unsigned n = 0;
    if (why_cap)
        why[0] = '\0';
    if (!(req->flags & HUGE_FLAGS)) {
        if (max)
            out[n++] = (struct hp_stack_plan){HP_KIND_BASE, -1};
        return n;
    }
    int seen = 0;
    for (unsigned t = 0; t < 2; t++) {
        if ((req->flags & HP_STACK_HUGETLB && tiers[t] != HP_KIND_HUGETLB) ||
            (req->flags & HP_STACK_THP && tiers[t] != HP_KIND_THP))
            continue;
        for (unsigned i = 0; i < n_backends && n < max; i++) {
            const struct hp_select_backend *b = &bk[i];
            if (!b->name || b->kind != tiers[t])
                continue;
            seen = 1;
            char buf[200];
            const char *no = unfit(req, b, buf, sizeof(buf));
            if (no)
                note(why, why_cap, "%s: %s", b->name, no);
            else
                out[n++] = (struct hp_stack_plan){tiers[t], (int)i};
        }
    }
    if (!seen)
        note(why, why_cap, "%s%s", "no hugetlb or THP backend is loaded",
             " (check HP_BACKEND_PATH and `hpctl status`)");
    /* HP_BACKENDS replaces the policy order with its own, as for blocks. */
    for (unsigned i = 1; req->n_only && i < n; i++) {
        struct hp_stack_plan x = out[i];
        int pos = listed(bk[x.backend].name, req->only, req->n_only);
        unsigned j = i;
        while (j > 0 && listed(bk[out[j - 1].backend].name, req->only, req->n_only) > pos) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = x;
    }
    if (req->flags & HP_STACK_ALLOW_LEAN && n < max)
        out[n++] = (struct hp_stack_plan){HP_KIND_BASE, -1};
    return n;
}

/* ---- mapping ----
 *
 * Stacks are mapped here, through the OS layer, not by a backend's map op:
 * a backend may put a block anywhere, while a stack needs its guard at a
 * fixed place right below an aligned range, which no op can express. The
 * backends' probes still decide whether, and from where, huge mode is served.
 */

static int32_t os_fail(int err, const char *what, uint64_t len)
{
    return hp_fail(err == -ENOMEM ? HP_ENOMEM : HP_EOS, "%s of %llu bytes failed: %s%s", what,
                   (unsigned long long)len, strerror(-err),
                   err == -ENOMEM ? " (out of memory, or vm.max_map_count reached)" : "");
}

void hp_stack_unmap(const struct hp_stack_map *m)
{
    int rc = hp_os_unmap(m->map_addr, m->map_len);
    if (rc < 0)
        hp_log("stack %p: munmap of %llu bytes failed: %s", m->base,
               (unsigned long long)m->map_len, strerror(-rc));
}

/* The page size the huge mode uses: the PMD size, as THP reports it. */
static uint64_t huge_page_size(void)
{
    static _Atomic uint64_t cached;
    uint64_t v = cached;
    if (v)
        return v;
    if (hp_os_read_u64("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", &v) != 0 ||
        v <= hp_os_page_size() || (v & (v - 1)))
        return UINT64_C(2) << 20;   /* not cached: a failed read may be injected */
    cached = v;
    return v;
}

/* Lean: one mapping, guard at the bottom. Mapped PROT_NONE first, as glibc
 * does, so the guard is never charged to the commit limit. MAP_STACK alone
 * means VM_NOHUGEPAGE only since Linux 6.7, hence the madvise; it also
 * keeps every mTHP size away (thp_vma_allowable_orders checks the flag). */
static int32_t map_lean(uint64_t usable, uint64_t guard, struct hp_stack_map *m)
{
    uint64_t len = guard + usable;
    void *p;
    int rc = hp_os_map(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0, &p);
    if (rc < 0)
        return os_fail(rc, "lean stack: mmap", len);
    rc = hp_os_advise(p, len, MADV_NOHUGEPAGE);
    if (rc == 0)
        rc = hp_os_protect((char *)p + guard, usable, PROT_READ | PROT_WRITE);
    if (rc < 0) {
        hp_os_discard(p, len);
        return os_fail(rc, "lean stack: madvise/mprotect", len);
    }
    *m = (struct hp_stack_map){.map_addr = p, .map_len = len, .base = (char *)p + guard,
                               .usable = usable, .guard = guard,
                               .page_size = hp_os_page_size(), .kind = HP_KIND_BASE};
    snprintf(m->source, sizeof(m->source), "lean");
    return HP_OK;
}

/* Huge: reserve guard + usable + one huge page of slack as PROT_NONE, put
 * the usable range on the first huge page boundary at least a guard above
 * the start, and give the slack back. The guard stays a PROT_NONE part of the
 * reservation, below the boundary: no huge page ever contains it, so no
 * mprotect ever splits one (split_huge_pmd() on a VMA split, mm/huge_memory.c). */
static int32_t map_huge(uint32_t kind, uint64_t usable, uint64_t guard, uint64_t huge,
                        struct hp_stack_map *m)
{
    uint64_t span = guard + usable + huge - hp_os_page_size();
    void *p;
    /* PROT_NONE is not charged to the commit limit; the THP range is charged
     * when it becomes writable, as any stack would be. */
    int rc = hp_os_map(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p);
    if (rc < 0)
        return os_fail(rc, "huge stack: reserving address space", span);
    uintptr_t start = (uintptr_t)p, base = (uintptr_t)round_up(start + guard, huge);
    uintptr_t lo = base - guard, hi = base + usable, end = start + span;
    void *got;
    if (kind == HP_KIND_HUGETLB) {
        /* Without MAP_NORESERVE the pool reserves every page now or fails. */
        int shift = __builtin_ctzll(huge);
        rc = hp_os_map((void *)base, usable, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB |
                           (shift << MAP_HUGE_SHIFT), -1, 0, &got);
    } else {
        rc = hp_os_advise((void *)base, usable, MADV_HUGEPAGE);
        if (rc == 0)
            rc = hp_os_protect((void *)base, usable, PROT_READ | PROT_WRITE);
    }
    if (rc < 0) {
        /* A failed MAP_FIXED may already have unmapped part of the span. */
        hp_os_discard(p, span);
        return hp_fail(rc == -ENOMEM ? HP_ENOMEM : HP_EOS, "%s stack of %llu bytes: %s failed: %s", kind_name(kind),
                       (unsigned long long)usable,
                       kind == HP_KIND_HUGETLB ? "mmap(MAP_HUGETLB)" : "madvise/mprotect",
                       strerror(-rc));
    }
    /* A trim splits the reservation and can fail at vm.max_map_count; then
     * the untrimmed slack simply stays part of the stack's mapping (it is
     * PROT_NONE) and goes with it at destroy. */
    if (lo > start && hp_os_unmap(p, lo - start) < 0)
        lo = start;
    if (end > hi && hp_os_unmap((void *)hi, end - hi) < 0)
        hi = end;
    *m = (struct hp_stack_map){.map_addr = (void *)lo, .map_len = hi - lo,
                               .base = (void *)base, .usable = usable, .guard = guard,
                               .page_size = huge, .kind = kind};
    return HP_OK;
}

/* Prefault [base, base + usable); a THP stack that did not come out huge
 * gets one synchronous collapse attempt. */
static int32_t populate(const struct hp_stack_map *m)
{
    int rc = hp_os_advise(m->base, m->usable, MADV_POPULATE_WRITE);
    if (rc == -EINVAL) {    /* before Linux 5.14 */
        volatile char *c = m->base;
        for (uint64_t off = 0; off < m->usable; off += hp_os_page_size())
            c[off] = c[off];
        rc = 0;
    }
    if (rc < 0)
        return hp_fail(HP_ENOMEM, "%s stack: prefaulting %llu bytes failed: %s",
                       kind_name(m->kind), (unsigned long long)m->usable, strerror(-rc));
    if (m->kind == HP_KIND_THP && hp_measure_huge_bytes(m->base, m->usable) < (int64_t)m->usable)
        hp_os_advise(m->base, m->usable, MADV_COLLAPSE);
    return HP_OK;
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

/* Map a new stack by the first plan that works. */
static int32_t map_fresh(struct hp_core *c, const struct hp_stack_request *req,
                         uint64_t lean_usable, uint64_t guard, struct hp_stack_map *m)
{
    struct hp_backend_caps caps[HP_MAX_BACKENDS];
    struct hp_select_backend view[HP_MAX_BACKENDS];
    for (unsigned i = 0; i < c->n && (req->flags & HUGE_FLAGS); i++) {
        struct hp_backend *b = &c->backends[i];
        view[i] = (struct hp_select_backend){b->ops ? b->name : NULL, b->kind, NULL};
        if (b->ops && (b->kind == HP_KIND_HUGETLB || b->kind == HP_KIND_THP)) {
            hp_backend_caps_now(b, req->usable, req->huge_page_size, &caps[i]);
            view[i].caps = &caps[i];
        }
    }
    struct hp_stack_plan plan[HP_STACK_PLAN_MAX];
    char why[400];
    unsigned n = hp_stack_plan(req, view, (req->flags & HUGE_FLAGS) ? c->n : 0, plan,
                               HP_STACK_PLAN_MAX, why, sizeof(why));
    if (n == 0)
        return hp_fail(HP_ENOHUGE, "no huge pages for a %llu-byte stack: %s",
                       (unsigned long long)req->usable, why);
    char tried[400] = "";
    int32_t rc = HP_ENOMEM;
    uint64_t gen = hp_fork_gen();  /* before the map: see lib/cache.h */
    for (unsigned i = 0; i < n; i++) {
        if (plan[i].kind == HP_KIND_BASE)
            rc = map_lean(lean_usable, guard, m);
        else
            rc = map_huge(plan[i].kind, req->usable, guard, req->huge_page_size, m);
        if (rc == HP_OK && plan[i].kind != HP_KIND_BASE)
            snprintf(m->source, sizeof(m->source), "%s", c->backends[plan[i].backend].name);
        /* hugetlb pages are reserved for the stack anyway: populating them now
         * turns a hugetlb cgroup limit into an error here, not a SIGBUS later. */
        if (rc == HP_OK && (req->flags & HP_STACK_POPULATE || plan[i].kind == HP_KIND_HUGETLB)) {
            rc = populate(m);
            if (rc != HP_OK)
                hp_stack_unmap(m);
        }
        if (rc == HP_OK) {
            m->gen = gen;
            return HP_OK;
        }
        if (plan[i].backend >= 0)  /* its figures were wrong: re-read them next time */
            hp_backend_mark_stale(&c->backends[plan[i].backend]);
        if (n == 1) {
            snprintf(tried, sizeof(tried), "%s", hp_last_error_detail());
            continue;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof(tried) - used, "%s%s: %s", used ? "; " : "",
                 kind_name(plan[i].kind), hp_last_error_detail());
    }
    if (req->flags & HUGE_FLAGS && !(req->flags & HP_STACK_ALLOW_LEAN))
        return hp_fail(HP_ENOHUGE, "no huge pages for a %llu-byte stack: %s%s%s",
                       (unsigned long long)req->usable, tried, why[0] ? "; " : "", why);
    return hp_fail(rc, "%s", tried);
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
        .flags = flags, .base_page_size = ps, .huge_page_size = huge ? huge_page_size() : ps,
        .n_only = o->n_only, .only = o->only, .n_never = o->n_never, .never = o->never,
    };
    req.usable = round_up(size, req.huge_page_size);
    uint64_t lean_usable = round_up(size, ps);
    struct hp_stack *s;
    if (!(flags & HP_STACK_NOCACHE)) {
        uint32_t kinds = !huge ? HP_STACK_KIND_BIT(HP_KIND_BASE)
                         : (flags & HP_STACK_HUGETLB) ? HP_STACK_KIND_BIT(HP_KIND_HUGETLB)
                         : (flags & HP_STACK_THP) ? HP_STACK_KIND_BIT(HP_KIND_THP)
                         : HP_STACK_KIND_BIT(HP_KIND_HUGETLB) | HP_STACK_KIND_BIT(HP_KIND_THP);
        if (hp_stack_cache_take(kinds, req.usable, guard, flags, &s) == 1) {
            if (!(flags & HP_STACK_POPULATE))
                return s;
            struct hp_stack copy;
            if (hp_stack_table_get(s, "hp_stack_create", &copy) == HP_OK &&
                populate(&copy.m) == HP_OK)
                return s;
            int32_t err = hp_last_error();
            char detail[512];
            snprintf(detail, sizeof(detail), "%s", hp_last_error_detail());
            hp_stack_table_retire(s, HP_STACK_LIVE, "hp_stack_create", &copy);
            hp_stack_unmap(&copy.m);
            hp_fail(err, "%s", detail);
            return NULL;
        }
    }
    struct hp_stack_map m;
    if (map_fresh(c, &req, lean_usable, guard, &m) != HP_OK)
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
    hp_stack_cache_put(&copy.m, copy.flags);
    return HP_OK;
}

HP_EXTERN(void *) hp_stack_base(const struct hp_stack *s)
{
    struct hp_stack copy;
    return hp_stack_table_get(s, "hp_stack_base", &copy) == HP_OK ? copy.m.base : NULL;
}

HP_EXTERN(size_t) hp_stack_size(const struct hp_stack *s)
{
    struct hp_stack copy;
    return hp_stack_table_get(s, "hp_stack_size", &copy) == HP_OK ? (size_t)copy.m.usable : 0;
}

/* ---- introspection ---- */

/* Bytes of [addr, addr + len) present in memory, from /proc/self/pagemap
 * (present bits are visible without privileges), or -errno. */
static int64_t resident_bytes(const void *addr, uint64_t len)
{
    uint64_t ps = hp_os_page_size(), vpn = (uintptr_t)addr / ps, n = len / ps, present = 0;
    int fd = hp_os_open("/proc/self/pagemap");
    if (fd < 0)
        return fd;
    uint64_t e[512];
    for (uint64_t done = 0; done < n;) {
        uint64_t k = n - done < 512 ? n - done : 512;
        int64_t got = hp_os_pread(fd, e, k * 8, (vpn + done) * 8);
        if (got != (int64_t)(k * 8)) {
            hp_os_close(fd);
            return got < 0 ? got : -EIO;
        }
        for (uint64_t i = 0; i < k; i++)
            present += (e[i] & PM_PRESENT) != 0;
        done += k;
    }
    hp_os_close(fd);
    return (int64_t)(present * ps);
}

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
    int64_t resident = resident_bytes(r.m.base, r.m.usable);
    int64_t huge = hp_measure_huge_bytes(r.m.base, r.m.usable);
    uint32_t size = info->size;
    struct hp_stack_info full = {
        .size = size,
        .mode = r.m.kind == HP_KIND_BASE ? HP_STACK_MODE_LEAN : HP_STACK_MODE_HUGE,
        .kind = r.m.kind,
        .from_cache = r.from_cache,
        .flags = r.flags,
        .base_addr = (uintptr_t)r.m.base,
        .usable_size = r.m.usable,
        .guard_addr = (uintptr_t)r.m.map_addr,
        .guard_size = r.m.guard,
        .page_size = r.m.page_size,
        .resident_bytes = resident >= 0 ? (uint64_t)resident : UINT64_MAX,
        .huge_bytes = huge >= 0 ? (uint64_t)huge : UINT64_MAX,
    };
    snprintf(full.source, sizeof(full.source), "%s", r.m.source);
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
        err = pthread_attr_setstack(&attr, r.m.base, (size_t)r.m.usable);
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
