#include "os.h"
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define HP_HAVE_MEMCHECK_H 1
#endif
#endif

struct fault {
    _Atomic uint64_t countdown;  /* fail when it reaches 1 */
    _Atomic int err;
    _Atomic int every;
};

static struct fault faults[HP_OS_NOPS];
static _Atomic uint64_t calls[HP_OS_NOPS];
static void (*_Atomic hooks[HP_OS_NOPS])(void);

void hp_os_set_hook(enum hp_os_op op, void (*fn)(void))
{
    if ((unsigned)op < HP_OS_NOPS)
        atomic_store(&hooks[op], fn);
}

void hp_os_inject_fault(enum hp_os_op op, uint64_t nth, int err, int every)
{
    if ((unsigned)op >= HP_OS_NOPS)
        return;
    atomic_store(&faults[op].err, err);
    atomic_store(&faults[op].every, every);
    atomic_store(&faults[op].countdown, nth);
}

void hp_os_clear_faults(void)
{
    for (int op = 0; op < HP_OS_NOPS; op++)
        atomic_store(&faults[op].countdown, 0);
}

uint64_t hp_os_calls(enum hp_os_op op)
{
    return (unsigned)op < HP_OS_NOPS ? atomic_load(&calls[op]) : 0;
}

/* Returns -err if this call is the one chosen to fail, else 0. */
static int injected(enum hp_os_op op)
{
    atomic_fetch_add_explicit(&calls[op], 1, memory_order_relaxed);
    void (*hook)(void) = atomic_load_explicit(&hooks[op], memory_order_relaxed);
    if (hook)
        hook();
    struct fault *f = &faults[op];
    uint64_t n = atomic_load_explicit(&f->countdown, memory_order_relaxed);
    while (n > 0) {
        if (n == 1) {
            if (!atomic_load(&f->every))
                atomic_store(&f->countdown, 0);
            return -atomic_load(&f->err);
        }
        if (atomic_compare_exchange_weak(&f->countdown, &n, n - 1))
            return 0;
    }
    return 0;
}

int hp_os_map(void *hint, size_t len, int prot, int flags, int fd, int64_t off, void **out)
{
    int rc = injected(HP_OS_MAP);
    if (rc)
        return rc;
    void *p = mmap(hint, len, prot, flags, fd, (off_t)off);
    if (p == MAP_FAILED)
        return -errno;
    *out = p;
    return 0;
}

int hp_os_unmap(void *addr, size_t len)
{
    int rc = injected(HP_OS_UNMAP);
    if (rc)
        return rc;
    return munmap(addr, len) == 0 ? 0 : -errno;
}

#ifdef __SANITIZE_THREAD__
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4  /* Linux 5.7: the old range stays mapped */
#endif
/* ThreadSanitizer intercepts mmap and munmap, not mremap. Its munmap
 * clears the shadow and the sync objects (mutexes) of the range
 * (UnmapShadow in the TSan runtime); a range that mremap vacated keeps
 * them, and the next block that arrives there by mremap, another thread's,
 * is reported as racing with accesses to memory that is long gone. So the
 * vacated range is mapped and unmapped again through the intercepted calls.
 * MAP_FIXED_NOREPLACE fails where another thread mapped meanwhile (its mmap
 * cleared the shadow it took); the rest is tried in halves. */
static void tsan_forget(void *addr, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(addr, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED) {
        munmap(p, len);
        return;
    }
    if (errno != EEXIST || len <= page)
        return;
    size_t half = len / 2 / page * page;
    tsan_forget(addr, half);
    tsan_forget((char *)addr + half, len - half);
}

/* Another thread's mremap, which TSan does not see either, could move a
 * block into the vacated range before it is cleared (an mmap there would
 * clear it), so remaps are serialised until it is. The lock is relaxed
 * atomics, which TSan does not count as synchronisation:
 * it adds no happens-before edge that could hide a real race. The word
 * holds the holder's pid: after fork, a lock that a thread of the parent
 * held is free in the child. */
