/* Stack internals, against the static core: the mode plan with fabricated
 * capability records, OS failures injected at every step, and the handle
 * quarantine. */
#include <hp.h>

#include "os.h"
#include "stack.h"
#include "st_util.h"
#include "support.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define MIB (UINT64_C(1) << 20)

/* ---- the plan ---- */

static struct hp_backend_caps hugetlb_caps(uint64_t free_2m)
{
    struct hp_backend_caps c = {.size = sizeof(c), .available = 1, .n_page_sizes = 2};
    c.page_sizes[0] = 2 * MIB;
    c.pool_free[0] = free_2m;
    c.page_flags[0] = HP_PAGE_GUARANTEED;
    c.page_sizes[1] = 1024 * MIB;
    c.pool_free[1] = 4;
    c.page_flags[1] = HP_PAGE_GUARANTEED;
    snprintf(c.reason, sizeof(c.reason), "2048K %llu free", (unsigned long long)free_2m);
    return c;
}

static struct hp_backend_caps thp_caps(int available)
{
    struct hp_backend_caps c = {.size = sizeof(c), .available = (uint32_t)available,
                                .n_page_sizes = 1};
    c.page_sizes[0] = 2 * MIB;
    c.pool_free[0] = UINT64_MAX;
    snprintf(c.reason, sizeof(c.reason), "%s", available ? "2048 KiB THP" : "THP is \"never\"");
    return c;
}

/* A third-party plugin (kind other) with base pages and THP, like
 * examples/plugin: it serves stacks only when HP_BACKENDS names it. */
static struct hp_backend_caps other_caps(void)
{
    struct hp_backend_caps c = {.size = sizeof(c), .available = 1, .n_page_sizes = 2};
    c.page_sizes[0] = 4096;
    c.pool_free[0] = UINT64_MAX;
    c.page_sizes[1] = 2 * MIB;
    c.pool_free[1] = UINT64_MAX;
    return c;
}

enum { FB, HUGETLB, THP, REJECTED, OTHER, N_BK };

struct plan_case {
    struct hp_backend_caps caps[N_BK];
    struct hp_select_backend bk[N_BK];
    struct hp_stack_request req;
    struct hp_stack_plan out[HP_STACK_PLAN_MAX];
    char why[400];
};

static void setup_case(struct plan_case *pc, uint64_t flags, uint64_t usable, uint64_t free_2m,
                       int thp)
{
    memset(pc, 0, sizeof(*pc));
    pc->caps[FB] = (struct hp_backend_caps){.size = sizeof(pc->caps[0]), .available = 1,
                                            .n_page_sizes = 1, .page_sizes = {4096},
                                            .pool_free = {UINT64_MAX}};
    pc->caps[HUGETLB] = hugetlb_caps(free_2m);
    pc->caps[THP] = thp_caps(thp);
    pc->caps[OTHER] = other_caps();
    pc->bk[FB] = (struct hp_select_backend){"fallback", HP_KIND_BASE, &pc->caps[FB], 0};
    pc->bk[HUGETLB] = (struct hp_select_backend){"hugetlbfs", HP_KIND_HUGETLB, &pc->caps[HUGETLB], 0};
    pc->bk[THP] = (struct hp_select_backend){"thp-madvise", HP_KIND_THP, &pc->caps[THP], 0};
    pc->bk[REJECTED] = (struct hp_select_backend){NULL, HP_KIND_THP, NULL, 0};  /* a rejected plugin */
    pc->bk[OTHER] = (struct hp_select_backend){"numa-local", HP_KIND_OTHER, &pc->caps[OTHER], 0};
    pc->req = (struct hp_stack_request){.flags = flags, .usable = usable,
                                        .huge_page_size = (flags & 7) ? 2 * MIB : 4096,
                                        .base_page_size = 4096};
}

static unsigned run_plan(struct plan_case *pc, unsigned n_backends)
{
    unsigned n = hp_stack_plan(&pc->req, pc->bk, n_backends, pc->out, HP_STACK_PLAN_MAX, pc->why,
                               sizeof(pc->why));
    print_message("# plan: %u way(s); why: %s\n", n, pc->why);
    return n;
}

