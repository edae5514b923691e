/* A threaded C program that knows nothing of libhp: stacks.py runs it
 * with and without HP_STACKS (hpctl run --stacks) and checks what it
 * prints.
 *
 *     threads_prog stacks N     N joinable threads each write 64 KiB of
 *                               their stack and wait; the main thread
 *                               measures their stacks in /proc/self/smaps;
 *                               then they are joined. Then N detached
 *                               threads (by attribute), N detached by
 *                               their creator and N that detach themselves
 *                               run and finish.
 *     threads_prog fork N       N threads; one of them and the main thread
 *                               each fork a child that works on its stack
 *                               and with malloc, then execs true(1).
 *
 * "stacks" prints one line of key=value pairs: the stacks' resident and
 * huge kB (AnonHugePages + hugetlb), how many stacks libhp made
 * (hp_stack_cache_get_stats, found with dlsym: -1 when libhp is not in the
 * process) and how many of them sit in libhp's stack cache once the
 * detached threads have finished (polled, bounded count). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOUCH (64 << 10)

struct cache_stats {  /* struct hp_stack_cache_stats, include/hp/stack.h */
    uint32_t size, reserved;
    uint64_t max_stacks, max_bytes, keep_bytes, cached_stacks, cached_bytes, kept_bytes,
        hits, misses, released, evictions;
};
typedef int32_t (*stats_fn)(struct cache_stats *);

static int get_stats(struct cache_stats *st)
{
    stats_fn f = (stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "hp_stack_cache_get_stats");
    memset(st, 0, sizeof(*st));
    st->size = sizeof(*st);
    return f && f(st) == 0 ? 0 : -1;
}

static pthread_barrier_t ready, go;
struct slot {
    uintptr_t lo, hi;
};

static __attribute__((noinline)) void write_stack(size_t n)
{
    volatile char buf[TOUCH];
    for (size_t i = 0; i < n && i < sizeof(buf); i += 512)
        buf[i] = (char)i;
}

static void *waiter(void *p)
{
    struct slot *s = p;
    pthread_attr_t a;
    void *addr;
    size_t size;
    write_stack(TOUCH);
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &addr, &size);
        s->lo = (uintptr_t)addr;
        s->hi = (uintptr_t)addr + size;
        pthread_attr_destroy(&a);
    }
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    return p;
}

/* Resident and huge kB of the mappings that overlap [lo, hi). */
static void measure(const struct slot *s, int n, long *rss_kb, long *huge_kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    *rss_kb = *huge_kb = 0;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        long v;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = 0;
            for (int i = 0; i < n; i++)
                if (a < s[i].hi && b > s[i].lo)
                    in = 1;
        } else if (in && sscanf(line, "Rss: %ld kB", &v) == 1) {
            *rss_kb += v;
        } else if (in && (sscanf(line, "AnonHugePages: %ld kB", &v) == 1 ||
                          sscanf(line, "Private_Hugetlb: %ld kB", &v) == 1 ||
                          sscanf(line, "Shared_Hugetlb: %ld kB", &v) == 1)) {
            *huge_kb += v;
            if (strncmp(line, "AnonHugePages", 13))
                *rss_kb += v;  /* hugetlb pages are not in Rss */
        }
    }
    fclose(f);
}

static void *quick(void *p)
{
    write_stack(4096);
    return p;
}

static void *self_detach(void *p)
{
    pthread_detach(pthread_self());
    write_stack(4096);
    return p;
}

static int stacks(int n)
{
    struct slot *s = calloc((size_t)n, sizeof(*s));
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    if (!s || !t)
        return 2;
    pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, waiter, &s[i]))
            return 3;
    pthread_barrier_wait(&ready);
    long rss, huge;
    measure(s, n, &rss, &huge);
    struct cache_stats st;
    int have = get_stats(&st) == 0;
    long made = have ? (long)(st.hits + st.misses) : -1;
    pthread_barrier_wait(&go);
    for (int i = 0; i < n; i++) {
        void *ret;
        if (pthread_join(t[i], &ret) || ret != &s[i])
            return 4;
    }
    /* Stacks still in use: made (misses; a hit reuses a cached one) less
     * those in the cache or unmapped from it. */
    have = get_stats(&st) == 0;
    long in_use_after_join =
        have ? (long)st.misses - (long)st.cached_stacks - (long)st.evictions : -1;

    pthread_attr_t da;
    pthread_attr_init(&da);
    pthread_attr_setdetachstate(&da, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < n; i++) {
        pthread_t d;
        if (pthread_create(&d, &da, quick, NULL))
            return 5;
        if (pthread_create(&d, NULL, quick, NULL) || pthread_detach(d))
            return 6;
        if (pthread_create(&d, NULL, self_detach, NULL))
            return 7;
    }
    pthread_attr_destroy(&da);
    /* Detached threads finish on their own and their stacks are released
     * once reaped: poll a bounded number of times. */
    long created = -1, in_use_after_detach = -1;
    struct timespec ms = {0, 10 * 1000 * 1000};
    for (int tries = 0; have && tries < 1000; tries++) {
        get_stats(&st);
        created = (long)(st.hits + st.misses);
        in_use_after_detach = (long)st.misses - (long)st.cached_stacks - (long)st.evictions;
        if (created >= made + 3 * n && in_use_after_detach == 0)
            break;
        nanosleep(&ms, NULL);
    }
    printf("threads=%d rss_kb=%ld huge_kb=%ld hp_stacks=%ld in_use_after_join=%ld "
           "hp_stacks_total=%ld in_use_after_detach=%ld\n", n, rss, huge, made,
           in_use_after_join, created, in_use_after_detach);
    free(s);
    free(t);
    return 0;
}

static int fork_child(const char *who)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        write_stack(TOUCH);  /* the child writes the stack it inherited */
        char *p = malloc(1 << 20);
        if (!p)
            _exit(9);
        memset(p, 1, 1 << 20);
        free(p);
        execlp("true", "true", (char *)NULL);
        _exit(8);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "fork from %s: child status %#x\n", who, status);
        return -1;
    }
    return 0;
}

static void *forker(void *p)
{
    write_stack(TOUCH);
    *(int *)p = fork_child("a thread");
    return NULL;
}

static int forks(int n)
{
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    int *rc = calloc((size_t)n, sizeof(*rc));
    if (!t || !rc)
        return 2;
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, i == 0 ? forker : quick, &rc[i]))
            return 3;
    int main_rc = fork_child("the main thread");
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("forks ok=%d\n", main_rc == 0 && rc[0] == 0);
    return main_rc == 0 && rc[0] == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "stacks"))
        return stacks(atoi(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "fork"))
        return forks(atoi(argv[2]));
    fprintf(stderr, "usage: threads_prog stacks|fork N\n");
    return 2;
}
