/*
 * bench/stacks — hp_stack_* against the stacks people make today.
 *
 *   rss    RSS of 128 idle threads: glibc's default stacks, a user-made
 *          2 MiB-aligned stack with its guard inside (THP=always fills it with huge pages),
 *          hp lean, hp huge; under THP=always and THP=madvise.
 *   start  time until 128 new threads have each touched 1 MiB of stack:
 *          glibc default and hp lean (4 KiB pages) against hp huge (THP and
 *          hugetlb).
 *   churn  create+destroy of one stack: fresh mmap+mprotect+munmap against
 *          hp_stack_create/destroy with a warm cache (both policies) and
 *          without the cache.
 *
 * Every measurement of rss and start runs in a fresh forked child; the
 * configurations are interleaved round-robin, repeated, and reported as
 * medians. Takes the machine-wide knob lock; knobs it sets are restored.
 * usage: bench_stacks [rss|start|churn|all] [reps] [JSON_FILE]   (root for
 * rss/hugetlb); JSON_FILE gets every measurement per rep, for bench/plots.py.
 */
#include <hp.h>
#include "st_crowd.h"

#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (UINT64_C(1) << 20)
#define NTHREADS ST_CROWD
#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define MAX_REPS 31

static volatile double *shared;   /* results from children */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long size, rss = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2)
            rss = -1;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static FILE *jout;
static int jrecords;

static void json_array(const double *v, int n, double scale)
{
    fputc('[', jout);
    for (int i = 0; i < n; i++)
        fprintf(jout, "%s%.9g", i ? ", " : "", v[i] * scale);
    fputc(']', jout);
}