static _Atomic pid_t remap_holder;

static void remap_lock(void)
{
    pid_t me = getpid();
    for (;;) {
        pid_t cur = 0;
        if (atomic_compare_exchange_weak_explicit(&remap_holder, &cur, me, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
        if (cur != me && atomic_compare_exchange_weak_explicit(&remap_holder, &cur, me,
                                                               memory_order_relaxed,
                                                               memory_order_relaxed))
            return;
        sched_yield();
    }
}

static void remap_unlock(void)
{
    atomic_store_explicit(&remap_holder, 0, memory_order_relaxed);
}
#endif

int hp_os_remap(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
                void **out)
{
    int rc = injected(HP_OS_REMAP);
    if (rc)
        return rc;
#ifdef __SANITIZE_THREAD__
    remap_lock();
    void *p = mremap(old_addr, old_len, new_len, flags, new_addr);
    int err = errno;
    if (p != MAP_FAILED && p != old_addr && !(flags & MREMAP_DONTUNMAP))
        tsan_forget(old_addr, old_len);
    else if (p != MAP_FAILED && new_len < old_len)
        tsan_forget((char *)old_addr + new_len, old_len - new_len);
    remap_unlock();
    errno = err;
#else
    void *p = mremap(old_addr, old_len, new_len, flags, new_addr);
#endif
    if (p == MAP_FAILED)
        return -errno;
#ifdef HP_HAVE_MEMCHECK_H
    /* memcheck (valgrind 3.19) leaves the grown part of a growing
     * mremap(MREMAP_FIXED) inaccessible in its shadow, so every later use
     * is a false "invalid write". It is fresh anonymous memory: defined.
     * A no-op outside valgrind. */
    if ((flags & MREMAP_FIXED) && new_len > old_len)
        VALGRIND_MAKE_MEM_DEFINED((char *)p + old_len, new_len - old_len);
#endif
    *out = p;
    return 0;
}

int hp_os_fd_is_open(int fd)
{
    return fcntl(fd, F_GETFD) < 0 ? -errno : 0;
}

int hp_os_move_to(void *from, size_t len, void *to)
{
    void *r = NULL, *p;
    int rc = hp_os_map(to, len, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0,
                       &r);
    if (rc)
        return rc;
    if (r != to) {  /* a kernel before 4.17 takes the flag as a hint */
        hp_os_unmap(r, len);
        return -EEXIST;
    }
    rc = hp_os_remap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to, &p);
    if (rc)
        hp_os_unmap(to, len);
    return rc;
}

int hp_os_advise(void *addr, size_t len, int advice)
{
    int rc = injected(HP_OS_ADVISE);
    if (rc)
        return rc;
    return madvise(addr, len, advice) == 0 ? 0 : -errno;
}

int hp_os_drop_pages(void *addr, size_t len)
{
    return hp_os_advise(addr, len, MADV_DONTNEED);
}

int hp_os_map_records(size_t len, void **out)
{
    void *p = NULL;
    int rc = hp_os_map(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p);
    if (rc < 0)
        return rc;
    /* Small scattered records: huge pages would only inflate RSS. A
     * refusal is harmless (the records work on any page). */
    hp_os_advise(p, len, MADV_NOHUGEPAGE);
    *out = p;
    return 0;
}

int hp_os_memfd(const char *name, unsigned flags, int *fd)
{
    int rc = injected(HP_OS_MEMFD);
    if (rc)
        return rc;
    if (!name || !fd)
        return -EINVAL;
    int f = (int)syscall(SYS_memfd_create, name, flags | MFD_CLOEXEC);
    if (f < 0)
        return -errno;
    *fd = f;
    return 0;
}

int hp_os_ftruncate(int fd, int64_t len)
{
    int rc = injected(HP_OS_FTRUNCATE);
    if (rc)
        return rc;
    if (len < 0)
        return -EINVAL;
    return ftruncate(fd, (off_t)len) == 0 ? 0 : -errno;
}

int hp_os_close_fd(int fd)
{
    int rc = injected(HP_OS_CLOSE);
    if (fd < 0)
        return -EBADF;
    if (rc) {
        /* The descriptor goes away whatever close returns (Linux, close(2)):
         * an injected failure must not leak it either. */
        close(fd);
        return rc;
    }
    return close(fd) == 0 ? 0 : -errno;
}

int hp_os_mbind(void *addr, uint64_t len, int mode, const unsigned long *nodemask,
                uint64_t maxnode, unsigned flags)
{
    int rc = injected(HP_OS_MBIND);
    if (rc)
        return rc;
    if (maxnode > 4096)
        return -EINVAL;
#ifdef SYS_mbind
    return syscall(SYS_mbind, addr, (unsigned long)len, mode, nodemask, (unsigned long)maxnode,
                   flags) == 0 ? 0 : -errno;
#else
    return -ENOSYS;
#endif
}

int hp_os_getcpu(unsigned *cpu, unsigned *node)
{
    int rc = injected(HP_OS_GETCPU);
    if (rc)
        return rc;
    unsigned c = 0, n = 0;
    if (syscall(SYS_getcpu, &c, &n, NULL) != 0)
        return -errno;
    if (cpu)
        *cpu = c;
    if (node)
        *node = n;
    return 0;
}

int hp_os_page_node(const void *addr, int *node)
{
    int rc = injected(HP_OS_NODE);
    if (rc)
        return rc;
    /* get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) allocates a page that is not
     * there yet, as a read would (mm/mempolicy.c do_get_mempolicy ->
     * lookup_node -> get_user_pages_fast): ask mincore first, so a query
     * never faults (for hugetlb: never takes a pool page). */
    size_t base = hp_os_page_size();
    void *page = (void *)((uintptr_t)addr & ~(uintptr_t)(base - 1));
    unsigned char vec = 0;
    if (mincore(page, base, &vec) != 0)
        return -errno;
    if (!(vec & 1))
        return -ENOENT;
#ifdef SYS_get_mempolicy
    int mode = -1;
    /* MPOL_F_NODE (1 << 0) | MPOL_F_ADDR (1 << 1), from linux/mempolicy.h. */
    if (syscall(SYS_get_mempolicy, &mode, NULL, 0UL, addr, 3UL) != 0)
        return -errno;
    *node = mode;
    return 0;
#else
    return -ENOSYS;
#endif
}

/* The test seam of hp_os_fake_mempolicy: read without a lock, written by
 * tests before the threads that read it start. */
static _Atomic int fake_mode = -1;
static struct hp_nodes fake_policy, fake_mems;

void hp_os_fake_mempolicy(int mode, const struct hp_nodes *policy, const struct hp_nodes *mems)
{
    if (mode < 0 || !policy || !mems) {
        atomic_store(&fake_mode, -1);
        return;
    }
    fake_policy = *policy;
    fake_mems = *mems;
    atomic_store(&fake_mode, mode);
}

/* get_mempolicy(2) into a whole struct hp_nodes: maxnode must be at least
 * the kernel's nr_node_ids (else EINVAL), and HP_NODES_MAX always is. */
static int get_policy(int *mode, struct hp_nodes *nodes, unsigned long flags)
{
    hp_nodes_clear(nodes);
#ifdef SYS_get_mempolicy
    int m = 0;
    if (syscall(SYS_get_mempolicy, &m, nodes->w, (unsigned long)HP_NODES_MAX, NULL, flags) != 0)
        return -errno;
    if (mode)
        *mode = m & ~((1 << 15) | (1 << 14) | (1 << 13));  /* MPOL_F_STATIC_NODES, _RELATIVE_NODES, _NUMA_BALANCING */
    return 0;
#else
    (void)mode;
    (void)flags;
    return -ENOSYS;
#endif
}

int hp_os_mempolicy(int *mode, struct hp_nodes *nodes)
{
    int rc = injected(HP_OS_MEMPOLICY);
    if (rc)
        return rc;
    int fake = atomic_load(&fake_mode);
    if (fake >= 0) {
        *mode = fake;
        *nodes = fake_policy;
        return 0;
    }
    return get_policy(mode, nodes, 0);
}

int hp_os_mems_allowed(struct hp_nodes *nodes)
{
    int rc = injected(HP_OS_MEMPOLICY);
    if (rc)
        return rc;
    if (atomic_load(&fake_mode) >= 0) {
        *nodes = fake_mems;
        return 0;
    }
    return get_policy(NULL, nodes, 4UL /* MPOL_F_MEMS_ALLOWED */);
}

/* get_mempolicy(2) without flags, the mode flags kept: what set_mempolicy
 * takes back. */
static int raw_policy(int *mode, struct hp_nodes *nodes)
{
    hp_nodes_clear(nodes);
#ifdef SYS_get_mempolicy
    if (syscall(SYS_get_mempolicy, mode, nodes->w, (unsigned long)HP_NODES_MAX, NULL, 0UL) != 0)
        return -errno;
    return 0;
#else
    return -ENOSYS;
#endif
}

static int set_policy(int mode, const struct hp_nodes *nodes)
{
#ifdef SYS_set_mempolicy
    int base = mode & 0xff;
    int none = base == HP_MPOL_DEFAULT || base == HP_MPOL_LOCAL ||
               (base == HP_MPOL_PREFERRED && !hp_nodes_count(nodes));
    /* set_mempolicy reads maxnode - 1 bits (mm/mempolicy.c get_nodes). */
    if (syscall(SYS_set_mempolicy, mode, none ? NULL : nodes->w,
                none ? 0UL : (unsigned long)HP_NODES_MAX + 1) != 0)
        return -errno;
    return 0;
#else
    (void)mode;
    (void)nodes;
    return -ENOSYS;
#endif
}

int hp_os_policy_swap(int mode, const struct hp_nodes *nodes, struct hp_os_policy *saved)
{
    saved->saved = 0;
    int rc = injected(HP_OS_MEMPOLICY);
    if (rc)
        return rc;
    if ((rc = raw_policy(&saved->mode, &saved->nodes)) != 0)
        return rc;
    if ((rc = set_policy(mode, nodes)) != 0)
        return rc;
    saved->saved = 1;
    return 0;
}

int hp_os_policy_restore(const struct hp_os_policy *saved)
{
    return saved->saved ? set_policy(saved->mode, &saved->nodes) : 0;
}

int hp_os_pages_nodes(void *const *pages, unsigned long count, int *status)
{
    int rc = injected(HP_OS_MOVE_PAGES);
    if (rc)
        return rc;
    if (count > 4096)
        return -EINVAL;
#ifdef SYS_move_pages
    if (syscall(SYS_move_pages, 0, count, pages, NULL, status, 0) != 0)
        return -errno;
    return 0;
#else
    (void)pages;
    (void)status;
    return -ENOSYS;
#endif
}

int hp_os_read_nodelist(const char *path, struct hp_nodes *nodes)
{
    char buf[4096];
    hp_nodes_clear(nodes);
    int64_t n = hp_os_read_text(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    if ((size_t)n >= sizeof(buf) - 1)
        return -EINVAL;  /* cut: the rest of the list is unknown */
    buf[n] = '\0';
    return hp_nodes_parse(buf, nodes);
}

int hp_os_protect(void *addr, size_t len, int prot)
{
    int rc = injected(HP_OS_PROTECT);
    if (rc)
        return rc;
    return mprotect(addr, len, prot) == 0 ? 0 : -errno;
}

int hp_os_guard(void *addr, size_t len)
{
    return hp_os_protect(addr, len, PROT_NONE);
}

int hp_os_split(void *addr, size_t len)
{
    /* madvise splits a VMA at the ends of the range it changes a flag of
     * (mm/madvise.c madvise_update_vma). The pieces of a hugetlb VMA stay
     * apart after: fs/hugetlbfs/inode.c hugetlbfs_file_mmap sets
     * VM_DONTEXPAND, and mm/vma.c never merges VM_SPECIAL VMAs. The flag is
     * the read-ahead hint (VM_RAND_READ), meaningless for anonymous memory,
     * and both of its changes are accepted on a hugetlb VMA by every kernel
     * tested. Not the fork flag: Linux 7.3 sets VM_DONTCOPY on a hugetlb
     * VMA (MADV_DONTFORK) but refuses to clear it again (MADV_DOFORK gives
     * EINVAL there; docs/kernels.md). */
    int rc = hp_os_advise(addr, len, MADV_RANDOM);
    int back = hp_os_advise(addr, len, MADV_NORMAL);  /* also after a partial failure */
    return rc ? rc : back;
}

struct vmflag_walk {
    uintptr_t lo, hi;   /* the range asked about */
    uintptr_t next;     /* its first byte no VMA seen so far covers */
    const char *flag;   /* two letters, as smaps prints them */
    int inside;         /* the current VMA overlaps [lo, hi) */
    int found;
};

static int vmflag_line(const char *line, void *ctx)
{
    struct vmflag_walk *w = ctx;
    uintptr_t start, end;
    char tail;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", &start, &end, &tail) == 3 && tail == ' ') {
        if (start >= w->hi)
            return 1;  /* VMAs come in address order: done */
        w->inside = end > w->lo && start < w->hi;
        if (w->inside && start <= w->next && end > w->next)
            w->next = end;
        return 0;
    }
    if (!w->inside || strncmp(line, "VmFlags:", 8))
        return 0;
    for (const char *p = line + 8; (p = strstr(p, w->flag)); p += 2)
        if (p[-1] == ' ' && (p[2] == ' ' || p[2] == '\0'))
            w->found = 1;
    return 0;
}

int hp_os_vma_flag(void *addr, size_t len, const char *flag)
{
    struct vmflag_walk w = {(uintptr_t)addr, (uintptr_t)addr + len, (uintptr_t)addr, flag, 0, 0};
    if (strlen(flag) != 2)
        return -EINVAL;
    int rc = hp_os_each_line("/proc/self/smaps", vmflag_line, &w);
    if (rc < 0)
        return rc;
    if (w.next < w.hi)
        return -ENOMEM;  /* a hole: not all of it is mapped */
    return w.found;
}

int hp_os_renew(void *addr, size_t len)
{
    int rc = hp_os_protect(addr, len, PROT_READ | PROT_WRITE);
    if (rc)
        return rc;
    rc = hp_os_advise(addr, len, MADV_DOFORK);
    if (rc != -EINVAL)
        return rc;
    /* Linux 7.3 refuses MADV_DOFORK on every hugetlb VMA, a fresh one
     * included (measured; docs/kernels.md), though MADV_DONTFORK still
     * sets VM_DONTCOPY there. The range is as a fresh mapping would be if
     * none of its VMAs has that flag ("dc" in smaps VmFlags,
     * Documentation/filesystems/proc.rst); otherwise it cannot be undone. */
    rc = hp_os_vma_flag(addr, len, "dc");
    return rc == 0 ? 0 : rc < 0 ? rc : -EINVAL;
}

int64_t hp_os_copy_in(void *dst, const void *src, size_t len)
{
    /* process_vm_readv on this very process (allowed: ptrace's access
     * check passes for one's own thread group, kernel/ptrace.c
     * __ptrace_may_access) reads up to the first byte that is not
     * readable and says how far it got, where a plain read would fault. */
    /* A transfer stops only between iovec elements: one per page. */
    enum { MAX_PIECES = 8 };
    struct iovec local = {dst, len}, remote[MAX_PIECES];
    uintptr_t at = (uintptr_t)src, end = at + len, page = hp_os_page_size();
    int pieces = 0;
    while (at < end && pieces < MAX_PIECES) {
        uintptr_t next = (at / page + 1) * page;
        remote[pieces].iov_base = (void *)at;
        remote[pieces].iov_len = (next < end ? next : end) - at;
        at += remote[pieces++].iov_len;
    }
    local.iov_len = at - (uintptr_t)src;
    ssize_t n = process_vm_readv(getpid(), &local, 1, remote, (unsigned long)pieces, 0);
    if (n >= 0 || (errno != ENOSYS && errno != EPERM))
        return n >= 0 ? n : (errno == EFAULT ? 0 : -errno);
    memcpy(dst, src, len);  /* no such call here (seccomp, old kernel): read it */
    return (int64_t)len;
}

int hp_os_check_mapped(void *addr, size_t len)
{
#ifdef HP_HAVE_MEMCHECK_H
    /* The range may well be unmapped: that is the question. memcheck would
     * report the msync argument as unaddressable. */
    VALGRIND_DISABLE_ERROR_REPORTING;
#endif
    int rc = msync(addr, len, MS_ASYNC) == 0 ? 0 : -errno;
#ifdef HP_HAVE_MEMCHECK_H
    VALGRIND_ENABLE_ERROR_REPORTING;
#endif
    return rc;
}

/* Walks /proc/self/maps (ascending) over [next, hi): pages inside
 * [rw_lo, rw_hi) must be read-write, pages outside [keep_lo, keep_hi)
 * PROT_NONE ("---"), the rest of keep may be anything. A hole or accessible
 * memory outside keep ends the walk; a page that is not read-write is
 * noted and the walk goes on, so that the former are never missed. */
struct prot_walk {
    uintptr_t next, hi, keep_lo, keep_hi, rw_lo, rw_hi;
    int rc;      /* 0, or -ENOMEM / -EEXIST at the first such page */
    int access;  /* some page of [rw_lo, rw_hi) is not read-write */
};

static int prot_line(const char *line, void *ctx)
{
    struct prot_walk *w = ctx;
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= w->next)
        return 0;
    if (lo > w->next) {
        w->rc = -ENOMEM;  /* a hole, or past the range: the rest is not mapped */
        return 1;
    }
    uintptr_t a = w->next, b = hi < w->hi ? hi : w->hi;  /* this VMA's part of the range */
    if ((a < w->keep_lo || b > w->keep_hi) && strncmp(perms, "---", 3) != 0) {
        w->rc = -EEXIST;
        return 1;
    }
    if (a < w->rw_hi && b > w->rw_lo && (perms[0] != 'r' || perms[1] != 'w'))
        w->access = 1;
    w->next = hi;
    return w->next >= w->hi;
}

