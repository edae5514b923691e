#include <hp.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

char kt_skip_all[256];

void kt_explain(const char *cond, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    print_error("check failed: %s: %s\n", cond, msg);
}

void kt_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
}

/* "always [madvise] never" -> "madvise"; plain values stay as they are. */
static void selected(const char *raw, char *out, size_t cap)
{
    const char *open_br = strchr(raw, '['), *close_br = open_br ? strchr(open_br, ']') : NULL;
    if (!open_br || !close_br) {
        snprintf(out, cap, "%s", raw);
        return;
    }
    snprintf(out, cap, "%.*s", (int)(close_br - open_br - 1), open_br + 1);
}

static void on_alarm(int sig)
{
    (void)sig;  /* only interrupts flock */
}

int kt_need_root(const char *what)
{
    if (is_root())
        return 0;
    snprintf(kt_skip_all, sizeof(kt_skip_all), "not root: %s need root", what);
    return -1;
}

int kt_lock(unsigned seconds)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;  /* no SA_RESTART: flock fails with EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    alarm(seconds);
    int rc = knob_lock();
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    if (rc == -EINTR)
        snprintf(kt_skip_all, sizeof(kt_skip_all),
                 "another process held the machine-wide knob lock "
                 "(/run/lock/libhp-knobs.lock) for %u s", seconds);
    else if (rc)
        snprintf(kt_skip_all, sizeof(kt_skip_all), "knob lock: %s", strerror(-rc));
    return rc ? -1 : 0;
}

int kt_knob(const char *path, const char *value)
{
    char raw[200], now[64];
    int rc = knob_set(path, value);
    if (rc == 0)
        rc = knob_get(path, raw, sizeof(raw));
    if (rc) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "cannot set %s to %s: %s", path, value,
                 strerror(-rc));
        return -1;
    }
    selected(raw, now, sizeof(now));
    if (strcmp(now, value)) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "%s reads \"%s\" after writing \"%s\"", path,
                 now, value);
        return -1;
    }
    return 0;
}

int kt_thp_knob(const char *file, const char *value)
{
    char path[200];
    snprintf(path, sizeof(path), KT_THP "/%s", file);
    return kt_knob(path, value);
}

int kt_mthp_all(const char *value)
{
    for (unsigned kb = 16; kb < 2048; kb *= 2) {
        char path[200];
        snprintf(path, sizeof(path), KT_THP "/hugepages-%ukB/enabled", kb);
        if (access(path, F_OK) == 0 && kt_knob(path, value) != 0)
            return -1;
    }
    return 0;
}

int kt_pool_exists(unsigned long size_kb)
{
    char path[200];
    snprintf(path, sizeof(path), KT_POOLS "/hugepages-%lukB/nr_hugepages", size_kb);
    return access(path, F_OK) == 0;
}

int kt_pool_exact(unsigned long size_kb, unsigned long pages)
{
    long got = pool_set(size_kb, pages);
    if (got < 0) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "cannot set the %lu kB pool: %s", size_kb,
                 strerror((int)-got));
        return -1;
    }
    if ((unsigned long)got != pages) {
        snprintf(kt_skip_all, sizeof(kt_skip_all),
                 "the kernel gave %ld of %lu pages of %lu kB (memory too fragmented?)", got,
                 pages, size_kb);
        return -1;
    }
    return 0;
}

/* Pool pages held by reservations of this process (kt_pool_usable). */
#define KT_HOLDS 64
static struct {
    unsigned long kb;
    void *p;
} holds[KT_HOLDS];

long kt_pool_held(unsigned long size_kb)
{
    long n = 0;
    for (int i = 0; i < KT_HOLDS; i++)
        n += holds[i].p && holds[i].kb == size_kb;
    return n;
}

long kt_pool_unreserved(unsigned long size_kb)
{
    long free = pool_get(size_kb, "free_hugepages"), rsvd = pool_get(size_kb, "resv_hugepages");
    if (free < 0 || rsvd < 0)
        return free < 0 ? free : rsvd;
    return free > rsvd ? free - rsvd : 0;
}

static int hold_one(unsigned long size_kb)
{
    int slot = 0;
    while (slot < KT_HOLDS && holds[slot].p)
        slot++;
    if (slot == KT_HOLDS)
        return -ENOSPC;
    size_t len = (size_t)size_kb << 10;
    int shift = __builtin_ctzl(len);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    madvise(p, len, MADV_DONTFORK);
    holds[slot].kb = size_kb;
    holds[slot].p = p;
    return 0;
}

