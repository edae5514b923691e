/*
 * Helpers for the kernel-backed tests (tests/kernel/): what the kernel says
 * about a range (smaps, pagemap + kpageflags, mincore), pool snapshots, a
 * SIGBUS-guarded fill, a process that drains a hugetlb pool, and re-running
 * the test program as a fresh child (THP/mTHP knobs are probed by libhp
 * once per process, so a different knob setting needs a new process).
 *
 * Include after <cmocka.h>. Children started with kt_run_child must never
 * call knob_set/knob_lock: the parent holds the machine-wide knob lock.
 */
#ifndef HP_KT_H
#define HP_KT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "support.h"

#define KT_4K (UINT64_C(4) << 10)
#define KT_64K (UINT64_C(64) << 10)
#define KT_2M (UINT64_C(2) << 20)
#define KT_1G (UINT64_C(1) << 30)

#define KT_THP "/sys/kernel/mm/transparent_hugepage"
#define KT_POOLS "/sys/kernel/mm/hugepages"

/* A line of the TAP stream that meson treats as a comment ("# ..."). */
void kt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Why every test of this program must skip ("" if none): set by main. */
extern char kt_skip_all[256];

/* Skip the current test, printing the reason as a TAP comment. */
#define KT_SKIP(...)                                                                               \
    do {                                                                                           \
        kt_note("SKIP: " __VA_ARGS__);                                                             \
        skip();                                                                                    \
        return;                                                                                    \
    } while (0)

/* First line of every test: skip when main found a missing prerequisite. */
#define KT_PRECONDITIONS()                                                                         \
    do {                                                                                           \
        (void)state;                                                                               \
        if (kt_skip_all[0])                                                                        \
            KT_SKIP("%s", kt_skip_all);                                                            \
    } while (0)

/* assert with a message that says what the kernel showed. */
#define KT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            kt_explain(#cond, __VA_ARGS__);                                                        \
            fail();                                                                                \
        }                                                                                          \
    } while (0)
