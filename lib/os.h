/*
 * The OS layer: every system call of the core goes through here (memory,
 * NUMA, /proc and /sys, the plugin files the loader opens and checks,
 * clocks), so tests can make any of them fail on demand. Not here: libc's
 * dynamic linker (dlopen and dlsym, lib/loader.c) and threads (pthread).
 *
 * All functions return 0 (or a length) on success and -errno on failure, and
 * never touch errno-visible state the caller relies on. None of them takes a
 * lock; they are safe to call from any thread, and after fork in the child.
 */
#ifndef HP_LIB_OS_H
#define HP_LIB_OS_H

#include <stddef.h>
#include <stdint.h>

#include "nodes.h"

enum hp_os_op {
    HP_OS_MAP,
    HP_OS_UNMAP,
    HP_OS_REMAP,
    HP_OS_ADVISE,
    HP_OS_PROTECT,
    HP_OS_READ,
    HP_OS_RESIDENT,
    HP_OS_MEMFD,
    HP_OS_FTRUNCATE,
    HP_OS_CLOSE,
    HP_OS_MBIND,
    HP_OS_GETCPU,
    HP_OS_NODE,
    HP_OS_MEMPOLICY,
    HP_OS_MOVE_PAGES,
    HP_OS_OPEN,      /* hp_os_openat, hp_os_dup_above */
    HP_OS_STAT,      /* hp_os_fstatat, hp_os_fstat, hp_os_stat */
    HP_OS_READLINK,
    HP_OS_READDIR,
    HP_OS_NOPS
};

/* mmap(hint, len, prot, flags, fd, off); *out is set only on success. */
int hp_os_map(void *hint, size_t len, int prot, int flags, int fd, int64_t off, void **out);
/* munmap; len may be any multiple of the base page. */
int hp_os_unmap(void *addr, size_t len);
/* mremap; new_addr is used only with MREMAP_FIXED. */
int hp_os_remap(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
                void **out);
int hp_os_advise(void *addr, size_t len, int advice);
int hp_os_protect(void *addr, size_t len, int prot);
/* Make [addr, addr + len) inaccessible (a stack guard). 0 or -errno. */
int hp_os_guard(void *addr, size_t len);
/* Make [addr, addr + len) whole VMAs: the kernel splits the VMAs it starts
 * or ends in. The range is left with the default read-ahead hint
 * (MADV_NORMAL); its fork flag is not touched. 0 or -errno. */
int hp_os_split(void *addr, size_t len);
/* Give [addr, addr + len) the protection and fork flag of a fresh private
 * mapping: read-write (mprotect), copied on fork (MADV_DOFORK). Where the
 * kernel refuses MADV_DOFORK (EINVAL: Linux 7.3 on hugetlb VMAs) it is 0
 * when no VMA of the range is marked not to be copied (it reads
 * /proc/self/smaps up to the range), else -EINVAL. 0 or -errno. */
int hp_os_renew(void *addr, size_t len);
/* 1 if some VMA overlapping [addr, addr + len) shows flag (two letters, as
 * in the VmFlags line of /proc/self/smaps: "dc" is VM_DONTCOPY), 0 if none
 * does, -ENOMEM if part of the range is not mapped, else -errno. Reads
 * smaps up to the range only, but that still costs a page table walk of
 * every VMA below it: not for hot paths. */
int hp_os_vma_flag(void *addr, size_t len, const char *flag);

/* madvise(MADV_DONTNEED): the pages of private anonymous (not hugetlb,
 * not shared) memory in [addr, addr+len) go back to the kernel; the range
 * stays mapped and reads as zero. addr aligned to the base page. */
int hp_os_drop_pages(void *addr, size_t len);
/* len bytes of private anonymous read-write memory for libhp's own records
 * (never huge-backed: MADV_NOHUGEPAGE). *out is set only on success. */
int hp_os_map_records(size_t len, void **out);

/* The descriptor and NUMA calls plugins make through struct hp_host (their
 * preconditions are written there, include/hp/backend.h). memfd_create
 * always adds MFD_CLOEXEC; close of an fd < 0 is -EBADF without a call;
 * mbind and getcpu are raw system calls (no libnuma). */
int hp_os_memfd(const char *name, unsigned flags, int *fd);
int hp_os_ftruncate(int fd, int64_t len);
int hp_os_close_fd(int fd);
int hp_os_mbind(void *addr, uint64_t len, int mode, const unsigned long *nodemask,
                uint64_t maxnode, unsigned flags);
int hp_os_getcpu(unsigned *cpu, unsigned *node);
/* NUMA node of the resident page at addr (get_mempolicy with MPOL_F_NODE |
 * MPOL_F_ADDR); -ENOENT when the page is not resident, never faulting it in. */
int hp_os_page_node(const void *addr, int *node);

/* 0 if fd is an open descriptor of this process (fcntl F_GETFD), else
 * -EBADF. */
int hp_os_fd_is_open(int fd);