/* Start the next record of "records"; the caller writes its fields. */
static void json_record(const char *table)
{
    fprintf(jout, "%s\n  {\"table\": \"%s\"", jrecords++ ? "," : "", table);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    double tmp[MAX_REPS];
    memcpy(tmp, v, (size_t)n * sizeof(*v));
    qsort(tmp, (size_t)n, sizeof(*tmp), cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* Run fn in a fresh child; 0 if it exited 0. */
static int in_child(int (*fn)(int), int arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);   /* the knob restorer is the parent's job */
        signal(SIGABRT, SIG_DFL);
        _exit(fn(arg));
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* ---- 128 threads ---- */

static const char *const kind_names[] = {
    "glibc default (8 MiB)", "user 2 MiB-aligned, guard inside", "hp lean (2 MiB)",
    "hp huge, THP (2 MiB)", "hp huge, hugetlb (2 MiB)"};

static size_t touch_bytes;  /* stack each crowd thread touches */

/* shared[0] = RSS growth in KiB, [1] = huge bytes / resident bytes of the
 * hp stacks, [2] = seconds until every thread had touched its stack,
 * [3] = minor faults in that time. */
static int crowd_child(int arg)
{
    enum st_kind k = (enum st_kind)arg;
    static struct st_crowd c;
    hp_backend_count();  /* libhp loaded before the baseline */
    struct rusage ru0, ru1;
    long before = rss_kb();
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_s();
    if (st_crowd_start(&c, k, 2 * MIB, touch_bytes) != 0)
        return 2;
    double t1 = now_s();
    getrusage(RUSAGE_SELF, &ru1);
    shared[0] = (double)(rss_kb() - before);
    shared[2] = t1 - t0;
    shared[3] = (double)(ru1.ru_minflt - ru0.ru_minflt);
    uint64_t huge = 0, resident = 0;
    for (int i = 0; k >= ST_LEAN && i < NTHREADS; i++) {
        struct hp_stack_info info = HP_STACK_INFO_INIT;
        if (hp_stack_get_info(c.s[i], &info) != HP_OK)
            return 3;
        huge += info.huge_bytes;
        resident += info.resident_bytes;
    }
    shared[1] = resident ? (double)huge / (double)resident : 0;
    st_crowd_stop(&c);
    return 0;
}

static int set_thp(const char *mode)
{
    int rc = knob_set(THP_ENABLED, mode);
    if (rc)
        fprintf(stderr, "cannot set THP to %s: %s\n", mode, strerror(-rc));
    return rc;
}

static int hugetlb_ready(void)
{
    long have = pool_get(2048, "nr_hugepages");
    if (have < 0)
        return 0;
    long got = pool_set(2048, (unsigned long)have + NTHREADS + 8);
    hp_reprobe();
    return got >= have + NTHREADS + 8;
}

static void bench_rss(int reps)
{
    const char *modes[] = {"always", "madvise"};
    enum st_kind kinds[] = {ST_GLIBC, ST_TRAP, ST_LEAN, ST_THP};
    const int nk = 4;
    printf("\n### RSS of %d idle threads (each touched 16 KiB of stack), median of %d\n\n",
           NTHREADS, reps);
    printf("| THP | stack | RSS growth | vs glibc | huge coverage of resident stack |\n");
    printf("|---|---|---:|---:|---:|\n");
    touch_bytes = 16 * 1024;
    for (int m = 0; m < 2; m++) {
        if (set_thp(modes[m]))
            return;
        hp_reprobe();
        double kb[ST_NKINDS][MAX_REPS], cov[ST_NKINDS][MAX_REPS];
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < nk; i++) {
                if (in_child(crowd_child, kinds[i]) != 0)
                    fprintf(stderr, "%s: child failed\n", kind_names[kinds[i]]);
                kb[i][r] = shared[0];
                cov[i][r] = shared[1];
            }
        double glibc = median(kb[0], reps);
        for (int i = 0; i < nk; i++) {
            double med = median(kb[i], reps);
            char covs[32] = "-";
            if (kinds[i] >= ST_LEAN)
                snprintf(covs, sizeof(covs), "%.1f %%", 100 * median(cov[i], reps));
            printf("| %s | %s | %.1f MiB | %.3fx | %s |\n", modes[m], kind_names[kinds[i]],
                   med / 1024, med / glibc, covs);
            if (jout) {
                json_record("rss");
                fprintf(jout, ", \"thp\": \"%s\", \"stack\": \"%s\", \"threads\": %d, "
                              "\"rss_growth_kib\": ", modes[m], kind_names[kinds[i]], NTHREADS);
                json_array(kb[i], reps, 1);
                fprintf(jout, ", \"huge_coverage\": ");
                kinds[i] >= ST_LEAN ? json_array(cov[i], reps, 1) : (void)fputs("null", jout);
                fputc('}', jout);
            }
        }
    }
    knob_restore_all();
}

static void bench_start(int reps, int tlb)
{
    enum st_kind kinds[] = {ST_GLIBC, ST_LEAN, ST_THP, ST_HUGETLB};
    const int nk = tlb ? 4 : 3;
    printf("\n### Start %d threads that each touch 1 MiB of stack (THP=madvise), median of %d"
           "\n\n", NTHREADS, reps);
    printf("| stack | time to all touched | minor faults | vs 4 KiB (hp lean) | huge coverage |\n");
    printf("|---|---:|---:|---:|---:|\n");
    touch_bytes = MIB;
    if (set_thp("madvise"))
        return;
    hp_reprobe();
    double t[4][MAX_REPS], faults[4][MAX_REPS], cov[4][MAX_REPS];
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nk; i++) {
            if (in_child(crowd_child, kinds[i]) != 0)
                fprintf(stderr, "%s: child failed\n", kind_names[kinds[i]]);
            t[i][r] = shared[2];
            faults[i][r] = shared[3];
            cov[i][r] = shared[1];
        }
    double lean = median(t[1], reps);
    for (int i = 0; i < nk; i++) {
        char covs[32] = "-";
        if (kinds[i] >= ST_LEAN)
            snprintf(covs, sizeof(covs), "%.1f %%", 100 * median(cov[i], reps));
        printf("| %s | %.2f ms | %.0f | %.2fx | %s |\n", kind_names[kinds[i]],
               1e3 * median(t[i], reps), median(faults[i], reps), median(t[i], reps) / lean,
               covs);
        if (jout) {
            json_record("start");
            fprintf(jout, ", \"stack\": \"%s\", \"threads\": %d, \"seconds\": ",
                    kind_names[kinds[i]], NTHREADS);
            json_array(t[i], reps, 1);
            fprintf(jout, ", \"minor_faults\": ");
            json_array(faults[i], reps, 1);
            fprintf(jout, ", \"huge_coverage\": ");
            kinds[i] >= ST_LEAN ? json_array(cov[i], reps, 1) : (void)fputs("null", jout);
            fputc('}', jout);
        }
    }
    knob_restore_all();
}

/* ---- create+destroy ---- */

enum churn_way { RAW, HP_KEPT, HP_RELEASED, HP_NOCACHE, HP_HUGE_KEPT, HP_HUGE_RELEASED,
                 HP_HUGE_NOCACHE, NWAYS };
static const char *const way_names[] = {
    "mmap+mprotect+munmap", "hp lean, warm cache, kept (default)",
    "hp lean, warm cache, keep_bytes=0 (released)", "hp lean, HP_STACK_NOCACHE",
    "hp huge THP, warm cache, kept (default)", "hp huge THP, warm cache, keep_bytes=0",
    "hp huge THP, HP_STACK_NOCACHE"};

