/*
 * The plugin loader: every broken-plugin kind is rejected with its reason,
 * the rest keep working, and the directory and files are trusted only when
 * nobody else could have written them. Each case runs in a forked child so
 * it starts from an unloaded libhp (the parent never calls libhp).
 */
#include <hp.h>

#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const char *fixture_dir, *backend_dir, *secure_probe, *base_dir, *crash_base,
    *crash_other;

/* Copy (not link) every *.so of src into dst with the given mode. */
static void copy_plugins(const char *src, const char *dst, mode_t mode)
{
    DIR *d = opendir(src);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".so"))
            continue;
        char from[512], to[512], buf[65536];
        snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
        int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
        assert_true(in >= 0 && out >= 0);
        ssize_t got;
        while ((got = read(in, buf, sizeof(buf))) > 0)
            assert_int_equal(write(out, buf, (size_t)got), got);
        close(in);
        close(out);
        assert_int_equal(chmod(to, mode), 0);
    }
    closedir(d);
}

/* A fresh directory inside the build tree, whose chain up to "/" the loader
 * trusts (README "Plugin trust"); /tmp, world-writable, would be refused.
 * Its name lives in a static slot, not on the heap: a failed assertion
 * leaves the test before remove_dir, and a heap name would then be a leak
 * that every later child, forked from this process, reports at its exit
 * under valgrind, failing too. */
static char *make_dir(mode_t mode)
{
    static char slots[8][PATH_MAX];
    static unsigned next;
    char *dir = slots[next++ % 8];
    int n = snprintf(dir, PATH_MAX, "%s/hp-loader-XXXXXX", base_dir);
    assert_true(n > 0 && n < PATH_MAX);
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, mode), 0);
    return dir;
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* fn(dir) in a child (run_in_child), dir a fresh directory holding copies
 * of the fixture plugins; removed afterwards. */
static void in_fixture_dir(int (*fn)(void *))
{
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    assert_int_equal(run_in_child(fn, dir), 0);
    remove_dir(dir);
}

/* Find a backend entry by name or by path suffix; fills *out. */
static int find(const char *name, const char *file, struct hp_backend_info *out)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK)
            return 0;
        const char *slash = strrchr(bi.path, '/');
        if ((name && !strcmp(bi.name, name)) || (file && slash && !strcmp(slash + 1, file))) {
            *out = bi;
            return 1;
        }
    }
    return 0;
}

/* 1 if path is a file directly in dir. */
static int in_dir(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && path[n] == '/' && !strchr(path + n + 1, '/');
}

static int expect_rejected(const char *file, const char *why)
{
    struct hp_backend_info bi;
    if (!find(NULL, file, &bi)) {
        fprintf(stderr, "# %s not listed\n", file);
        return 0;
    }
    fprintf(stderr, "# %s: %s\n", file, bi.reason);
    return !bi.available && strstr(bi.reason, "rejected") && strstr(bi.reason, why);
}

static int index_of_path(const char *path);

static int child_all_fixtures(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_DEBUG", "1", 1);
    /* Every kind of broken plugin, each with its reason. */
    CHILD_CHECK(expect_rejected("fx_no_entry.so", "missing entry symbol"));
    CHILD_CHECK(expect_rejected("fx_bad_abi.so", "ABI version 99"));
    CHILD_CHECK(expect_rejected("fx_short_desc.so", "descriptor too short"));
    CHILD_CHECK(expect_rejected("fx_no_map.so", "mandatory op missing"));
    CHILD_CHECK(expect_rejected("fx_probe_reason.so",
                                "probe failed: HP_ENOTSUP: no widget device (/dev/widget missing)"));
    CHILD_CHECK(expect_rejected("fx_bad_caps_1.so",
                                "invalid capability record: n_page_sizes is 99, at most 16"));
    CHILD_CHECK(expect_rejected("fx_bad_caps_2.so",
                                "invalid capability record: page sizes not ascending"));
    CHILD_CHECK(expect_rejected("fx_bad_caps_3.so", "invalid capability record: page size 12288 "
                                "is not a power of two"));
    CHILD_CHECK(expect_rejected("fx_null_entry.so", "returned NULL"));
    CHILD_CHECK(expect_rejected("fx_bad_name.so", "invalid backend name"));
    CHILD_CHECK(expect_rejected("fx_zz_duplicate.so", "duplicate backend name \"fixture-good\": "));
    CHILD_CHECK(expect_rejected("fx_zz_duplicate.so", "/fx_good.so provides it already"));
    CHILD_CHECK(expect_rejected("fx_v1_only.so", "built for backend ABI 1; this libhp loads "
                                "ABI 2 (hp_backend_entry_v2)"));
    CHILD_CHECK(expect_rejected("fx_init_fails.so", "init failed: HP_ENOTSUP: no widget device "
                                "(/dev/widget missing)"));
    /* ... and everything else keeps working: the built-ins from their own
     * directory (the copies beside the fixtures are refused their names). */
    struct hp_backend_info bi;
    CHILD_CHECK(find("fallback", NULL, &bi) && bi.available && in_dir(bi.path, backend_dir));
    CHILD_CHECK(find("thp-madvise", NULL, &bi) && in_dir(bi.path, backend_dir));
    CHILD_CHECK(find("hugetlbfs", NULL, &bi) && in_dir(bi.path, backend_dir));
    CHILD_CHECK(find("anon-orders", NULL, &bi) && in_dir(bi.path, backend_dir));
    char copy[700];
    snprintf(copy, sizeof(copy), "%s/thp-madvise.so", (const char *)dir);
    struct hp_backend_info at = HP_BACKEND_INFO_INIT;
    CHILD_CHECK(hp_backend_get((uint32_t)index_of_path(copy), &at) == HP_OK &&
                strstr(at.reason, "is reserved for the built-in backend"));
    /* Third-party backends are probed only once named. */
    CHILD_CHECK(find("fixture-good", NULL, &bi) && !bi.available &&
                strstr(bi.reason, "probed when named"));
    CHILD_CHECK(find("fixture-probe-fails", NULL, &bi) && strstr(bi.reason, "probed when named"));
    void *p = hp_alloc(1 << 20, 0);
    CHILD_CHECK(p != NULL);
    CHILD_CHECK(hp_free(p) == HP_OK);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-good";
    p = hp_alloc_ex(12345, &o);
    CHILD_CHECK(p != NULL);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fixture-good"));
    CHILD_CHECK(hp_free(p) == HP_OK);
    CHILD_CHECK(find("fixture-good", NULL, &bi) && bi.available);
    /* Named, a failing probe says why, in the plugin's words. */
    o.backend = "fixture-probe-fails";
    CHILD_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_ENOBACKEND &&
                strstr(hp_last_error_detail(), "probe failed: HP_ENOTSUP: fixture probe says no"));
    CHILD_CHECK(find("fixture-probe-fails", NULL, &bi) && !bi.available &&
                strstr(bi.reason, "fixture probe says no"));
    /* A third-party backend is never chosen unless named. */
    for (int i = 0; i < 20; i++) {
        p = hp_alloc(4096u << (i % 10), 0);
        CHILD_CHECK(p && hp_info(p, &info) == HP_OK && strcmp(info.backend, "fixture-good"));
        hp_free(p);
    }
    return 0;
}

