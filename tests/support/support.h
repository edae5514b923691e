/*
 * Test support: kernel knobs that are restored whatever happens, and the
 * kernel's own counters (smaps, meminfo, mTHP stats) read before and after.
 */
#ifndef HP_TEST_SUPPORT_H
#define HP_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write value into a sysfs/procfs knob, remembering the first value seen so
 * that it is written back at exit, on a fatal signal, or by
 * knob_restore_all(). Returns 0, or -errno (e.g. not root). */
int knob_set(const char *path, const char *value);
/* Take the machine-wide knob lock (/run/lock/libhp-knobs.lock, flock) for
 * the rest of the process. knob_set takes it implicitly; tests and
 * benchmarks that only depend on knobs call it so nobody changes them
 * underneath. Returns 0 or -errno. */
int knob_lock(void);
/* Write back every knob changed so far (idempotent). */
void knob_restore_all(void);
/* Read a knob's raw contents (newline stripped) into buf; 0 or -errno. */
int knob_get(const char *path, char *buf, size_t cap);

/* NUMA balancing (/proc/sys/kernel/numa_balancing) off the calling
 * thread's memory and that of the threads it creates after: on (1), the
 * thread's policy becomes MPOL_LOCAL, which the balancer does not scan
 * (kernel/sched/fair.c task_numa_work skips VMAs whose policy lacks
 * MPOL_F_MOF, mm/mempolicy.c vma_policy_mof); off (0), the default policy
 * again. For tests that measure how pages are mapped: on Linux 6.1 with
 * two nodes, the balancer leaves some THP mapped by PTEs (seen after
 * mremap growth and on 128 thread stacks; docs/kernels.md). Returns 0 or
 * -errno (ENOSYS: no NUMA). */
int numa_balancing_away(int on);

/* nr_hugepages for a page size in KiB: set and read back (the kernel may
 * give fewer). Returns the count now in the pool, or -errno. */
long pool_set(unsigned long size_kb, unsigned long pages);
/* A value from /sys/kernel/mm/hugepages/hugepages-<kb>kB/<file>, or -1. */
long pool_get(unsigned long size_kb, const char *file);
/* A "Name: value" line of /proc/meminfo (value as printed), or -1. */
long meminfo_get(const char *name);
/* A counter of /sys/kernel/mm/transparent_hugepage/hugepages-<kb>kB/stats, or -1. */
long mthp_stat(unsigned long size_kb, const char *counter);

/* Sum of a smaps field (kB) over the mappings overlapping [addr, addr+len). */
long smaps_field_kb(const void *addr, size_t len, const char *field);
/* KernelPageSize (kB) of the mapping that holds addr, or -1. */
long smaps_kernel_page_kb(const void *addr);
/* Number of lines in /proc/self/maps, less those of the sanitizer's or
 * valgrind's own memory (support.c says which). */
long maps_count(void);
/* 1 if this /proc/self/maps line is valgrind's own memory (when running
 * under valgrind; support.c says how it is told), else 0. */
int maps_line_is_valgrinds(const char *line);
/* The permissions ("rw-p", "---p") of the /proc/self/maps line holding
 * addr, in perms[5]; 1 if found, else 0. */
int perms_at(const void *addr, char perms[5]);
/* VmRSS of process pid in kB (/proc/PID/status), or -1. */
long vmrss_kb(pid_t pid);

/* Run fn in a forked child (a fresh libhp state if the parent never called
 * libhp); returns fn's return value, or 128 + signal if it died. */
int run_in_child(int (*fn)(void *), void *arg);

/* In a run_in_child function: on failure, say where and with libhp's last
 * error, and make the child exit 1. (Callers include hp.h.) */
#define CHILD_CHECK(cond)                                                               \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "# child check failed at line %d: %s (%s: %s)\n", __LINE__, \
                    #cond, hp_error_name(hp_last_error()), hp_last_error_detail());     \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

/* 1 if running as root. */
int is_root(void);

/* The positive count in environment variable NAME, else dflt. The CI
 * stages size repetition loops this way (HPTEST_OPS, HPTEST_FORKS,
 * HPTEST_RUNS, HPTEST_FAULT_WAYS; tools/ci/stages says which stage sets
 * what). */
unsigned long env_count(const char *name, unsigned long dflt);

/* Touch one byte per 4 KiB page. */
void touch_pages(void *p, size_t len);

#endif