static void assert_way(const struct plan_case *pc, unsigned i, unsigned backend, uint64_t ps)
{
    assert_int_equal(pc->out[i].backend, backend);
    assert_int_equal(pc->out[i].page_size, ps);
}

static void plan_policy(void **state)
{
    (void)state;
    struct plan_case pc;
    /* Lean: base pages from the base-page backend; the third party is not
     * named, the huge-page backends have no base pages. */
    setup_case(&pc, 0, 64 * 1024, 0, 0);
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, FB, 4096);
    assert_int_equal(pc.out[0].guaranteed, 0);
    /* Huge: reserved pool first (prefaulted), then THP. */
    setup_case(&pc, HP_STACK_HUGE, 4 * MIB, 2, 1);
    assert_int_equal(run_plan(&pc, N_BK), 2);
    assert_way(&pc, 0, HUGETLB, 2 * MIB);
    assert_int_equal(pc.out[0].guaranteed, 1);
    assert_way(&pc, 1, THP, 2 * MIB);
    assert_int_equal(pc.out[1].guaranteed, 0);
    /* A pool too small for every page is skipped, with the reason. */
    setup_case(&pc, HP_STACK_HUGE, 6 * MIB, 2, 1);
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, THP, 2 * MIB);
    assert_non_null(strstr(pc.why, "pool can reserve 2 pages"));
    /* Forced kinds of page: reserved pool, or not. */
    setup_case(&pc, HP_STACK_HUGETLB, 2 * MIB, 0, 1);
    assert_int_equal(run_plan(&pc, N_BK), 0);
    assert_non_null(strstr(pc.why, "hugetlbfs"));
    assert_non_null(strstr(pc.why, "thp-madvise: its pages are not from a reserved pool"));
    setup_case(&pc, HP_STACK_THP, 2 * MIB, 100, 1);
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, THP, 2 * MIB);
    setup_case(&pc, HP_STACK_THP, 2 * MIB, 100, 0);
    assert_int_equal(run_plan(&pc, N_BK), 0);
    assert_non_null(strstr(pc.why, "never"));
    /* ALLOW_LEAN appends lean last, with base pages. */
    setup_case(&pc, HP_STACK_THP | HP_STACK_ALLOW_LEAN, 2 * MIB, 100, 0);
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, FB, 4096);
    setup_case(&pc, HP_STACK_HUGE | HP_STACK_ALLOW_LEAN, 2 * MIB, 100, 1);
    assert_int_equal(run_plan(&pc, N_BK), 3);
    assert_way(&pc, 2, FB, 4096);
    /* No huge-capable backend at all. */
    setup_case(&pc, HP_STACK_HUGE, 2 * MIB, 0, 0);
    assert_int_equal(run_plan(&pc, 1), 0);
    assert_non_null(strstr(pc.why, "no backend offers 2048 KiB pages"));
    /* A hugetlb backend without the PMD size. */
    setup_case(&pc, HP_STACK_HUGETLB, 2 * MIB, 100, 1);
    pc.caps[HUGETLB].page_sizes[0] = 1024 * MIB;
    pc.caps[HUGETLB].n_page_sizes = 1;
    assert_int_equal(run_plan(&pc, N_BK), 0);
    assert_non_null(strstr(pc.why, "no 2048 KiB pages"));
    /* The plan never holds more than max ways. */
    setup_case(&pc, HP_STACK_HUGE | HP_STACK_ALLOW_LEAN, 2 * MIB, 100, 1);
    assert_int_equal(hp_stack_plan(&pc.req, pc.bk, N_BK, pc.out, 2, pc.why, sizeof(pc.why)), 2);
    assert_way(&pc, 0, HUGETLB, 2 * MIB);
    assert_way(&pc, 1, THP, 2 * MIB);
}

/* HP_BACKENDS lists only these names, in this order. */
#define LIST_ONLY(pc, names) ((pc)->req.only = (names), \
                              (pc)->req.n_only = sizeof(names) / sizeof((names)[0]))

