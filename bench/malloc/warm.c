/*
 * bench/malloc: the conditioning step run.py runs before every measured
 * process. It maps MIB MiB of anonymous memory with MADV_HUGEPAGE, writes
 * one byte per 4 KiB page and exits, so every configuration starts right
 * after the same process gave the same memory back to the kernel.
 *
 * Why: on a VM whose guest reports free memory to the host
 * (page_reporting, virtio-balloon free page reporting), the first touch of
 * memory the guest handed back pays a host-side fault as well; memory freed
 * a moment ago has not been reported yet. How much of a benchmark's memory
 * is in either state otherwise depends on what ran just before it and how
 * long ago (bench/malloc/README.md measures the difference).
 *
 *     bench_warm [MIB]        (default 1024)
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define PMD ((size_t)2 << 20)

int main(int argc, char **argv)
{
    size_t len = (size_t)(argc > 1 ? strtoul(argv[1], NULL, 10) : 1024) << 20;
    if (!len)
        return 0;
    char *p = mmap(NULL, len + PMD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    p = (char *)(((uintptr_t)p + PMD - 1) & ~(uintptr_t)(PMD - 1));
    madvise(p, len, MADV_HUGEPAGE);  /* a refusal (THP "never") leaves 4 KiB pages: still warm */
    for (size_t i = 0; i < len; i += 4096)
        p[i] = 1;
    return 0;
}