static void let_go(unsigned long size_kb, long n)
{
    for (int i = KT_HOLDS - 1; i >= 0 && n > 0; i--)
        if (holds[i].p && holds[i].kb == size_kb) {
            munmap(holds[i].p, (size_t)size_kb << 10);
            holds[i].p = NULL;
            n--;
        }
}

long kt_pool_usable(unsigned long size_kb, long n)
{
    long have = kt_pool_unreserved(size_kb);
    if (have < 0)
        return have;
    if (have < n) {
        let_go(size_kb, n - have);
        have = kt_pool_unreserved(size_kb);
    }
    if (have < n) {
        long nr = pool_get(size_kb, "nr_hugepages");
        if (nr < 0)
            return nr;
        long got = pool_set(size_kb, (unsigned long)(nr + n - have));
        if (got < 0)
            return got;
        have = kt_pool_unreserved(size_kb);
    }
    while (have > n) {
        int rc = hold_one(size_kb);
        if (rc)
            return rc;
        have = kt_pool_unreserved(size_kb);
    }
    return have;
}

int kt_pool_usable_exact(unsigned long size_kb, long n)
{
    long got = kt_pool_usable(size_kb, n);
    if (got == n)
        return 0;
    if (got < 0)
        snprintf(kt_skip_all, sizeof(kt_skip_all), "cannot make %ld pages of %lu kB usable: %s",
                 n, size_kb, strerror((int)-got));
    else
        snprintf(kt_skip_all, sizeof(kt_skip_all),
                 "%ld pages of %lu kB usable, not %ld (memory too fragmented?)", got, size_kb, n);
    return -1;
}

int kt_pool_wait(unsigned long size_kb, long free, long rsvd, long *got_free, long *got_rsvd)
{
    for (int i = 0; i < 50; i++) {
        *got_free = pool_get(size_kb, "free_hugepages");
        *got_rsvd = pool_get(size_kb, "resv_hugepages");
        if (*got_free == free && *got_rsvd == rsvd)
            return 0;
        usleep(10000);
    }
    return -1;
}

static const char *pool_files[5] = {"nr_hugepages", "free_hugepages", "resv_hugepages",
                                    "surplus_hugepages", "nr_overcommit_hugepages"};
static const unsigned long pool_kb[2] = {2048, 1048576};
static const char *meminfo_names[4] = {"HugePages_Total", "HugePages_Free", "HugePages_Rsvd",
                                       "HugePages_Surp"};
static const char *thp_files[12] = {
    "enabled", "defrag", "hugepages-16kB/enabled", "hugepages-32kB/enabled",
    "hugepages-64kB/enabled", "hugepages-128kB/enabled", "hugepages-256kB/enabled",
    "hugepages-512kB/enabled", "hugepages-1024kB/enabled", "hugepages-2048kB/enabled",
    "shmem_enabled", "use_zero_page"};

void kt_snapshot_take(struct kt_snapshot *s)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 5; f++)
            s->pool[i][f] = pool_get(pool_kb[i], pool_files[f]);
    for (int i = 0; i < 4; i++)
        s->meminfo[i] = meminfo_get(meminfo_names[i]);
    for (int i = 0; i < 12; i++) {
        char path[200], raw[200];
        snprintf(path, sizeof(path), KT_THP "/%s", thp_files[i]);
        if (knob_get(path, raw, sizeof(raw)) == 0)
            selected(raw, s->thp[i], sizeof(s->thp[i]));
        else
            snprintf(s->thp[i], sizeof(s->thp[i]), "(absent)");
    }
}

int kt_snapshot_diff(const struct kt_snapshot *a, const struct kt_snapshot *b, char *why,
                     size_t cap)
{
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 5; f++)
            if (a->pool[i][f] != b->pool[i][f]) {
                snprintf(why, cap, "hugepages-%lukB/%s: %ld before, %ld after", pool_kb[i],
                         pool_files[f], a->pool[i][f], b->pool[i][f]);
                return 1;
            }
    for (int i = 0; i < 4; i++)
        if (a->meminfo[i] != b->meminfo[i]) {
            snprintf(why, cap, "%s: %ld before, %ld after", meminfo_names[i], a->meminfo[i],
                     b->meminfo[i]);
            return 1;
        }
    for (int i = 0; i < 12; i++)
        if (strcmp(a->thp[i], b->thp[i])) {
            snprintf(why, cap, "%s/%s: \"%s\" before, \"%s\" after", KT_THP, thp_files[i],
                     a->thp[i], b->thp[i]);
            return 1;
        }
    return 0;
}

static int smaps_header(const char *line, uintptr_t *start, uintptr_t *end)
{
    char sp;
    return sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", start, end, &sp) == 3 && sp == ' ';
}