static void plan_overrides(void **state)
{
    (void)state;
    struct plan_case pc;
    const char never[1][HP_OPT_NAME_LEN] = {"hugetlbfs"};
    const char only[2][HP_OPT_NAME_LEN] = {"thp-madvise", "hugetlbfs"};
    const char only_fb[1][HP_OPT_NAME_LEN] = {"fallback"};
    const char only_other[1][HP_OPT_NAME_LEN] = {"numa-local"};
    const char other_first[2][HP_OPT_NAME_LEN] = {"numa-local", "fallback"};
    setup_case(&pc, HP_STACK_HUGE, 2 * MIB, 100, 1);
    pc.req.never = never;
    pc.req.n_never = 1;
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, THP, 2 * MIB);
    assert_non_null(strstr(pc.why, "excluded by HP_BACKENDS"));
    /* HP_BACKENDS order replaces the policy's. */
    setup_case(&pc, HP_STACK_HUGE, 2 * MIB, 100, 1);
    LIST_ONLY(&pc, only);
    assert_int_equal(run_plan(&pc, N_BK), 2);
    assert_way(&pc, 0, THP, 2 * MIB);
    assert_way(&pc, 1, HUGETLB, 2 * MIB);
    setup_case(&pc, HP_STACK_HUGE, 2 * MIB, 100, 1);
    LIST_ONLY(&pc, only_fb);
    assert_int_equal(run_plan(&pc, N_BK), 0);
    assert_non_null(strstr(pc.why, "not listed in HP_BACKENDS"));
    /* A lean stack obeys HP_BACKENDS too: nothing listed offers base pages. */
    setup_case(&pc, 0, 64 * 1024, 100, 1);
    LIST_ONLY(&pc, only);
    assert_int_equal(run_plan(&pc, N_BK), 0);
    assert_non_null(strstr(pc.why, "offers base pages"));
    /* A third-party plugin named by HP_BACKENDS serves stacks like a
     * built-in: huge ones with its THP size, lean ones with base pages. */
    setup_case(&pc, HP_STACK_HUGE, 4 * MIB, 100, 1);
    LIST_ONLY(&pc, only_other);
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, OTHER, 2 * MIB);
    setup_case(&pc, 0, 64 * 1024, 100, 1);
    LIST_ONLY(&pc, other_first);
    assert_int_equal(run_plan(&pc, N_BK), 2);
    assert_way(&pc, 0, OTHER, 4096);
    assert_way(&pc, 1, FB, 4096);
    /* ... and HP_STACK_THP takes it (its 2 MiB pages are not a pool). */
    setup_case(&pc, HP_STACK_THP, 2 * MIB, 100, 1);
    LIST_ONLY(&pc, only_other);
    assert_int_equal(run_plan(&pc, N_BK), 1);
    assert_way(&pc, 0, OTHER, 2 * MIB);
}

/* ---- failures at every OS step ---- */

static void warm_up(void)
{
    struct hp_stack *s = hp_stack_create(64 * 1024, HP_STACK_NOCACHE);
    assert_non_null(s);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    hp_stack_cache_trim();
}

struct fault_case {
    const char *what;
    enum hp_os_op op;
    uint64_t nth;
    int err;
    uint64_t flags;
    int32_t code;
};