static void broken_plugins_are_rejected_with_reasons(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    copy_plugins(backend_dir, dir, 0755);
    assert_int_equal(run_in_child(child_all_fixtures, dir), 0);
    remove_dir(dir);
}

/* Every op gets the context init made; fini gets it at exit. */
static int child_context(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-context";
    for (int i = 0; i < 3; i++) {
        void *p = hp_alloc_ex(8192, &o);
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fixture-context"));
        /* The query op reaches hp_info ... */
        CHILD_CHECK(info.numa_node == 3 && info.fd >= 0 && info.fd_offset == 4096 &&
                    fcntl(info.fd, F_GETFD) >= 0);
        /* ... and a caller with the 1.0 struct gets the 1.0 fields only. */
        struct hp_block_info old;
        memset(&old, 0x7e, sizeof(old));
        old.size = (uint32_t)offsetof(struct hp_block_info, numa_node);
        CHILD_CHECK(hp_info(p, &old) == HP_OK && old.usable_size == info.usable_size &&
                    old.numa_node == 0x7e7e7e7e && old.fd_offset == UINT64_C(0x7e7e7e7e7e7e7e7e));
        CHILD_CHECK(hp_free(p) == HP_OK);
    }
    exit(0);  /* run the destructors, unlike run_in_child's _exit */
}

static void plugin_context_reaches_every_op_and_fini(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    char mark[600], line[200] = "";
    snprintf(mark, sizeof(mark), "%s/fini.txt", dir);
    setenv("HP_FX_FINI_MARK", mark, 1);
    assert_int_equal(run_in_child(child_context, dir), 0);
    unsetenv("HP_FX_FINI_MARK");
    FILE *f = fopen(mark, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    assert_null(fgets(line + strlen(line), sizeof(line) - strlen(line), f));  /* once */
    fclose(f);
    assert_string_equal(line, "fini ok=1 maps=3 unmaps=3 probes=1\n");
    remove_dir(dir);
}

static uint64_t cached_bytes(const char *backend)
{
    struct hp_cache_stats st = HP_CACHE_STATS_INIT;
    if (hp_cache_get_stats(&st) != HP_OK)
        return UINT64_MAX;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < st.n_entries; i++)
        if (!strcmp(st.entries[i].backend, backend))
            bytes += st.entries[i].bytes;
    return bytes;
}

/* A third-party plugin whose mappings are HP_MAP_CARVABLE gets what the
 * built-ins get: its freed blocks are cached, carved into new blocks and
 * merged back, and hp_realloc grows a block in place into the freed range
 * after it. */
static int child_carvable(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    const uint64_t mib2 = UINT64_C(2) << 20;
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-carvable";
    char *p = hp_alloc_ex(2 * mib2, &o);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fixture-carvable") &&
                info.page_size == mib2);
    CHILD_CHECK(hp_free(p) == HP_OK);
    CHILD_CHECK(cached_bytes("fixture-carvable") == 2 * mib2);
    /* Two blocks carved from the cached range, one after the other. */
    char *q = hp_alloc_ex(mib2, &o), *r = hp_alloc_ex(mib2, &o);
    CHILD_CHECK(q == p && r == p + mib2);
    CHILD_CHECK(cached_bytes("fixture-carvable") == 0);
    memset(q, 0x5a, mib2);
    /* Reused memory is zeroed like fresh memory. */
    CHILD_CHECK(r[0] == 0 && r[mib2 - 1] == 0);
    /* r goes back; q grows in place into it. */
    CHILD_CHECK(hp_free(r) == HP_OK && cached_bytes("fixture-carvable") == mib2);
    char *g = hp_realloc(q, 2 * mib2, 0);
    CHILD_CHECK(g == q && g[0] == 0x5a && g[mib2 - 1] == 0x5a && g[mib2] == 0);
    CHILD_CHECK(cached_bytes("fixture-carvable") == 0);
    CHILD_CHECK(hp_info(g, &info) == HP_OK && !strcmp(info.backend, "fixture-carvable") &&
                info.usable_size == 2 * mib2);
    CHILD_CHECK(hp_free(g) == HP_OK);
    /* The cache gives the range back through the plugin's unmap (which
     * refuses pieces without the plugin's cookie and flags). */
    CHILD_CHECK(hp_cache_trim() == HP_OK && cached_bytes("fixture-carvable") == 0);
    struct hp_cache_stats st = HP_CACHE_STATS_INIT;
    CHILD_CHECK(hp_cache_get_stats(&st) == HP_OK && st.bytes == 0);
    return 0;
}

static void carvable_plugin_gets_the_cache(void **state)
{
    (void)state;
    in_fixture_dir(child_carvable);
}

/* A plugin whose probe calls its page size unpooled but whose mappings
 * carry HP_MAP_POOL: HP_F_NOPOOL refuses its memory with a detail naming
 * both, the mapping goes back through the plugin's unmap (nothing leaks),
 * and without the flag it serves as usual. */
static int child_pool_liar(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    unsetenv("FX_POOL_LIAR_UNMAPS");
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-pool-liar";
    o.flags = HP_F_NOPOOL;
    CHILD_CHECK(hp_alloc_ex(65536, &o) == NULL);
    CHILD_CHECK(hp_last_error() == HP_EBACKEND);
    CHILD_CHECK(strstr(hp_last_error_detail(), "fixture-pool-liar") &&
                strstr(hp_last_error_detail(), "HP_F_NOPOOL"));
    const char *unmaps = getenv("FX_POOL_LIAR_UNMAPS");
    CHILD_CHECK(unmaps && !strcmp(unmaps, "1"));
    o.flags = 0;
    char *p = hp_alloc_ex(65536, &o);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fixture-pool-liar"));
    p[65535] = 1;
    CHILD_CHECK(hp_free(p) == HP_OK);
    return 0;
}

