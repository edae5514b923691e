/*
 * hpctl run [--backend NAME] [--page-size SIZE] [--pool[=all]] [--stacks lean|huge]
 *           [--report] [--report-json FILE] [--] CMD [ARGS...]
 *
 * Runs an unmodified program with libhp-malloc.so: appends the library to
 * LD_PRELOAD, passes the choices on as environment (HP_BACKENDS,
 * HP_MALLOC_PAGE_SIZE; HP_MALLOC_POOL=1 for --pool: the hugetlb pool may
 * serve large blocks, which a fork child then needs free pool pages to
 * write; HP_MALLOC_POOL=all for --pool=all: arenas too, which any child
 * writes before it execs, so hpctl warns when the pool has less than two
 * arenas free (pool_warning); without either option, HP_MALLOC_POOL in the
 * environment counts as the option it names; a backend that only a pool has
 * needs one of them, a page size that only a pool has needs --pool=all, as
 * the arenas are asked for it too; HP_STACKS for --stacks: thread stacks
 * from hp_stack_create), and with --report prints
 * a line per process to stderr when the command has exited: what its malloc
 * served from which backend and how much of it was huge, as libhp-malloc
 * measured in the process's smaps at exit, with its peak RSS
 * (HP_MALLOC_STATS=line, written to a private file and read back here;
 * each process first writes a "started" line, so one that ends without
 * exit handlers is told apart from one that never loaded the library).
 * --report-json FILE writes the same as a JSON document.
 * Exits with the command's status (128 + signal number if it was killed);
 * 127 if CMD was not found, 126 if it could not be executed, 125 if hpctl
 * could not start it (no libhp-malloc.so, no report file), 2 for a bad
 * command line: as env(1) and timeout(1) do.
 *
 * The library is found at HP_MALLOC_LIBRARY if set, else in bindings/malloc/ of
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

/* hpctl run's own failures, apart from the command's statuses. */
enum { RUN_CANNOT_START = 125, RUN_CANNOT_EXEC = 126, RUN_NOT_FOUND = 127 };

static int run_usage(void)
{
    fprintf(stderr, "usage: hpctl run [--backend NAME] [--page-size SIZE] [--pool[=all]] "
                    "[--stacks lean|huge] [--report] [--report-json FILE] [--] CMD [ARGS...]\n");
    return HPCTL_USAGE;
}

static int readable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Where libhp-malloc.so is: HP_MALLOC_LIBRARY; else the build tree's
 * bindings/malloc/ when this hpctl runs from a build tree (tools/hpctl); else
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
            int len = snprintf(out, cap, "%s/../bindings/malloc/libhp-malloc.so", exe);
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

/* HP_MALLOC_POOL's values: what the pool may serve. */
enum { POOL_OFF, POOL_LARGE, POOL_ALL };

static int pool_env(void)
{
    const char *v = getenv("HP_MALLOC_POOL");
    if (!v)
        return POOL_OFF;
    if (!strcmp(v, "all"))
        return POOL_ALL;
    return !strcmp(v, "1") || !strcmp(v, "on") ? POOL_LARGE : POOL_OFF;
}

/* Under --pool=all a fork child's first write to an arena page needs a free
 * page of the pool it came from (Documentation/mm/hugetlbfs_reserv.rst;
 * unmap_ref_private in mm/hugetlb.c), and a shell or xargs writes its heap
 * between fork and exec. The first arena (HP_MALLOC_ARENA, 32 MiB by
 * default) takes one arena of the pool whole, so that much again must stay
 * free for the copies: warn when a pool the arenas may use (page size ps,
 * 0: any, no larger than the arena) has free pages but fewer free bytes
 * than two arenas. */