static void injected_failures(void **state)
{
    (void)state;
    warm_up();
    int thp = st_huge_possible(HP_STACK_THP), hugetlb = st_huge_possible(HP_STACK_HUGETLB);
    hp_stack_cache_trim();
    /* Every step of the backends' map for a stack: the mapping or
     * reservation, the memory over it, the trims to the alignment, the
     * advice, the guard's mprotect; and the prefault. Each fails cleanly and leaves no mapping behind. */
    const struct fault_case cases[] = {
        {"lean mmap ENOMEM", HP_OS_MAP, 1, ENOMEM, 0, HP_ENOMEM},
        {"lean mmap EPERM", HP_OS_MAP, 1, EPERM, 0, HP_ENOMEM},
        {"lean madvise(NOHUGEPAGE)", HP_OS_ADVISE, 1, EINVAL, 0, HP_EOS},
        {"lean mprotect", HP_OS_PROTECT, 1, ENOMEM, 0, HP_ENOMEM},
        {"lean populate", HP_OS_ADVISE, 2, ENOMEM, HP_STACK_POPULATE, HP_ENOMEM},
        {"THP reservation", HP_OS_MAP, 1, ENOMEM, HP_STACK_THP, HP_ENOHUGE},
        {"THP trim to the alignment", HP_OS_UNMAP, 1, ENOMEM, HP_STACK_THP, HP_ENOHUGE},
        {"THP memory over the reservation", HP_OS_MAP, 2, ENOMEM, HP_STACK_THP, HP_ENOHUGE},
        {"THP madvise(HUGEPAGE)", HP_OS_ADVISE, 1, EINVAL, HP_STACK_THP, HP_ENOHUGE},
        {"THP populate", HP_OS_ADVISE, 2, ENOMEM, HP_STACK_THP | HP_STACK_POPULATE, HP_ENOHUGE},
        {"hugetlb reservation", HP_OS_MAP, 1, ENOMEM, HP_STACK_HUGETLB, HP_ENOHUGE},
        {"hugetlb pool pages", HP_OS_MAP, 2, ENOMEM, HP_STACK_HUGETLB, HP_ENOHUGE},
        {"hugetlb prefault", HP_OS_ADVISE, 1, ENOMEM, HP_STACK_HUGETLB, HP_ENOHUGE},
    };
    long maps0 = maps_count();
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        if (((cases[i].flags & HP_STACK_THP) && !thp) ||
            ((cases[i].flags & HP_STACK_HUGETLB) && !hugetlb))
            continue;
        print_message("# injected: %s\n", cases[i].what);
        hp_os_inject_fault(cases[i].op, cases[i].nth, cases[i].err, 0);
        struct hp_stack *s = hp_stack_create(3 * MIB, cases[i].flags | HP_STACK_NOCACHE);
        hp_os_clear_faults();
        assert_null(s);
        assert_int_equal(hp_last_error(), cases[i].code);
        print_message("#   %s: %s\n", hp_error_name(hp_last_error()), hp_last_error_detail());
        assert_true(strlen(hp_last_error_detail()) > 0);
        assert_true(st_maps_back_to(maps0));
    }
    if (thp) {
        /* A huge stack that cannot be made falls back to lean if allowed. */
        hp_os_inject_fault(HP_OS_ADVISE, 1, ENOMEM, 0);
        struct hp_stack *s = hp_stack_create(3 * MIB, HP_STACK_THP | HP_STACK_ALLOW_LEAN |
                                                          HP_STACK_NOCACHE);
        hp_os_clear_faults();
        assert_non_null(s);
        struct hp_stack_info info = HP_STACK_INFO_INIT;
        assert_int_equal(hp_stack_get_info(s, &info), HP_OK);
        assert_int_equal(info.mode, HP_STACK_MODE_LEAN);
        assert_int_equal(info.usable_size, 3 * MIB);
        assert_int_equal(hp_stack_destroy(s), HP_OK);
    }
    assert_true(st_maps_back_to(maps0));
}

static void cache_failures(void **state)
{
    (void)state;
    warm_up();
    long maps0 = maps_count();
    struct hp_stack_cache_stats st = HP_STACK_CACHE_STATS_INIT;
    struct hp_stack_cache_config cfg = HP_STACK_CACHE_CONFIG_INIT;
    cfg.keep_bytes = 0;  /* every stack entering the cache is released */
    assert_int_equal(hp_stack_cache_configure(&cfg), HP_OK);
    /* MADV_DONTNEED refused on the way into the cache: unmapped instead. */
    struct hp_stack *s = hp_stack_create(MIB, 0);
    assert_non_null(s);
    hp_os_inject_fault(HP_OS_ADVISE, 1, EAGAIN, 0);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    hp_os_clear_faults();
    hp_stack_cache_get_stats(&st);
    assert_int_equal(st.cached_stacks, 0);
    assert_true(st_maps_back_to(maps0));
    /* Prefaulting a cached stack fails: the stack goes, the error stays. */
    s = hp_stack_create(MIB, 0);
    assert_int_equal(hp_stack_destroy(s), HP_OK);
    hp_stack_cache_get_stats(&st);
    assert_int_equal(st.cached_stacks, 1);
    hp_os_inject_fault(HP_OS_ADVISE, 1, ENOMEM, 0);
    s = hp_stack_create(MIB, HP_STACK_POPULATE);
    hp_os_clear_faults();
    assert_null(s);
    assert_int_equal(hp_last_error(), HP_ENOMEM);
    assert_non_null(strstr(hp_last_error_detail(), "prefault"));
    hp_stack_cache_get_stats(&st);
    assert_int_equal(st.cached_stacks, 0);
    assert_true(st_maps_back_to(maps0));
    assert_int_equal(hp_stack_table_live(), 0);
    cfg.keep_bytes = HP_STACK_CACHE_DEFAULT_KEEP_BYTES;
    assert_int_equal(hp_stack_cache_configure(&cfg), HP_OK);
}

