#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HP_HAVE_VALGRIND_H 1
#endif
#endif

#define MAX_KNOBS 64

struct knob {
    char path[200];
    char saved[200];
};

static struct knob knobs[MAX_KNOBS];
static volatile sig_atomic_t n_knobs;

static int write_file(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(value);
    ssize_t n = write(fd, value, len);
    int err = n < 0 ? errno : 0;
    close(fd);
    return n == (ssize_t)len ? 0 : -(err ? err : EIO);
}

int knob_get(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, cap - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* "always [madvise] never" -> "madvise": the form the file accepts back. */
static void selected_word(char *s)
{
    char *open_br = strchr(s, '[');
    if (!open_br)
        return;
    char *close_br = strchr(open_br, ']');
    if (!close_br)
        return;
    size_t n = (size_t)(close_br - open_br - 1);
    memmove(s, open_br + 1, n);
    s[n] = '\0';
}

void knob_restore_all(void)
{
    /* Newest first, so dependent knobs unwind in order. */
    for (int i = n_knobs - 1; i >= 0; i--)
        write_file(knobs[i].path, knobs[i].saved);
}

static void on_fatal(int sig)
{
    knob_restore_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_restorers(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    atexit(knob_restore_all);
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGTERM, SIGINT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
        signal(sigs[i], on_fatal);
}

int knob_lock(void)
{
    static int fd = -1;
    if (fd >= 0)
        return 0;
    int lfd = open("/run/lock/libhp-knobs.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0)
        lfd = open("/tmp/libhp-knobs.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0)
        return -errno;
    if (flock(lfd, LOCK_EX) != 0) {
        int err = errno;
        close(lfd);
        return -err;
    }
    fd = lfd;
    return 0;
}

int knob_set(const char *path, const char *value)
{
    int lrc = knob_lock();
    if (lrc)
        return lrc;
    int known = 0;
    for (int i = 0; i < n_knobs; i++)
        known |= !strcmp(knobs[i].path, path);
    if (!known) {
        if (n_knobs == MAX_KNOBS)
            return -ENOSPC;
        struct knob *k = &knobs[n_knobs];
        int rc = knob_get(path, k->saved, sizeof(k->saved));
        if (rc)
            return rc;
        selected_word(k->saved);
        snprintf(k->path, sizeof(k->path), "%s", path);
        install_restorers();
        n_knobs++;
    }
    return write_file(path, value);
}

long pool_get(unsigned long size_kb, const char *file)
{
    char path[200], buf[64];
    snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB/%s", size_kb, file);
    return knob_get(path, buf, sizeof(buf)) ? -1 : strtol(buf, NULL, 10);
}

long pool_set(unsigned long size_kb, unsigned long pages)
{
    char path[200], value[32];
    snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB/nr_hugepages", size_kb);
    snprintf(value, sizeof(value), "%lu", pages);
    int rc = knob_set(path, value);
    if (rc)
        return rc;
    return pool_get(size_kb, "nr_hugepages");
}

long meminfo_get(const char *name)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, name, n) && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

long mthp_stat(unsigned long size_kb, const char *counter)
{
    char path[200], buf[64];
    snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/hugepages-%lukB/stats/%s",
             size_kb, counter);
    return knob_get(path, buf, sizeof(buf)) ? -1 : strtol(buf, NULL, 10);
}

/* Walk smaps; fn sees each mapping's range and each field line. */
static long smaps_walk(const void *addr, size_t len, const char *field, int first_only)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    char line[512];
    int in = 0, found = 0;
    long sum = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f)) {
        uintptr_t s, e;
        char sp;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", &s, &e, &sp) == 3 && sp == ' ') {
            in = s < hi && e > lo;
            continue;
        }
        if (in && !strncmp(line, field, n) && line[n] == ':') {
            sum += strtol(line + n + 1, NULL, 10);
            found = 1;
            if (first_only)
                break;
        }
    }
    fclose(f);
    return found ? sum : -1;
}

long smaps_field_kb(const void *addr, size_t len, const char *field)
{
    long v = smaps_walk(addr, len, field, 0);
    return v < 0 ? 0 : v;
}

long smaps_kernel_page_kb(const void *addr)
{
    return smaps_walk(addr, 1, "KernelPageSize", 1);
}

int maps_line_is_valgrinds(const char *line)
{
#ifdef HP_HAVE_VALGRIND_H
    /* Under valgrind its own memory (translation cache, arenas, and the
     * heap that stands in for malloc's) is anonymous and mapped rwx
     * (measured with valgrind 3.19: a client mmap of rw- memory stays
     * rw-p), and it grows and splits as valgrind translates code and frees
     * blocks. Neither libhp nor its plugins map anything executable, so
     * such lines are valgrind's. */
    char perms[5] = "", path[2] = "";
    return RUNNING_ON_VALGRIND &&
           sscanf(line, "%*x-%*x %4s %*s %*s %*s %1s", perms, path) >= 1 &&
           !strcmp(perms, "rwxp") && !path[0];
#else
    (void)line;
    return 0;
#endif
}

long maps_count(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    long n = 0;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        if (!strchr(line, '\n') && !feof(f))
            continue;  /* the rest of an over-long line comes next */
        if (maps_line_is_valgrinds(line))
            continue;
#if defined(__SANITIZE_ADDRESS__)
        /* ASan's allocator maps a region per size class in
         * [0x600000000000, 0x640000000000) the first time the program
         * mallocs that size: its mappings, not libhp's. */
        unsigned long long start = strtoull(line, NULL, 16);
        if (start >= 0x600000000000ULL && start < 0x640000000000ULL)
            continue;
#endif
        n++;
    }
    fclose(f);
    return n;
}

int perms_at(const void *addr, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi)
            found = 1;
    }
    if (f)
        fclose(f);
    if (!found)
        perms[0] = 0;
    return found;
}

long vmrss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    long v = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            v = strtol(line + 6, NULL, 10);
    fclose(f);
    return v;
}

int is_root(void)
{
    return geteuid() == 0;
}

unsigned long env_count(const char *name, unsigned long dflt)
{
    const char *v = getenv(name);
    char *end = NULL;
    unsigned long n = v ? strtoul(v, &end, 10) : 0;
    return n && end && *end == '\0' ? n : dflt;
}

void touch_pages(void *p, size_t len)
{
    volatile char *c = p;
    for (size_t off = 0; off < len; off += 4096)
        c[off] = 1;
    if (len)
        c[len - 1] = 1;
}

int run_in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        _exit(fn(arg));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int numa_balancing_away(int on)
{
    /* MPOL_DEFAULT 0, MPOL_LOCAL 4 (linux/mempolicy.h; no libnuma). */
    return syscall(SYS_set_mempolicy, on ? 4 : 0, NULL, 0UL) == 0 ? 0 : -errno;
}
