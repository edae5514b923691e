/* Stacks against the real kernel, under THP=always and THP=madvise (knobs
 * restored at exit, under the machine-wide knob lock): lean RSS against
 * glibc's own stacks, 128 huge stacks that stay whole huge pages, guards that
 * catch overflows, and hugetlb stacks that give every pool page back.
 * Needs root; skips with the reason otherwise. */
#include <hp.h>

#include "st_crowd.h"
#include "st_util.h"
#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmocka.h>

#define MIB (UINT64_C(1) << 20)
#define NTHREADS ST_CROWD
#define THP_DIR "/sys/kernel/mm/transparent_hugepage"

static const char *const modes[] = {"always", "madvise"};

static int set_thp(const char *mode)
{
    print_message("# THP enabled=%s\n", mode);
    /* The PMD size follows the top-level switch; no mTHP size interferes. */
    if (knob_set(THP_DIR "/hugepages-2048kB/enabled", "inherit") != 0 &&
        access(THP_DIR "/hugepages-2048kB/enabled", F_OK) == 0)
        return -1;
    int rc = knob_set(THP_DIR "/enabled", mode);
    hp_reprobe();  /* libhp reads THP switches at load otherwise */
    return rc;
}

static void need_root(void)
{
    if (!is_root()) {
        print_message("# skipped: needs root to set THP and hugetlb knobs\n");
        skip();
    }
}

/* Results from forked children. */
static volatile long *shared;

/* ---- 128 idle threads ---- */

static const char *const kind_names[] = {"glibc default", "user 2 MiB aligned, guard inside",
                                         "hp lean", "hp huge (THP)", "hp huge (hugetlb)"};

/* The warm-up thread: touches as much stack as a crowd thread does. */
static void *warm_up(void *arg)
{
    volatile char buf[16384];
    for (size_t i = 0; i < sizeof(buf); i += 512)
        buf[i] = 1;
    return arg;
}

/* In a fresh child: RSS growth (KiB) for 128 idle threads of one kind. */
static int rss_child(void *arg)
{
    enum st_kind kind = (enum st_kind)(uintptr_t)arg;
    static struct st_crowd c;
    /* Warm up libhp and glibc alike: one thread of the same kind first. */
    signal(SIGFPE, SIG_DFL);  /* the parent's knob restorer must not run here */
    signal(SIGSEGV, SIG_DFL);
    struct hp_stack *w;
    if (hp_stack_thread_create(&w, 8 * MIB, NULL, warm_up, NULL) == HP_OK)
        hp_stack_thread_join(w, NULL);
    hp_stack_cache_trim();
    long before = st_rss_kb();
    if (st_crowd_start(&c, kind, 8 * MIB, 16384) != 0)
        return 2;
    shared[0] = st_rss_kb() - before;
    shared[1] = 0;
    for (int i = 0; kind == ST_LEAN && i < NTHREADS; i++) {
        struct st_vma v;
        if (st_vma_at((uintptr_t)hp_stack_base(c.s[i]), &v) || !v.nohuge)
            shared[1]++;  /* a lean stack without VmFlags nh */
    }
    st_crowd_stop(&c);
    return 0;
}

