/*
 * HP_* environment values: bad ones give HP_EENV naming the variable and
 * the accepted values; good ones take effect. Every case runs in a forked
 * child, because libhp reads its environment once.
 */
#include <hp.h>

#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct env_case {
    const char *name, *value;
    const char *detail;      /* expected in the detail message; NULL: accepted */
};

static int child_env(void *arg)
{
    const struct env_case *c = arg;
    setenv(c->name, c->value, 1);
    void *p = hp_alloc(4096, 0);
    if (!c->detail) {
        if (!p) {
            fprintf(stderr, "# %s=%s rejected: %s\n", c->name, c->value, hp_last_error_detail());
            return 1;
        }
        return hp_free(p) == HP_OK ? 0 : 1;
    }
    fprintf(stderr, "# %s=\"%s\": %s: %s\n", c->name, c->value, hp_error_name(hp_last_error()),
            hp_last_error_detail());
    if (p || hp_last_error() != HP_EENV)
        return 1;
    if (!strstr(hp_last_error_detail(), c->detail))
        return 2;
    /* Every later call keeps failing the same way, and loses nothing. */
    if (hp_alloc(1 << 20, 0) || hp_last_error() != HP_EENV)
        return 3;
    return 0;
}

static void environment_values(void **state)
{
    (void)state;
    static const struct env_case cases[] = {
        {"HP_DEBUG", "maybe", "HP_DEBUG=\"maybe\" is invalid; accepted: 0, 1"},
        {"HP_DEBUG", "2", "HP_DEBUG"},
        {"HP_BACKEND_PATH", "relative/dir", "HP_BACKEND_PATH=\"relative/dir\" is invalid: entry 1 "
         "(\"relative/dir\") is not an absolute path; accepted: colon-separated absolute"},
        {"HP_BACKEND_PATH", "/a/../etc", "entry 1 (\"/a/../etc\") has a \"..\" component"},
        {"HP_BACKEND_PATH", "/opt/hp:plugins", "entry 2 (\"plugins\") is not an absolute path"},
        {"HP_BACKEND_PATH", "/opt/hp::/usr/hp", "entry 2 (\"\") is empty"},
        {"HP_BACKEND_PATH", ":/opt/hp", "entry 1 (\"\") is empty"},
        {"HP_BACKEND_PATH", "/opt/hp:", "entry 2 (\"\") is empty"},
        {"HP_BACKEND_PATH", "", "entry 1 (\"\") is empty"},
        {"HP_BACKEND_DIR", "build/backends", "HP_BACKEND_DIR=\"build/backends\" is invalid"},
        {"HP_BACKENDS", "", "HP_BACKENDS"},
        {"HP_BACKENDS", "Fallback", "HP_BACKENDS"},
        {"HP_BACKENDS", "fallback,,thp-madvise", "HP_BACKENDS"},
        {"HP_BACKENDS", "fallback,", "HP_BACKENDS"},
        /* the detail lists the names that do exist */
        {"HP_BACKENDS", "no-such-backend",
         "unknown backend \"no-such-backend\"; known: anon-orders, fallback, hugetlbfs, thp-madvise"},
        {"HP_BACKENDS", "-nope", "unknown backend \"nope\""},
        {"HP_SYSFS_ROOT", "sys", "HP_SYSFS_ROOT"},
        /* accepted */
        {"HP_DEBUG", "0", NULL},
        {"HP_DEBUG", "off", NULL},
        {"HP_DEBUG", "TRUE", NULL},
        {"HP_BACKENDS", "fallback", NULL},
        {"HP_BACKENDS", "thp-madvise,fallback", NULL},
        {"HP_BACKENDS", "-hugetlbfs,-anon-orders", NULL},
        {"HP_BACKEND_PATH", "/nonexistent", NULL},
        {"HP_BACKEND_PATH", "/nonexistent:/also/nonexistent", NULL},
        {"HP_BACKEND_DIR", "/nonexistent", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        int rc = run_in_child(child_env, (void *)&cases[i]);
        if (rc)
            print_message("# case %s=\"%s\" failed with %d\n", cases[i].name, cases[i].value, rc);
        assert_int_equal(rc, 0);
    }
}

/* The plugin directory may be as long as the kernel allows: the loader
 * never copies it into a fixed buffer. */
static void backend_path_length(void **state)
{
    (void)state;
    char ok[400] = "/nonexistent/";
    memset(ok + strlen(ok), 'a', 300);
    ok[313] = '\0';
    struct env_case accepted = {"HP_BACKEND_PATH", ok, NULL};
    assert_int_equal(run_in_child(child_env, &accepted), 0);
    char *long_path = malloc(4200);
    assert_non_null(long_path);
    long_path[0] = '/';
    memset(long_path + 1, 'a', 4150);
    long_path[4151] = '\0';
    struct env_case refused = {"HP_BACKEND_PATH", long_path, "is longer than 4095 bytes"};
    assert_int_equal(run_in_child(child_env, &refused), 0);
    free(long_path);
}

static int child_backends_order(void *unused)
{
    (void)unused;
    setenv("HP_BACKENDS", "fallback,thp-madvise", 1);
    void *p = hp_alloc(8 << 20, 0);  /* THP would win by policy */
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (!p || hp_info(p, &info) != HP_OK || strcmp(info.backend, "fallback"))
        return 1;
    return hp_free(p) == HP_OK ? 0 : 1;
}

static int child_backends_exclude(void *unused)
{
    (void)unused;
    setenv("HP_BACKENDS", "-fallback", 1);
    /* Nothing but base pages could serve 4 KiB. */
    if (hp_alloc(4096, 0) != NULL)
        return 1;
    if (hp_last_error() != HP_ENOBACKEND)
        return 2;
    /* Naming the excluded backend: the detail says which list left it out. */
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fallback";
    if (hp_alloc_ex(4096, &o) != NULL)
        return 3;
    fprintf(stderr, "# %s\n", hp_last_error_detail());
    if (!strstr(hp_last_error_detail(), "from backend fallback (excluded by HP_BACKENDS)"))
        return 4;
    return 0;
}

static void backends_variable_takes_effect(void **state)
{
    (void)state;
    assert_int_equal(run_in_child(child_backends_order, NULL), 0);
    assert_int_equal(run_in_child(child_backends_exclude, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(environment_values),
        cmocka_unit_test(backend_path_length),
        cmocka_unit_test(backends_variable_takes_effect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
