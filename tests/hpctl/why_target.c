/*
 * A process set up one way for `hpctl why` (tests/hpctl/check-why.py): it
 * maps one region as MODE says, touches it (unless MODE is untouched),
 * prints "START LEN" of the region in hex and its PID, and waits until its stdin closes.
 * It does not use libhp: why must explain any process.
 *
 *   thp        8 MiB, 2 MiB-aligned, MADV_HUGEPAGE
 *   plain      the same without advice
 *   nohuge     the same with MADV_NOHUGEPAGE
 *   prctl      PR_SET_THP_DISABLE first, then as thp
 *   small      1 MiB with MADV_HUGEPAGE
 *   unaligned  2 MiB with MADV_HUGEPAGE starting 1 MiB past a 2 MiB boundary
 *   edges      5 MiB with MADV_HUGEPAGE starting 1 MiB past a 2 MiB boundary
 *   stack      8 MiB, 2 MiB-aligned, MAP_STACK, no advice
 *   untouched  as thp, never touched
 *   hugetlb    4 MiB MAP_HUGETLB (the 2 MiB pool must have 2 free pages)
 *   sparse     8 TiB MAP_NORESERVE, no advice, one page touched every 64 GiB (a
 *              sanitizer's shadow, a runtime's reserved heap)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define M ((size_t)1 << 20)

/* len bytes at offset skew past a 2 MiB boundary. */
static char *aligned(size_t len, size_t skew, int extra)
{
    size_t span = len + 4 * M;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)raw + 2 * M - 1) & ~(uintptr_t)(2 * M - 1);
    char *p = (char *)(a + skew);
    /* Unmap the slack so that the region is a VMA of its own. */
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + span > p + len)
        munmap(p + len, (size_t)(raw + span - (p + len)));
    return p;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "thp";
    size_t len = 8 * M, skew = 0;
    int advice = MADV_HUGEPAGE, extra = 0, touch = 1;
    if (!strcmp(mode, "plain"))
        advice = 0;
    else if (!strcmp(mode, "nohuge"))
        advice = MADV_NOHUGEPAGE;
    else if (!strcmp(mode, "prctl") && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        return perror("prctl"), 1;
    else if (!strcmp(mode, "small"))
        len = M;
    else if (!strcmp(mode, "unaligned"))
        len = 2 * M, skew = M;
    else if (!strcmp(mode, "edges"))
        len = 5 * M, skew = M;
    else if (!strcmp(mode, "stack"))
        advice = 0, extra = MAP_STACK;
    else if (!strcmp(mode, "untouched"))
        touch = 0;
    else if (!strcmp(mode, "hugetlb"))
        advice = 0, len = 4 * M, extra = MAP_HUGETLB;
    else if (!strcmp(mode, "sparse"))
        advice = 0, len = (size_t)8 << 40, extra = MAP_NORESERVE, touch = 0;
    char *p = extra == MAP_HUGETLB || extra == MAP_NORESERVE
                  ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0)
                  : aligned(len, skew, extra);
    if (!p || p == MAP_FAILED)
        return perror("mmap"), 1;
    if (advice && madvise(p, len, advice) != 0)
        return perror("madvise"), 1;
    if (touch)
        memset(p, 1, len);
    if (extra == MAP_NORESERVE)
        for (size_t off = 0; off < len; off += (size_t)64 << 30)
            p[off] = 1;
    printf("%lx %lx %d\n", (unsigned long)(uintptr_t)p, (unsigned long)len, (int)getpid());
    fflush(stdout);
    char buf[16];
    while (read(0, buf, sizeof(buf)) > 0)
        ;
    return 0;
}
