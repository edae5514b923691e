/* The public API contract and a table of bad inputs, through libhp.so. */
#include <hp.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define PAGE 4096u

/* Every failure names a specific code and leaves a detail behind. */
static void assert_failed_with(int32_t code)
{
    assert_int_equal(hp_last_error(), code);
    assert_true(strlen(hp_last_error_detail()) > 0);
}

struct bad_alloc {
    const char *what;
    size_t size;
    uint64_t flags;
    int32_t code;
};

static void bad_allocations(void **state)
{
    (void)state;
    const struct bad_alloc cases[] = {
        {"size 0", 0, 0, HP_ESIZE},
        {"SIZE_MAX", SIZE_MAX, 0, HP_ESIZE},
        {"overflows when rounded to a page", SIZE_MAX - PAGE + 2, 0, HP_ESIZE},
        {"overflows when rounded to 1 GiB", SIZE_MAX - (1u << 29), HP_F_PAGE_1G, HP_ESIZE},
        {"just above the limit", ((size_t)1 << 46) + 1, 0, HP_ESIZE},
        {"unknown flag bit", PAGE, UINT64_C(1) << 40, HP_EFLAGS},
        {"unknown low flag bit", PAGE, UINT64_C(1) << 9, HP_EFLAGS},
        {"page size below the base page", PAGE, UINT64_C(5) << HP_F_PAGE_SHIFT_POS, HP_EFLAGS},
        {"page size 2^63", PAGE, UINT64_C(63) << HP_F_PAGE_SHIFT_POS, HP_EFLAGS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        print_message("# bad input: %s\n", cases[i].what);
        assert_null(hp_alloc(cases[i].size, cases[i].flags));
        assert_failed_with(cases[i].code);
        assert_null(hp_realloc(NULL, cases[i].size, cases[i].flags));
        assert_failed_with(cases[i].code);
    }
}

static void bad_options(void **state)
{
    (void)state;
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.size = 4;
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL);

    o = (struct hp_alloc_opts)HP_ALLOC_OPTS_INIT;
    o.reserved = 1;
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL);

    o = (struct hp_alloc_opts)HP_ALLOC_OPTS_INIT;
    o.backend = "no-such-backend";
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_ENOBACKEND);
    assert_non_null(strstr(hp_last_error_detail(), "no-such-backend"));

    o.backend = "Bad Name!";
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL);

    o = (struct hp_alloc_opts)HP_ALLOC_OPTS_INIT;
    o.exclude = "fallback,,thp-madvise";
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL);
    o.exclude = "fallback,";
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_EINVAL);

    /* Base pages cannot satisfy "require huge". */
    o = (struct hp_alloc_opts)HP_ALLOC_OPTS_INIT;
    o.backend = "fallback";
    o.flags = HP_F_REQUIRE_HUGE;
    assert_null(hp_alloc_ex(PAGE, &o));
    assert_failed_with(HP_ENOHUGE);

    /* NULL opts is hp_alloc(size, 0). */
    void *p = hp_alloc_ex(PAGE, NULL);
    assert_non_null(p);
    assert_int_equal(hp_free(p), HP_OK);
}

static void bad_pointers(void **state)
{
    (void)state;
    int on_stack;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;

    assert_int_equal(hp_free(NULL), HP_OK);
    assert_int_equal(hp_free(&on_stack), HP_EFOREIGN);
    assert_failed_with(HP_EFOREIGN);
    /* A wild pointer is classified without being touched. */
    assert_int_equal(hp_free((void *)(uintptr_t)0x10), HP_EFOREIGN);
    assert_int_equal(hp_info(&on_stack, &info), HP_EFOREIGN);
    assert_null(hp_realloc(&on_stack, 100, 0));
    assert_failed_with(HP_EFOREIGN);

    char *p = hp_alloc(3 * PAGE, 0);
    assert_non_null(p);
    p[0] = 42;
    assert_int_equal(hp_free(p + PAGE), HP_EINTERIOR);
    assert_failed_with(HP_EINTERIOR);
    assert_int_equal(hp_info(p + 1, &info), HP_EINTERIOR);
    assert_null(hp_realloc(p + 8, 100, 0));
    assert_failed_with(HP_EINTERIOR);
    assert_int_equal(p[0], 42);  /* failed calls lost nothing */

    assert_int_equal(hp_free(p), HP_OK);
    assert_int_equal(hp_free(p), HP_EDOUBLEFREE);
    assert_failed_with(HP_EDOUBLEFREE);
    assert_int_equal(hp_info(p, &info), HP_EDOUBLEFREE);
    assert_null(hp_realloc(p, 100, 0));
    assert_failed_with(HP_EDOUBLEFREE);
}