static long field_kb(const char *line, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) || line[n] != ':')
        return -1;
    return strtol(line + n + 1, NULL, 10);
}

int kt_vma_of(const void *addr, struct kt_vma *v)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int in = 0, found = 0;
    uintptr_t a = (uintptr_t)addr;
    memset(v, 0, sizeof(*v));
    while (getline(&line, &cap, f) > 0) {
        uintptr_t s, e;
        if (smaps_header(line, &s, &e)) {
            if (in)
                break;
            in = a >= s && a < e;
            if (in) {
                found = 1;
                v->start = s;
                v->end = e;
            }
            continue;
        }
        if (!in)
            continue;
        long kb;
        if ((kb = field_kb(line, "KernelPageSize")) >= 0)
            v->kernel_page_kb = kb;
        else if ((kb = field_kb(line, "Rss")) >= 0)
            v->rss_kb = kb;
        else if ((kb = field_kb(line, "AnonHugePages")) >= 0)
            v->anon_huge_kb = kb;
        else if ((kb = field_kb(line, "Private_Hugetlb")) >= 0 ||
                 (kb = field_kb(line, "Shared_Hugetlb")) >= 0)
            v->hugetlb_kb += kb;  /* KERNEL-FACTS: 1 GiB private may show as Shared */
        else if (!strncmp(line, "VmFlags:", 8)) {
            snprintf(v->vmflags, sizeof(v->vmflags), "%s", line + 8);
            v->vmflags[strcspn(v->vmflags, "\n")] = '\0';
        }
    }
    free(line);
    fclose(f);
    return found ? 0 : -1;
}

#define PM_PRESENT (UINT64_C(1) << 63)
#define PM_PFN_MASK ((UINT64_C(1) << 55) - 1)

static int64_t pread_u64(int fd, uint64_t index, uint64_t *out)
{
    ssize_t n = pread(fd, out, 8, (off_t)(index * 8));
    return n == 8 ? 0 : (n < 0 ? -errno : -EIO);
}

int64_t kt_page_flags(const void *addr)
{
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    int kf = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
    uint64_t e = 0, flags = 0;
    int64_t rc = -1;
    if (pm >= 0 && kf >= 0 && pread_u64(pm, (uintptr_t)addr / KT_4K, &e) == 0 &&
        (e & PM_PRESENT) && (e & PM_PFN_MASK) && pread_u64(kf, e & PM_PFN_MASK, &flags) == 0)
        rc = (int64_t)flags;
    if (pm >= 0)
        close(pm);
    if (kf >= 0)
        close(kf);
    return rc;
}

int kt_folio_scan(const void *addr, size_t len, uint64_t chunk, struct kt_folios *out)
{
    memset(out, 0, sizeof(*out));
    uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(KT_4K - 1);
    uint64_t n = ((uintptr_t)addr + len - lo + KT_4K - 1) / KT_4K;
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    int kf = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
    /* One entry more than the range: the page after a chunk must not
     * continue its folio. */
    uint64_t *pfn = calloc(n + 1, sizeof(*pfn)), *flags = calloc(n + 1, sizeof(*flags));
    int rc = (pm < 0 || kf < 0) ? -errno : (!pfn || !flags) ? -ENOMEM : 0;
    for (uint64_t i = 0; rc == 0 && i <= n; i++) {
        uint64_t e;
        if (pread_u64(pm, lo / KT_4K + i, &e) != 0) {
            if (i == n)
                break;
            rc = -EIO;
            break;
        }
        if (!(e & PM_PRESENT) || !(e & PM_PFN_MASK))
            continue;
        pfn[i] = e & PM_PFN_MASK;
        if (pread_u64(kf, pfn[i], &flags[i]) != 0)
            rc = -EIO;
        if (i == n)
            break;
        out->present++;
        if ((flags[i] >> KT_KPF_HEAD & 1) || (flags[i] >> KT_KPF_TAIL & 1))
            out->in_large++;
    }
    uint64_t per = chunk / KT_4K;
    for (uint64_t i = 0; rc == 0 && per > 1 && i + per <= n; i++) {
        if ((lo + i * KT_4K) % chunk)
            continue;
        int exact = pfn[i] && (flags[i] >> KT_KPF_HEAD & 1);
        for (uint64_t k = 1; exact && k < per; k++)
            exact = pfn[i + k] == pfn[i] + k && (flags[i + k] >> KT_KPF_TAIL & 1);
        if (exact && pfn[i + per] == pfn[i] + per && (flags[i + per] >> KT_KPF_TAIL & 1))
            exact = 0;  /* the folio goes on past the chunk: it is larger */
        out->exact_chunks += exact;
    }
    free(pfn);
    free(flags);
    if (pm >= 0)
        close(pm);
    if (kf >= 0)
        close(kf);
    return rc;
}

