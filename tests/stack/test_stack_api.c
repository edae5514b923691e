/* hp_stack_*: the public contract, bad inputs, fibers, threads, the cache
 * and mapping leaks, through libhp.so. No knob is changed here. */
#include <hp.h>

#include "st_util.h"
#include "support.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmocka.h>

#define PAGE 4096u
#define MIB (UINT64_C(1) << 20)

static void assert_failed_with(int32_t code, const char *needle)
{
    assert_int_equal(hp_last_error(), code);
    assert_true(strlen(hp_last_error_detail()) > 0);
    if (needle && !strstr(hp_last_error_detail(), needle)) {
        print_message("# detail \"%s\" lacks \"%s\"\n", hp_last_error_detail(), needle);
        fail();
    }
}

static void cache_reset(void)
{
    struct hp_stack_cache_config c = HP_STACK_CACHE_CONFIG_INIT;
    assert_int_equal(hp_stack_cache_configure(&c), HP_OK);
    assert_int_equal(hp_stack_cache_trim(), HP_OK);
}

static struct hp_stack_cache_stats stats_now(void)
{
    struct hp_stack_cache_stats st = HP_STACK_CACHE_STATS_INIT;
    assert_int_equal(hp_stack_cache_get_stats(&st), HP_OK);
    return st;
}

struct bad_create {
    const char *what;
    size_t size;
    uint64_t flags;
    int32_t code;
    const char *needle;
};