static long median3(long a, long b, long c)
{
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

static void lean_rss_like_glibc(void **state)
{
    (void)state;
    need_root();
    for (size_t m = 0; m < 2; m++) {
        assert_int_equal(set_thp(modes[m]), 0);
        enum st_kind kinds[] = {ST_GLIBC, ST_LEAN, ST_TRAP};
        long kb[3][3];
        for (int rep = 0; rep < 3; rep++) {
            for (int k = 0; k < 3; k++) {  /* interleaved */
                int st = st_run_child(rss_child, (void *)(uintptr_t)kinds[k]);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    print_message("# %s child: status 0x%x\n", kind_names[kinds[k]], st);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
                kb[k][rep] = shared[0];
                if (kinds[k] == ST_LEAN)
                    assert_int_equal(shared[1], 0);
            }
        }
        long med[3];
        for (int k = 0; k < 3; k++) {
            med[k] = median3(kb[k][0], kb[k][1], kb[k][2]);
            print_message("# THP=%s %-34s RSS +%ld KiB (runs %ld %ld %ld)\n", modes[m],
                          kind_names[kinds[k]], med[k], kb[k][0], kb[k][1], kb[k][2]);
        }
        /* Within a few MB of glibc's own stacks. */
        assert_true(med[1] <= med[0] + 4096);
        /* The control: the trap really bloats when THP is always on. */
        if (m == 0)
            assert_true(med[2] >= 128 * 1024);
    }
}

/* Lean stays lean even with an mTHP size forced on: kpageflags-exact. */
static void lean_never_huge(void **state)
{
    (void)state;
    need_root();
    assert_int_equal(set_thp("always"), 0);
    if (access(THP_DIR "/hugepages-64kB/enabled", F_OK) == 0)
        assert_int_equal(knob_set(THP_DIR "/hugepages-64kB/enabled", "always"), 0);
    struct hp_stack *s = hp_stack_create(8 * MIB, HP_STACK_NOCACHE);
    assert_non_null(s);
    memset(hp_stack_base(s), 1, hp_stack_size(s));
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
    print_message("# lean 8 MiB fully touched: resident %llu, huge %llu\n",
                  (unsigned long long)info.resident_bytes, (unsigned long long)info.huge_bytes);
    assert_int_equal(info.resident_bytes, 8 * MIB);
    assert_int_equal(info.huge_bytes, 0);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    if (access(THP_DIR "/hugepages-64kB/enabled", F_OK) == 0)
        assert_int_equal(knob_set(THP_DIR "/hugepages-64kB/enabled", "never"), 0);
}

/* ---- 128 huge stacks ---- */

static void check_huge_crowd(struct st_crowd *c, uint32_t want_kind)
{
    for (int i = 0; i < NTHREADS; i++) {
        struct hp_stack_info info = HP_STACK_INFO_INIT;
        assert_int_equal(hp_stack_get_info(c->s[i], &info), HP_OK);
        assert_int_equal(info.mode, HP_STACK_MODE_HUGE);
        assert_int_equal(info.kind, want_kind);
        assert_int_equal(info.usable_size, 2 * MIB);
        assert_int_equal(info.base_addr % (2 * MIB), 0);
        assert_int_equal(info.guard_addr + info.guard_size, info.base_addr);
        struct st_vma u, g;
        assert_int_equal(st_vma_at(info.base_addr, &u), 0);
        assert_int_equal(st_vma_at(info.guard_addr, &g), 0);
        if (i == 0)
            print_message("# stack 0: %lx-%lx %s rss %ld kB, AnonHuge %ld kB, KernelPage %ld kB,"
                          " hugetlb %ld kB; guard %lx-%lx %s rss %ld kB; measured huge %llu\n",
                          (unsigned long)u.start, (unsigned long)u.end, u.perms, u.rss_kb,
                          u.anon_huge_kb, u.kernel_page_kb, u.hugetlb_kb, (unsigned long)g.start,
                          (unsigned long)g.end, g.perms, g.rss_kb,
                          (unsigned long long)info.huge_bytes);
        /* The usable range is its own mapping, all of it one huge page. */
        assert_true(u.start == info.base_addr && u.end == info.base_addr + 2 * MIB);
        assert_string_equal(u.perms, "rw-p");
        if (want_kind == HP_KIND_THP) {
            assert_int_equal(u.anon_huge_kb, 2048);
        } else {
            assert_int_equal(u.kernel_page_kb, 2048);
            assert_int_equal(u.hugetlb_kb, 2048);
        }
        assert_int_equal(info.huge_bytes, 2 * MIB);
        /* The guard is a separate, untouched PROT_NONE mapping right below. */
        assert_string_equal(g.perms, "---p");
        assert_true(g.end == info.base_addr);
        assert_int_equal(g.rss_kb, 0);
    }
}

static void huge_thp_crowd(void **state)
{
    (void)state;
    need_root();
    static struct st_crowd c;
    int rc = numa_balancing_away(1);  /* the crowd's threads inherit it */
    assert_true(rc == 0 || rc == -ENOSYS);
    for (size_t m = 0; m < 2; m++) {
        assert_int_equal(set_thp(modes[m]), 0);
        assert_int_equal(st_crowd_start(&c, ST_THP, 2 * MIB, 16384), 0);
        check_huge_crowd(&c, HP_KIND_THP);
        st_crowd_stop(&c);
        hp_stack_cache_trim();
    }
    numa_balancing_away(0);
}

static long pool_before = -1;

static int grow_pool(long extra)
{
    if (pool_before < 0)
        pool_before = pool_get(2048, "nr_hugepages");
    long want = pool_before + extra;
    long got = pool_set(2048, (unsigned long)want);
    print_message("# hugetlb 2 MiB pool: %ld -> %ld pages (asked %ld)\n", pool_before, got, want);
    hp_reprobe();
    return got >= want ? 0 : -1;
}

static void huge_hugetlb_crowd(void **state)
{
    (void)state;
    need_root();
    static struct st_crowd c;
    assert_int_equal(set_thp("madvise"), 0);
    if (grow_pool(NTHREADS + 8) != 0) {
        print_message("# skipped: the kernel would not grow the 2 MiB pool\n");
        skip();
    }
    long free0 = pool_get(2048, "free_hugepages");
    assert_int_equal(st_crowd_start(&c, ST_HUGETLB, 2 * MIB, 16384), 0);
    check_huge_crowd(&c, HP_KIND_HUGETLB);
    st_crowd_stop(&c);
    /* HP_STACK_HUGE prefers the reserved pool while it has room. */
    struct hp_stack *s = hp_stack_create(2 * MIB, HP_STACK_HUGE);
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
    assert_int_equal(info.kind, HP_KIND_HUGETLB);
    assert_string_equal(info.source, "hugetlbfs");
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    /* Every pool page is back, and no mapping is left, after many rounds. */
    hp_stack_cache_trim();
    long maps0 = maps_count();
    for (int i = 0; i < 200; i++) {
        s = hp_stack_create((size_t)(i % 3 + 1) * 2 * MIB, HP_STACK_HUGETLB);
        assert_non_null(s);
        assert_int_equal(hp_stack_destroy(s), HP_OK);
    }
    hp_stack_cache_trim();
    assert_int_equal(maps_count(), maps0);
    assert_int_equal(pool_get(2048, "free_hugepages"), free0);
    /* Kept in the cache (within keep_bytes), a hugetlb stack holds its pool
     * page until reused or trimmed; beyond the budget it is unmapped. */
    s = hp_stack_create(2 * MIB, HP_STACK_HUGETLB);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    assert_int_equal(pool_get(2048, "free_hugepages"), free0 - 1);
    s = hp_stack_create(2 * MIB, HP_STACK_HUGETLB);
    assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
    assert_int_equal(info.from_cache, 1);
    struct hp_stack_cache_config cfg = HP_STACK_CACHE_CONFIG_INIT;
    cfg.keep_bytes = 0;
    assert_int_equal(hp_stack_cache_configure(&cfg), HP_OK);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    assert_int_equal(pool_get(2048, "free_hugepages"), free0);
    cfg.keep_bytes = HP_STACK_CACHE_DEFAULT_KEEP_BYTES;
    assert_int_equal(hp_stack_cache_configure(&cfg), HP_OK);
    assert_true(pool_set(2048, (unsigned long)pool_before) >= 0);
}

/* ---- overflow hits the guard ---- */

struct overflow {
    uint64_t flags;
    int on_thread;
    int with_handler;
};

static uintptr_t guard_lo, guard_hi;
static ucontext_t ov_main, ov_fiber;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    _exit(a >= guard_lo && a < guard_hi ? 42 : 43);
}

