/*
 * bench/malloc: the cost of one malloc + touch + free cycle by size, to
 * place HP_MALLOC_LARGE (the size from which requests go to hp_alloc
 * instead of mimalloc's arenas). Run under libhp-malloc with different
 * HP_MALLOC_LARGE values (sizes.py). For each size: ROUNDS cycles of
 * malloc(size), write one byte per 4 KiB page, free; a live neighbour block
 * of the same size is kept, so the allocator cannot just hand back the same
 * block every time without managing two. Prints "size_kib ns_per_cycle".
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    static const size_t kib[] = {64, 128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 16384};
    for (size_t i = 0; i < sizeof(kib) / sizeof(*kib); i++) {
        size_t n = kib[i] << 10;
        char *keep = malloc(n);
        double t0 = now();
        for (int r = 0; r < rounds; r++) {
            char *p = malloc(n);
            if (!p || !keep)
                return 2;
            for (size_t off = 0; off < n; off += 4096)
                p[off] = (char)r;
            free(p);
        }
        double dt = now() - t0;
        free(keep);
        printf("%zu %.0f\n", kib[i], dt / rounds * 1e9);
    }
    return 0;
}