/* Move the pages of [from, from + len) to to, which must be free address
 * space: it is reserved first (MAP_FIXED_NOREPLACE, which fails where
 * anything is mapped), then the pages move onto the reservation (mremap
 * with MREMAP_FIXED), so nothing of anybody else's is ever replaced. Both
 * addresses and len aligned to the mapping's page size. 0 or -errno (the
 * pages stay where they were). */
int hp_os_move_to(void *from, size_t len, void *to);

/* The calling thread's memory policy (get_mempolicy(2), no flags): *mode
 * gets its HP_MPOL_* mode without the mode flags (MPOL_F_STATIC_NODES,
 * MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING), *nodes its node set (empty
 * for HP_MPOL_DEFAULT and HP_MPOL_LOCAL). 0, or -errno: -ENOSYS where the
 * kernel has no NUMA support. */
int hp_os_mempolicy(int *mode, struct hp_nodes *nodes);
/* The nodes the calling thread's cpuset lets it use (get_mempolicy(2) with
 * MPOL_F_MEMS_ALLOWED). 0 or -errno, as hp_os_mempolicy. */
int hp_os_mems_allowed(struct hp_nodes *nodes);
/* For tests: hp_os_mempolicy and hp_os_mems_allowed answer mode, *policy
 * and *mems (process-wide, every thread) instead of asking the kernel, as
 * a thread bound with set_mempolicy(2) on a machine of the fake sysfs tree
 * would see them; mode < 0 (or policy or mems NULL) goes back to the
 * kernel. An injected HP_OS_MEMPOLICY fault still fires first. */
void hp_os_fake_mempolicy(int mode, const struct hp_nodes *policy, const struct hp_nodes *mems);

/* The calling thread's memory policy as it was, for hp_os_policy_restore. */
struct hp_os_policy {
    int saved;                 /* 1: mode and nodes hold the policy to restore */
    int mode;                  /* with its mode flags (MPOL_F_STATIC_NODES ...) */
    struct hp_nodes nodes;
};
/* Give the calling thread the memory policy (mode HP_MPOL_*, nodes) until
 * hp_os_policy_restore(saved): set_mempolicy(2), after get_mempolicy(2) has
 * saved the current one (mode flags and user node set included). Every
 * page the thread faults in meanwhile, and every hugetlb reservation it
 * makes at mmap (mm/hugetlb.c allowed_mems_nr), follows it. 0 or -errno;
 * on failure nothing changed and saved->saved is 0. */
int hp_os_policy_swap(int mode, const struct hp_nodes *nodes, struct hp_os_policy *saved);
/* Put back the policy hp_os_policy_swap saved (nothing if it saved none).
 * 0 or -errno. */
int hp_os_policy_restore(const struct hp_os_policy *saved);

/* move_pages(2) of this process with no target nodes: status[i] gets the
 * node of the page holding pages[i], or -ENOENT when it is not resident
 * (nothing is faulted in or moved), -EFAULT when it is not mapped. count
 * at most 4096. 0 or -errno (-ENOSYS without NUMA support). */
int hp_os_pages_nodes(void *const *pages, unsigned long count, int *status);

/* Read a node list file ("0-3,5\n", Documentation/ABI/stable/
 * sysfs-devices-node: /sys/devices/system/node/has_memory and friends;
 * an empty file is the empty set). 0, or -errno: -EINVAL for anything else,
 * a node id of HP_NODES_MAX or more included. */
int hp_os_read_nodelist(const char *path, struct hp_nodes *nodes);

/* 0 if every page of [addr, addr+len) is mapped in this process, else
 * -ENOMEM (msync with MS_ASYNC validates the range and does no I/O for
 * anonymous memory). Used to refuse a wild pointer from a broken plugin. */
int hp_os_check_mapped(void *addr, size_t len);

/* Copy up to len bytes from src, this process's memory, stopping at the
 * first byte that cannot be read: the bytes copied, or -errno. For text a
 * plugin points at, which may end where its memory does (a name without
 * its NUL). Where the kernel refuses the call it reads like memcpy. */
int64_t hp_os_copy_in(void *dst, const void *src, size_t len);

/* 0 if every page of [addr, addr+len) is mapped readable and writable
 * (the "rw" of its /proc/self/maps lines); -EACCES if some page is not
 * both, -ENOMEM if some page is not mapped, another -errno if the maps
 * cannot be read (the answer is unknown; hp_os_check_layout). Reads the whole maps file: for
 * checking a plugin's result, not for every call. */
int hp_os_check_rw(const void *addr, size_t len);

/* The layout a plugin's mapping must have (hp/backend.h, struct
 * hp_mapping), in one read of /proc/self/maps: every page of [addr,
 * addr+len) mapped, those of [rw, rw+rw_len) readable and writable, those
 * outside [keep, keep+keep_len) PROT_NONE ("---"). 0 if so; else -EEXIST
 * (accessible memory outside keep) or -ENOMEM (a page not mapped), which
 * take precedence over -EACCES (a page of rw not read-write); another
 * -errno, never one of those three, if the maps cannot be read (the answer
 * is unknown: a failed read of ENOMEM comes back as -EIO). */
int hp_os_check_layout(const void *addr, size_t len, const void *keep, size_t keep_len,
                       const void *rw, size_t rw_len);