static void pool_warning(uint64_t ps)
{
    uint64_t arena = (uint64_t)32 << 20, best_ps = 0, best = 0;
    const char *env = getenv("HP_MALLOC_ARENA");
    if (env && parse_size(env, &arena))
        arena = (uint64_t)32 << 20;  /* libhp-malloc uses its default and says so */
    int32_t n = hp_backend_count();
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK || !bi.available)
            continue;
        for (uint32_t k = 0; k < bi.n_page_sizes && k < HP_MAX_PAGE_SIZES; k++) {
            uint64_t p = bi.page_sizes[k], fr = bi.pool_free[k];
            if (fr == UINT64_MAX || fr == 0 || p > arena || (ps && p != ps))
                continue;
            if (fr * p > best) {
                best = fr * p;
                best_ps = p;
            }
        }
    }
    if (best && best < 2 * arena)
        fprintf(stderr, "hpctl run: warning: --pool=all: the %llu MiB hugetlb pool has %llu free "
                "pages, fewer than two %llu MiB arenas (%llu): a child that writes its heap "
                "before exec may die of SIGBUS (--pool keeps arenas off the pool)\n",
                (unsigned long long)(best_ps >> 20), (unsigned long long)(best / best_ps),
                (unsigned long long)(arena >> 20), (unsigned long long)(2 * arena / best_ps));
}

/* What one process wrote to the report file. */
struct proc_report {
    int pid;
    int started;          /* it loaded libhp-malloc */
    const char *figures;  /* its line after "pid N: ", or NULL */
};

#define MAX_PROCS 256
#define SHOWN_PROCS 16

/* Split the report file into processes, the command's own first, the
 * others in the order they appeared. buf is modified. */
static int parse_report(char *buf, int child, struct proc_report *p, int max)
{
    int n = 0;
    for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        int pid, off = 0;
        if (sscanf(line, "libhp-malloc: pid %d: %n", &pid, &off) != 1 || off == 0)
            continue;
        int k = 0;
        while (k < n && p[k].pid != pid)
            k++;
        if (k == n) {
            if (n == max)
                continue;
            p[n++] = (struct proc_report){.pid = pid};
        }
        if (!strcmp(line + off, "started"))
            p[k].started = 1;
        else
            p[k].figures = line + off;
    }
    for (int k = 1; k < n; k++)
        if (p[k].pid == child) {
            struct proc_report t = p[k];
            memmove(p + 1, p, (size_t)k * sizeof(*p));
            p[0] = t;
        }
    return n;
}

static void print_report(const struct proc_report *p, int n, int child, const char *cmd,
                         int exec_err)
{
    if (exec_err)
        return;  /* the exec error was printed */
    if (n == 0 || p[0].pid != child)
        fprintf(stderr, "hpctl run: pid %d (%s) did not load libhp-malloc (statically linked, "
                        "or setuid): nothing to report for it\n", child, cmd);
    int shown = 0;
    for (int k = 0; k < n && shown < SHOWN_PROCS; k++, shown++) {
        if (p[k].figures)
            fprintf(stderr, "hpctl run: pid %d: %s\n", p[k].pid, p[k].figures);
        else
            fprintf(stderr, "hpctl run: pid %d: ran libhp-malloc, and ended without running "
                            "exit handlers (_exit, as a shell's exit may, or a signal): no "
                            "figures\n", p[k].pid);
    }
    if (n > shown)
        fprintf(stderr, "hpctl run: and %d more processes (--report-json FILE lists every "
                        "one)\n", n - shown);
    if (n > 1)
        fprintf(stderr, "hpctl run: %d processes ran libhp-malloc (one line each above; the "
                        "figures are each process's own, not a sum)\n", n);
}

/* "arenas thp-madvise/2M 64M (4M huge),hugetlbfs/2M ...; large blocks 1 (8M) via
 * hp_alloc, 0 hp_realloc; process huge now: hugetlb 0M, thp 4M, rss 7M; peak
 * rss 9M" as JSON; figures libhp-malloc does not print are null. */