static void nopool_refuses_a_plugin_that_maps_pool_pages(void **state)
{
    (void)state;
    in_fixture_dir(child_pool_liar);
}

static int filled(const unsigned char *p, size_t len, unsigned char v)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static int backend_is(const void *p, const char *name)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    return hp_info(p, &info) == HP_OK && !strcmp(info.backend, name);
}

/* A block whose backend was named stays there: with no remap op it is
 * copied within the backend; when remap fails and a new map does too,
 * hp_realloc fails with both details and the block is unchanged. */
static int child_pinned(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-good";  /* no remap */
    unsigned char *p = hp_alloc_ex(64 << 10, &o);
    CHILD_CHECK(p && backend_is(p, "fixture-good"));
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(hp_info(p, &info) == HP_OK && info.pin == HP_BLOCK_PIN_NAMED);
    memset(p, 0x11, 64 << 10);
    unsigned char *q = hp_realloc(p, 3 << 20, 0);
    CHILD_CHECK(q && backend_is(q, "fixture-good") && filled(q, 64 << 10, 0x11) &&
                filled(q + (64 << 10), (3 << 20) - (64 << 10), 0));
    q = hp_realloc(q, 16 << 10, 0);
    CHILD_CHECK(q && backend_is(q, "fixture-good") && filled(q, 16 << 10, 0x11));
    CHILD_CHECK(hp_free(q) == HP_OK);

    o.backend = "fixture-remap-fails";
    p = hp_alloc_ex(64 << 10, &o);
    CHILD_CHECK(p && backend_is(p, "fixture-remap-fails"));
    memset(p, 0x22, 64 << 10);
    q = hp_realloc(p, 512 << 10, 0);  /* remap fails; a copy within the backend works */
    CHILD_CHECK(q && backend_is(q, "fixture-remap-fails") && filled(q, 64 << 10, 0x22));
    unsigned char *r = hp_realloc(q, 4 << 20, 0);
    fprintf(stderr, "# %s: %s\n", hp_error_name(hp_last_error()), hp_last_error_detail());
    CHILD_CHECK(r == NULL && hp_last_error() == HP_ENOMEM);
    CHILD_CHECK(strstr(hp_last_error_detail(), "fixture remap refused") &&
                strstr(hp_last_error_detail(), "fixture map refuses more than 1 MiB") &&
                strstr(hp_last_error_detail(), "fixture-remap-fails"));
    CHILD_CHECK(backend_is(q, "fixture-remap-fails") && filled(q, 64 << 10, 0x22));
    /* A page size the backend does not have: no move elsewhere either. */
    r = hp_realloc(q, 1 << 20, HP_F_PAGE_2M);
    CHILD_CHECK(r == NULL && backend_is(q, "fixture-remap-fails"));
    CHILD_CHECK(hp_free(q) == HP_OK);
    return 0;
}

static void named_block_never_migrates(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    copy_plugins(backend_dir, dir, 0755);
    assert_int_equal(run_in_child(child_pinned, dir), 0);
    remove_dir(dir);
}

/* HP_BACKENDS listing exactly one backend pins the blocks it serves like
 * a name in hp_alloc_opts.backend: a failing remap and a failing copy make
 * hp_realloc fail with the plugin's details and leave the block unchanged.
 * A longer list lets a block move among the listed backends. */
static int child_env_pinned(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKENDS", "fixture-remap-fails", 1);
    unsigned char *p = hp_alloc(64 << 10, 0);
    CHILD_CHECK(p && backend_is(p, "fixture-remap-fails"));
    memset(p, 0x33, 64 << 10);
    unsigned char *q = hp_realloc(p, 4 << 20, 0);
    fprintf(stderr, "# %s: %s\n", hp_error_name(hp_last_error()), hp_last_error_detail());
    CHILD_CHECK(q == NULL && hp_last_error() == HP_ENOMEM);
    CHILD_CHECK(strstr(hp_last_error_detail(), "fixture remap refused") &&
                strstr(hp_last_error_detail(), "fixture map refuses more than 1 MiB") &&
                strstr(hp_last_error_detail(), "HP_BACKENDS"));
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(hp_info(p, &info) == HP_OK && info.usable_size == 64 << 10 &&
                !strcmp(info.backend, "fixture-remap-fails") && filled(p, 64 << 10, 0x33) &&
                info.pin == HP_BLOCK_PIN_ENV);
    /* Within the backend's reach a copy inside it works. */
    q = hp_realloc(p, 512 << 10, 0);
    CHILD_CHECK(q && backend_is(q, "fixture-remap-fails") && filled(q, 64 << 10, 0x33));
    CHILD_CHECK(hp_info(q, &info) == HP_OK && info.pin == HP_BLOCK_PIN_ENV);
    CHILD_CHECK(hp_free(q) == HP_OK);
    return 0;
}

static int child_env_list(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKENDS", "fixture-remap-fails,fallback", 1);
    unsigned char *p = hp_alloc(64 << 10, 0);
    CHILD_CHECK(p && backend_is(p, "fixture-remap-fails"));
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(hp_info(p, &info) == HP_OK && info.pin == HP_BLOCK_PIN_NONE);
    memset(p, 0x44, 64 << 10);
    unsigned char *q = hp_realloc(p, 4 << 20, 0);
    CHILD_CHECK(q && backend_is(q, "fallback") && filled(q, 64 << 10, 0x44) &&
                filled(q + (64 << 10), (4 << 20) - (64 << 10), 0));
    CHILD_CHECK(hp_free(q) == HP_OK);
    return 0;
}

static void hp_backends_alone_pins_the_block(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    copy_plugins(backend_dir, dir, 0755);
    assert_int_equal(run_in_child(child_env_pinned, dir), 0);
    assert_int_equal(run_in_child(child_env_list, dir), 0);
    remove_dir(dir);
}

/* A shared (MAP_SHARED memfd) block resized by a forked child: the child
 * copies instead of calling the plugin's remap, whose ftruncate would take
 * the pages away from the parent (SIGBUS at its next touch). */