static void bad_out_params(void **state)
{
    (void)state;
    void *p = hp_alloc(PAGE, 0);
    assert_non_null(p);
    assert_int_equal(hp_info(p, NULL), HP_EINVAL);
    assert_failed_with(HP_EINVAL);
    struct hp_block_info small = HP_BLOCK_INFO_INIT;
    small.size = 8;
    assert_int_equal(hp_info(p, &small), HP_EINVAL);
    assert_int_equal(hp_info(NULL, &small), HP_EINVAL);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    assert_int_equal(hp_info(NULL, &info), HP_EFOREIGN);

    assert_int_equal(hp_backend_get(0, NULL), HP_EINVAL);
    struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
    bi.size = 3;
    assert_int_equal(hp_backend_get(0, &bi), HP_EINVAL);
    bi.size = sizeof(bi);
    assert_int_equal(hp_backend_get((uint32_t)hp_backend_count(), &bi), HP_ERANGE);
    assert_failed_with(HP_ERANGE);
    assert_int_equal(hp_backend_get(UINT32_MAX, &bi), HP_ERANGE);
    assert_int_equal(hp_free(p), HP_OK);
}

static void block_contract(void **state)
{
    (void)state;
    const size_t sizes[] = {1, PAGE - 1, PAGE, PAGE + 1, 100000, (3u << 20) + 123};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
        unsigned char *p = hp_alloc(sizes[i], 0);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % PAGE, 0);
        for (size_t k = 0; k < sizes[i]; k += 997)
            assert_int_equal(p[k], 0);  /* zero-filled */
        memset(p, 0xa5, sizes[i]);
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        assert_int_equal(hp_info(p, &info), HP_OK);
        assert_true(strlen(info.backend) > 0);
        assert_true(info.usable_size >= sizes[i]);
        assert_true(info.mapped_size >= info.usable_size);
        assert_true(info.page_size >= PAGE);
        assert_int_equal(info.page_size & (info.page_size - 1), 0);
        assert_true(info.huge_bytes <= info.mapped_size);
        assert_int_equal(info.requested_page_size, 0);
        assert_int_equal(hp_free(p), HP_OK);
    }
}

/* A caller that knows an older, shorter struct gets only those bytes. */
static void info_struct_versioning(void **state)
{
    (void)state;
    void *p = hp_alloc(PAGE, 0);
    struct {
        struct hp_block_info info;
        unsigned char canary[16];
    } s;
    memset(&s, 0x5a, sizeof(s));
    s.info.size = sizeof(s.info);
    assert_int_equal(hp_info(p, &s.info), HP_OK);
    for (size_t i = 0; i < sizeof(s.canary); i++)
        assert_int_equal(s.canary[i], 0x5a);
    assert_int_equal(hp_free(p), HP_OK);
}

static void realloc_semantics(void **state)
{
    (void)state;
    unsigned char *p = hp_realloc(NULL, 10 * PAGE, 0);
    assert_non_null(p);
    for (size_t i = 0; i < 10 * PAGE; i++)
        p[i] = (unsigned char)(i * 7);
    p = hp_realloc(p, 300 * PAGE, 0);
    assert_non_null(p);
    for (size_t i = 0; i < 10 * PAGE; i++)
        assert_int_equal(p[i], (unsigned char)(i * 7));
    p = hp_realloc(p, 3 * PAGE + 5, 0);
    assert_non_null(p);
    for (size_t i = 0; i < 3 * PAGE + 5; i++)
        assert_int_equal(p[i], (unsigned char)(i * 7));

    /* A failing resize leaves the block valid and unchanged. */
    assert_null(hp_realloc(p, 100, UINT64_C(1) << 41));
    assert_failed_with(HP_EFLAGS);
    assert_null(hp_realloc(p, SIZE_MAX, 0));
    assert_failed_with(HP_ESIZE);
    assert_int_equal(p[5], (unsigned char)35);

    /* realloc(p, 0) frees and reports success. */
    assert_null(hp_realloc(p, 0, 0));
    assert_int_equal(hp_last_error(), HP_OK);
    assert_int_equal(hp_free(p), HP_EDOUBLEFREE);
}

