/*
 * An allocator interposed on libhp that calls libhp back from an allocation
 * libhp's own start-up makes (libhp-malloc does, when that allocation is
 * the process's first): the call must fail with HP_ENOTSUP and its detail,
 * not wait for the start-up it is part of, and libhp must work once the
 * start-up is done. This program is that allocator: its calloc, which
 * libhp's loader calls while it builds its tables, calls hp_alloc and
 * hp_backend_count the first time it runs inside libhp's start-up.
 */
#include <hp.h>

#include "support.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef __SANITIZE_ADDRESS__
void *__libc_calloc(size_t n, size_t size);

static int armed, inside;
static void *got;
static int32_t got_error, got_count;
static char got_detail[400];

/* Exported from the executable, so that libhp's calls bind to it. ASan's
 * allocator must own every block the program frees, so under ASan there is
 * no allocator of this program's own, and the test skips. */
void *calloc(size_t n, size_t size)
{
    if (armed && !inside) {
        inside = 1;
        armed = 0;
        got = hp_alloc(4096, 0);
        got_error = hp_last_error();
        snprintf(got_detail, sizeof(got_detail), "%s", hp_last_error_detail());
        got_count = hp_backend_count();
        inside = 0;
    }
    return __libc_calloc(n, size);
}
#endif

static void called_back_during_start_up(void **state)
{
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    print_message("# SKIP: an allocator of its own cannot run under ASan\n");
    skip();
#else
    if (getenv("HPTEST_VALGRIND")) {
        print_message("# SKIP: valgrind replaces every allocator, this program's too\n");
        skip();
    }
    /* Waiting on its own start-up would hang: the alarm ends it instead. */
    alarm(20);
    armed = 1;
    int32_t n = hp_backend_count();  /* libhp's first call: its start-up */
    alarm(0);
    assert_false(armed);  /* the loader did call calloc */
    print_message("# called back inside the start-up: hp_alloc %s (%s: %s), "
                  "hp_backend_count %d; afterwards %d backends\n", got ? "served" : "failed",
                  hp_error_name(got_error), got_detail, got_count, n);
    assert_null(got);
    assert_int_equal(got_error, HP_ENOTSUP);
    assert_non_null(strstr(got_detail, "starts up"));
    assert_int_equal(got_count, 0);
    assert_true(n >= 1);
    void *p = hp_alloc(4096, 0);
    assert_non_null(p);
    assert_int_equal(hp_free(p), HP_OK);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(called_back_during_start_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