static int child_shared_fork(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-shared";
    unsigned char *p = hp_alloc_ex(256 << 10, &o);
    CHILD_CHECK(p && backend_is(p, "fixture-shared"));
    memset(p, 0x33, 256 << 10);
    /* Before any fork, remap is the plugin's own business. */
    unsigned char *q = hp_realloc(p, 512 << 10, 0);
    CHILD_CHECK(q && filled(q, 256 << 10, 0x33));
    memset(q, 0x44, 512 << 10);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *c = hp_realloc(q, 4096, 0);  /* shrink in the child */
        _exit(c && c[0] == 0x44 && backend_is(c, "fixture-shared") ? 0 : 1);
    }
    int status;
    CHILD_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0);
    CHILD_CHECK(filled(q, 512 << 10, 0x44));  /* all still there: no SIGBUS */
    CHILD_CHECK(hp_free(q) == HP_OK);
    return 0;
}

static void shared_block_resized_after_fork_is_copied(void **state)
{
    (void)state;
    in_fixture_dir(child_shared_fork);
}

/* HP_MAP_SHARED memory is another process's too: the core never caches it
 * (hp/backend.h), not even when the mapping is also HP_MAP_CARVABLE with
 * everything else the cache keeps (a page size above the base page,
 * addr == map_addr, aligned: lib/cache.c, hp_cache_accepts). The same
 * plugin without the shared flag is cached, first, so the test shows the
 * cache on and the layout kept; the shared one goes to its unmap at once. */
static int child_carvable_shared(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    unsetenv("FX_CARVABLE_SHARED_UNMAPS");
    const uint64_t mib2 = UINT64_C(2) << 20;
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-carvable-noremap";
    char *p = hp_alloc_ex(2 * mib2, &o);
    CHILD_CHECK(p && backend_is(p, "fixture-carvable-noremap") && hp_free(p) == HP_OK);
    CHILD_CHECK(cached_bytes("fixture-carvable-noremap") == 2 * mib2);
    CHILD_CHECK(hp_cache_trim() == HP_OK);

    o.backend = "fixture-carvable-shared";
    p = hp_alloc_ex(2 * mib2, &o);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK &&
                !strcmp(info.backend, "fixture-carvable-shared") && info.page_size == mib2);
    memset(p, 0x5a, 2 * mib2);
    CHILD_CHECK(hp_free(p) == HP_OK);
    const char *unmaps = getenv("FX_CARVABLE_SHARED_UNMAPS");
    fprintf(stderr, "# after hp_free: %llu bytes cached, %s unmap calls\n",
            (unsigned long long)cached_bytes("fixture-carvable-shared"), unmaps ? unmaps : "no");
    CHILD_CHECK(cached_bytes("fixture-carvable-shared") == 0);
    CHILD_CHECK(unmaps && !strcmp(unmaps, "1"));
    /* The next block is mapped afresh, never carved from the freed one. */
    struct hp_cache_stats st = HP_CACHE_STATS_INIT;
    CHILD_CHECK(hp_cache_get_stats(&st) == HP_OK && st.bytes == 0);
    uint64_t hits = st.hits;
    char *q = hp_alloc_ex(mib2, &o);
    CHILD_CHECK(q && backend_is(q, "fixture-carvable-shared") && q[0] == 0);
    CHILD_CHECK(hp_cache_get_stats(&st) == HP_OK && st.hits == hits);
    CHILD_CHECK(hp_free(q) == HP_OK && cached_bytes("fixture-carvable-shared") == 0);
    unmaps = getenv("FX_CARVABLE_SHARED_UNMAPS");
    CHILD_CHECK(unmaps && !strcmp(unmaps, "2"));
    return 0;
}

/* Stacks too (lib/stack_cache.c, hp_stack_cache_put): a destroyed stack
 * of the plugin goes to its unmap, not to the stack cache. */
static int child_carvable_shared_stack(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKENDS", "fixture-carvable-shared", 1);
    unsetenv("FX_CARVABLE_SHARED_UNMAPS");
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.flags = HP_STACK_HUGE;
    struct hp_stack *s = hp_stack_create_ex(UINT64_C(2) << 20, &o);
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    CHILD_CHECK(s && hp_stack_get_info(s, &info) == HP_OK &&
                !strcmp(info.source, "fixture-carvable-shared"));
    CHILD_CHECK(hp_stack_destroy(s) == HP_OK);
    struct hp_stack_cache_stats st = HP_STACK_CACHE_STATS_INIT;
    CHILD_CHECK(hp_stack_cache_get_stats(&st) == HP_OK);
    const char *unmaps = getenv("FX_CARVABLE_SHARED_UNMAPS");
    fprintf(stderr, "# after hp_stack_destroy: %llu stacks cached, %s unmap calls\n",
            (unsigned long long)st.cached_stacks, unmaps ? unmaps : "no");
    CHILD_CHECK(st.max_stacks > 0 && st.cached_stacks == 0);
    CHILD_CHECK(unmaps && !strcmp(unmaps, "1"));
    return 0;
}

static void shared_carvable_plugin_is_never_cached(void **state)
{
    (void)state;
    in_fixture_dir(child_carvable_shared);
    in_fixture_dir(child_carvable_shared_stack);
}

static int child_hostile(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-hostile";
    void *warm = hp_alloc_ex(4096, &o);  /* the honest path works */
    CHILD_CHECK(warm && hp_free(warm) == HP_OK);
    long maps = maps_count();
    for (size_t lie = 1; lie <= 9; lie++) {
        o.flags = lie == 9 ? HP_F_PAGE_2M : 0;
        void *p = hp_alloc_ex(lie, &o);
        fprintf(stderr, "# lie %zu: %s %s\n", lie, hp_error_name(hp_last_error()),
                hp_last_error_detail());
        CHILD_CHECK(p == NULL);
        CHILD_CHECK(hp_last_error() == HP_EBACKEND);
    }
    CHILD_CHECK(maps_count() == maps);  /* the lies leaked no mapping */
    return 0;
}

/* Stacks from a plugin that gets guards wrong: no room for one is refused;
 * a guard it left writable is made inaccessible by the core. */
