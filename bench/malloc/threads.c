/*
 * bench/malloc: the 128-thread case of the glibc thread on stacks, huge
 * pages and RSS, as an unmodified program (no libhp call): 128 threads
 * with default attributes each write TOUCH KiB of their stack, top down as
 * a stack grows, and wait. Prints the time from the first pthread_create
 * until all have written, the RSS growth over that time (/proc/self/statm:
 * THP pages count, hugetlb pages do not) and the process's huge kB then
 * (smaps_rollup: AnonHugePages + Private_Hugetlb + Shared_Hugetlb).
 * threads.py runs it with and without HP_STACKS.
 *
 *     bench_threads [TOUCH_KIB]   (default 16)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 128

static size_t touch;
static pthread_barrier_t touched, release;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
    long size, rss = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2)
            rss = -1;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static long huge_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long sum = 0, v;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "AnonHugePages: %ld kB", &v) == 1 ||
            sscanf(line, "Private_Hugetlb: %ld kB", &v) == 1 ||
            sscanf(line, "Shared_Hugetlb: %ld kB", &v) == 1)
            sum += v;
    fclose(f);
    return sum;
}

static void *worker(void *arg)
{
    char *buf = __builtin_alloca(touch);
    for (size_t off = touch; off > 0; off -= 4096)
        ((volatile char *)buf)[off - 1] = 1;
    pthread_barrier_wait(&touched);
    pthread_barrier_wait(&release);
    return arg;
}

int main(int argc, char **argv)
{
    touch = (size_t)(argc > 1 ? atol(argv[1]) : 16) << 10;
    pthread_t t[NTHREADS];
    pthread_barrier_init(&touched, NULL, NTHREADS + 1);
    pthread_barrier_init(&release, NULL, NTHREADS + 1);
    long rss0 = rss_kb();
    double t0 = now();
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL))
            return 1;
    pthread_barrier_wait(&touched);
    double t1 = now();
    long rss1 = rss_kb(), huge = huge_kb();
    pthread_barrier_wait(&release);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    printf("start_ms=%.2f rss_growth_kb=%ld huge_kb=%ld\n", (t1 - t0) * 1e3, rss1 - rss0, huge);
    return 0;
}
