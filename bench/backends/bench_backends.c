/*
 * Each libhp backend against the raw syscall sequence it wraps, in one run.
 *
 *   map + first touch (one byte per 4 KiB) + unmap of --size-mb (2 GiB):
 *     fallback     vs mmap
 *     thp-madvise  vs mmap(len + 2 MiB - 4 KiB), trim to 2 MiB, MADV_HUGEPAGE
 *     anon-orders  vs mmap(len + 64 KiB - 4 KiB), trim to 64 KiB, MADV_HUGEPAGE
 *                     (hugepages-64kB=madvise, hugepages-2048kB=never)
 *     hugetlbfs    vs mmap(MAP_HUGETLB | MAP_HUGE_2MB), and MAP_HUGE_1GB
 *   Rounds are interleaved (every pair in every round, raw and libhp in
 *   alternating order), round 0 is a warm-up that also checks with the
 *   kernel's counters that each run got the pages it claims. Medians, and
 *   the median of the per-round ratios libhp/raw.
 *
 *   random access over --ra-size-mb (4 GiB), through libhp with
 *   HP_F_POPULATE: populate time, dependent loads (each address depends on
 *   the value loaded before), GUPS-style read-modify-write updates; on
 *   4 KiB, THP, 64 KiB mTHP, 2 MiB and 1 GiB hugetlb pages.
 *
 *   --first-touch thp-raw|thp-libhp: one THP map+touch+unmap as the very
 *   first thing in a fresh process (run.sh runs several, alternating).
 *
 * Knobs and pools are set through tests/support (machine-wide lock, restored
 * at exit and on fatal signals). Root only. Not a test: never run by meson.
 */
#include <hp.h>

#include "support.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define KB (UINT64_C(1) << 10)
#define MB (UINT64_C(1) << 20)
#define GB (UINT64_C(1) << 30)
#define THP "/sys/kernel/mm/transparent_hugepage"
#define MAX_ROUNDS 64

