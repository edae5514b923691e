/* Helpers shared by the stack tests: smaps of one mapping, forked children. */
#ifndef HP_ST_UTIL_H
#define HP_ST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* One /proc/self/smaps entry. */
struct st_vma {
    uintptr_t start, end;
    char perms[5];
    long rss_kb, anon_huge_kb, kernel_page_kb, hugetlb_kb;  /* hugetlb: Private + Shared */
    int nohuge, huge;                                        /* VmFlags nh / hg */
};

/* The mapping holding addr; 0, or -1 if none. */
int st_vma_at(uintptr_t addr, struct st_vma *out);

/* Run fn(arg) in a forked child that ends with _exit(fn(arg)); returns the
 * raw wait status, or -1. */
int st_run_child(int (*fn)(void *), void *arg);

/* Resident set of the process in KiB (/proc/self/statm). */
long st_rss_kb(void);

/* Thread stacks for tests: TSan's static TLS alone needs about 900 KiB. */
#define ST_THREAD_STACK (2u << 20)

/* /proc/self/maps line count, to compare with an earlier one: equal, except
 * under TSan, whose runtime maps shadow memory as the program runs (then
 * only printed). Returns 1 if the check holds. */
int st_maps_back_to(long before);

/* 1 if an HP_STACK_HUGE stack can be made here (printed reason if not). */
int st_huge_possible(uint64_t flags);

#endif