int kt_mincore_errno(const void *p, size_t len)
{
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(KT_4K - 1);
    size_t n = ((uintptr_t)p + len - lo + KT_4K - 1) / KT_4K;
    unsigned char *vec = malloc(n);
    if (!vec)
        return ENOMEM;
    int rc = mincore((void *)lo, (uintptr_t)p + len - lo, vec) == 0 ? 0 : errno;
    free(vec);
    return rc;
}

static sigjmp_buf fill_env;
static void *volatile fault_addr;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    fault_addr = si->si_addr;
    siglongjmp(fill_env, 1);
}

int kt_verify(const void *p, size_t len, unsigned char byte, size_t *off)
{
    const unsigned char *c = p;
    uint64_t word;
    memset(&word, byte, sizeof(word));
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v;
        memcpy(&v, c + i, 8);
        if (v != word)
            break;
    }
    for (; i < len; i++)
        if (c[i] != byte) {
            *off = i;
            return 1;
        }
    return 0;
}

int kt_fill_verify(void *p, size_t len, unsigned char byte, size_t *off)
{
    struct sigaction sa, old_bus, old_segv;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGSEGV, &sa, &old_segv);
    int rc;
    if (sigsetjmp(fill_env, 1)) {
        *off = (size_t)((char *)fault_addr - (char *)p);
        rc = -1;
    } else {
        memset(p, byte, len);
        rc = kt_verify(p, len, byte, off);
    }
    sigaction(SIGBUS, &old_bus, NULL);
    sigaction(SIGSEGV, &old_segv, NULL);
    return rc;
}

int kt_backend(const char *name, struct hp_backend_info *info)
{
    int32_t n = hp_backend_count();
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info b = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &b) == HP_OK && !strcmp(b.name, name)) {
            *info = b;
            return 0;
        }
    }
    return -1;
}

uint64_t kt_round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static void *held[8];

void kt_hold(void *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < sizeof(held) / sizeof(*held); i++)
        if (!held[i]) {
            held[i] = p;
            return;
        }
}

void kt_release(void *p)
{
    for (size_t i = 0; i < sizeof(held) / sizeof(*held); i++)
        if (held[i] == p)
            held[i] = NULL;
    int32_t rc = hp_free(p);
    KT_CHECK(rc == HP_OK, "hp_free(%p): %s", p, hp_error_name(rc));
}

void kt_free_held(void)
{
    for (size_t i = 0; i < sizeof(held) / sizeof(*held); i++)
        if (held[i])
            hp_free(held[i]), held[i] = NULL;
}

int kt_teardown_held(void **state)
{
    (void)state;
    kt_free_held();
    return 0;
}

void *kt_realloc(void *p, size_t len, uint64_t flags)
{
    void *q = hp_realloc(p, len, flags);
    if (q)
        for (size_t i = 0; i < sizeof(held) / sizeof(*held); i++)
            if (held[i] == p)
                held[i] = q;
    return q;
}

void *kt_alloc(size_t len, const char *backend, const char *exclude, uint64_t flags)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = backend;
    o.exclude = exclude;
    o.flags = flags;
    void *p = hp_alloc_ex(len, &o);
    kt_hold(p);
    return p;
}

void *kt_must_alloc(size_t len, const char *backend, const char *exclude, uint64_t flags)
{
    void *p = kt_alloc(len, backend, exclude, flags);
    if (!p)
        fail_msg("hp_alloc_ex(%zu, backend=%s, exclude=%s, flags=0x%llx): %s: %s", len,
                 backend ? backend : "-", exclude ? exclude : "-", (unsigned long long)flags,
                 hp_error_name(hp_last_error()), hp_last_error_detail());
    return p;
}

struct hp_block_info kt_info(const void *p)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    int32_t rc = hp_info(p, &info);
    KT_CHECK(rc == HP_OK, "hp_info: %s", hp_error_name(rc));
    return info;
}

void kt_expect_unmapped(const void *p, size_t len)
{
    int err = kt_mincore_errno(p, len);
    KT_CHECK(err == ENOMEM, "mincore after hp_free says %s, not ENOMEM",
             err ? strerror(err) : "mapped");
}