static int child_hostile_stacks(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKENDS", "fixture-hostile", 1);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.flags = HP_STACK_NOCACHE;
    hp_stack_destroy(hp_stack_create_ex(32 * page, &o));  /* libhp's own first-use maps */
    long maps = maps_count();
    struct hp_stack *s = hp_stack_create_ex(32 * page, &o);
    fprintf(stderr, "# no room for a guard: %s %s\n", hp_error_name(hp_last_error()),
            hp_last_error_detail());
    CHILD_CHECK(s == NULL);
    CHILD_CHECK(hp_last_error() == HP_EBACKEND);
    CHILD_CHECK(strstr(hp_last_error_detail(), "guard") != NULL);
    CHILD_CHECK(maps_count() == maps);  /* the refused mapping was unmapped */
    s = hp_stack_create_ex(16 * page, &o);
    CHILD_CHECK(s != NULL);
    struct hp_stack_info info = HP_STACK_INFO_INIT;
    CHILD_CHECK(hp_stack_get_info(s, &info) == HP_OK);
    CHILD_CHECK(!strcmp(info.source, "fixture-hostile"));
    char perms[5];
    CHILD_CHECK(perms_at((const void *)(uintptr_t)info.guard_addr, perms));
    fprintf(stderr, "# guard left writable by the plugin: %s after hp_stack_create\n", perms);
    CHILD_CHECK(info.guard_size >= page && info.guard_addr + info.guard_size == info.base_addr);
    CHILD_CHECK(!strcmp(perms, "---p"));
    CHILD_CHECK(perms_at((const void *)(uintptr_t)info.base_addr, perms) && !strcmp(perms, "rw-p"));
    CHILD_CHECK(hp_stack_destroy(s) == HP_OK);
    return 0;
}

static void misbehaving_plugin_stacks_are_refused_or_guarded(void **state)
{
    (void)state;
    in_fixture_dir(child_hostile_stacks);
}

static void misbehaving_plugin_results_are_refused(void **state)
{
    (void)state;
    in_fixture_dir(child_hostile);
}

static int child_no_directory(void *unused)
{
    (void)unused;
    unsetenv("HP_BACKEND_PATH");
    setenv("HP_BACKEND_DIR", "/nonexistent/hp-backends", 1);
    CHILD_CHECK(hp_backend_count() == 1);
    struct hp_backend_info bi;
    CHILD_CHECK(find("fallback", NULL, &bi) && !strcmp(bi.path, "builtin") && bi.available);
    void *p = hp_alloc(5 << 20, 0);
    CHILD_CHECK(p != NULL && hp_free(p) == HP_OK);
    return 0;
}

static void builtin_fallback_without_plugins(void **state)
{
    (void)state;
    assert_int_equal(run_in_child(child_no_directory, NULL), 0);
}

static int child_untrusted_dir(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
    int rejected = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        CHILD_CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        rejected |= strstr(bi.reason, "writable by others (sticky bit or not)") != NULL;
        CHILD_CHECK(strcmp(bi.name, "fixture-good") != 0);
    }
    CHILD_CHECK(rejected);
    CHILD_CHECK(find("fallback", NULL, &bi) && bi.available);
    void *p = hp_alloc(4096, 0);
    CHILD_CHECK(p && hp_free(p) == HP_OK);
    return 0;
}

static void world_writable_directory_is_refused(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(run_in_child(child_untrusted_dir, dir), 0);
    /* /tmp-style: the sticky bit does not make it trusted either. */
    assert_int_equal(chmod(dir, 01777), 0);
    assert_int_equal(run_in_child(child_untrusted_dir, dir), 0);
    remove_dir(dir);
}

static int child_writable_file(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    CHILD_CHECK(expect_rejected("fx_good.so", "writable by others"));
    return 0;
}

static void others_writable_plugin_is_refused(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0757);
    assert_int_equal(run_in_child(child_writable_file, dir), 0);
    remove_dir(dir);
}

static int child_foreign_owner(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    CHILD_CHECK(expect_rejected("fx_good.so", "owned by neither root nor the running user"));
    return 0;
}

static void plugin_of_another_user_is_refused(void **state)
{
    (void)state;
    if (!is_root()) {
        print_message("# SKIP: needs root to give a file to another user\n");
        skip();
    }
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    char path[600];
    snprintf(path, sizeof(path), "%s/fx_good.so", dir);
    assert_int_equal(chown(path, 65534, 65534), 0);
    assert_int_equal(run_in_child(child_foreign_owner, dir), 0);
    remove_dir(dir);
}

/* fixture_dir/file, in a static buffer. */
static const char *fixture_path(const char *file)
{
    static char path[600];
    snprintf(path, sizeof(path), "%s/%s", fixture_dir, file);
    return path;
}

/* Copy one file under a new name, root's, 0755. */
static void copy_as(const char *from, const char *dir, const char *name)
{
    char cmd[1600];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s/%s' && chmod 0755 '%s/%s'", from, dir, name, dir, name);
    assert_int_equal(system(cmd), 0);
}

struct logged {
    const char *dir;
    const char *backends;   /* HP_BACKENDS, or NULL */
    const char *name;       /* hp_alloc_ex(opts.backend = name) at the end, or NULL */
    char log[8192];
};

/* Load dir with HP_DEBUG=1, stderr in a file; list the backends, re-probe,
 * allocate (from name, if set). Returns how the child ended; l->log holds
 * what it logged. */
static int run_logged(struct logged *l);

static int child_logged(void *arg)
{
    struct logged *l = arg;
    signal(SIGSEGV, SIG_DFL);  /* cmocka's handler would catch a plugin's crash */
    setenv("HP_BACKEND_PATH", l->dir, 1);
    setenv("HP_DEBUG", "1", 1);
    if (l->backends)
        setenv("HP_BACKENDS", l->backends, 1);
    CHILD_CHECK(hp_backend_count() >= 2);
    CHILD_CHECK(hp_reprobe() == HP_OK);
    void *p = hp_alloc(4096, 0);
    CHILD_CHECK(p && hp_free(p) == HP_OK);
    if (l->name) {
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = l->name;
        hp_alloc_ex(4096, &o);
    }
    return 0;
}

static int run_logged(struct logged *l)
{
    char path[] = "/tmp/hp-loader-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(NULL);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = run_in_child(child_logged, l);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, l->log, sizeof(l->log) - 1, 0);
    close(fd);
    l->log[n > 0 ? n : 0] = '\0';
    return rc;
}

