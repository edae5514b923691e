/*
 * Measuring what the kernel really did to a range: how many of its bytes sit
 * in pages larger than the base page right now, and how many are resident.
 */
#ifndef HP_LIB_MEASURE_H
#define HP_LIB_MEASURE_H

#include <stddef.h>
#include <stdint.h>

/* Huge-backed bytes of [addr, addr+len), or -errno. Uses page flags
 * (/proc/self/pagemap + /proc/kpageflags: exact for hugetlb, THP and mTHP)
 * when they are readable, else smaps (AnonHugePages and *_Hugetlb of the
 * mappings wholly inside the range; mTHP is invisible there). */
int64_t hp_measure_huge_bytes(const void *addr, size_t len);

/* The smaps-only measure (exposed for tests that compare the two). */
int64_t hp_measure_smaps_huge_bytes(const void *addr, size_t len);

/* The page-flags measure; -EPERM when PFNs are hidden (not root). */
int64_t hp_measure_folio_huge_bytes(const void *addr, size_t len);

/* Bytes of [addr, addr+len) present in memory now, from /proc/self/pagemap
 * (the present bit is visible without privileges,
 * Documentation/admin-guide/mm/pagemap.rst), or -errno. addr and len
 * aligned to the base page. */
int64_t hp_measure_resident_bytes(const void *addr, size_t len);

#endif