/* The handle table itself cannot be mapped (first use, in a fresh child). */
static int table_map_fails(void *arg)
{
    (void)arg;
    hp_backend_count();  /* load the backends first */
    long maps0 = maps_count();
    hp_os_inject_fault(HP_OS_MAP, 2, ENOMEM, 0);  /* 1: the stack, 2: the table */
    struct hp_stack *s = hp_stack_create(64 * 1024, 0);
    hp_os_clear_faults();
    if (s || hp_last_error() != HP_ENOMEM || !strstr(hp_last_error_detail(), "handle table"))
        return 10;
    if (!st_maps_back_to(maps0))
        return 11;
    s = hp_stack_create(64 * 1024, 0);  /* retried on the next call */
    if (!s || hp_stack_destroy(s) != HP_OK)
        return 12;
    return 0;
}

static void table_failure(void **state)
{
    (void)state;
    int status = st_run_child(table_map_fails, NULL);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- handle quarantine ---- */

static void quarantine(void **state)
{
    (void)state;
    warm_up();
    struct hp_stack *dead = hp_stack_create(64 * 1024, 0);
    assert_int_equal(hp_stack_destroy(dead), HP_OK);
    /* A cache hit hands out a different record than the destroyed one. */
    struct hp_stack *again = hp_stack_create(64 * 1024, 0);
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    assert_int_equal(hp_stack_get_info(again, &info), HP_OK);
    assert_int_equal(info.from_cache, 1);
    assert_ptr_not_equal(again, dead);
    assert_int_equal(hp_stack_destroy(dead), HP_EDOUBLEFREE);
    assert_int_equal(hp_stack_destroy(again), HP_OK);
    for (unsigned i = 0; i < HP_STACK_HANDLE_QUARANTINE - 8; i++) {
        struct hp_stack *s = hp_stack_create(64 * 1024, i % 2 ? HP_STACK_NOCACHE : 0);
        assert_non_null(s);
        assert_ptr_not_equal(s, dead);
        assert_int_equal(hp_stack_destroy(s), HP_OK);
    }
    assert_int_equal(hp_stack_destroy(dead), HP_EDOUBLEFREE);
    assert_int_equal(hp_stack_table_live(), 0);
    hp_stack_cache_trim();
}

/* More handles than one chunk of the table holds. */
static void many_handles(void **state)
{
    (void)state;
    enum { N = 5000 };
    static struct hp_stack *s[N];
    warm_up();
    long maps0 = maps_count();
    for (int i = 0; i < N; i++) {
        s[i] = hp_stack_create(4096, HP_STACK_NOCACHE);
        assert_non_null(s[i]);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(hp_stack_size(s[i]), 4096);
        /* Between two records is never a handle. */
        assert_null(hp_stack_base((struct hp_stack *)((char *)s[i] + 8)));
        assert_int_equal(hp_last_error(), HP_EFOREIGN);
    }
    assert_int_equal(hp_stack_table_live(), N);
    for (int i = 0; i < N; i++)
        assert_int_equal(hp_stack_destroy(s[i]), HP_OK);
    for (int i = 0; i < N; i += 97)
        assert_int_equal(hp_stack_destroy(s[i]), HP_EDOUBLEFREE);
    assert_int_equal(hp_stack_table_live(), 0);
    /* The table's chunks stay; the stacks are gone. */
    long now = maps_count();
    print_message("# maps lines %ld -> %ld (the table grew by one chunk)\n", maps0, now);
    assert_true(now <= maps0 + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* table_failure first: its child needs a process that made no stack. */
        cmocka_unit_test(table_failure),     cmocka_unit_test(plan_policy),
        cmocka_unit_test(plan_overrides),    cmocka_unit_test(injected_failures),
        cmocka_unit_test(cache_failures),    cmocka_unit_test(quarantine),
        cmocka_unit_test(many_handles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