/* The last line of a log. */
static const char *last_line(const char *log)
{
    size_t n = strlen(log);
    while (n && log[n - 1] == '\n')
        n--;
    while (n && log[n - 1] != '\n')
        n--;
    return log + n;
}

/* A probe that crashes kills the process; the debug log says which file it
 * was, on the line written right before the call. */
static void debug_log_names_the_file_before_probing(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_as(crash_base, dir, "crash.so");
    struct logged l = {.dir = dir};
    int rc = run_logged(&l);
    const char *last = last_line(l.log);
    print_message("# the child ended with %d; its last log line: %s", rc, last);
    assert_int_equal(rc, 128 + SIGSEGV);
    char want[700];
    snprintf(want, sizeof(want), "libhp: loader: probing %s/crash.so (fixture-crash-base)", dir);
    assert_true(!strncmp(last, want, strlen(want)));
    remove_dir(dir);
}

/* A plugin of kind other is loaded but its probe is not called until a
 * request (hp_alloc_opts.backend) or HP_BACKENDS names it: one that crashes
 * in its probe harms nobody who does not use it. */
static void other_kind_probed_only_when_named(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_plugins(backend_dir, dir, 0755);
    copy_as(crash_other, dir, "crash.so");
    struct logged l = {.dir = dir};
    assert_int_equal(run_logged(&l), 0);  /* listed, re-probed, allocated: no probe */
    char probing[700];
    snprintf(probing, sizeof(probing), "probing %s/crash.so", dir);
    assert_null(strstr(l.log, probing));
    assert_non_null(strstr(l.log, "fixture-crash-other from"));
    /* Every other plugin's probe is announced the same way. */
    snprintf(probing, sizeof(probing), "probing %s/anon-orders.so (anon-orders)", backend_dir);
    assert_non_null(strstr(l.log, probing));
    struct logged named = {.dir = dir, .name = "fixture-crash-other"};
    assert_int_equal(run_logged(&named), 128 + SIGSEGV);
    assert_non_null(strstr(last_line(named.log), "crash.so (fixture-crash-other)"));
    struct logged env = {.dir = dir, .backends = "fixture-crash-other,fallback"};
    assert_int_equal(run_logged(&env), 128 + SIGSEGV);
    remove_dir(dir);
}

/* The path of fixture variant v (fixtures/meson.build), for copy_as. */
static const char *variant(const char *v)
{
    static char path[8][600];
    static unsigned next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof(path[0]), "%s/fx_v_%s.lib", fixture_dir, v);
    return p;
}

/* The index of the first list entry with this path, or -1. */
static int index_of_path(const char *path)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK)
            return -1;
        if (!strcmp(bi.path, path))
            return i;
    }
    return -1;
}

static int count_path(const char *path)
{
    int n = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        n += hp_backend_get((uint32_t)i, &bi) == HP_OK && !strcmp(bi.path, path);
    }
    return n;
}

struct takeover {
    const char *dir;           /* HP_BACKEND_PATH */
    const char *builtin_dir;   /* HP_BACKEND_DIR */
    int core_fallback;         /* builtin_dir has no fallback.so */
};

static int child_takeover(void *arg)
{
    const struct takeover *t = arg;
    setenv("HP_BACKEND_PATH", t->dir, 1);
    setenv("HP_BACKEND_DIR", t->builtin_dir, 1);
    char want[700];
    snprintf(want, sizeof(want), "the name \"fallback\" is reserved for the built-in backend "
             "(from %s, or compiled into libhp); a plugin elsewhere may not take it", t->builtin_dir);
    CHILD_CHECK(expect_rejected("aa-fallback.so", want));
    snprintf(want, sizeof(want), "the name \"thp-madvise\" is reserved for the built-in backend "
             "(from %s, or compiled into libhp); a plugin elsewhere may not take it", t->builtin_dir);
    CHILD_CHECK(expect_rejected("aa-thp.so", want));
    struct hp_backend_info bi;
    CHILD_CHECK(find("fallback", NULL, &bi) && bi.available &&
                (t->core_fallback ? !strcmp(bi.path, "builtin") : in_dir(bi.path, t->builtin_dir)));
    CHILD_CHECK(find("thp-madvise", NULL, &bi) && in_dir(bi.path, t->builtin_dir));
    /* The in-core fallback serves small blocks... */
    void *p = hp_alloc(4096, 0);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fallback"));
    CHILD_CHECK(hp_free(p) == HP_OK);
    /* ... and the name thp-madvise still means the built-in. */
    if (!bi.available) {
        fprintf(stderr, "# thp-madvise unavailable here (%s): its serving is not checked\n",
                bi.reason);
        return 0;
    }
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "thp-madvise";
    p = hp_alloc_ex(4 << 20, &o);
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "thp-madvise") &&
                info.page_size == bi.page_sizes[bi.n_page_sizes - 1]);
    CHILD_CHECK(hp_free(p) == HP_OK);
    return 0;
}

/* A plugin cannot take a built-in's name: "fallback" is the core's, and
 * the others belong to the files of the built-ins' directory, even when a
 * file providing them sorts first. */
static void builtin_names_are_reserved(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_as(variant("takeover_fallback"), dir, "aa-fallback.so");
    copy_as(variant("takeover_thp"), dir, "aa-thp.so");
    struct takeover t = {dir, backend_dir, 0};
    assert_int_equal(run_in_child(child_takeover, &t), 0);
    /* Without a fallback.so among the built-ins, the core's own serves. */
    char *builtins = make_dir(0755);
    copy_plugins(backend_dir, builtins, 0755);
    char path[700];
    snprintf(path, sizeof(path), "%s/fallback.so", builtins);
    unlink(path);
    t = (struct takeover){dir, builtins, 1};
    assert_int_equal(run_in_child(child_takeover, &t), 0);
    remove_dir(builtins);
    remove_dir(dir);
}

struct two_dirs {
    char *a, *b;
};