int hp_os_check_layout(const void *addr, size_t len, const void *keep, size_t keep_len,
                       const void *rw, size_t rw_len)
{
    struct prot_walk w = {(uintptr_t)addr, (uintptr_t)addr + len, (uintptr_t)keep,
                          (uintptr_t)keep + keep_len, (uintptr_t)rw, (uintptr_t)rw + rw_len, 0, 0};
    if (!len)
        return 0;
    int rc = hp_os_each_line("/proc/self/maps", prot_line, &w);
    if (rc < 0)  /* unknown: never an answer's code (a read may fail with ENOMEM) */
        return rc == -ENOMEM || rc == -EEXIST || rc == -EACCES ? -EIO : rc;
    if (w.rc)
        return w.rc;
    if (w.next < w.hi)
        return -ENOMEM;
    return w.access ? -EACCES : 0;
}

int hp_os_check_rw(const void *addr, size_t len)
{
    return hp_os_check_layout(addr, len, addr, len, addr, len);
}

struct overlap_walk {
    uintptr_t lo, hi;
    int found;
};

static int overlap_line(const char *line, void *ctx)
{
    struct overlap_walk *w = ctx;
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi <= w->lo)
        return 0;
    w->found = lo < w->hi;
    return 1;
}

int hp_os_any_mapped(const void *addr, size_t len)
{
    struct overlap_walk w = {(uintptr_t)addr, (uintptr_t)addr + len, 0};
    int rc = hp_os_each_line("/proc/self/maps", overlap_line, &w);
    return rc < 0 ? rc : w.found;
}

