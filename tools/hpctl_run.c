/*
 * hpctl run [--backend NAME] [--page-size SIZE] [--pool] [--stacks lean|huge] [--report]
 *           [--] CMD [ARGS...]
 *
 * Runs an unmodified program with libhp-malloc.so: appends the library to
 * LD_PRELOAD, passes the choices on as environment (HP_BACKENDS,
 * HP_MALLOC_PAGE_SIZE, HP_MALLOC_POOL=1 for --pool: the hugetlb pool may
 * serve, and a fork child then needs free pool pages to write what it
 * inherited (HP_MALLOC_POOL=1 in the environment counts as --pool; a
 * backend or page size that only a pool has needs it); HP_STACKS for
 * --stacks: thread stacks from hp_stack_create), and with --report prints
 * one line to stderr when the command has exited: what its malloc served
 * from which backend and how much of it was huge, as libhp-malloc measured
 * in the process's smaps
 * (HP_MALLOC_STATS=line, written to a private file and read back here).
 * Exits with the command's status (128 + signal number if it was killed).
 *
 * The library is found at HP_MALLOC_LIBRARY if set, else in lib/malloc/ of
 * the build tree this hpctl runs from, else in the installed libdir.
 */
#include "hpctl.h"

#include <hp.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_usage(void)
{
    fprintf(stderr, "usage: hpctl run [--backend NAME] [--page-size SIZE] [--pool] "
                    "[--stacks lean|huge] [--report] [--] CMD [ARGS...]\n");
    return 2;
}

static int readable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Where libhp-malloc.so is: HP_MALLOC_LIBRARY; else the build tree's
 * lib/malloc/ when this hpctl runs from a build tree (tools/hpctl); else
 * the installed library directory, beside libhp.so.1 (HPCTL_LIBDIR, set at
 * build time: hpctl links the core statically, so no loaded libhp.so.1 can
 * tell where that is). Returns 0 and fills out, or -1. */
static int find_library(char *out, size_t cap)
{
    const char *env = getenv("HP_MALLOC_LIBRARY");
    if (env && env[0]) {
        if (env[0] != '/' || !readable_file(env) || strlen(env) >= cap)
            return -1;
        snprintf(out, cap, "%s", env);
        return 0;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            int len = snprintf(out, cap, "%s/../lib/malloc/libhp-malloc.so", exe);
            if (len > 0 && (size_t)len < cap && readable_file(out))
                return 0;
        }
    }
    int len = snprintf(out, cap, "%s/libhp-malloc.so", HPCTL_LIBDIR);
    return len > 0 && (size_t)len < cap && readable_file(out) ? 0 : -1;
}

/* Does bi offer page size ps (0: any size) outside a pool? */
static int offers_unpooled(const struct hp_backend_info *bi, uint64_t ps)
{
    for (uint32_t k = 0; k < bi->n_page_sizes && k < HP_MAX_PAGE_SIZES; k++)
        if ((!ps || bi->page_sizes[k] == ps) && bi->pool_free[k] == UINT64_MAX)
            return 1;
    return 0;
}

/* 0: no such backend; 1: known; 2: known, and every page size it has
 * comes from a pool (it can serve nothing without --pool). */
static int known_backend(const char *name)
{
    int32_t n = hp_backend_count();
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && !strcmp(bi.name, name))
            return bi.n_page_sizes && !offers_unpooled(&bi, 0) ? 2 : 1;
    }
    return 0;
}

/* --page-size, passed on as given, so in the form HP_MALLOC_PAGE_SIZE
 * takes: digits and at most one K, M or G (parse_size alone would also take
 * "2MiB"), a page size libhp knows. Its bytes, or 0 if it is not that. */
static uint64_t page_size_arg(const char *s)
{
    const char *sfx = s + strspn(s, "0123456789");
    uint64_t ps;
    if ((*sfx && (sfx[1] || !strchr("kKmMgG", *sfx))) || parse_size(s, &ps) ||
        ps > (UINT64_C(1) << 40) || !hp_page_size_flag(ps))
        return 0;
    return ps;
}

/* Does a backend offer page size ps without a pool? */
static int unpooled_size(uint64_t ps)
{
    int32_t n = hp_backend_count();
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && bi.available && offers_unpooled(&bi, ps))
            return 1;
    }
    return 0;
}

/* The report lines of every process of the command, one per process; the
 * line of the command's own process is printed, the others counted. */