static int verbose;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    if (n <= 0)
        return NAN;
    memcpy(s, v, (size_t)n * sizeof(*v));
    qsort(s, (size_t)n, sizeof(*s), cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* --json FILE: every measurement, per round, for bench/plots.py. */
static FILE *jout;
static int jrecords;

static void json_array(const double *v, int n)
{
    fputc('[', jout);
    for (int i = 0; i < n; i++)
        fprintf(jout, "%s%.9g", i ? ", " : "", v[i]);
    fputc(']', jout);
}

/* Start the next record of "records"; the caller writes its fields. */
static void json_record(const char *table)
{
    fprintf(jout, "%s\n  {\"table\": \"%s\"", jrecords++ ? "," : "", table);
}

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "bench_backends: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

static void knob(const char *file, const char *value)
{
    char path[200];
    snprintf(path, sizeof(path), THP "/%s", file);
    int rc = knob_set(path, value);
    if (rc)
        fprintf(stderr, "bench_backends: cannot set %s=%s: %s\n", path, value, strerror(-rc));
}

/* ---- the raw syscall sequences libhp's backends wrap ---- */

static void *raw_aligned(uint64_t len, uint64_t align, int advise)
{
    uint64_t slack = align > 4 * KB ? align - 4 * KB : 0;
    char *raw = mmap(NULL, len + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t start = (uintptr_t)raw, aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    if (aligned > start)
        munmap(raw, aligned - start);
    if (slack - (aligned - start))
        munmap((void *)(aligned + len), slack - (aligned - start));
    if (advise)
        madvise((void *)aligned, len, MADV_HUGEPAGE);
    return (void *)aligned;
}

static void *raw_hugetlb(uint64_t len, uint64_t ps)
{
    int shift = __builtin_ctzll(ps);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- configurations ---- */

enum kind { K_BASE, K_THP, K_MTHP, K_HUGETLB };

struct config {
    const char *name;       /* row label */
    const char *backend;    /* libhp backend */
    enum kind kind;
    uint64_t page_size;
    int usable;             /* 0: skipped, for the reason in why */
    char why[96];
    /* per round: [0] raw, [1] libhp */
    double map_touch[2][MAX_ROUNDS], unmap[2][MAX_ROUNDS], total[2][MAX_ROUNDS];
    double warm_total[2];   /* round 0 */
    double huge_frac[2];    /* round 0: fraction of the block in pages of page_size */
    long faults[2];         /* round 0: minor faults during the touch */
};

static uint64_t flag_for(uint64_t ps)
{
    return hp_page_size_flag(ps);
}

static void *map_one(struct config *c, int libhp, uint64_t len, uint64_t extra_flags)
{
    if (libhp) {
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = c->backend;
        o.flags = flag_for(c->page_size) | extra_flags;
        return hp_alloc_ex(len, &o);
    }
    void *p;
    switch (c->kind) {
    case K_BASE:
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        p = p == MAP_FAILED ? NULL : p;
        break;
    case K_THP:
    case K_MTHP:
        p = raw_aligned(len, c->page_size, 1);
        break;
    default:
        p = raw_hugetlb(len, c->page_size);
        break;
    }
    if (p && (extra_flags & HP_F_POPULATE))
        madvise(p, len, MADV_POPULATE_WRITE);
    return p;
}

static void unmap_one(int libhp, void *p, uint64_t len)
{
    if (libhp)
        hp_free(p);
    else
        munmap(p, len);
}

static void touch(volatile char *p, uint64_t len)
{
    for (uint64_t off = 0; off < len; off += 4 * KB)
        p[off] = 1;
}

/* Bytes of [p, p+len) the kernel backs with this config's page size, as
 * the kernel reports it (smaps; the mTHP fault counter for 64 KiB). */
static double huge_fraction(struct config *c, int libhp, void *p, uint64_t len, long mthp_before)
{
    if (libhp) {
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        if (hp_info(p, &info) != HP_OK)
            return NAN;
        if (strcmp(info.backend, c->backend))
            return -1;  /* served by another backend: flagged in the table */
        return (double)info.huge_bytes / (double)len;
    }
    switch (c->kind) {
    case K_BASE:
        return (double)smaps_field_kb(p, len, "AnonHugePages") * KB / (double)len;
    case K_THP:
        return (double)smaps_field_kb(p, len, "AnonHugePages") * KB / (double)len;
    case K_MTHP:
        return (double)(mthp_stat(c->page_size / KB, "anon_fault_alloc") - mthp_before) *
               (double)c->page_size / (double)len;
    default:
        return (double)(smaps_field_kb(p, len, "Private_Hugetlb") +
                        smaps_field_kb(p, len, "Shared_Hugetlb")) * KB / (double)len;
    }
}

/* The mTHP row needs the PMD size off, or MADV_HUGEPAGE would give THP. */
static void phase_knobs(struct config *c, int enter)
{
    if (c->kind == K_MTHP)
        knob("hugepages-2048kB/enabled", enter ? "never" : "inherit");
}

/* One timed map + touch + unmap. round 0 is the warm-up (checked, not timed
 * into the medians). Returns 0, or -1 if the map failed. */
static int run_once(struct config *c, int libhp, int round, uint64_t len)
{
    long mthp0 = c->kind == K_MTHP ? mthp_stat(c->page_size / KB, "anon_fault_alloc") : 0;
    double t0 = now_s();
    char *p = map_one(c, libhp, len, 0);
    if (!p) {
        fprintf(stderr, "bench_backends: %s %s: map failed (%s)\n", c->name,
                libhp ? "libhp" : "raw", libhp ? hp_last_error_detail() : strerror(errno));
        snprintf(c->why, sizeof(c->why), "%s map failed", libhp ? "libhp" : "raw");
        c->usable = 0;
        return -1;
    }
    long f0 = minflt();
    touch(p, len);
    double t1 = now_s();
    long f1 = minflt();
    if (round == 0) {
        c->huge_frac[libhp] = huge_fraction(c, libhp, p, len, mthp0);
        c->faults[libhp] = f1 - f0;
    }
    double t2 = now_s();
    unmap_one(libhp, p, len);
    double t3 = now_s();
    if (round == 0) {
        c->warm_total[libhp] = (t1 - t0) + (t3 - t2);
        return 0;
    }
    if (verbose)
        fprintf(stderr, "round %d %-28s %-5s map+touch %.3f s unmap %.1f ms\n", round, c->name,
                libhp ? "libhp" : "raw", t1 - t0, 1e3 * (t3 - t2));
    c->map_touch[libhp][round - 1] = t1 - t0;
    c->unmap[libhp][round - 1] = t3 - t2;
    c->total[libhp][round - 1] = (t1 - t0) + (t3 - t2);
    return 0;
}

/* An untimed raw run of the same kind: the guest hands memory that has been
 * free for a while back to the host (free page reporting), and the next
 * touch of it pays a host fault. After the primer, both timed runs of the
 * pair reuse memory that was just freed, so neither pays that by luck. */
static void primer(struct config *c, uint64_t len)
{
    char *p = map_one(c, 0, len, 0);
    if (p) {
        touch(p, len);
        unmap_one(0, p, len);
    }
}

static void run_pair(struct config *c, int round, uint64_t len)
{
    int first = round % 2;
    if (round > 0)
        primer(c, len);
    if (run_once(c, first, round, len) == 0)
        run_once(c, !first, round, len);
}

static double paired_ratio(const struct config *c, int rounds)
{
    double r[MAX_ROUNDS];
    for (int i = 0; i < rounds; i++)
        r[i] = c->total[1][i] / c->total[0][i];
    return median(r, rounds);
}

static void map_touch_unmap(struct config *cfg, int ncfg, int rounds, uint64_t len)
{
    printf("\n## map + first touch (1 byte per 4 KiB) + unmap of %llu MiB\n",
           (unsigned long long)(len / MB));
    printf("%d measured rounds after one warm-up round, interleaved (row order rotates, raw and "
           "libhp alternate who goes first, each pair follows an untimed raw primer run of the "
           "same kind).\n\n", rounds);
    for (int round = 0; round <= rounds; round++) {
        for (int i = 0; i < ncfg; i++) {
            struct config *c = &cfg[(i + round) % ncfg];  /* rotate the row order too */
            if (!c->usable)
                continue;
            phase_knobs(c, 1);
            run_pair(c, round, len);
            phase_knobs(c, 0);
        }
        fprintf(stderr, "round %d/%d done\n", round, rounds);
    }
    printf("| backend | raw map+touch s | libhp map+touch s | raw unmap ms | libhp unmap ms | "
           "raw total s | libhp total s | ratio of medians | median paired ratio | "
           "huge pages raw / libhp (round 0) | faults raw / libhp |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < ncfg; i++) {
        struct config *c = &cfg[i];
        if (!c->usable) {
            printf("| %s | skipped: %s | | | | | | | | | |\n", c->name, c->why);
            continue;
        }
        double rt = median(c->total[0], rounds), lt = median(c->total[1], rounds);
        printf("| %s | %.3f | %.3f | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.0f%% / %.0f%% | "
               "%ld / %ld |\n",
               c->name, median(c->map_touch[0], rounds), median(c->map_touch[1], rounds),
               1e3 * median(c->unmap[0], rounds), 1e3 * median(c->unmap[1], rounds), rt, lt,
               lt / rt, paired_ratio(c, rounds), 100 * c->huge_frac[0], 100 * c->huge_frac[1],
               c->faults[0], c->faults[1]);
    }
    for (int i = 0; jout && i < ncfg; i++) {
        struct config *c = &cfg[i];
        json_record("map_touch");
        fprintf(jout, ", \"backend\": \"%s\", \"page_size\": %llu, \"size\": %llu, "
                      "\"usable\": %s, \"why\": \"%s\"", c->name,
                (unsigned long long)c->page_size, (unsigned long long)len,
                c->usable ? "true" : "false", c->why);
        if (!c->usable) {
            fputc('}', jout);
            continue;
        }
        const char *who[2] = {"raw", "libhp"};
        for (int k = 0; k < 2; k++) {
            fprintf(jout, ", \"%s\": {\"map_touch_s\": ", who[k]);
            json_array(c->map_touch[k], rounds);
            fprintf(jout, ", \"unmap_s\": ");
            json_array(c->unmap[k], rounds);
            fprintf(jout, ", \"total_s\": ");
            json_array(c->total[k], rounds);
            fprintf(jout, ", \"warm_total_s\": %.9g, \"huge_frac\": %.6g, \"faults\": %ld}",
                    c->warm_total[k], c->huge_frac[k], c->faults[k]);
        }
        fputc('}', jout);
    }
    printf("\nWarm-up round (round 0, not in the medians; the THP row's first run is this "
           "process's very first THP touch):\n\n");
    printf("| backend | raw s | libhp s | ran first |\n|---|---|---|---|\n");
    for (int i = 0; i < ncfg; i++)
        if (cfg[i].usable)
            printf("| %s | %.3f | %.3f | raw |\n", cfg[i].name, cfg[i].warm_total[0],
                   cfg[i].warm_total[1]);
}

/* ---- random access ---- */

/* Dependent loads: a chain of next-indices stored in the block, one node
 * per 1 KiB slot, visited in the order of a full-period LCG modulo the slot
 * count (a permutation of every slot), so each hop lands on a pseudo-random
 * slot anywhere in the block and its address is known only once the load
 * before it completes. (Computing the next index from the loaded value by
 * arithmetic instead lets the CPU overlap the misses: 45 ns a hop against
 * 266 ns for a real chase, measured here.) */
#define SLOT_WORDS 128
static void build_chain(uint64_t *a, uint64_t slots)
{
    uint64_t mask = slots - 1;
    for (uint64_t s = 0; s < slots; s++)
        a[s * SLOT_WORDS] = ((s * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407)) &
                             mask) * SLOT_WORDS;
}

static double dependent_loads(const uint64_t *a, uint64_t hops, uint64_t *sink)
{
    uint64_t i = 0;
    double t0 = now_s();
    for (uint64_t k = 0; k < hops; k++)
        i = a[i];
    double t = now_s() - t0;
    *sink += i;
    return t * 1e9 / (double)hops;
}

/* GUPS: independent random read-modify-write updates. */
static double gups(uint64_t *a, uint64_t mask, uint64_t updates)
{
    uint64_t x = 1;
    double t0 = now_s();
    for (uint64_t k = 0; k < updates; k++) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        a[(x >> 17) & mask] ^= x;
    }
    return (now_s() - t0) * 1e9 / (double)updates;
}

struct ra_row {
    struct config *c;
    double populate[MAX_ROUNDS], dep_ns[MAX_ROUNDS], gups_ns[MAX_ROUNDS], huge[MAX_ROUNDS];
    int n;
};

static void random_access(struct config *cfg, int ncfg, int rounds, uint64_t len)
{
    struct ra_row rows[8] = {{0}};
    int nrows = 0;
    for (int i = 0; i < ncfg && nrows < 8; i++)
        rows[nrows++].c = &cfg[i];
    uint64_t n = len / 8, mask = n - 1, sink = 0;
    uint64_t hops = 2u << 20, updates = 16u << 20;
    printf("\n## random access over %llu MiB, through libhp with HP_F_POPULATE\n",
           (unsigned long long)(len / MB));
    printf("%d rounds, rows rotated per round; %llu dependent loads (a pointer chase over one "
           "node per 1 KiB), %llu GUPS updates (random 8-byte xor).\n\n",
           rounds, (unsigned long long)hops, (unsigned long long)updates);
    for (int round = 0; round < rounds; round++) {
        for (int k = 0; k < nrows; k++) {
            struct ra_row *r = &rows[(k + round) % nrows];
            struct config *c = r->c;
            if (!c->usable)
                continue;
            phase_knobs(c, 1);
            double t0 = now_s();
            uint64_t *a = map_one(c, 1, len, HP_F_POPULATE);
            double t1 = now_s();
            if (!a) {
                fprintf(stderr, "bench_backends: random access %s: %s\n", c->name,
                        hp_last_error_detail());
                phase_knobs(c, 0);
                continue;
            }
            struct hp_block_info info = HP_BLOCK_INFO_INIT;
            hp_info(a, &info);
            r->populate[r->n] = t1 - t0;
            r->huge[r->n] = (double)info.huge_bytes / (double)len;
            build_chain(a, len / (SLOT_WORDS * 8));
            r->dep_ns[r->n] = dependent_loads(a, hops, &sink);
            r->gups_ns[r->n] = gups(a, mask, updates);
            r->n++;
            hp_free(a);
            phase_knobs(c, 0);
        }
        fprintf(stderr, "random access round %d/%d done\n", round + 1, rounds);
    }
    double base_dep = rows[0].n ? median(rows[0].dep_ns, rows[0].n) : NAN;
    double base_gups = rows[0].n ? median(rows[0].gups_ns, rows[0].n) : NAN;
    printf("| pages | populate s | dependent load ns | speed-up vs 4 KiB | GUPS update ns | "
           "speed-up vs 4 KiB | huge-backed |\n|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < nrows; k++) {
        struct ra_row *r = &rows[k];
        if (!r->n) {
            printf("| %s | skipped: %s | | | | | |\n", r->c->name,
                   r->c->why[0] ? r->c->why : "map failed");
            continue;
        }
        double dep = median(r->dep_ns, r->n), up = median(r->gups_ns, r->n);
        printf("| %s | %.2f | %.0f | %.2fx | %.1f | %.2fx | %.0f%% |\n", r->c->name,
               median(r->populate, r->n), dep, base_dep / dep, up, base_gups / up,
               100 * median(r->huge, r->n));
    }
    for (int k = 0; jout && k < nrows; k++) {
        struct ra_row *r = &rows[k];
        json_record("random_access");
        fprintf(jout, ", \"backend\": \"%s\", \"page_size\": %llu, \"size\": %llu, "
                      "\"hops\": %llu, \"updates\": %llu, \"usable\": %s, \"populate_s\": ",
                r->c->name, (unsigned long long)r->c->page_size, (unsigned long long)len,
                (unsigned long long)hops, (unsigned long long)updates, r->n ? "true" : "false");
        json_array(r->populate, r->n);
        fprintf(jout, ", \"dependent_load_ns\": ");
        json_array(r->dep_ns, r->n);
        fprintf(jout, ", \"gups_update_ns\": ");
        json_array(r->gups_ns, r->n);
        fprintf(jout, ", \"huge_frac\": ");
        json_array(r->huge, r->n);
        fputc('}', jout);
    }
    if (sink == 42)
        printf("\n");
}

/* ---- setup ---- */

static long reserve(unsigned long kb, unsigned long pages)
{
    long got = pool_set(kb, pages);
    if (got >= 0 && got < (long)pages && kb >= 1048576) {
        /* 1 GiB pages need 1 GiB of contiguous free memory: compact once
         * (a one-shot action, not a setting) and ask again. */
        FILE *f = fopen("/proc/sys/vm/compact_memory", "we");
        if (f) {
            fputs("1\n", f);
            fclose(f);
        }
        got = pool_set(kb, pages);
    }
    if (got != (long)pages)
        fprintf(stderr, "bench_backends: %lu kB pool: asked %lu pages, got %ld\n", kb, pages, got);
    return got;
}

static void base_knobs(void)
{
    knob("enabled", "madvise");
    knob("defrag", "madvise");
    knob("hugepages-2048kB/enabled", "inherit");
    static const char *sizes[] = {"16", "32", "128", "256", "512", "1024"};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
        char file[64];
        snprintf(file, sizeof(file), "hugepages-%skB/enabled", sizes[i]);
        char path[200];
        snprintf(path, sizeof(path), THP "/%s", file);
        if (access(path, F_OK) == 0)
            knob(file, "never");
    }
    knob("hugepages-64kB/enabled", "madvise");
}