struct kps_walk {
    uintptr_t addr;
    int inside;         /* the current VMA holds addr */
    int64_t bytes;      /* -ENOMEM until found */
};

static int kps_line(const char *line, void *ctx)
{
    struct kps_walk *w = ctx;
    uintptr_t start, end;
    char tail;
    unsigned long long kb;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", &start, &end, &tail) == 3 && tail == ' ') {
        if (start > w->addr)
            return 1;  /* VMAs come in address order: not mapped */
        w->inside = end > w->addr;
        return 0;
    }
    if (w->inside && sscanf(line, "KernelPageSize: %llu kB", &kb) == 1) {
        w->bytes = (int64_t)kb * 1024;
        return 1;
    }
    return 0;
}

int64_t hp_os_kernel_page_size(const void *addr)
{
    struct kps_walk w = {(uintptr_t)addr, 0, -ENOMEM};
    int rc = hp_os_each_line("/proc/self/smaps", kps_line, &w);
    return rc < 0 ? rc : w.bytes;
}

int hp_os_resident(void *addr, size_t len, unsigned char *vec)
{
    int rc = injected(HP_OS_RESIDENT);
    if (rc)
        return rc;
    return mincore(addr, len, vec) == 0 ? 0 : -errno;
}

const char *hp_os_path(const char *path, char *buf, size_t cap)
{
    const char *root = hp_options()->sysfs_root;
    if (!root || !root[0])
        return path;
    if (strncmp(path, "/proc/", 6) != 0 && strncmp(path, "/sys/", 5) != 0)
        return path;
    int n = snprintf(buf, cap, "%s%s", root, path);
    return (n > 0 && (size_t)n < cap) ? buf : path;
}

