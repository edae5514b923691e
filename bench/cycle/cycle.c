/*
 * bench/cycle: the cost of one allocate + first write + free cycle of one
 * size, the pattern of a program that allocates a buffer per request:
 *
 *     repeat WARMUP times, untimed, then CYCLES times, timed:
 *         p = alloc(size)
 *         p[0] = i; p[size - 1] = i      (first and last page written)
 *         free(p)
 *
 * One process per measurement (run.py starts them in interleaved rounds).
 * MODE is how the memory comes and goes:
 *   hp      hp_alloc(size, 0) / hp_free: whatever libhp selects for the size
 *           by default, with its cache as the environment configures it
 *           (run.py sets HP_CACHE_MAX=0 for the uncached rows); a block
 *           that comes from the cache is zeroed first, as hp_alloc promises;
 *   hp-nozero  the same with HP_F_NOZERO: what the cache's own bookkeeping
 *           costs, without the zeroing;
 *   mmap    mmap(MAP_PRIVATE | MAP_ANONYMOUS) / munmap;
 *   malloc  malloc / free of the C library (or whatever LD_PRELOAD put there).
 * The first and last byte are written so that every mode pays for the
 * memory it hands out (an untouched mmap costs almost nothing), and two
 * writes keep a block that a malloc splits from its heap honest.
 *
 * Prints one JSON object: mode, size, cycles, ns per cycle, minor faults
 * per cycle (getrusage), and for hp the backend and page size of the last
 * block (hp_info) and the cache hits and misses during the timed cycles.
 *
 *     cycle MODE SIZE CYCLES [WARMUP]
 */
#include <hp.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

enum mode { MODE_HP, MODE_HP_NOZERO, MODE_MMAP, MODE_MALLOC };

/* The bytes read back go here, so that no compiler drops a malloc, write
 * and free triple as dead code. */
static volatile unsigned sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void die(const char *what)
{
    fprintf(stderr, "cycle: %s failed: %s\n", what,
            errno ? strerror(errno) : hp_error_name(hp_last_error()));
    exit(2);
}

static unsigned char *get(enum mode m, size_t size)
{
    void *p;
    switch (m) {
    case MODE_HP:
    case MODE_HP_NOZERO:
        p = hp_alloc(size, m == MODE_HP_NOZERO ? HP_F_NOZERO : 0);
        return p;
    case MODE_MMAP:
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    default:
        return malloc(size);
    }
}

static void put(enum mode m, unsigned char *p, size_t size)
{
    switch (m) {
    case MODE_HP:
    case MODE_HP_NOZERO:
        if (hp_free(p) != HP_OK)
            die("hp_free");
        break;
    case MODE_MMAP:
        if (munmap(p, size) != 0)
            die("munmap");
        break;
    default:
        free(p);
    }
}

static unsigned run(enum mode m, size_t size, long n)
{
    unsigned sum = 0;
    for (long i = 0; i < n; i++) {
        unsigned char *p = get(m, size);
        if (!p)
            die("allocation");
        p[0] = (unsigned char)i;
        p[size - 1] = (unsigned char)i;
        sum += p[0] + p[size - 1];
        put(m, p, size);
    }
    return sum;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s hp|hp-nozero|mmap|malloc SIZE CYCLES [WARMUP]\n", argv[0]);
        return 2;
    }
    enum mode m = !strcmp(argv[1], "hp")          ? MODE_HP
                  : !strcmp(argv[1], "hp-nozero") ? MODE_HP_NOZERO
                  : !strcmp(argv[1], "mmap")      ? MODE_MMAP
                  : !strcmp(argv[1], "malloc")    ? MODE_MALLOC
                                                  : (enum mode)-1;
    char *end;
    size_t size = strtoull(argv[2], &end, 10);
    long cycles = strtol(argv[3], NULL, 10);
    long warmup = argc > 4 ? strtol(argv[4], NULL, 10) : 16;
    if ((int)m < 0 || *end || size < 2 || cycles < 1 || warmup < 0) {
        fprintf(stderr, "cycle: bad arguments\n");
        return 2;
    }

    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    int hp = m == MODE_HP || m == MODE_HP_NOZERO;
    if (hp) {
        unsigned char *p = get(m, size);
        if (!p || hp_info(p, &info) != HP_OK)
            die("hp_alloc + hp_info");
        hp_free(p);
    }
    run(m, size, warmup);

    struct hp_cache_stats s0 = HP_CACHE_STATS_INIT, s1 = HP_CACHE_STATS_INIT;
    hp_cache_get_stats(&s0);
    long f0 = minflt();
    double t0 = now_ns();
    unsigned sum = run(m, size, cycles);
    double t1 = now_ns();
    long f1 = minflt();
    hp_cache_get_stats(&s1);

    printf("{\"mode\": \"%s\", \"size\": %zu, \"cycles\": %ld, \"ns\": %.1f, "
           "\"minflt\": %.3f",
           argv[1], size, cycles, (t1 - t0) / (double)cycles,
           (double)(f1 - f0) / (double)cycles);
    if (hp)
        printf(", \"backend\": \"%s\", \"page_size\": %" PRIu64 ", \"hits\": %" PRIu64
               ", \"misses\": %" PRIu64,
               info.backend, info.page_size, s1.hits - s0.hits, s1.misses - s0.misses);
    printf("}\n");
    sink = sum;
    return 0;
}