static void page_size_flags(void **state)
{
    (void)state;
    assert_true(hp_page_size_flag(2u << 20) == HP_F_PAGE_2M);
    assert_true(hp_page_size_flag(UINT64_C(1) << 30) == HP_F_PAGE_1G);
    assert_true(hp_page_size_flag(65536) == HP_F_PAGE_64K);
    assert_true(hp_page_size_flag(3000) == 0);
    assert_true(hp_page_size_flag(0) == 0);
    assert_true(hp_page_size_flag(2048) == 0);
    /* Asking for base pages explicitly is allowed. */
    void *p = hp_alloc(PAGE, HP_F_PAGE_4K);
    assert_non_null(p);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    assert_int_equal(hp_info(p, &info), HP_OK);
    assert_int_equal(info.page_size, PAGE);
    assert_int_equal(info.requested_page_size, PAGE);
    assert_int_equal(hp_free(p), HP_OK);
}

static void error_table(void **state)
{
    (void)state;
    const int32_t codes[] = {HP_OK, HP_EINVAL, HP_ENOMEM, HP_ESIZE, HP_EFLAGS,
                             HP_EFOREIGN, HP_EINTERIOR, HP_EDOUBLEFREE, HP_ENOHUGE,
                             HP_ENOBACKEND, HP_EBACKEND, HP_EENV, HP_ENOTSUP, HP_ERANGE, HP_EOS};
    size_t n = sizeof(codes) / sizeof(*codes);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(codes[i], -(int32_t)i);  /* values are ABI: never renumbered */
        assert_string_not_equal(hp_strerror(codes[i]), "unknown error");
        assert_int_equal(strncmp(hp_error_name(codes[i]), "HP_", 3), 0);
        for (size_t k = 0; k < i; k++)
            assert_string_not_equal(hp_strerror(codes[i]), hp_strerror(codes[k]));
    }
    assert_string_equal(hp_strerror(12345), "unknown error");
    assert_string_equal(hp_error_name(-999), "HP_UNKNOWN");
    assert_string_equal(hp_error_name(HP_ENOHUGE), "HP_ENOHUGE");
}

static void version(void **state)
{
    (void)state;
    assert_int_equal(hp_version(), HP_VERSION_NUMBER);
    assert_string_equal(hp_version_string(), "1.4.0");
}

static void backends_listed(void **state)
{
    (void)state;
    int32_t n = hp_backend_count();
    assert_true(n >= 1);
    int fallback = 0;
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        assert_int_equal(hp_backend_get((uint32_t)i, &bi), HP_OK);
        assert_true(strlen(bi.reason) > 0);
        assert_true(bi.n_page_sizes <= HP_MAX_PAGE_SIZES);
        if (!strcmp(bi.name, "fallback")) {
            fallback = 1;
            assert_int_equal(bi.available, 1);
            assert_int_equal(bi.kind, HP_KIND_BASE);
            assert_int_equal(bi.page_sizes[0], PAGE);
        }
        for (uint32_t k = 1; k < bi.n_page_sizes; k++)
            assert_true(bi.page_sizes[k] > bi.page_sizes[k - 1]);
    }
    assert_true(fallback);
}

/* Errors are per thread; blocks may be freed by another thread. */
static void *thread_errors(void *arg)
{
    int on_stack;
    hp_free(&on_stack);
    return (void *)(intptr_t)(hp_last_error() == HP_EFOREIGN && arg == NULL);
}

static void *thread_churn(void *arg)
{
    void **slots = arg;
    for (int i = 0; i < 200; i++) {
        void *p = hp_alloc(PAGE * (size_t)(1 + i % 7), 0);
        if (!p)
            return (void *)0;
        memset(p, i, PAGE);
        if (hp_free(p) != HP_OK)
            return (void *)0;
    }
    *slots = hp_alloc(PAGE, 0);
    return (void *)1;
}

static void threads(void **state)
{
    (void)state;
    assert_null(hp_alloc(0, 0));
    assert_int_equal(hp_last_error(), HP_ESIZE);
    pthread_t t;
    void *ok;
    assert_int_equal(pthread_create(&t, NULL, thread_errors, NULL), 0);
    pthread_join(t, &ok);
    assert_true(ok);
    assert_int_equal(hp_last_error(), HP_ESIZE);  /* untouched by the other thread */

    pthread_t ts[4];
    void *slots[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&ts[i], NULL, thread_churn, &slots[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(ts[i], &ok);
        assert_true(ok);
        assert_non_null(slots[i]);
        assert_int_equal(hp_free(slots[i]), HP_OK);  /* freed by another thread */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_allocations),  cmocka_unit_test(bad_options),
        cmocka_unit_test(bad_pointers),     cmocka_unit_test(bad_out_params),
        cmocka_unit_test(block_contract),   cmocka_unit_test(info_struct_versioning),
        cmocka_unit_test(realloc_semantics), cmocka_unit_test(page_size_flags),
        cmocka_unit_test(error_table),      cmocka_unit_test(version),
        cmocka_unit_test(backends_listed),  cmocka_unit_test(threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