static int first_touch(const char *which, uint64_t len)
{
    base_knobs();
    struct config c = {.name = "thp", .backend = "thp-madvise", .kind = K_THP,
                       .page_size = 2 * MB, .usable = 1};
    int libhp = !strcmp(which, "thp-libhp");
    if (!libhp && strcmp(which, "thp-raw"))
        die("--first-touch takes thp-raw or thp-libhp, not %s", which);
    if (hp_reprobe() != HP_OK)  /* load the plugins outside the timed part */
        die("libhp cannot start: %s", hp_last_error_detail());
    double t0 = now_s();
    char *p = map_one(&c, libhp, len, 0);
    if (!p)
        die("first touch: map failed%s", "");
    touch(p, len);
    double t1 = now_s();
    double frac = huge_fraction(&c, libhp, p, len, 0);
    unmap_one(libhp, p, len);
    printf("first-touch %s: map+touch %.3f s of %llu MiB, %.0f%% THP\n", which, t1 - t0,
           (unsigned long long)(len / MB), 100 * frac);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 8, ra_rounds = 3, skip_ra = 0;
    uint64_t len = 2 * GB, ra_len = 4 * GB;
    const char *first = NULL, *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--rounds") && v)
            rounds = atoi(v), i++;
        else if (!strcmp(a, "--ra-rounds") && v)
            ra_rounds = atoi(v), i++;
        else if (!strcmp(a, "--size-mb") && v)
            len = strtoull(v, NULL, 10) * MB, i++;
        else if (!strcmp(a, "--ra-size-mb") && v)
            ra_len = strtoull(v, NULL, 10) * MB, i++;
        else if (!strcmp(a, "--skip-ra"))
            skip_ra = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (!strcmp(a, "--first-touch") && v)
            first = v, i++;
        else if (!strcmp(a, "--json") && v)
            json_path = v, i++;
        else
            die("usage: bench_backends [--rounds N] [--size-mb M] [--ra-rounds N] "
                "[--ra-size-mb M (power of two)] [--skip-ra] [--verbose] "
                "[--first-touch thp-raw|thp-libhp] [--json FILE]%s",
                "");
    }
    /* libhp against the syscalls its backends issue: a freed block must be
     * unmapped, not kept by libhp's cache for the next round to reuse. */
    setenv("HP_CACHE_MAX", "0", 1);
    if (!is_root())
        die("needs root: it reserves hugetlb pools and sets THP knobs%s", "");
    if (rounds < 1 || rounds >= MAX_ROUNDS || ra_rounds < 1 || ra_rounds >= MAX_ROUNDS ||
        len < GB || len % GB || ra_len & (ra_len - 1) || ra_len < GB)
        die("bad sizes or rounds (sizes: whole GiB; --ra-size-mb a power of two >= 1024)%s", "");
    if (knob_lock() != 0)
        die("cannot take the knob lock%s", "");
    if (first)
        return first_touch(first, len);

    /* Before the first libhp call: THP and mTHP are probed at load. */
    base_knobs();
    uint64_t need = (skip_ra || ra_len < len) ? len : ra_len;
    long got1g = reserve(1048576, need / GB);  /* first: 1 GiB pages need unfragmented memory */
    long got2m = reserve(2048, need / (2 * MB));
    struct config cfg[] = {
        {.name = "4 KiB (fallback)", .backend = "fallback", .kind = K_BASE, .page_size = 4 * KB},
        {.name = "THP 2 MiB (thp-madvise)", .backend = "thp-madvise", .kind = K_THP,
         .page_size = 2 * MB},
        {.name = "mTHP 64 KiB (anon-orders)", .backend = "anon-orders", .kind = K_MTHP,
         .page_size = 64 * KB},
        {.name = "hugetlb 2 MiB (hugetlbfs)", .backend = "hugetlbfs", .kind = K_HUGETLB,
         .page_size = 2 * MB},
        {.name = "hugetlb 1 GiB (hugetlbfs)", .backend = "hugetlbfs", .kind = K_HUGETLB,
         .page_size = GB},
    };
    int ncfg = (int)(sizeof(cfg) / sizeof(*cfg));
    for (int i = 0; i < ncfg; i++)
        cfg[i].usable = 1;
    if (got2m < (long)(len / (2 * MB)))
        cfg[3].usable = 0, snprintf(cfg[3].why, sizeof(cfg[3].why), got2m < 0 ?
                                    "no pool of this size on this kernel" : "%ld pages in the pool", got2m);
    if (got1g < (long)(len / GB))
        cfg[4].usable = 0, snprintf(cfg[4].why, sizeof(cfg[4].why), got1g < 0 ?
                                    "no pool of this size on this kernel" : "%ld pages in the pool", got1g);
    if (hp_reprobe() != HP_OK)
        die("libhp cannot start: %s", hp_last_error_detail());

    if (json_path) {
        jout = fopen(json_path, "we");
        if (!jout)
            die("cannot write %s", json_path);
        char kernel[128] = "?";
        FILE *f = fopen("/proc/sys/kernel/osrelease", "re");
        if (f && fgets(kernel, sizeof(kernel), f))
            kernel[strcspn(kernel, "\n")] = '\0';
        if (f)
            fclose(f);
        fprintf(jout, "{\"bench\": \"backends\", \"kernel\": \"%s\", \"cpus\": %ld, "
                      "\"date\": %lld, \"rounds\": %d, \"ra_rounds\": %d, \"pool_2m\": %ld, "
                      "\"pool_1g\": %ld, \"records\": [", kernel, sysconf(_SC_NPROCESSORS_ONLN),
                (long long)time(NULL), rounds, skip_ra ? 0 : ra_rounds, got2m, got1g);
    }
    printf("# libhp backends against their raw syscall sequences\n\n");
    printf("Kernel pools: %ld x 2 MiB, %ld x 1 GiB; THP enabled=madvise defrag=madvise; "
           "mTHP 64 KiB madvise (2 MiB off during the mTHP rows).\n", got2m, got1g);
    map_touch_unmap(cfg, ncfg, rounds, len);
    if (!skip_ra) {
        for (int i = 3; i < 5; i++) {
            long got = i == 3 ? got2m : got1g;
            if (cfg[i].usable && got < (long)(ra_len / cfg[i].page_size)) {
                cfg[i].usable = 0;
                snprintf(cfg[i].why, sizeof(cfg[i].why), "only %ld of %llu pages could be reserved",
                         got, (unsigned long long)(ra_len / cfg[i].page_size));
            }
        }
        random_access(cfg, ncfg, ra_rounds, ra_len);
    }
    if (jout) {
        fprintf(jout, "\n]}\n");
        if (fclose(jout) != 0)
            die("cannot write %s", json_path);
    }
    knob_restore_all();
    return 0;
}