int64_t hp_os_read_text(const char *path, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return -EINVAL;
    buf[0] = '\0';
    int rc = injected(HP_OS_READ);
    if (rc)
        return rc;
    char full[512];
    int fd = open(hp_os_path(path, full, sizeof(full)), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t used = 0;
    while (used + 1 < cap) {
        ssize_t n = read(fd, buf + used, cap - 1 - used);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            buf[0] = '\0';
            return -err;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    return (int64_t)used;
}

int hp_os_read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    int64_t n = hp_os_read_text(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    char *end;
    errno = 0;
    if (buf[0] < '0' || buf[0] > '9')
        return -EINVAL;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || (*end != '\0' && *end != '\n'))
        return -EINVAL;
    *out = v;
    return 0;
}

int hp_os_read_choice(const char *path, char *out, size_t cap)
{
    char buf[256];
    int64_t n = hp_os_read_text(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    const char *start = strchr(buf, '[');
    const char *stop;
    if (start) {
        start++;
        stop = strchr(start, ']');
        if (!stop)
            return -EINVAL;
    } else {
        start = buf;
        stop = start + strcspn(start, " \n");
    }
    size_t len = (size_t)(stop - start);
    if (len == 0 || len >= cap)
        return -EINVAL;
    memcpy(out, start, len);
    out[len] = '\0';
    return 0;
}

size_t hp_os_page_size(void)
{
    static _Atomic size_t cached;
    size_t ps = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!ps) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096;
        atomic_store_explicit(&cached, ps, memory_order_relaxed);
    }
    return ps;
}