__attribute__((noinline)) static int deep(int n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    pad[511] = (char)n;
    if (n == INT32_MAX)  /* never: a 512-byte frame per level overflows long before */
        return 0;
    return deep(n + 1) + pad[n % 512];
}

/* The handler runs on the overflowing thread: it needs its own altstack. */
static void use_altstack(void)
{
    static char alt[2][64 * 1024];
    static int next;
    stack_t ss = {.ss_sp = alt[next++ % 2], .ss_size = sizeof(alt[0])};
    sigaltstack(&ss, NULL);
}

static void fiber_deep(void)
{
    deep(0);
}

static void *thread_deep(void *arg)
{
    (void)arg;
    use_altstack();
    deep(0);
    return NULL;
}

static int overflow_child(void *arg)
{
    const struct overflow *o = arg;
    signal(SIGSEGV, SIG_DFL);  /* the parent's knob restorer must not run here */
    struct hp_stack_opts opts = HP_STACK_OPTS_INIT;
    opts.flags = o->flags;
    /* The thread starts only once the guard bounds and handler are set. */
    struct hp_stack *s = hp_stack_create_ex(2 * MIB, &opts);
    if (!s)
        return 3;
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    if (hp_stack_get_info(s, &info) != HP_OK)
        return 4;
    guard_lo = info.guard_addr;
    guard_hi = info.base_addr;
    if (hp_stack_destroy(s) != HP_OK)  /* into the cache, taken back just below */
        return 4;
    if (o->with_handler) {
        use_altstack();
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
        sigaction(SIGSEGV, &sa, NULL);
    }
    if (o->on_thread) {
        if (hp_stack_thread_create(&s, 2 * MIB, &opts, thread_deep, NULL) != HP_OK ||
            hp_stack_base(s) != (void *)guard_hi)
            return 5;
        pause();  /* the thread overflows */
        return 5;
    }
    s = hp_stack_create_ex(2 * MIB, &opts);
    if (hp_stack_base(s) != (void *)guard_hi)
        return 5;
    getcontext(&ov_fiber);
    ov_fiber.uc_stack.ss_sp = hp_stack_base(s);
    ov_fiber.uc_stack.ss_size = hp_stack_size(s);
    ov_fiber.uc_link = NULL;
    makecontext(&ov_fiber, fiber_deep, 0);
    swapcontext(&ov_main, &ov_fiber);
    return 6;  /* never: the fiber overflows */
}