void kt_expect_restored(const struct kt_snapshot *after_setup,
                        const struct kt_snapshot *before_all)
{
    struct kt_snapshot now;
    char why[256];
    long got_free, got_rsvd;
    /* A pool a test grew (kt_pool_usable, on a machine whose pool was too
     * small) goes back to its size after setup, as many of its pages
     * usable as now: pages added at run time can be given back (a 1 GiB
     * page reserved at boot never is: the pool never shrinks below that). */
    for (int i = 0; i < 2; i++) {
        long nr = pool_get(pool_kb[i], "nr_hugepages");
        if (nr > after_setup->pool[i][0]) {
            long usable = kt_pool_unreserved(pool_kb[i]);
            let_go(pool_kb[i], kt_pool_held(pool_kb[i]));
            pool_set(pool_kb[i], (unsigned long)after_setup->pool[i][0]);
            kt_pool_usable(pool_kb[i], usable);
        }
    }
    kt_pool_wait(pool_kb[0], after_setup->pool[0][1], after_setup->pool[0][2], &got_free, &got_rsvd);
    kt_snapshot_take(&now);
    KT_CHECK(!kt_snapshot_diff(after_setup, &now, why, sizeof(why)),
             "differs from right after setup: %s", why);
    for (int i = 0; i < 2; i++)
        let_go(pool_kb[i], kt_pool_held(pool_kb[i]));
    knob_restore_all();
    kt_snapshot_take(&now);
    KT_CHECK(!kt_snapshot_diff(before_all, &now, why, sizeof(why)),
             "machine differs from before the tests: %s", why);
}

/* A child must not run the parent's knob restorers if it crashes, and
 * must not outlive the parent holding pool pages. */
static void child_defaults(pid_t parent)
{
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGTERM, SIGINT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
        signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
}

/* fork with stdio flushed; the child gets child_defaults. */
static pid_t fork_child(void)
{
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        child_defaults(parent);
    return pid;
}

static pid_t live[8];

static void track(pid_t pid)
{
    for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++)
        if (!live[i]) {
            live[i] = pid;
            return;
        }
}

static long pool_room(unsigned long size_kb)
{
    long free_pages = pool_get(size_kb, "free_hugepages");
    long rsvd = pool_get(size_kb, "resv_hugepages");
    return free_pages > rsvd ? free_pages - rsvd : 0;
}

static void *map_pool(unsigned long size_kb, long pages)
{
    uint64_t ps = (uint64_t)size_kb << 10;
    int shift = __builtin_ctzll(ps);
    void *m = mmap(NULL, (size_t)pages * ps, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (madvise(m, (size_t)pages * ps, MADV_POPULATE_WRITE) != 0) {
        munmap(m, (size_t)pages * ps);
        return NULL;
    }
    return m;
}

pid_t kt_drainer_start(unsigned long size_kb, long *pages)
{
    int up[2];
    if (pipe2(up, O_CLOEXEC) != 0)
        return -errno;
    pid_t pid = fork_child();
    if (pid < 0) {
        int err = errno;
        close(up[0]);
        close(up[1]);
        return -err;
    }
    if (pid == 0) {
        long n = pool_room(size_kb);
        if (n > 0 && !map_pool(size_kb, n))
            n = -errno;
        if (write(up[1], &n, sizeof(n)) != sizeof(n))
            _exit(1);
        for (;;)
            pause();
    }
    track(pid);
    close(up[1]);
    long n = 0;
    ssize_t got = read(up[0], &n, sizeof(n));
    close(up[0]);
    if (got != sizeof(n) || n < 0) {
        kt_drainer_stop(pid);
        return got != sizeof(n) ? -EIO : (pid_t)n;
    }
    *pages = n;
    return pid;
}

pid_t kt_churner_start(unsigned long size_kb)
{
    pid_t pid = fork_child();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        uint64_t ps = (uint64_t)size_kb << 10;
        for (;;) {
            long n = pool_room(size_kb);
            void *m = n > 0 ? map_pool(size_kb, n) : NULL;
            if (m)
                munmap(m, (size_t)n * ps);
        }
    }
    track(pid);
    return pid;
}

void kt_drainer_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++)
        if (live[i] == pid)
            live[i] = 0;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

void kt_drainers_stop_all(void)
{
    for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++)
        kt_drainer_stop(live[i]);
}

int kt_teardown_drainers(void **state)
{
    (void)state;
    kt_drainers_stop_all();
    return 0;
}

int kt_run_child(const char *mode)
{
    pid_t pid = fork_child();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        execl("/proc/self/exe", "kt-child", "--kt-child", mode, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void kt_backends_only(void)
{
    setenv("HP_CACHE_MAX", "0", 0);
}

const char *kt_child_mode(int argc, char **argv)
{
    return argc == 3 && !strcmp(argv[1], "--kt-child") ? argv[2] : NULL;
}
