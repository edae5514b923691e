#include "measure.h"
#include "os.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* /proc/kpageflags bits (Documentation/admin-guide/mm/pagemap.rst). */
#define KPF_COMPOUND_HEAD 15
#define KPF_COMPOUND_TAIL 16
#define KPF_ZERO_PAGE 24
#define PM_PRESENT (UINT64_C(1) << 63)
#define PM_PFN_MASK ((UINT64_C(1) << 55) - 1)

struct smaps_walk {
    uintptr_t lo, hi;       /* range measured */
    int inside;             /* current mapping lies wholly in [lo, hi) */
    uint64_t room;          /* bytes the current mapping may still add */
    uint64_t bytes;
};

static int smaps_line(const char *line, void *ctx)
{
    struct smaps_walk *w = ctx;
    uintptr_t start, end;
    char tail;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", &start, &end, &tail) == 3 && tail == ' ') {
        w->inside = start >= w->lo && end <= w->hi && start < end;
        w->room = w->inside ? end - start : 0;
        return 0;
    }
    if (!w->inside)
        return 0;
    static const char *fields[] = {"AnonHugePages:", "Private_Hugetlb:", "Shared_Hugetlb:"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++) {
        size_t n = strlen(fields[i]);
        unsigned long long kb;
        if (strncmp(line, fields[i], n) || sscanf(line + n, "%llu", &kb) != 1)
            continue;
        /* A garbled or lying smaps (a test root, a hostile container) must
         * not give a mapping more huge bytes than its size, nor overflow. */
        uint64_t add = kb > w->room / 1024 ? w->room : (uint64_t)kb * 1024;
        w->room -= add;
        w->bytes += add;
    }
    return 0;
}

int64_t hp_measure_smaps_huge_bytes(const void *addr, size_t len)
{
    struct smaps_walk w = {(uintptr_t)addr, (uintptr_t)addr + len, 0, 0, 0};
    int rc = hp_os_each_line("/proc/self/smaps", smaps_line, &w);
    if (rc < 0)
        return rc;
    /* Overlapping lines (again: a lying file) cannot add up past len. */
    return (int64_t)(w.bytes < len ? w.bytes : len);
}

/* Count pages in [first, first+n) of physically contiguous PFNs that belong
 * to a large folio. One pread covers the whole run. */
static int64_t count_run(int kfd, uint64_t pfn, uint64_t n)
{
    uint64_t flags[512];
    int64_t pages = 0;
    while (n) {
        uint64_t k = n < 512 ? n : 512;
        int64_t got = hp_os_pread(kfd, flags, k * 8, pfn * 8);
        if (got < 0)
            return got;
        if ((uint64_t)got != k * 8)
            return -EIO;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t f = flags[i];
            if ((f >> KPF_ZERO_PAGE) & 1)
                continue;
            if (((f >> KPF_COMPOUND_HEAD) & 1) || ((f >> KPF_COMPOUND_TAIL) & 1))
                pages++;
        }
        pfn += k;
        n -= k;
    }
    return pages;
}

int64_t hp_measure_folio_huge_bytes(const void *addr, size_t len)
{
    uint64_t ps = hp_os_page_size();
    int pfd = hp_os_open("/proc/self/pagemap");
    if (pfd < 0)
        return pfd;
    int kfd = hp_os_open("/proc/kpageflags");
    if (kfd < 0) {
        hp_os_close(pfd);
        return kfd;
    }
    uint64_t vpn = (uint64_t)(uintptr_t)addr / ps, npages = (len + ps - 1) / ps;
    uint64_t entries[512];
    uint64_t run_pfn = 0, run_len = 0;
    int64_t pages = 0, rc = 0, seen_pfn = 0;
    for (uint64_t done = 0; done < npages && rc >= 0;) {
        uint64_t k = npages - done < 512 ? npages - done : 512;
        int64_t got = hp_os_pread(pfd, entries, k * 8, (vpn + done) * 8);
        if (got != (int64_t)(k * 8)) {
            rc = got < 0 ? got : -EIO;
            break;
        }
        for (uint64_t i = 0; i < k && rc >= 0; i++) {
            uint64_t e = entries[i], pfn = e & PM_PFN_MASK;
            if (!(e & PM_PRESENT) || !pfn)
                continue;
            seen_pfn = 1;
            if (run_len && pfn == run_pfn + run_len) {
                run_len++;
                continue;
            }
            if (run_len) {
                rc = count_run(kfd, run_pfn, run_len);
                pages += rc > 0 ? rc : 0;
            }
            run_pfn = pfn;
            run_len = 1;
        }
        done += k;
    }
    if (rc >= 0 && run_len) {
        rc = count_run(kfd, run_pfn, run_len);
        pages += rc > 0 ? rc : 0;
    }
    hp_os_close(kfd);
    hp_os_close(pfd);
    if (rc < 0)
        return rc;
    /* Present pages with PFN 0 everywhere means PFNs are hidden from us. */
    if (!seen_pfn && pages == 0) {
        int64_t smaps = hp_measure_smaps_huge_bytes(addr, len);
        return smaps > 0 ? smaps : 0;
    }
    return pages * (int64_t)ps;
}

int64_t hp_measure_huge_bytes(const void *addr, size_t len)
{
    int64_t b = hp_measure_folio_huge_bytes(addr, len);
    if (b >= 0)
        return b;
    return hp_measure_smaps_huge_bytes(addr, len);
}

int64_t hp_measure_resident_bytes(const void *addr, size_t len)
{
    uint64_t ps = hp_os_page_size(), vpn = (uintptr_t)addr / ps, n = len / ps, present = 0;
    int fd = hp_os_open("/proc/self/pagemap");
    if (fd < 0)
        return fd;
    uint64_t e[512];
    for (uint64_t done = 0; done < n;) {
        uint64_t k = n - done < 512 ? n - done : 512;
        int64_t got = hp_os_pread(fd, e, k * 8, (vpn + done) * 8);
        if (got != (int64_t)(k * 8)) {
            hp_os_close(fd);
            return got < 0 ? got : -EIO;
        }
        for (uint64_t i = 0; i < k; i++)
            present += (e[i] & PM_PRESENT) != 0;
        done += k;
    }
    hp_os_close(fd);
    return (int64_t)(present * ps);
}