void kt_explain(const char *cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* First check of every setup: 0 if root, else -1 with kt_skip_all saying
 * "not root: <what> need root". */
int kt_need_root(const char *what);
/* Take the machine-wide knob lock, waiting at most seconds (another
 * engineer's benchmark may hold it for minutes; meson would kill us as a
 * timeout). Returns 0, or -1 with kt_skip_all saying why. */
int kt_lock(unsigned seconds);
/* Set a knob or make every test skip with the reason; returns 0 or -1. */
int kt_knob(const char *path, const char *value);
/* knob_set on a THP file under KT_THP ("enabled", "hugepages-64kB/enabled"). */
int kt_thp_knob(const char *file, const char *value);
/* Set every mTHP size below the PMD (16K..1M) to value, if it exists. */
int kt_mthp_all(const char *value);
/* pool_set that insists on exactly pages; sets kt_skip_all when short. */
int kt_pool_exact(unsigned long size_kb, unsigned long pages);
/* Make exactly n pages of the size_kb pool usable by libhp (free and not
 * reserved), without shrinking the pool: pages beyond n are held, each by
 * a private MAP_HUGETLB mapping of this process that is never touched (a
 * reservation: free_hugepages stays, resv_hugepages grows); held pages are
 * given back first when n grows, and the pool is grown (pool_set) only
 * past them. A 1 GiB page given back to the kernel at run time may never be
 * reserved again (Linux 6.1, 6.12, two nodes): pages reserved at boot stay
 * in the pool this way. Returns the usable pages, or -errno. Fork children
 * do not inherit the holds (MADV_DONTFORK). */
long kt_pool_usable(unsigned long size_kb, long n);
/* kt_pool_usable that insists on exactly n; sets kt_skip_all when short. */
int kt_pool_usable_exact(unsigned long size_kb, long n);
/* Pages of the size_kb pool this process holds (kt_pool_usable). */
long kt_pool_held(unsigned long size_kb);
/* free_hugepages - resv_hugepages of the size_kb pool (what libhp can use). */
long kt_pool_unreserved(unsigned long size_kb);
/* Wait up to 0.5 s for the size_kb pool to show free_hugepages == free and
 * resv_hugepages == rsvd (another process's short-lived block can disturb
 * the counters for a moment; our own leak never goes away). 0 if it does;
 * else -1 with the last values in *got_free, *got_rsvd. */
int kt_pool_wait(unsigned long size_kb, long free, long rsvd, long *got_free, long *got_rsvd);
/* 1 if the pool directory for size_kb exists. */
int kt_pool_exists(unsigned long size_kb);

/* Everything a test may disturb: both pools, the meminfo totals, THP knobs. */
struct kt_snapshot {
    long pool[2][5];             /* 2M, 1G: nr, free, resv, surplus, overcommit */
    long meminfo[4];             /* HugePages_Total, _Free, _Rsvd, _Surp */
    char thp[12][48];            /* enabled, defrag, per-size enabled files */
};
void kt_snapshot_take(struct kt_snapshot *s);
/* 0 if identical; else 1 with the first difference described in why. */
int kt_snapshot_diff(const struct kt_snapshot *a, const struct kt_snapshot *b, char *why,
                     size_t cap);

/* The smaps entry of the mapping (VMA) that holds addr. */
struct kt_vma {
    uintptr_t start, end;
    long kernel_page_kb, rss_kb, anon_huge_kb, hugetlb_kb; /* hugetlb: Private + Shared */
    char vmflags[160];
};
/* 0 if found, -1 if addr is in no mapping. */
int kt_vma_of(const void *addr, struct kt_vma *v);

/* /proc/kpageflags bits (Documentation/admin-guide/mm/pagemap.rst). */
#define KT_KPF_HEAD 15
#define KT_KPF_TAIL 16
#define KT_KPF_HUGE 17
#define KT_KPF_THP 22
/* Page flags of the page mapped at addr; -1 if not present or unreadable. */
int64_t kt_page_flags(const void *addr);

/* What pagemap + kpageflags say about [addr, addr+len) (base pages). */
struct kt_folios {
    uint64_t present;      /* base pages present */
    uint64_t in_large;     /* of those, part of a large folio (head or tail) */
    uint64_t exact_chunks; /* chunk-aligned chunks that are exactly one folio */
};
/* chunk: folio size to look for (64 KiB, 2 MiB). 0, or -errno. */
int kt_folio_scan(const void *addr, size_t len, uint64_t chunk, struct kt_folios *out);

/* errno of mincore over [p, p+len): 0 if every page is mapped, ENOMEM if
 * some page is not. */
int kt_mincore_errno(const void *p, size_t len);

/* Fill every byte of [p, p+len) with byte and read it back, catching SIGBUS
 * and SIGSEGV. 0 if fine; -1 if a signal struck (*off = offset); 1 if a
 * byte read back wrong (*off = offset). */
int kt_fill_verify(void *p, size_t len, unsigned char byte, size_t *off);
/* 0 if every byte of [p, p+len) equals byte, else 1 + (*off = offset). */
int kt_verify(const void *p, size_t len, unsigned char byte, size_t *off);

/* hp_backend_get by name: 0 and *info filled, or -1 if not in the list. */
struct hp_backend_info;
int kt_backend(const char *name, struct hp_backend_info *info);

/* v rounded up to a multiple of a. */
uint64_t kt_round_up(uint64_t v, uint64_t a);

/* Blocks a test holds (at most 8: every block kt_alloc gives) are freed by
 * the teardown if the test fails half-way. kt_release forgets p and
 * hp_frees it, failing the test if hp_free does. */
void kt_release(void *p);
/* Hold p (NULL is ignored) as kt_alloc holds its blocks, e.g. one from hp_alloc_ex. */
void kt_hold(void *p);
/* hp_free every block still held, ignoring errors (for teardowns). */
void kt_free_held(void);
/* cmocka teardown calling kt_free_held. */
int kt_teardown_held(void **state);

/* hp_alloc_ex with these options (NULL: not set); a block is held. */
void *kt_alloc(size_t len, const char *backend, const char *exclude, uint64_t flags);
/* hp_realloc of a held block; the new block is held in its place. */
void *kt_realloc(void *p, size_t len, uint64_t flags);
/* kt_alloc that fails the test, with libhp's error, if it gives no block. */
void *kt_must_alloc(size_t len, const char *backend, const char *exclude, uint64_t flags);
/* hp_info of a block, failing the test if hp_info does. */
struct hp_block_info;
struct hp_block_info kt_info(const void *p);
/* Fail unless mincore says [p, p+len) is unmapped (after hp_free). */
void kt_expect_unmapped(const void *p, size_t len);

/* Last test of every program, after its teardown: the machine matches
 * after_setup (a pool a test grew shrunk back to its size then first),
 * then, once the pages kt_pool_usable holds are let go and
 * knob_restore_all has put every knob back, before_all; the first difference fails the test. The 2 MiB pool's free
 * and reserved pages get kt_pool_wait's grace to return to after_setup's
 * counts first. */
void kt_expect_restored(const struct kt_snapshot *after_setup,
                        const struct kt_snapshot *before_all);

/* Drainer: a forked process that reserves and faults every page of the
 * size_kb pool that is free and unreserved right now, with its own
 * MAP_HUGETLB mapping, and holds them until kt_drainer_stop. Fork it only
 * while this process holds no hugetlb block (fork would share those pages).
 * Returns the pid and *pages taken, or -errno. */
pid_t kt_drainer_start(unsigned long size_kb, long *pages);
/* A drainer that keeps taking every free page and giving it back, as fast
 * as it can, until stopped. Returns the pid or -errno. */
pid_t kt_churner_start(unsigned long size_kb);
void kt_drainer_stop(pid_t pid);
/* Stop every drainer still running (a test that failed half-way). */
void kt_drainers_stop_all(void);
/* cmocka teardown calling kt_drainers_stop_all. */
int kt_teardown_drainers(void **state);

/* Run this program again as "<exe> --kt-child <mode>" and wait for it.
 * Returns its exit status, or 128 + signal if it died. */
int kt_run_child(const char *mode);
/* First call of every main: these tests prove what the backends do with
 * the kernel, so libhp's cache of freed blocks is off (HP_CACHE_MAX=0,
 * unless the environment already says otherwise): hp_free must reach the
 * backend's unmap, and a new block must come from the backend's map. */
void kt_backends_only(void);
/* In main: the mode when started by kt_run_child, else NULL. */
const char *kt_child_mode(int argc, char **argv);

#endif