static int child_path_order(void *arg)
{
    const struct two_dirs *d = arg;
    char list[1400], path[700], want[1400];
    snprintf(list, sizeof(list), "%s:%s:/nonexistent/hp-entry:%s", d->a, d->b, d->a);
    setenv("HP_BACKEND_PATH", list, 1);
    /* Directories in list order, files in byte order of name within each,
     * then the built-ins' directory, then the core's fallback. */
    char good[700], size56[700], nulldesc[700], dup[700];
    snprintf(good, sizeof(good), "%s/m.so", d->a);
    snprintf(size56, sizeof(size56), "%s/B.so", d->b);
    snprintf(nulldesc, sizeof(nulldesc), "%s/b.so", d->b);
    snprintf(dup, sizeof(dup), "%s/a.so", d->b);
    snprintf(path, sizeof(path), "%s/thp-madvise.so", backend_dir);
    int i_good = index_of_path(good), i_56 = index_of_path(size56),
        i_null = index_of_path(nulldesc), i_thp = index_of_path(path);
    fprintf(stderr, "# order: %d %d %d %d\n", i_good, i_56, i_null, i_thp);
    CHILD_CHECK(i_good == 0 && i_56 == 1 && i_null == 2 && i_thp > i_null);
    /* A directory listed twice is read once. */
    CHILD_CHECK(count_path(good) == 1);
    /* The first file that provides a name wins; the later one says which. */
    snprintf(want, sizeof(want), "duplicate backend name \"fixture-good\": %s provides it "
             "already (the first file found wins)", good);
    struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
    CHILD_CHECK(hp_backend_get((uint32_t)index_of_path(dup), &bi) == HP_OK && !bi.available &&
                strstr(bi.reason, want));
    /* A missing entry is listed, not skipped silently. */
    int i_missing = index_of_path("/nonexistent/hp-entry");
    CHILD_CHECK(i_missing >= 0 && hp_backend_get((uint32_t)i_missing, &bi) == HP_OK &&
                strstr(bi.reason, "rejected: HP_BACKEND_PATH entry does not exist"));
    /* Descriptions: the plugin's own, "" for NULL. */
    CHILD_CHECK(find("fixture-good", NULL, &bi) && !strcmp(bi.description, "test fixture"));
    CHILD_CHECK(find("fixture-null-desc", NULL, &bi) && !strcmp(bi.description, ""));
    CHILD_CHECK(find("fallback", NULL, &bi) && bi.description[0]);
    /* A descriptor of exactly the ABI 1 minimum (through unmap) serves. */
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-size-min";
    void *p = hp_alloc_ex(8192, &o);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fixture-size-min"));
    CHILD_CHECK(hp_free(p) == HP_OK);
    return 0;
}

/* HP_BACKEND_PATH is a list searched in order before the built-ins'
 * directory, which is always searched (nobody copies the built-ins). */
static void backend_path_is_an_ordered_list(void **state)
{
    (void)state;
    struct two_dirs d = {make_dir(0755), make_dir(0755)};
    copy_as(fixture_path("fx_good.so"), d.a, "m.so");
    copy_as(fixture_path("fx_good.so"), d.b, "a.so");
    copy_as(variant("size_min"), d.b, "B.so");
    copy_as(variant("null_desc"), d.b, "b.so");
    assert_int_equal(run_in_child(child_path_order, &d), 0);
    /* HP_DEBUG shows every refusal, with its reason. */
    char list[1400], want[1400];
    snprintf(list, sizeof(list), "%s:%s", d.a, d.b);
    struct logged l = {.dir = list};
    assert_int_equal(run_logged(&l), 0);
    snprintf(want, sizeof(want), "libhp: loader: rejected %s/a.so: duplicate backend name", d.b);
    assert_non_null(strstr(l.log, want));
    remove_dir(d.a);
    remove_dir(d.b);
}

struct builtins_first {
    const char *list;      /* HP_BACKEND_PATH, the built-ins' directory first */
    const char *plugins;   /* the other entry, holding m.so (fixture-good) */
};

static int child_builtins_first(void *arg)
{
    const struct builtins_first *t = arg;
    static const char *const builtins[] = {"anon-orders", "fallback", "hugetlbfs", "thp-madvise"};
    setenv("HP_BACKEND_PATH", t->list, 1);
    setenv("HP_BACKEND_DIR", backend_dir, 1);
    fprintf(stderr, "# HP_BACKEND_PATH=%s\n", t->list);
    char good[700];
    snprintf(good, sizeof(good), "%s/m.so", t->plugins);
    struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        CHILD_CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        fprintf(stderr, "# %d %s %s: %s\n", i, bi.name, bi.path, bi.reason);
        CHILD_CHECK(!strstr(bi.reason, "rejected"));  /* no reserved name, no duplicate */
    }
    /* The later entry's plugin first, then the built-ins, read once, from
     * their own directory, in byte order of file name. */
    CHILD_CHECK(index_of_path(good) == 0);
    CHILD_CHECK(hp_backend_count() == 5);
    for (int i = 0; i < 4; i++) {
        char path[700];
        snprintf(path, sizeof(path), "%s/%s.so", backend_dir, builtins[i]);
        CHILD_CHECK(index_of_path(path) == i + 1 && count_path(path) == 1);
        CHILD_CHECK(hp_backend_get((uint32_t)(i + 1), &bi) == HP_OK &&
                    !strcmp(bi.name, builtins[i]));
    }
    void *p = hp_alloc(4096, 0);
    CHILD_CHECK(p && backend_is(p, "fallback") && hp_free(p) == HP_OK);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-good";
    p = hp_alloc_ex(8192, &o);
    CHILD_CHECK(p && backend_is(p, "fixture-good") && hp_free(p) == HP_OK);
    return 0;
}

/* The built-ins' directory is always read last, as the built-ins', even
 * when HP_BACKEND_PATH lists it first, by its own name or through a link
 * (a directory is known by its device and inode): a plugin of a later
 * entry comes before the built-ins, and no built-in is refused its name as
 * a plugin outside the built-ins' directory would be. */
static void builtins_dir_listed_first_is_read_last(void **state)
{
    (void)state;
    char *plugins = make_dir(0755), *links = make_dir(0755);
    copy_as(fixture_path("fx_good.so"), plugins, "m.so");
    char link[700], list[2200];
    snprintf(link, sizeof(link), "%s/builtins", links);
    assert_int_equal(symlink(backend_dir, link), 0);
    snprintf(list, sizeof(list), "%s:%s", backend_dir, plugins);
    struct builtins_first t = {list, plugins};
    assert_int_equal(run_in_child(child_builtins_first, &t), 0);
    snprintf(list, sizeof(list), "%s:%s:%s", link, plugins, backend_dir);
    assert_int_equal(run_in_child(child_builtins_first, &t), 0);
    remove_dir(links);
    remove_dir(plugins);
}

