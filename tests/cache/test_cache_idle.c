/*
 * Idle memory goes back without another libhp call, as a second process
 * sees it: a child frees a block into the cache and then sleeps without
 * calling libhp; this process (which never calls libhp) watches the kernel's
 * own counters.
 *   - hugetlb: 1 GiB of 2 MiB pool pages; HugePages_Free (free_hugepages)
 *     must come back within the pool idle bound (HP_CACHE_POOL_IDLE_MS,
 *     default 1 s) + 1 s of the free;
 *   - THP: 512 MiB from thp-madvise; the child's VmRSS must fall within
 *     HP_CACHE_IDLE_MS (2 s here) + 1 s.
 * Both also check that the cache did hold the memory first (the pages stay
 * taken right after the free), so the test fails without the release thread.
 */
#include <hp.h>

#include "support.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MiB (UINT64_C(1) << 20)
#define POOL_PAGES 512l   /* 1 GiB of 2 MiB pages */
#define THP_IDLE_MS 2000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void child_defaults(void)
{
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGTERM, SIGINT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
        signal(sigs[i], SIG_DFL);
}

/* Fork a child that allocates len bytes from backend, touches them, frees
 * them, writes 'f' to the pipe and sleeps 8 s without calling libhp. */
static pid_t freeing_child(const char *backend, size_t len, int *rd)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        child_defaults();
        close(p[0]);
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = backend;
        o.flags = HP_F_REQUIRE_HUGE;
        unsigned char *b = hp_alloc_ex(len, &o);
        if (!b) {
            fprintf(stderr, "# child: %s\n", hp_last_error_detail());
            _exit(3);
        }
        memset(b, 0x42, len);
        if (write(p[1], "a", 1) != 1 || hp_free(b) != HP_OK || write(p[1], "f", 1) != 1)
            _exit(2);
        sleep(8);
        _exit(0);
    }
    close(p[1]);
    *rd = p[0];
    return pid;
}

static int finish(pid_t pid)
{
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    return 0;
}

static void hugetlb_pool_pages_come_back(void **state)
{
    (void)state;
    long total = pool_get(2048, "nr_hugepages"), free_now = pool_get(2048, "free_hugepages");
    long others = total >= 0 && free_now >= 0 ? total - free_now : 0;  /* not ours to count */
    if (!is_root() || pool_set(2048, (unsigned long)(others + POOL_PAGES)) != others + POOL_PAGES ||
        pool_get(2048, "free_hugepages") != POOL_PAGES) {
        print_message("# no pool of %ld free 2 MiB pages\n", POOL_PAGES);
        skip();
    }
    int rd;
    pid_t pid = freeing_child("hugetlbfs", (size_t)POOL_PAGES * 2 * MiB, &rd);
    assert_true(pid > 0);
    char c;
    assert_int_equal(read(rd, &c, 1), 1);
    long used = pool_get(2048, "free_hugepages");
    if (read(rd, &c, 1) != 1) {
        finish(pid);
        fail_msg("the child could not allocate or free the block");
    }
    double freed = now_s();
    long right_after = pool_get(2048, "free_hugepages");
    long got = right_after;
    double when = 0;
    while (now_s() - freed < 4.0) {
        got = pool_get(2048, "free_hugepages");
        if (got == POOL_PAGES) {
            when = now_s() - freed;
            break;
        }
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
    }
    finish(pid);
    close(rd);
    print_message("# free pool pages: %ld while allocated, %ld right after hp_free, %ld after "
                  "%.2f s\n", used, right_after, got, when ? when : now_s() - freed);
    assert_int_equal(used, 0);
    assert_true(right_after < POOL_PAGES);  /* the cache held them */
    assert_int_equal(got, POOL_PAGES);
    assert_true(when <= 1.0 + 1.0);
}

static void thp_rss_falls(void **state)
{
    (void)state;
    char mode[64];
    if (knob_get("/sys/kernel/mm/transparent_hugepage/enabled", mode, sizeof(mode)) != 0 ||
        strstr(mode, "[never]")) {
        print_message("# THP is off\n");
        skip();
    }
    char idle[16];
    snprintf(idle, sizeof(idle), "%d", THP_IDLE_MS);
    setenv("HP_CACHE_IDLE_MS", idle, 1);  /* read by the child's first libhp call */
    int rd;
    pid_t pid = freeing_child("thp-madvise", 512 * MiB, &rd);
    unsetenv("HP_CACHE_IDLE_MS");
    assert_true(pid > 0);
    char c;
    if (read(rd, &c, 1) != 1) {
        finish(pid);
        skip();  /* no THP backend here (the child said why) */
    }
    long held = vmrss_kb(pid);
    assert_int_equal(read(rd, &c, 1), 1);
    double freed = now_s();
    long right_after = vmrss_kb(pid), got = right_after;
    double when = 0;
    while (now_s() - freed < THP_IDLE_MS / 1000.0 + 3.0) {
        got = vmrss_kb(pid);
        if (got < held - 400 * 1024) {
            when = now_s() - freed;
            break;
        }
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
    }
    finish(pid);
    close(rd);
    print_message("# child RSS: %ld kB with the block, %ld kB right after hp_free, %ld kB "
                  "after %.2f s (HP_CACHE_IDLE_MS=%d)\n", held, right_after, got,
                  when ? when : now_s() - freed, THP_IDLE_MS);
    assert_true(right_after > held - 400 * 1024);  /* the cache held it */
    assert_true(when > 0);
    assert_true(when <= THP_IDLE_MS / 1000.0 + 1.0);
}

int main(void)
{
    unsetenv("HP_CACHE_MAX");
    unsetenv("HP_CACHE_IDLE_MS");
    unsetenv("HP_CACHE_POOL_IDLE_MS");
    knob_lock();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hugetlb_pool_pages_come_back),
        cmocka_unit_test(thp_rss_falls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