static void overflow_hits_guard(void **state)
{
    (void)state;
    need_root();
    for (size_t m = 0; m < 2; m++) {
        assert_int_equal(set_thp(modes[m]), 0);
        const struct overflow cases[] = {
            {0, 0, 1},
            {0, 0, 0},
            {0, 1, 1},
            {HP_STACK_THP, 0, 1},
            {HP_STACK_THP, 0, 0},
            {HP_STACK_THP, 1, 1},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
            int st = st_run_child(overflow_child, (void *)&cases[i]);
            print_message("# %s on a %s: %s %d\n", cases[i].flags ? "huge" : "lean",
                          cases[i].on_thread ? "thread" : "fiber",
                          WIFSIGNALED(st) ? "signal" : "exit",
                          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            if (cases[i].with_handler) {
                /* 42: the faulting address lies in this stack's guard. */
                assert_true(WIFEXITED(st));
                assert_int_equal(WEXITSTATUS(st), 42);
            } else {
                assert_true(WIFSIGNALED(st));
                assert_int_equal(WTERMSIG(st), SIGSEGV);
            }
        }
    }
}

static void hugetlb_overflow(void **state)
{
    (void)state;
    need_root();
    if (grow_pool(4) != 0) {
        print_message("# skipped: the kernel would not grow the 2 MiB pool\n");
        skip();
    }
    const struct overflow o = {HP_STACK_HUGETLB, 0, 1};
    int st = st_run_child(overflow_child, (void *)&o);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 42);
    assert_true(pool_set(2048, (unsigned long)pool_before) >= 0);
}

int main(void)
{
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 1;
    if (is_root() && knob_lock() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lean_rss_like_glibc), cmocka_unit_test(lean_never_huge),
        cmocka_unit_test(huge_thp_crowd),      cmocka_unit_test(huge_hugetlb_crowd),
        cmocka_unit_test(overflow_hits_guard), cmocka_unit_test(hugetlb_overflow),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    knob_restore_all();
    return failed;
}