/* 1 if some page of [addr, addr+len) is mapped, 0 if none is
 * (/proc/self/maps), -errno if the maps cannot be read. */
int hp_os_any_mapped(const void *addr, size_t len);

/* The KernelPageSize of the VMA that holds addr, in bytes (/proc/self/smaps;
 * Documentation/filesystems/proc.rst: the page size of a hugetlb VMA, else
 * the base page, THP included); -ENOMEM if addr is not mapped, another
 * -errno if smaps cannot be read. Reads smaps up to that VMA: for checking
 * a plugin's result, not for every call. */
int64_t hp_os_kernel_page_size(const void *addr);

/* mincore: vec[i] bit 0 says whether base page i of [addr, addr+len) is
 * resident now (vec holds len / base page bytes). A swapped-out page reads
 * as not resident, so "not resident" does not mean "reads as zero".
 * addr must be base-page aligned. */
int hp_os_resident(void *addr, size_t len, unsigned char *vec);

/* Read a whole small file into buf, NUL-terminated, truncated to cap - 1.
 * path is absolute; under HP_SYSFS_ROOT (test root) /proc and /sys paths are
 * read below that directory instead. Returns the length or -errno. */
int64_t hp_os_read_text(const char *path, char *buf, size_t cap);
/* Read path as an unsigned decimal. Returns 0 or -errno/-EINVAL. */
int hp_os_read_u64(const char *path, uint64_t *out);
/* Read path; *out is its first word (e.g. "[madvise]" selection resolved:
 * the bracketed word if there is one). Returns 0 or -errno. */
int hp_os_read_choice(const char *path, char *out, size_t cap);

/* Open a /proc or /sys file read-only (test root applies). Returns an fd
 * or -errno. hp_os_pread returns bytes read or -errno. */
int hp_os_open(const char *path);
int64_t hp_os_pread(int fd, void *buf, size_t len, uint64_t off);
void hp_os_close(int fd);

/* Call fn on each line of path (newline stripped, lines longer than 511
 * bytes are cut); stops early when fn returns non-zero and returns that.
 * Returns 0 at end of file, or -errno if the file cannot be read. */
int hp_os_each_line(const char *path, int (*fn)(const char *line, void *ctx), void *ctx);

/* Files, for the loader and its trust checks (lib/trust.c, which must
 * check the very descriptor it then uses). No test root applies: these
 * name the plugin directories, not /proc or /sys. Every descriptor is
 * O_CLOEXEC. hp_os_openat returns a descriptor or -errno; the others 0 (or
 * a length) or -errno. hp_os_fstat is fstat(2); hp_os_stat stat(2) of an
 * absolute path. hp_os_readlinkat returns the target's length (cut to
 * cap, not terminated). hp_os_dup_above duplicates fd to the lowest free
 * descriptor above min. */
int hp_os_openat(int dirfd, const char *path, int flags);
struct stat;
int hp_os_fstatat(int dirfd, const char *path, struct stat *st, int flags);
int hp_os_fstat(int fd, struct stat *st);
int hp_os_stat(const char *path, struct stat *st);
int64_t hp_os_readlinkat(int dirfd, const char *path, char *buf, size_t cap);
int hp_os_dup_above(int fd, int min);
/* Call fn with the name of each entry of the directory open at fd (".",
 * ".." and all), in the directory's order, until fn returns non-zero (which
 * is returned); fd stays open and the caller's. 0 at the end, or -errno. */
int hp_os_each_dirent(int fd, int (*fn)(const char *name, void *ctx), void *ctx);
/* The effective user id (geteuid(2)). */
unsigned hp_os_euid(void);
/* clock_gettime(2) of clock, in nanoseconds (0 if the clock is unknown). */
uint64_t hp_os_clock_ns(int clock);
/* Sleep ns nanoseconds (nanosleep(2); a signal may cut it short). */
void hp_os_sleep_ns(uint64_t ns);

/* Path under the test root, if one is set; else path itself. */
const char *hp_os_path(const char *path, char *buf, size_t cap);

/* The PMD page size THP reports (transparent_hugepage/hpage_pmd_size), the
 * huge page of huge stacks; 2 MiB when unreadable (then read again next
 * time). Cached once read. */
uint64_t hp_os_pmd_page_size(void);

/* Base page size (sysconf), cached. */
size_t hp_os_page_size(void);

/* Fault injection, for tests: make the nth next call (1 = the next) of op
 * fail with -err; every = 1 makes every later call fail too. n = 0 clears.
 * Thread-safe. */
void hp_os_inject_fault(enum hp_os_op op, uint64_t nth, int err, int every);
void hp_os_clear_faults(void);
/* For tests: fn runs on the calling thread before every later call of op,
 * until hp_os_set_hook(op, NULL) (a test forks there, say, to stand for
 * another thread's fork racing the syscall). */
void hp_os_set_hook(enum hp_os_op op, void (*fn)(void));
/* Calls of op since the process started (counted even without faults). */
uint64_t hp_os_calls(enum hp_os_op op);

#endif