static void bad_creates(void **state)
{
    (void)state;
    const struct bad_create cases[] = {
        {"size 0", 0, 0, HP_ESIZE, "size 0"},
        {"SIZE_MAX", SIZE_MAX, 0, HP_ESIZE, "exceeds"},
        {"SIZE_MAX huge", SIZE_MAX, HP_STACK_HUGE, HP_ESIZE, "exceeds"},
        {"just above the limit", (size_t)HP_STACK_MAX_SIZE + 1, 0, HP_ESIZE, "exceeds"},
        {"unknown flag bit", PAGE, UINT64_C(1) << 40, HP_EFLAGS, "0x10000000000"},
        {"unknown low flag bit", PAGE, UINT64_C(0x40), HP_EFLAGS, "0x40"},
        {"HUGETLB and THP", PAGE, HP_STACK_HUGETLB | HP_STACK_THP, HP_EFLAGS, "exclude"},
        {"ALLOW_LEAN without huge", PAGE, HP_STACK_ALLOW_LEAN, HP_EFLAGS, "ALLOW_LEAN"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        print_message("# bad input: %s\n", cases[i].what);
        assert_null(hp_stack_create(cases[i].size, cases[i].flags));
        assert_failed_with(cases[i].code, cases[i].needle);
        struct hp_stack *s = (struct hp_stack *)&cases[i];
        assert_int_equal(hp_stack_thread_create(&s, cases[i].size, &(struct hp_stack_opts){
                             sizeof(struct hp_stack_opts), 0, cases[i].flags, 0, 0, 0, NULL},
                                                (void *(*)(void *))abort, NULL),
                         cases[i].code);
        assert_null(s);
    }
}

static void bad_options(void **state)
{
    (void)state;
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.size = 8;
    assert_null(hp_stack_create_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL, "opts->size");
    o = (struct hp_stack_opts)HP_STACK_OPTS_INIT;
    o.reserved = 7;
    assert_null(hp_stack_create_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL, "reserved");
    o = (struct hp_stack_opts)HP_STACK_OPTS_INIT;
    o.guard_size = HP_STACK_MAX_GUARD + 1;
    assert_null(hp_stack_create_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL, "guard_size");
    o.guard_size = UINT64_MAX;
    assert_null(hp_stack_create_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL, "guard_size");
    /* NULL opts is the default. */
    struct hp_stack *s = hp_stack_create_ex(PAGE, NULL);
    assert_non_null(s);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
}

static void bad_handles(void **state)
{
    (void)state;
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    /* NULL */
    assert_int_equal(hp_stack_destroy(NULL), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "NULL");
    assert_null(hp_stack_base(NULL));
    assert_failed_with(HP_EINVAL, "NULL");
    assert_int_equal(hp_stack_size(NULL), 0);
    assert_failed_with(HP_EINVAL, "NULL");
    assert_int_equal(hp_stack_get_info(NULL, &info), HP_EINVAL);
    assert_int_equal(hp_stack_thread_join(NULL, NULL), HP_EINVAL);
    /* Foreign: a local, a heap block, the stack's own memory, inside a handle. */
    long local = 0;
    void *heap = malloc(256);
    struct hp_stack *s = hp_stack_create(64 * 1024, 0);
    assert_non_null(s);
    void *foreign[] = {&local, heap, hp_stack_base(s), (char *)s + 1, (char *)s - 8,
                       (void *)(uintptr_t)0x1000};
    for (size_t i = 0; i < sizeof(foreign) / sizeof(*foreign); i++) {
        struct hp_stack *f = foreign[i];
        assert_int_equal(hp_stack_destroy(f), HP_EFOREIGN);
        assert_failed_with(HP_EFOREIGN, "not a stack handle");
        assert_null(hp_stack_base(f));
        assert_int_equal(hp_stack_size(f), 0);
        assert_int_equal(hp_stack_get_info(f, &info), HP_EFOREIGN);
        assert_int_equal(hp_stack_thread_join(f, NULL), HP_EFOREIGN);
    }
    assert_int_equal(local, 0);
    free(heap);
    /* Double destroy, then every use of the dead handle. */
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    assert_int_equal(hp_stack_destroy(s), HP_EDOUBLEFREE);
    assert_failed_with(HP_EDOUBLEFREE, "already destroyed");
    assert_null(hp_stack_base(s));
    assert_failed_with(HP_EDOUBLEFREE, NULL);
    assert_int_equal(hp_stack_size(s), 0);
    assert_int_equal(hp_stack_get_info(s, &info), HP_EDOUBLEFREE);
    assert_int_equal(hp_stack_thread_join(s, NULL), HP_EDOUBLEFREE);
    /* Joining a stack that hosts no thread. */
    s = hp_stack_create(64 * 1024, 0);
    assert_int_equal(hp_stack_thread_join(s, NULL), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "no thread");
    assert_int_equal(hp_stack_destroy(s), HP_OK);
}

static void bad_out_params(void **state)
{
    (void)state;
    struct hp_stack *s = hp_stack_create(PAGE, 0);
    assert_non_null(s);
    assert_int_equal(hp_stack_get_info(s, NULL), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "info is NULL");
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    info.size = 16;
    assert_int_equal(hp_stack_get_info(s, &info), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "info->size");
    assert_int_equal(hp_stack_thread_create(NULL, PAGE, NULL, (void *(*)(void *))abort, NULL),
                     HP_EINVAL);
    struct hp_stack *t = s;
    assert_int_equal(hp_stack_thread_create(&t, 64 * 1024, NULL, NULL, NULL), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "start is NULL");
    assert_null(t);
    /* Cache API */
    assert_int_equal(hp_stack_cache_configure(NULL), HP_EINVAL);
    struct hp_stack_cache_config c = HP_STACK_CACHE_CONFIG_INIT;
    c.size = 4;
    assert_int_equal(hp_stack_cache_configure(&c), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "cfg->size");
    c = (struct hp_stack_cache_config)HP_STACK_CACHE_CONFIG_INIT;
    c.reserved = 9;
    assert_int_equal(hp_stack_cache_configure(&c), HP_EINVAL);
    assert_failed_with(HP_EINVAL, "reserved");
    c = (struct hp_stack_cache_config)HP_STACK_CACHE_CONFIG_INIT;
    c.max_stacks = HP_STACK_CACHE_MAX_STACKS + 1;
    assert_int_equal(hp_stack_cache_configure(&c), HP_ERANGE);
    assert_int_equal(hp_stack_cache_get_stats(NULL), HP_EINVAL);
    struct hp_stack_cache_stats st = HP_STACK_CACHE_STATS_INIT;
    st.size = 8;
    assert_int_equal(hp_stack_cache_get_stats(&st), HP_EINVAL);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
}

/* Versioned structs: a short (older) caller gets its prefix only. */
static void info_contract(void **state)
{
    (void)state;
    cache_reset();
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.guard_size = 10000;  /* rounds up to 3 pages */
    struct hp_stack *s = hp_stack_create_ex(100000, &o);
    assert_non_null(s);
    char *base = hp_stack_base(s);
    size_t size = hp_stack_size(s);
    assert_int_equal((uintptr_t)base % PAGE, 0);
    assert_int_equal(size, 102400);
    memset(base, 0xa5, size);  /* all of it is writable */
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
    assert_int_equal(info.mode, HP_STACK_MODE_LEAN);
    assert_int_equal(info.kind, HP_KIND_BASE);
    assert_string_equal(info.source, "fallback");  /* the base-page backend served it */
    assert_int_equal(info.base_addr, (uintptr_t)base);
    assert_int_equal(info.usable_size, size);
    assert_int_equal(info.guard_size, 3 * PAGE);
    assert_int_equal(info.guard_addr, (uintptr_t)base - 3 * PAGE);
    assert_int_equal(info.page_size, PAGE);
    assert_int_equal(info.resident_bytes, size);
    assert_int_equal(info.huge_bytes, 0);
    assert_int_equal(info.from_cache, 0);
    struct st_vma g, u;
    assert_int_equal(st_vma_at(info.guard_addr, &g), 0);
    assert_string_equal(g.perms, "---p");
    assert_true(g.end == (uintptr_t)base);
    assert_int_equal(st_vma_at((uintptr_t)base, &u), 0);
    assert_string_equal(u.perms, "rw-p");
    assert_true(u.nohuge);
    /* A short struct: only its prefix is written. */
    unsigned char raw[sizeof(struct hp_stack_info) + 8];
    memset(raw, 0xee, sizeof(raw));
    struct hp_stack_info *shortinfo = (struct hp_stack_info *)raw;
    shortinfo->size = (uint32_t)(offsetof(struct hp_stack_info, huge_bytes) + 8);
    assert_int_equal(hp_stack_get_info(s, shortinfo), HP_OK);
    assert_int_equal(raw[sizeof(struct hp_stack_info)], 0xee);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    /* Default guard: one page. */
    s = hp_stack_create(1, 0);
    assert_int_equal(hp_stack_size(s), PAGE);
    assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
    assert_int_equal(info.guard_size, PAGE);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
}

/* ---- fibers ---- */

static ucontext_t main_ctx, fiber_ctx;
static volatile uintptr_t fiber_sp;
static volatile int fiber_rounds;

static void fiber_body(void)
{
    for (;;) {
        char local[256];
        memset(local, fiber_rounds, sizeof(local));
        fiber_sp = (uintptr_t)local;
        fiber_rounds++;
        swapcontext(&fiber_ctx, &main_ctx);
    }
}

static void fiber_on(struct hp_stack *s)
{
    assert_non_null(s);
    char *base = hp_stack_base(s);
    size_t size = hp_stack_size(s);
    assert_int_equal(getcontext(&fiber_ctx), 0);
    fiber_ctx.uc_stack.ss_sp = base;
    fiber_ctx.uc_stack.ss_size = size;
    fiber_ctx.uc_link = NULL;
    makecontext(&fiber_ctx, fiber_body, 0);
    fiber_rounds = 0;
    for (int i = 1; i <= 3; i++) {
        fiber_sp = 0;
        assert_int_equal(swapcontext(&main_ctx, &fiber_ctx), 0);
        /* Back on the main stack, and the fiber ran on the hp stack. */
        assert_int_equal(fiber_rounds, i);
        assert_true(fiber_sp >= (uintptr_t)base && fiber_sp < (uintptr_t)base + size);
        char here;
        assert_false((uintptr_t)&here >= (uintptr_t)base &&
                     (uintptr_t)&here < (uintptr_t)base + size);
    }
    assert_int_equal(hp_stack_destroy(s), HP_OK);
}

static void fiber_switch(void **state)
{
    (void)state;
    fiber_on(hp_stack_create(64 * 1024, 0));
    fiber_on(hp_stack_create(64 * 1024, HP_STACK_NOCACHE));
    if (st_huge_possible(HP_STACK_HUGE))
        fiber_on(hp_stack_create(64 * 1024, HP_STACK_HUGE));
    else
        print_message("# huge fiber skipped: no huge pages here\n");
}

/* ---- threads ---- */

struct thread_arg {
    uintptr_t sp;
    int n;
};

static void *thread_body(void *p)
{
    struct thread_arg *a = p;
    char local[4096];
    memset(local, 1, sizeof(local));
    a->sp = (uintptr_t)local;
    return (void *)(uintptr_t)(a->n * 2 + local[7]);
}

static void threads(void **state)
{
    (void)state;
    enum { N = 16 };
    struct hp_stack *st[N];
    struct thread_arg args[N];
    uintptr_t base[N];
    size_t size[N];
    for (int i = 0; i < N; i++) {
        args[i] = (struct thread_arg){0, i};
        struct hp_stack_opts o = HP_STACK_OPTS_INIT;
        o.flags = i % 2 ? HP_STACK_NOCACHE : 0;
        assert_int_equal(hp_stack_thread_create(&st[i], ST_THREAD_STACK, &o, thread_body, &args[i]),
                         HP_OK);
        base[i] = (uintptr_t)hp_stack_base(st[i]);
        size[i] = hp_stack_size(st[i]);
        /* A stack with a thread on it cannot be destroyed. */
        assert_int_equal(hp_stack_destroy(st[i]), HP_EINVAL);
        assert_failed_with(HP_EINVAL, "hp_stack_thread_join");
    }
    for (int i = 0; i < N; i++) {
        void *ret = NULL;
        assert_int_equal(hp_stack_thread_join(st[i], &ret), HP_OK);
        assert_int_equal((uintptr_t)ret, (uintptr_t)(i * 2 + 1));
        assert_true(args[i].sp >= base[i] && args[i].sp < base[i] + size[i]);
        assert_int_equal(hp_stack_thread_join(st[i], NULL), HP_EDOUBLEFREE);
    }
    /* Too small for the thread's TLS: refused, nothing left behind. */
    struct hp_stack *t = NULL;
    hp_stack_cache_trim();
    long before = maps_count();
    int rc = hp_stack_thread_create(&t, PAGE, NULL, thread_body, &args[0]);
    assert_int_equal(rc, HP_EINVAL);
    assert_failed_with(HP_EINVAL, "too small");
    assert_null(t);
    hp_stack_cache_trim();
    assert_true(st_maps_back_to(before));
}

struct self_join {
    _Atomic(struct hp_stack *) handle;
    _Atomic int32_t result;
    _Atomic int done;
};

static void *join_self(void *p)
{
    struct self_join *j = p;
    while (!atomic_load(&j->handle))
        usleep(1000);
    atomic_store(&j->result, hp_stack_thread_join(atomic_load(&j->handle), NULL));
    atomic_store(&j->done, 1);
    return NULL;
}

static void thread_join_self(void **state)
{
    (void)state;
    static struct self_join j;
    atomic_store(&j.handle, NULL);
    atomic_store(&j.done, 0);
    struct hp_stack *s;
    assert_int_equal(hp_stack_thread_create(&s, ST_THREAD_STACK, NULL, join_self, &j), HP_OK);
    atomic_store(&j.handle, s);
    while (!atomic_load(&j.done))
        usleep(1000);
    assert_int_equal(atomic_load(&j.result), HP_EINVAL);
    assert_int_equal(hp_stack_thread_join(s, NULL), HP_OK);
}

/* ---- the cache ---- */

static void set_keep(uint64_t keep_bytes)
{
    struct hp_stack_cache_config c = HP_STACK_CACHE_CONFIG_INIT;
    c.keep_bytes = keep_bytes;
    assert_int_equal(hp_stack_cache_configure(&c), HP_OK);
}

static void cache_policy(void **state)
{
    (void)state;
    cache_reset();
    struct hp_stack_cache_stats st0 = stats_now();
    assert_int_equal(st0.max_stacks, HP_STACK_CACHE_DEFAULT_STACKS);
    assert_int_equal(st0.max_bytes, HP_STACK_CACHE_DEFAULT_BYTES);
    assert_int_equal(st0.keep_bytes, HP_STACK_CACHE_DEFAULT_KEEP_BYTES);
    assert_int_equal(st0.cached_stacks, 0);
    assert_int_equal(st0.kept_bytes, 0);

    /* Within the keep budget: same range, contents and pages kept. */
    struct hp_stack *s = hp_stack_create(MIB, 0);
    char *base = hp_stack_base(s);
    memset(base, 0x5a, MIB);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    struct hp_stack_cache_stats st = stats_now();
    assert_int_equal(st.cached_stacks, 1);
    assert_int_equal(st.cached_bytes, MIB);
    assert_int_equal(st.kept_bytes, MIB);
    s = hp_stack_create(MIB, 0);
    assert_ptr_equal(hp_stack_base(s), base);
    assert_int_equal(base[MIB - 1], 0x5a);
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
    assert_int_equal(info.from_cache, 1);
    assert_int_equal(info.resident_bytes, MIB);
    assert_int_equal(stats_now().hits, st0.hits + 1);
    assert_int_equal(stats_now().kept_bytes, 0);
    assert_int_equal(hp_stack_destroy(s), HP_OK);

    /* keep_bytes = 0: released, zero-filled, not resident, same range. */
    set_keep(0);
    assert_int_equal(stats_now().cached_stacks, 0);  /* the kept one was trimmed */
    s = hp_stack_create(MIB, 0);
    base = hp_stack_base(s);
    memset(base, 0x5a, MIB);
    uint64_t released = stats_now().released;
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    assert_int_equal(stats_now().released, released + 1);
    assert_int_equal(stats_now().kept_bytes, 0);
    struct hp_stack *s2 = hp_stack_create(MIB, 0);
    assert_ptr_equal(hp_stack_base(s2), base);
    assert_int_equal(hp_stack_get_info(s2, &info), HP_OK);
    assert_int_equal(info.from_cache, 1);
    assert_int_equal(info.resident_bytes, 0);
    for (size_t i = 0; i < MIB; i += PAGE)
        assert_int_equal(base[i], 0);
    /* Another size or another guard is a miss. */
    struct hp_stack *other = hp_stack_create(2 * MIB, 0);
    assert_ptr_not_equal(hp_stack_base(other), base);
    assert_int_equal(hp_stack_destroy(other), HP_OK);
    assert_int_equal(hp_stack_destroy(s2), HP_OK);
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.guard_size = 2 * PAGE;
    s = hp_stack_create_ex(MIB, &o);
    assert_ptr_not_equal(hp_stack_base(s), base);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    /* NOCACHE neither takes nor gives. */
    st = stats_now();
    s = hp_stack_create(MIB, HP_STACK_NOCACHE);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    assert_int_equal(stats_now().cached_stacks, st.cached_stacks);
    assert_int_equal(stats_now().hits, st.hits);

    /* The budget: of three 1 MiB stacks with 2 MiB to keep, one is released;
     * a create takes a kept one first. */
    set_keep(2 * MIB);
    assert_int_equal(hp_stack_cache_trim(), HP_OK);
    struct hp_stack *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = hp_stack_create(MIB, HP_STACK_NOCACHE);
        memset(hp_stack_base(t[i]), 0x77, MIB);
    }
    for (int i = 0; i < 3; i++) {
        /* NOCACHE was a creation flag: these must not be cached either. */
        assert_int_equal(hp_stack_destroy(t[i]), HP_OK);
    }
    assert_int_equal(stats_now().cached_stacks, 0);
    for (int i = 0; i < 3; i++) {
        t[i] = hp_stack_create(MIB, 0);
        memset(hp_stack_base(t[i]), 0x77, MIB);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(hp_stack_destroy(t[i]), HP_OK);
    st = stats_now();
    assert_int_equal(st.cached_stacks, 3);
    assert_int_equal(st.kept_bytes, 2 * MIB);
    for (int i = 0; i < 3; i++) {
        t[i] = hp_stack_create(MIB, 0);
        assert_int_equal(hp_stack_get_info(t[i], &info), HP_OK);
        print_message("# reuse %d: resident %llu\n", i, (unsigned long long)info.resident_bytes);
        assert_int_equal(info.resident_bytes, i < 2 ? MIB : 0);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(hp_stack_destroy(t[i]), HP_OK);
    cache_reset();
    assert_int_equal(stats_now().cached_stacks, 0);
}

static void cache_bounds(void **state)
{
    (void)state;
    cache_reset();
    long maps0 = maps_count();
    struct hp_stack_cache_config c = HP_STACK_CACHE_CONFIG_INIT;
    c.max_stacks = 4;
    assert_int_equal(hp_stack_cache_configure(&c), HP_OK);
    struct hp_stack *s[10];
    for (int i = 0; i < 10; i++)
        assert_non_null(s[i] = hp_stack_create(64 * 1024, 0));
    uint64_t ev = stats_now().evictions;
    for (int i = 0; i < 10; i++)
        assert_int_equal(hp_stack_destroy(s[i]), HP_OK);
    struct hp_stack_cache_stats st = stats_now();
    assert_int_equal(st.cached_stacks, 4);
    assert_int_equal(st.evictions, ev + 6);
    /* The most recently destroyed are the ones kept, and reused first. */
    void *last = NULL;
    for (int i = 0; i < 4; i++) {
        s[i] = hp_stack_create(64 * 1024, 0);
        struct hp_stack_info info = HP_STACK_INFO_INIT;
        hp_stack_get_info(s[i], &info);
        assert_int_equal(info.from_cache, 1);
        last = hp_stack_base(s[i]);
    }
    (void)last;
    for (int i = 0; i < 4; i++)
        hp_stack_destroy(s[i]);
    /* max_bytes: 3 stacks of 64 KiB fit in 200 KiB, not 4. */
    c.max_bytes = 200 * 1024;
    assert_int_equal(hp_stack_cache_configure(&c), HP_OK);
    st = stats_now();
    assert_int_equal(st.cached_stacks, 3);
    assert_int_equal(st.cached_bytes, 3 * 64 * 1024);
    /* A stack larger than max_bytes is never cached. */
    struct hp_stack *big = hp_stack_create(MIB, 0);
    hp_stack_destroy(big);
    assert_int_equal(stats_now().cached_stacks, 3);
    /* Off. */
    c.max_stacks = 0;
    assert_int_equal(hp_stack_cache_configure(&c), HP_OK);
    assert_int_equal(stats_now().cached_stacks, 0);
    big = hp_stack_create(64 * 1024, 0);
    hp_stack_destroy(big);
    assert_int_equal(stats_now().cached_stacks, 0);
    cache_reset();
    assert_true(st_maps_back_to(maps0));
}

/* ---- leaks ---- */

static void no_mapping_leaks(void **state)
{
    (void)state;
    cache_reset();
    int huge = st_huge_possible(HP_STACK_HUGE);
    hp_stack_cache_trim();
    long maps0 = maps_count();
    uint64_t modes[] = {0, HP_STACK_NOCACHE, HP_STACK_POPULATE, HP_STACK_HUGE,
                        HP_STACK_HUGE | HP_STACK_NOCACHE, HP_STACK_HUGE | HP_STACK_ALLOW_LEAN};
    for (size_t m = 0; m < sizeof(modes) / sizeof(*modes); m++) {
        if ((modes[m] & HP_STACK_HUGE) && !huge)
            continue;
        for (int i = 0; i < 300; i++) {
            size_t size = (size_t)(i % 7 + 1) * 48 * 1024;
            struct hp_stack *a = hp_stack_create(size, modes[m]);
            struct hp_stack *b = hp_stack_create(size + PAGE, modes[m]);
            assert_non_null(a);
            assert_non_null(b);
            ((char *)hp_stack_base(a))[hp_stack_size(a) - 1] = 1;
            assert_int_equal(hp_stack_destroy(b), HP_OK);
            assert_int_equal(hp_stack_destroy(a), HP_OK);
        }
        hp_stack_cache_trim();
        long now = maps_count();
        print_message("# flags 0x%llx: %ld maps lines before, %ld after\n",
                      (unsigned long long)modes[m], maps0, now);
        assert_true(st_maps_back_to(maps0));
    }
    for (int i = 0; i < 64; i++) {
        struct hp_stack *t;
        struct thread_arg a = {0, i};
        assert_int_equal(hp_stack_thread_create(&t, ST_THREAD_STACK, NULL, thread_body, &a), HP_OK);
        assert_int_equal(hp_stack_thread_join(t, NULL), HP_OK);
    }
    hp_stack_cache_trim();
    assert_true(st_maps_back_to(maps0));
}

/* ---- many threads at once ---- */

static void *churn(void *p)
{
    unsigned seed = (unsigned)(uintptr_t)p;
    struct hp_stack *held[8] = {0};
    for (int i = 0; i < 2000; i++) {
        unsigned k = (unsigned)rand_r(&seed) % 8;
        if (held[k]) {
            if (hp_stack_destroy(held[k]) != HP_OK)
                return (void *)1;
            held[k] = NULL;
        } else {
            held[k] = hp_stack_create((size_t)(k + 1) * 16 * 1024, 0);
            if (!held[k])
                return (void *)2;
            *(volatile char *)hp_stack_base(held[k]) = 1;
        }
    }
    for (int k = 0; k < 8; k++)
        if (held[k] && hp_stack_destroy(held[k]) != HP_OK)
            return (void *)3;
    return NULL;
}

static void *noop(void *p)
{
    return p;
}

static void concurrent(void **state)
{
    (void)state;
    cache_reset();
    pthread_t t[8];
    /* glibc keeps the stacks of its exited threads (up to 40 MiB): small
     * enough stacks all stay in its cache, so the maps count is stable. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, ST_THREAD_STACK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], &attr, noop, NULL), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    long maps0 = maps_count();
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], &attr, churn, (void *)(uintptr_t)(i + 1)), 0);
    pthread_attr_destroy(&attr);
    for (int i = 0; i < 8; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    hp_stack_cache_trim();
    assert_true(st_maps_back_to(maps0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_creates),     cmocka_unit_test(bad_options),
        cmocka_unit_test(bad_handles),     cmocka_unit_test(bad_out_params),
        cmocka_unit_test(info_contract),   cmocka_unit_test(fiber_switch),
        cmocka_unit_test(threads),         cmocka_unit_test(thread_join_self),
        cmocka_unit_test(cache_policy),    cmocka_unit_test(cache_bounds),
        cmocka_unit_test(no_mapping_leaks), cmocka_unit_test(concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