static void json_figures(FILE *f, const char *line)
{
    unsigned long long v[4];
    const char *semi = strchr(line, ';');
    fprintf(f, "\"arenas\": [");
    if (!strncmp(line, "arenas", 6) && semi) {
        int first = 1;
        for (const char *a = line + 6; a < semi;) {
            char backend[64], ps[16];
            unsigned long long mapped, huge;
            int used = 0;
            a += strspn(a, " ,");
            if (a >= semi || sscanf(a, "%63[^/]/%15s %lluM (%lluM huge)%n", backend, ps,
                                    &mapped, &huge, &used) != 4 || !used)
                break;
            uint64_t page = 0;
            parse_size(ps, &page);
            fprintf(f, "%s{\"backend\": \"%s\", \"page_size\": %llu, \"mapped_mib\": %llu, "
                       "\"huge_mib\": %llu}", first ? "" : ", ", backend,
                    (unsigned long long)page, mapped, huge);
            first = 0;
            a += used;
        }
    }
    fprintf(f, "]");
    const char *lb = strstr(line, "large blocks ");
    int ok = lb && sscanf(lb, "large blocks %llu (%lluM) via hp_alloc, %llu hp_realloc", &v[0],
                          &v[1], &v[2]) == 3;
    ok ? fprintf(f, ", \"large_blocks\": %llu, \"large_mib\": %llu, \"hp_realloc\": %llu",
                 v[0], v[1], v[2])
       : fprintf(f, ", \"large_blocks\": null, \"large_mib\": null, \"hp_realloc\": null");
    const char *now = strstr(line, "process huge now: ");
    ok = now && sscanf(now, "process huge now: hugetlb %lluM, thp %lluM, rss %lluM", &v[0],
                       &v[1], &v[2]) == 3;
    ok ? fprintf(f, ", \"hugetlb_mib\": %llu, \"thp_mib\": %llu, \"rss_mib\": %llu", v[0],
                 v[1], v[2])
       : fprintf(f, ", \"hugetlb_mib\": null, \"thp_mib\": null, \"rss_mib\": null");
    const char *peak = strstr(line, "peak rss ");
    peak && sscanf(peak, "peak rss %lluM", &v[3]) == 1
        ? fprintf(f, ", \"peak_rss_mib\": %llu", v[3])
        : fprintf(f, ", \"peak_rss_mib\": null");
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The --report-json document: written to a temporary file beside FILE,
 * then renamed over it. 0, or -1 with a message. */
static int write_report_json(const char *path, char **argv, int rc, int child, int exec_err,
                             const struct proc_report *p, int n)
{
    char tmp[4200];
    int len = snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    int fd = len > 0 && (size_t)len < sizeof(tmp) ? mkostemp(tmp, O_CLOEXEC) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "hpctl run: cannot write %s: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return -1;
    }
    fprintf(f, "{\"schema\": %d, \"command\": \"run\", \"status\": %d, \"argv\": [",
            HPCTL_SCHEMA, rc);
    for (int i = 0; argv[i]; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, argv[i]);
    }
    fprintf(f, "], \"pid\": %d, \"exec_error\": ", child);
    exec_err ? json_str(f, strerror(exec_err)) : (void)fprintf(f, "null");
    fprintf(f, ", \"loaded\": %s, \"processes\": [",
            n && p[0].pid == child ? "true" : "false");
    for (int k = 0; k < n; k++) {
        fprintf(f, "%s{\"pid\": %d, \"figures\": %s, ", k ? ", " : "", p[k].pid,
                p[k].figures ? "true" : "false");
        json_figures(f, p[k].figures ? p[k].figures : "");
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
    int err = fflush(f) != 0 || fsync(fileno(f)) != 0 ? errno : 0;
    if (fclose(f) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        fprintf(stderr, "hpctl run: cannot write %s: %s\n", path, strerror(err));
        return -1;
    }
    return 0;
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
    const char *backend = NULL, *page_size = NULL, *stacks = NULL, *report_json = NULL;
    int report = 0, pool = 0, i = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        }
        if (!strcmp(argv[i], "--report"))
            report = 1;
        else if (!strcmp(argv[i], "--pool"))
            pool = POOL_LARGE;
        else if (!strcmp(argv[i], "--pool=all"))
            pool = POOL_ALL;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--page-size") && i + 1 < argc)
            page_size = argv[++i];
        else if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
            stacks = argv[++i];
        else if (!strcmp(argv[i], "--report-json") && i + 1 < argc)
            report_json = argv[++i];
        else if (argv[i][0] == '-')
            return hpctl_unexpected("run", argv, i, argc,
                                    (const char *const[]){"--backend", "--page-size", "--stacks",
                                                          "--report-json", NULL}), run_usage();
        else
            break;
    }
    if (i >= argc)
        return hpctl_bad("run", "a command to run is required"), run_usage();
    /* Without the option, HP_MALLOC_POOL inherited from the environment
     * counts as the option it names. */
    if (!pool)
        pool = pool_env();
    int known = backend ? known_backend(backend) : 1;
    if (!known) {
        fprintf(stderr, "hpctl run: unknown backend \"%s\" (hpctl status lists them)\n", backend);
        return 2;
    }
    if (known == 2 && !pool) {
        fprintf(stderr, "hpctl run: backend \"%s\" serves only from a hugetlb pool: add --pool "
                        "(large blocks from it; a fork child then needs free pool pages to write "
                        "them) or --pool=all (arenas too)\n",
                backend);
        return 2;
    }
    uint64_t ps = page_size ? page_size_arg(page_size) : 0;
    if (page_size && !ps) {
        fprintf(stderr, "hpctl run: --page-size \"%s\" is not a power of two from 4K "
                        "(K/M/G suffix)\n", page_size);
        return 2;
    }
    if (page_size && pool != POOL_ALL && !unpooled_size(ps)) {
        fprintf(stderr, "hpctl run: no backend offers %s pages outside a hugetlb pool, and the "
                        "arenas are asked for them too: add --pool=all (a fork child then needs "
                        "free pool pages to write what it inherited)\n",
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
        return RUN_CANNOT_START;
    }
    if (set_preload(lib)) {
        fprintf(stderr, "hpctl run: cannot set LD_PRELOAD: %s\n", strerror(errno));
        return RUN_CANNOT_START;
    }
    if (backend) {
        /* Only this backend, and base pages when it cannot serve. */
        char v[80];
        snprintf(v, sizeof(v), strcmp(backend, "fallback") ? "%s,fallback" : "%s", backend);
        setenv("HP_BACKENDS", v, 1);
    }
    if (page_size)
        setenv("HP_MALLOC_PAGE_SIZE", page_size, 1);
    if (pool)
        setenv("HP_MALLOC_POOL", pool == POOL_ALL ? "all" : "1", 1);
    if (pool == POOL_ALL)
        pool_warning(ps);
    if (stacks)
        setenv("HP_STACKS", stacks, 1);
    if (report_json) {
        /* Fail before running the command, not after it. The report holds
         * the command line: 0600, as the temporary file that replaces it. */
        int probe = open(report_json, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (probe < 0) {
            fprintf(stderr, "hpctl run: cannot write --report-json %s: %s\n", report_json,
                    strerror(errno));
            return RUN_CANNOT_START;
        }
        close(probe);
    }
    if (!report && !report_json) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "hpctl run: %s: %s\n", argv[i], strerror(errno));
        return errno == ENOENT ? RUN_NOT_FOUND : RUN_CANNOT_EXEC;
    }
    char path[] = "/tmp/hpctl-run.XXXXXX";
    int fd = mkostemp(path, O_CLOEXEC), exec_pipe[2] = {-1, -1};
    if (fd < 0 || pipe2(exec_pipe, O_CLOEXEC) != 0) {
        fprintf(stderr, "hpctl run: cannot create the report file: %s\n", strerror(errno));
        if (fd >= 0) {
            unlink(path);
            close(fd);
        }
        return RUN_CANNOT_START;
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
        close(exec_pipe[0]);
        execvp(argv[i], argv + i);
        int err = errno;
        fprintf(stderr, "hpctl run: %s: %s\n", argv[i], strerror(err));
        ssize_t w = write(exec_pipe[1], &err, sizeof(err));
        (void)w;
        _exit(err == ENOENT ? RUN_NOT_FOUND : RUN_CANNOT_EXEC);
    }
    close(exec_pipe[1]);
    int status = 0, rc, exec_err = 0;
    if (pid < 0) {
        fprintf(stderr, "hpctl run: fork: %s\n", strerror(errno));
        rc = RUN_CANNOT_START;
    } else {
        /* The pipe closes on a successful exec, or carries its errno. */
        while (read(exec_pipe[0], &exec_err, sizeof(exec_err)) < 0 && errno == EINTR)
            ;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        static char buf[1 << 16];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        static struct proc_report procs[MAX_PROCS];
        int np = parse_report(buf, (int)pid, procs, MAX_PROCS);
        if (report)
            print_report(procs, np, (int)pid, argv[i], exec_err);
        if (report_json)
            write_report_json(report_json, argv + i, rc, (int)pid, exec_err, procs, np);
    }
    close(exec_pipe[0]);
    unlink(path);
    close(fd);
    return rc;
}