static int child_validation(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    CHILD_CHECK(expect_rejected("v-long.so", "backend name longer than 31 characters"));
    CHILD_CHECK(expect_rejected("v-empty.so", "empty backend name"));
    CHILD_CHECK(expect_rejected("v-null.so", "no backend name (name is NULL)"));
    CHILD_CHECK(expect_rejected("v-upper.so",
                                "backend name has a character outside [a-z0-9_-] (\"Fixture\")"));
    CHILD_CHECK(expect_rejected("v-kind.so", "unknown kind 99 (enum hp_backend_kind is 0 to 4)"));
    CHILD_CHECK(expect_rejected("v-short.so", "descriptor too short (size field below the "
                                "mandatory ops: 71 bytes, at least 72)"));
    /* A description is shown on terminals: control characters never pass. */
    struct hp_backend_info bi;
    CHILD_CHECK(find("fixture-ctrl-desc", NULL, &bi));
    fprintf(stderr, "# description: %s\n", bi.description);
    CHILD_CHECK(!strcmp(bi.description, "line one?line two ?[31mred?[0m tab?here"));
    /* Nothing of the refused files is ever chosen. */
    for (int i = 0; i < 8; i++) {
        void *p = hp_alloc(4096u << i, 0);
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        CHILD_CHECK(p && hp_info(p, &info) == HP_OK && strncmp(info.backend, "fixture", 7));
        CHILD_CHECK(hp_free(p) == HP_OK);
    }
    return 0;
}

/* Each load-time check of the descriptor, with a fixture that breaks it. */
static void descriptors_are_validated_at_load(void **state)
{
    (void)state;
    char *dir = make_dir(0755);
    copy_as(variant("long_name"), dir, "v-long.so");
    copy_as(variant("empty_name"), dir, "v-empty.so");
    copy_as(variant("null_name"), dir, "v-null.so");
    copy_as(variant("upper_name"), dir, "v-upper.so");
    copy_as(variant("bad_kind"), dir, "v-kind.so");
    copy_as(variant("size_short"), dir, "v-short.so");
    copy_as(variant("ctrl_desc"), dir, "v-ctrl.so");
    assert_int_equal(run_in_child(child_validation, dir), 0);
    remove_dir(dir);
}

/* Run probe as user nobody with HP_BACKEND_PATH=dir; returns what it
 * printed (1: the variable was honoured), -2 if nobody cannot reach it, or -1. */
static int probe_as_nobody(const char *probe, const char *dir)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        if (access(probe, X_OK) != 0)
            _exit(5);
        char env[600];
        snprintf(env, sizeof(env), "HP_BACKEND_PATH=%s", dir);
        char *const envp[] = {env, NULL};
        char *const args[] = {(char *)probe, NULL};
        execve(probe, args, envp);
        _exit(4);
    }
    close(fds[1]);
    char out[16] = "";
    ssize_t n = read(fds[0], out, sizeof(out) - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 5)
        return -2;
    if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return out[0] - '0';
}

/* HP_BACKEND_PATH is read with secure_getenv: in a setuid program (AT_SECURE)
 * a user cannot point libhp at plugins of their choosing. */
static void backend_path_ignored_when_setuid(void **state)
{
    (void)state;
    if (!is_root()) {
        print_message("# SKIP: needs root to make a setuid-root program\n");
        skip();
    }
    char *dir = make_dir(0755);
    copy_plugins(fixture_dir, dir, 0755);
    char probe[300], cmd[1400];
    snprintf(probe, sizeof(probe), "%s/secure_probe", dir);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chown 0:0 '%s' && chmod 0755 '%s'", secure_probe,
             probe, probe, probe);
    assert_int_equal(system(cmd), 0);
    /* Control: the same program, not setuid, honours the variable. */
    int control = probe_as_nobody(probe, dir);
    if (control == -2) {
        /* Passes with the reason: meson counts cmocka's skip() as a failure. */
        print_message("# SKIP: user nobody cannot reach the build directory\n");
        remove_dir(dir);
        return;
    }
    assert_int_equal(control, 1);
    assert_int_equal(chmod(probe, 04755), 0);
    int setuid_result = probe_as_nobody(probe, dir);
    struct stat st;
    assert_int_equal(stat(probe, &st), 0);
    if (!(st.st_mode & S_ISUID)) {
        print_message("# SKIP: this filesystem dropped the setuid bit\n");
        remove_dir(dir);
        skip();
    }
    assert_int_equal(setuid_result, 0);
    remove_dir(dir);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s FIXTURE_DIR BACKEND_DIR SECURE_PROBE BASE_DIR CRASH_BASE "
                "CRASH_OTHER\n", argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    backend_dir = argv[2];
    secure_probe = argv[3];
    base_dir = argv[4];
    crash_base = argv[5];
    crash_other = argv[6];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(broken_plugins_are_rejected_with_reasons),
        cmocka_unit_test(misbehaving_plugin_results_are_refused),
        cmocka_unit_test(misbehaving_plugin_stacks_are_refused_or_guarded),
        cmocka_unit_test(plugin_context_reaches_every_op_and_fini),
        cmocka_unit_test(carvable_plugin_gets_the_cache),
        cmocka_unit_test(nopool_refuses_a_plugin_that_maps_pool_pages),
        cmocka_unit_test(named_block_never_migrates),
        cmocka_unit_test(hp_backends_alone_pins_the_block),
        cmocka_unit_test(shared_block_resized_after_fork_is_copied),
        cmocka_unit_test(shared_carvable_plugin_is_never_cached),
        cmocka_unit_test(builtin_fallback_without_plugins),
        cmocka_unit_test(world_writable_directory_is_refused),
        cmocka_unit_test(others_writable_plugin_is_refused),
        cmocka_unit_test(plugin_of_another_user_is_refused),
        cmocka_unit_test(backend_path_ignored_when_setuid),
        cmocka_unit_test(debug_log_names_the_file_before_probing),
        cmocka_unit_test(other_kind_probed_only_when_named),
        cmocka_unit_test(builtin_names_are_reserved),
        cmocka_unit_test(backend_path_is_an_ordered_list),
        cmocka_unit_test(builtins_dir_listed_first_is_read_last),
        cmocka_unit_test(descriptors_are_validated_at_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
