/*
 * bench/realloc: a realloc-growth loop (doubling or 1.5x growth), one whole process per
 * measurement (run.py times it from outside with wait4):
 *
 *     for it in 1..iters:
 *         ptr = NULL; old = 0
 *         for size = 4; size < 1 GiB; size = next(size):
 *             ptr = realloc(ptr, size)
 *             memset(ptr + old, 0xff, size - old)
 *             old = size
 *         free(ptr)
 *
 * next(size) is size * 2, or size * 3 / 2 for the 1.5x variant.
 *
 * Built twice: realloc_loop_libc calls realloc/free (whatever LD_PRELOAD put
 * there: glibc, jemalloc, tcmalloc, mimalloc); realloc_loop_hp calls
 * hp_realloc/hp_free. Usage:
 *
 *     realloc_loop_libc FACTOR ITERS
 *     realloc_loop_hp   FACTOR ITERS [zero]
 *     realloc_loop_libc primer MIB      (untimed: touch and free MIB MiB)
 *
 * hp_realloc gets HP_F_NOZERO, which is realloc's own contract (the grown
 * tail is unspecified); "zero" drops it, so reused memory is cleared first.
 *
 * With REALLOC_TRACE=FILE, the loop also writes to FILE, as a JSON array of
 * [size, seconds], the time from the start of an iteration until each size
 * was reached and filled, averaged over the iterations (two clock reads per
 * step: noise against the milliseconds a step takes above 1 MiB).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifdef USE_HP
#include <hp.h>
#endif

#define MAX_STEPS 128

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "realloc_loop: %s failed\n", what);
    exit(2);
}

/* Touch and release memory, so that every timed run starts after the same
 * kind of event (this VM gives memory freed a while ago back to the host,
 * and the next first touch of it is much slower). */
static int primer(size_t mib)
{
    size_t len = mib << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    madvise(p, len, MADV_HUGEPAGE);
    for (size_t off = 0; off < len; off += 4096)
        p[off] = 1;
    munmap(p, len);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "primer"))
        return primer(strtoul(argv[2], NULL, 10));
    if (argc < 3) {
        fprintf(stderr, "usage: %s FACTOR ITERS [zero] | primer MIB\n", argv[0]);
        return 2;
    }
    int half = !strcmp(argv[1], "1.5");
    long iters = strtol(argv[2], NULL, 10);
#ifdef USE_HP
    uint64_t flags = argc > 3 && !strcmp(argv[3], "zero") ? 0 : HP_F_NOZERO;
#endif
    const char *trace = getenv("REALLOC_TRACE");
    static double at[MAX_STEPS];
    static size_t sizes[MAX_STEPS];
    int steps = 0;
    unsigned long sum = 0;
    for (long it = 0; it < iters; it++) {
        unsigned char *ptr = NULL;
        size_t old = 0;
        int step = 0;
        double t0 = now_s();
        for (size_t size = 4; size < (size_t)1 << 30; size = half ? size * 3 / 2 : size * 2) {
#ifdef USE_HP
            ptr = hp_realloc(ptr, size, flags);
#else
            ptr = realloc(ptr, size);
#endif
            if (!ptr)
                die("realloc");
            memset(ptr + old, 0xff, size - old);
            old = size;
            if (trace && step < MAX_STEPS) {
                at[step] += now_s() - t0;
                sizes[step++] = size;
            }
        }
        steps = step;
        sum += ptr[old - 1];
#ifdef USE_HP
        if (hp_free(ptr) != HP_OK)
            die("hp_free");
#else
        free(ptr);
#endif
    }
    if (trace) {
        FILE *f = fopen(trace, "w");
        if (!f)
            die("fopen of REALLOC_TRACE");
        fputc('[', f);
        for (int i = 0; i < steps; i++)
            fprintf(f, "%s[%zu, %.9g]", i ? ", " : "", sizes[i], at[i] / (double)iters);
        fputs("]\n", f);
        if (fclose(f) != 0)
            die("write of REALLOC_TRACE");
    }
    return sum == (unsigned long)iters * 0xff ? 0 : 3;
}