static double churn_once(enum churn_way w, size_t size, int touch, int iters)
{
    struct hp_stack_cache_config cfg = HP_STACK_CACHE_CONFIG_INIT;
    if (w == HP_RELEASED || w == HP_HUGE_RELEASED)
        cfg.keep_bytes = 0;
    hp_stack_cache_configure(&cfg);
    uint64_t flags = w == HP_NOCACHE || w == HP_HUGE_NOCACHE ? HP_STACK_NOCACHE : 0;
    if (w >= HP_HUGE_KEPT)
        flags |= HP_STACK_THP;
    size_t guard = 4096;
    if (w != RAW) {  /* warm: one stack of this shape in the cache */
        struct hp_stack *s = hp_stack_create(size, flags);
        hp_stack_destroy(s);
    }
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        if (w == RAW) {
            char *p = mmap(NULL, guard + size, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
            if (p == MAP_FAILED || mprotect(p + guard, size, PROT_READ | PROT_WRITE))
                abort();
            if (touch)
                p[guard + size - 1] = 1;
            munmap(p, guard + size);
        } else {
            struct hp_stack *s = hp_stack_create(size, flags);
            if (!s)
                abort();
            if (touch)
                ((volatile char *)hp_stack_base(s))[hp_stack_size(s) - 1] = 1;
            hp_stack_destroy(s);
        }
    }
    double ns = (now_s() - t0) * 1e9 / iters;
    hp_stack_cache_trim();
    return ns;
}

static void bench_churn(int reps, int huge)
{
    const size_t sizes[] = {256 * 1024, 2 * MIB};
    printf("\n### create+destroy of one stack (ns per pair, median of %d rounds, interleaved)"
           "\n\n", reps);
    printf("| size | stack touched | way | ns/op | speed-up vs mmap+mprotect+munmap |\n");
    printf("|---|---|---|---:|---:|\n");
    for (size_t z = 0; z < sizeof(sizes) / sizeof(*sizes); z++)
        for (int touch = 0; touch < 2; touch++) {
            double ns[NWAYS][MAX_REPS];
            int nways = huge && sizes[z] == 2 * MIB ? NWAYS : HP_HUGE_KEPT;
            for (int r = 0; r < reps; r++)
                for (int w = 0; w < nways; w++) {
                    int iters = w >= HP_HUGE_RELEASED && touch ? 200 : 20000;
                    ns[w][r] = churn_once((enum churn_way)w, sizes[z], touch, iters);
                }
            double raw = median(ns[RAW], reps);
            for (int w = 0; w < nways; w++) {
                double med = median(ns[w], reps);
                printf("| %zu KiB | %s | %s | %.0f | %.1fx |\n", sizes[z] >> 10,
                       touch ? "1 byte at the top" : "no", way_names[w], med, raw / med);
                if (jout) {
                    json_record("churn");
                    fprintf(jout, ", \"size\": %zu, \"touched\": %s, \"way\": \"%s\", "
                                  "\"ns\": ", sizes[z], touch ? "true" : "false", way_names[w]);
                    json_array(ns[w], reps, 1);
                    fputc('}', jout);
                }
            }
        }
    struct hp_stack_cache_config cfg = HP_STACK_CACHE_CONFIG_INIT;
    hp_stack_cache_configure(&cfg);
}

static int thp_ok(void)
{
    struct hp_stack *s = hp_stack_create(1, HP_STACK_THP | HP_STACK_NOCACHE);
    if (!s) {
        fprintf(stderr, "no THP stacks here: %s\n", hp_last_error_detail());
        return 0;
    }
    hp_stack_destroy(s);
    return 1;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: %s [rss|start|churn|all] [reps 1..%d] [JSON_FILE]\n", argv[0],
                MAX_REPS);
        return 2;
    }
#ifdef BENCH_BACKEND_DIR
    setenv("HP_BACKEND_DIR", BENCH_BACKEND_DIR, 0);  /* this build's plugins */
#endif
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 1;
    /* Nobody changes knobs underneath us; ours are restored at exit. */
    if (knob_lock() != 0)
        fprintf(stderr, "warning: no knob lock; results may be disturbed\n");
    char thp[64] = "?";
    knob_get(THP_ENABLED, thp, sizeof(thp));
    printf("# bench_stacks %s, %d reps; THP enabled: %s; %d threads\n", what, reps, thp,
           NTHREADS);
    if (argc > 3) {
        jout = fopen(argv[3], "we");
        if (!jout) {
            fprintf(stderr, "cannot write %s: %s\n", argv[3], strerror(errno));
            return 1;
        }
        fprintf(jout, "{\"bench\": \"stacks\", \"date\": %lld, \"reps\": %d, "
                      "\"thp_enabled\": \"%s\", \"records\": [", (long long)time(NULL), reps, thp);
    }
    int root = is_root();
    int all = !strcmp(what, "all");
    if ((all || !strcmp(what, "rss")) && root)
        bench_rss(reps);
    if (all || !strcmp(what, "start"))
        bench_start(reps, root && hugetlb_ready());
    knob_restore_all();
    hp_reprobe();
    if (all || !strcmp(what, "churn"))
        bench_churn(reps, thp_ok());
    if (jout) {
        fputs("\n]}\n", jout);
        if (fclose(jout) != 0)
            return 1;
    }
    return 0;
}