static void print_report(int fd, pid_t child)
{
    char buf[16384];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) {
        fprintf(stderr, "hpctl run: no report (the command did not run libhp-malloc: "
                        "statically linked, setuid, or exec failed)\n");
        return;
    }
    buf[n] = '\0';
    char mine[64];
    snprintf(mine, sizeof(mine), "libhp-malloc: pid %d:", (int)child);
    const char *own = NULL;
    int others = 0;
    for (char *line = buf, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        if (!own && !strncmp(line, mine, strlen(mine)))
            own = line;
        else if (!strncmp(line, "libhp-malloc: pid ", 18))
            others++;
    }
    if (!own)
        own = buf;  /* the command exec'd another program under the same pid */
    fprintf(stderr, "hpctl run: %s", own + strlen("libhp-malloc: "));
    if (others)
        fprintf(stderr, " (+%d more processes)", others);
    fputc('\n', stderr);
}

static int set_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (!old || !old[0])
        return setenv("LD_PRELOAD", lib, 1);
    size_t len = strlen(old) + 1 + strlen(lib) + 1;
    char *v = malloc(len);
    if (!v)
        return -1;
    snprintf(v, len, "%s:%s", old, lib);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

int hpctl_run(int argc, char **argv)
{
    const char *backend = NULL, *page_size = NULL, *stacks = NULL;
    int report = 0, pool = 0, i = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        }
        if (!strcmp(argv[i], "--report"))
            report = 1;
        else if (!strcmp(argv[i], "--pool"))
            pool = 1;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--page-size") && i + 1 < argc)
            page_size = argv[++i];
        else if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
            stacks = argv[++i];
        else if (argv[i][0] == '-')
            return run_usage();
        else
            break;
    }
    if (i >= argc)
        return run_usage();
    /* HP_MALLOC_POOL=1 inherited from the environment means --pool. */
    const char *env_pool = getenv("HP_MALLOC_POOL");
    if (env_pool && (!strcmp(env_pool, "1") || !strcmp(env_pool, "on")))
        pool = 1;
    int known = backend ? known_backend(backend) : 1;
    if (!known) {
        fprintf(stderr, "hpctl run: unknown backend \"%s\" (hpctl status lists them)\n", backend);
        return 2;
    }
    if (known == 2 && !pool) {
        fprintf(stderr, "hpctl run: backend \"%s\" serves only from a hugetlb pool: add --pool "
                        "(a fork child then needs free pool pages to write what it inherited)\n",
                backend);
        return 2;
    }
    uint64_t ps = page_size ? page_size_arg(page_size) : 0;
    if (page_size && !ps) {
        fprintf(stderr, "hpctl run: --page-size \"%s\" is not a power of two from 4K "
                        "(K/M/G suffix)\n", page_size);
        return 2;
    }
    if (page_size && !pool && !unpooled_size(ps)) {
        fprintf(stderr, "hpctl run: no backend offers %s pages outside a hugetlb pool: add --pool "
                        "(a fork child then needs free pool pages to write what it inherited)\n",
                page_size);
        return 2;
    }
    if (stacks && strcmp(stacks, "lean") && strcmp(stacks, "huge")) {
        fprintf(stderr, "hpctl run: --stacks \"%s\" is neither lean nor huge\n", stacks);
        return 2;
    }
    char lib[4096];
    if (find_library(lib, sizeof(lib))) {
        fprintf(stderr, "hpctl run: libhp-malloc.so not found in the build tree or in " HPCTL_LIBDIR " "
                        "(set HP_MALLOC_LIBRARY to its absolute path)\n");
        return 2;
    }
    if (set_preload(lib))
        return 2;
    if (backend) {
        /* Only this backend, and base pages when it cannot serve. */
        char v[80];
        snprintf(v, sizeof(v), strcmp(backend, "fallback") ? "%s,fallback" : "%s", backend);
        setenv("HP_BACKENDS", v, 1);
    }
    if (page_size)
        setenv("HP_MALLOC_PAGE_SIZE", page_size, 1);
    if (pool)
        setenv("HP_MALLOC_POOL", "1", 1);
    if (stacks)
        setenv("HP_STACKS", stacks, 1);
    if (!report) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "hpctl run: %s: %s\n", argv[i], strerror(errno));
        return 127;
    }
    char path[] = "/tmp/hpctl-run.XXXXXX";
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "hpctl run: cannot create the report file: %s\n", strerror(errno));
        return 2;
    }
    setenv("HP_MALLOC_STATS", "line", 1);
    setenv("HP_MALLOC_STATS_FILE", path, 1);
    /* Like system(3): the terminal's signals are the command's to handle. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        execvp(argv[i], argv + i);
        fprintf(stderr, "hpctl run: %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    int status = 0, rc;
    if (pid < 0) {
        fprintf(stderr, "hpctl run: fork: %s\n", strerror(errno));
        rc = 2;
    } else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        print_report(fd, pid);
    }
    unlink(path);
    close(fd);
    return rc;
}