uint64_t hp_os_pmd_page_size(void)
{
    static _Atomic uint64_t cached;
    uint64_t v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v)
        return v;
    if (hp_os_read_u64("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", &v) != 0 ||
        v <= hp_os_page_size() || (v & (v - 1)))
        return UINT64_C(2) << 20;   /* not cached: a failed read may be injected */
    atomic_store_explicit(&cached, v, memory_order_relaxed);
    return v;
}

int hp_os_open(const char *path)
{
    int rc = injected(HP_OS_READ);
    if (rc)
        return rc;
    char full[512];
    int fd = open(hp_os_path(path, full, sizeof(full)), O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int64_t hp_os_pread(int fd, void *buf, size_t len, uint64_t off)
{
    for (;;) {
        ssize_t n = pread(fd, buf, len, (off_t)off);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return -errno;
    }
}

void hp_os_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

int hp_os_each_line(const char *path, int (*fn)(const char *line, void *ctx), void *ctx)
{
    int fd = hp_os_open(path);
    if (fd < 0)
        return fd;
    char chunk[4096], line[512];
    size_t used = 0;
    int rc = 0, cut = 0;
    for (;;) {
        /* read(), not pread(): seq_file restarts its walk on every seek. */
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n && !rc; i++) {
            char c = chunk[i];
            if (c == '\n') {
                line[used] = '\0';
                rc = fn(line, ctx);
                used = 0;
                cut = 0;
            } else if (used + 1 < sizeof(line) && !cut) {
                line[used++] = c;
            } else {
                cut = 1;
            }
        }
        if (rc)
            break;
    }
    if (!rc && used) {
        line[used] = '\0';
        rc = fn(line, ctx);
    }
    hp_os_close(fd);
    return rc;
}

/* ---- files of the loader ----------------------------------------------- */

int hp_os_openat(int dirfd, const char *path, int flags)
{
    int rc = injected(HP_OS_OPEN);
    if (rc)
        return rc;
    int fd = openat(dirfd, path, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int hp_os_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    int rc = injected(HP_OS_STAT);
    if (rc)
        return rc;
    return fstatat(dirfd, path, st, flags) == 0 ? 0 : -errno;
}

int hp_os_fstat(int fd, struct stat *st)
{
    return hp_os_fstatat(fd, "", st, AT_EMPTY_PATH);
}

int hp_os_stat(const char *path, struct stat *st)
{
    return hp_os_fstatat(AT_FDCWD, path, st, 0);
}

int64_t hp_os_readlinkat(int dirfd, const char *path, char *buf, size_t cap)
{
    int rc = injected(HP_OS_READLINK);
    if (rc)
        return rc;
    ssize_t n = readlinkat(dirfd, path, buf, cap);
    return n < 0 ? -errno : n;
}

int hp_os_dup_above(int fd, int min)
{
    int rc = injected(HP_OS_OPEN);
    if (rc)
        return rc;
    int d = fcntl(fd, F_DUPFD_CLOEXEC, min + 1);
    return d < 0 ? -errno : d;
}

int hp_os_each_dirent(int fd, int (*fn)(const char *name, void *ctx), void *ctx)
{
    int rc = injected(HP_OS_READDIR);
    if (rc)
        return rc;
    /* closedir closes the descriptor it reads: it gets a copy. */
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0)
        return -errno;
    DIR *d = fdopendir(copy);
    if (!d) {
        rc = -errno;
        close(copy);
        return rc;
    }
    rewinddir(d);  /* the copy shares the file offset of fd */
    for (;;) {
        errno = 0;  /* readdir's only way to tell an error from the end */
        struct dirent *e = readdir(d);
        if (!e) {
            rc = errno ? -errno : 0;
            break;
        }
        if ((rc = fn(e->d_name, ctx)) != 0)
            break;
    }
    closedir(d);
    return rc;
}

unsigned hp_os_euid(void)
{
    return (unsigned)geteuid();
}

uint64_t hp_os_clock_ns(int clock)
{
    struct timespec ts;
    if (clock_gettime((clockid_t)clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hp_os_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}
