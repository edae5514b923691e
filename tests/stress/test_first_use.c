/*
 * Concurrent first use: 16 threads call hp_alloc at the same moment (a
 * barrier) in a process that never called libhp before. Every call
 * succeeds, every thread sees the same backend table, and each plugin is
 * loaded exactly once: the loader logs one "loader: NAME from PATH" line per
 * plugin (HP_DEBUG=1, stderr captured) and /proc/self/maps shows each
 * plugin file mapped, and dl_iterate_phdr one object per plugin. Repeated in fresh children to give a race many chances.
 * This program links the public libhp.so, as an application would.
 */
#include <hp.h>

#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
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

#define NTHREADS 16
#define ROUNDS 20

static const char *backend_dir;
static pthread_barrier_t go;

struct result {
    void *p;
    int32_t err;
    int32_t count;
};

static void *first_call(void *arg)
{
    struct result *r = arg;
    pthread_barrier_wait(&go);
    r->p = hp_alloc((size_t)(1u << 20) + 4096, 0);
    r->err = hp_last_error();
    r->count = hp_backend_count();
    return NULL;
}

/* Plugin files this process has mapped: distinct files under dir in
 * /proc/self/maps, where the kernel names the file behind each mapping
 * (plugins are dlopen'd by descriptor, so the dynamic linker's own names
 * are /proc/self/fd/N). */
static int count_plugin_files(const char *dir)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[4096], seen[64][512];
    int n = 0;
    size_t dl = strlen(dir);
    while (fgets(line, sizeof(line), f)) {
        char *path = strchr(line, '/');
        if (!path || strncmp(path, dir, dl) || path[dl] != '/')
            continue;
        path[strcspn(path, "\n")] = '\0';
        int known = 0;
        for (int i = 0; i < n; i++)
            known |= !strcmp(seen[i], path);
        if (!known && n < 64)
            snprintf(seen[n++], sizeof(seen[0]), "%s", path);
    }
    fclose(f);
    return n;
}

static int count_fd_objects(struct dl_phdr_info *info, size_t size, void *n)
{
    (void)size;
    if (info->dlpi_name && !strncmp(info->dlpi_name, "/proc/self/fd/", 14))
        ++*(int *)n;
    return 0;
}

/* Lines of the captured log that say a plugin was adopted. */
static int count_loads(const char *log, const char *name)
{
    char needle[64];
    snprintf(needle, sizeof(needle), "loader: %s from ", name);
    int n = 0;
    for (const char *s = log; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}

static int child_first_use(void *unused)
{
    (void)unused;
    alarm(30);
    /* stderr goes to a file: it is where HP_DEBUG writes. */
    char logpath[] = "/tmp/hp-first-use-XXXXXX";
    int lfd = mkstemp(logpath);
    CHILD_CHECK(lfd >= 0);
    unlink(logpath);
    int saved = dup(2);
    CHILD_CHECK(saved >= 0 && dup2(lfd, 2) == 2);
    setenv("HP_DEBUG", "1", 1);

    pthread_t t[NTHREADS];
    struct result r[NTHREADS];
    pthread_barrier_init(&go, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++)
        CHILD_CHECK(pthread_create(&t[i], NULL, first_call, &r[i]) == 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    fflush(stderr);
    dup2(saved, 2);

    char log[65536];
    ssize_t n = pread(lfd, log, sizeof(log) - 1, 0);
    close(lfd);
    CHILD_CHECK(n > 0);
    log[n] = '\0';

    for (int i = 0; i < NTHREADS; i++) {
        if (!r[i].p)
            dprintf(2, "# thread %d: %s\n", i, hp_error_name(r[i].err));
        CHILD_CHECK(r[i].p != NULL);
        CHILD_CHECK(r[i].count == r[0].count);
        for (int k = 0; k < i; k++)
            CHILD_CHECK(r[k].p != r[i].p);
    }
    CHILD_CHECK(r[0].count == hp_backend_count() && hp_backend_count() >= 1);

    int plugins = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        CHILD_CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        if (!bi.name[0] || !strcmp(bi.path, "builtin"))
            continue;
        plugins++;
        int loads = count_loads(log, bi.name);
        if (loads != 1)
            dprintf(2, "# %s adopted %d times\n", bi.name, loads);
        CHILD_CHECK(loads == 1);
    }
    int files = count_plugin_files(backend_dir);
    if (files != plugins)
        dprintf(2, "# %d plugin files mapped for %d plugins\n", files, plugins);
    CHILD_CHECK(files == plugins);
    int objects = 0;
    dl_iterate_phdr(count_fd_objects, &objects);
    if (objects != plugins)
        dprintf(2, "# %d objects loaded by descriptor for %d plugins\n", objects, plugins);
    CHILD_CHECK(objects == plugins);
    for (int i = 0; i < NTHREADS; i++)
        CHILD_CHECK(hp_free(r[i].p) == HP_OK);
    return 0;
}

static void sixteen_threads_first_call(void **state)
{
    (void)state;
    for (int round = 0; round < ROUNDS; round++) {
        int rc = run_in_child(child_first_use, NULL);
        if (rc)
            print_message("# round %d failed with %d\n", round, rc);
        assert_int_equal(rc, 0);
    }
    print_message("# %d fresh processes x %d simultaneous first calls: all succeeded, "
                  "each plugin loaded once\n", ROUNDS, NTHREADS);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s BACKEND_DIR\n", argv[0]);
        return 2;
    }
    backend_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sixteen_threads_first_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
