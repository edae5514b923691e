/*
 * hpctl why PID: why a running process (any program, libhp or not) has or
 * lacks huge pages, from what the kernel shows about it:
 *   - /proc/PID/smaps (proc(5)): per mapping Rss, AnonHugePages (PMD THP),
 *     Private/Shared_Hugetlb, KernelPageSize, THPeligible and VmFlags (hg:
 *     MADV_HUGEPAGE, nh: MADV_NOHUGEPAGE or MAP_STACK since 6.7, ht: hugetlb,
 *     io/pf: device memory);
 *   - /proc/PID/status THP_enabled: 0 after prctl(PR_SET_THP_DISABLE), which
 *     fork and exec inherit;
 *   - the THP and per-size mTHP switches, khugepaged's settings and the
 *     hugetlb pools (Documentation/admin-guide/mm/transhuge.rst,
 *     hugetlbpage.rst), the hugetlb limits of the process's cgroup
 *     (Documentation/admin-guide/cgroup-v2.rst "HugeTLB", cgroup-v1/hugetlb.rst);
 *   - as root, /proc/PID/pagemap and /proc/kpageflags
 *     (Documentation/admin-guide/mm/pagemap.rst): which resident pages sit in
 *     large folios, which is how mTHP shows, since smaps counts only PMD THP.
 * Each mapping gets one reason for the part of it that is not on huge pages;
 * the reasons are summed over the process, by resident bytes.
 */
#include "hpctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MAX_SIZES 32
#define KPF_COMPOUND_HEAD 15
#define KPF_COMPOUND_TAIL 16
#define KPF_THP 22
#define UNKNOWN UINT64_MAX

/* Reasons, in the order they are tested; the JSON name, then the text. */
enum why {
    W_HUGE,            /* every resident byte is huge */
    W_HUGETLB,         /* hugetlb mapping */
    W_SPECIAL,
    W_PROCESS_OFF,
    W_NOHUGEPAGE,
    W_SHMEM_NEVER,
    W_FILE,
    W_SYSTEM_NEVER,
    W_NOT_ADVISED,
    W_TOO_SMALL,
    W_NOT_RESIDENT,
    W_NOT_ELIGIBLE,
    W_EDGES,
    W_FALLBACK,
    W_COUNT
};

static const char *const why_name[W_COUNT] = {
    "huge", "hugetlb", "special", "process-thp-disabled", "nohugepage", "shmem-never", "file",
    "system-never", "madvise-not-advised", "too-small", "not-resident", "not-eligible",
    "unaligned-edges", "fallback",
};

struct mapping {
    uint64_t start, end;
    char perms[8];
    char path[256];
    uint64_t rss_kb, thp_kb, hugetlb_kb, shmem_pmd_kb, file_pmd_kb, kernel_page_kb;
    int eligible;               /* THPeligible, -1 if absent */
    int hg, nh, ht, io;         /* VmFlags */
    uint64_t mthp_kb;           /* large folios below the PMD size; UNKNOWN */
    uint64_t mthp_by_size[MAX_SIZES];  /* KiB, per index of struct sys.kb */
    enum why why;
    char text[400];
};

struct sys {
    char thp[32], defrag[32], shmem[32];
    uint64_t pmd;                            /* bytes; 0 if no THP */
    int n;                                   /* mTHP sizes */
    unsigned long kb[MAX_SIZES];
    int has_enabled[MAX_SIZES];              /* sizes offered for shmem only have none */
    char mode[MAX_SIZES][32];                /* as set: always, inherit, madvise, never */
    char eff[MAX_SIZES][32];                 /* inherit resolved */
    char shmem_size[MAX_SIZES][32];
    int n_pools;
    unsigned long pool_kb[MAX_SIZES];
    uint64_t pool_total[MAX_SIZES], pool_free[MAX_SIZES];
    int have_pool[MAX_SIZES];
    char kh_defrag[16], kh_ptes_none[16], kh_to_scan[16], kh_sleep[16];
};

struct cgroup {
    char path[256];
    int v2;
    int n;
    char size_name[MAX_SIZES][16];           /* "2MB" as the cgroup files name it */
    uint64_t limit[MAX_SIZES];               /* bytes; UNKNOWN = max */
};

struct proc {
    int pid;
    char name[64];
    int thp_enabled;                         /* -1 if the kernel does not say */
    int n;
    struct mapping *m;
    int large_measured;                      /* pagemap walk done */
    const char *large_why;                   /* why not */
    struct cgroup cg;
};

/* ---------------------------------------------------------------- sizes */

/* 52.3M, 8M, 512K, 12B: for people; JSON has bytes. */
static void approx(uint64_t bytes, char *buf, size_t cap)
{
    static const char u[] = "BKMGT";
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024 && i < 4)
        v /= 1024, i++;
    if (i == 0 || v >= 100 || v == (double)(uint64_t)v)
        snprintf(buf, cap, "%.0f%c", v, u[i]);
    else
        snprintf(buf, cap, "%.1f%c", v, u[i]);
}

/* ----------------------------------------------------------- the system */

static void read_sys(struct sys *s)
{
    char pmd[32], path[256];
    memset(s, 0, sizeof(*s));
    selected(THP_DIR "/enabled", s->thp, sizeof(s->thp));
    selected(THP_DIR "/defrag", s->defrag, sizeof(s->defrag));
    selected(THP_DIR "/shmem_enabled", s->shmem, sizeof(s->shmem));
    read_line(THP_DIR "/hpage_pmd_size", pmd, sizeof(pmd));
    if (parse_u64(pmd, &s->pmd) != 0 || !path_exists(THP_DIR "/enabled"))
        s->pmd = 0;
    s->n = size_dirs(THP_DIR, s->kb, MAX_SIZES);
    for (int i = 0; i < s->n; i++) {
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/enabled", s->kb[i]);
        s->has_enabled[i] = path_exists(path);
        selected(path, s->mode[i], sizeof(s->mode[i]));
        snprintf(s->eff[i], sizeof(s->eff[i]), "%s", !s->has_enabled[i] ? "never"
                 : strcmp(s->mode[i], "inherit") ? s->mode[i] : s->thp);
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/shmem_enabled", s->kb[i]);
        selected(path, s->shmem_size[i], sizeof(s->shmem_size[i]));
        if (!strcmp(s->shmem_size[i], "inherit"))
            snprintf(s->shmem_size[i], sizeof(s->shmem_size[i]), "%s", s->shmem);
    }
    read_line(THP_DIR "/khugepaged/defrag", s->kh_defrag, sizeof(s->kh_defrag));
    read_line(THP_DIR "/khugepaged/max_ptes_none", s->kh_ptes_none, sizeof(s->kh_ptes_none));
    read_line(THP_DIR "/khugepaged/pages_to_scan", s->kh_to_scan, sizeof(s->kh_to_scan));
    read_line(THP_DIR "/khugepaged/scan_sleep_millisecs", s->kh_sleep, sizeof(s->kh_sleep));
    s->n_pools = size_dirs(POOL_DIR, s->pool_kb, MAX_SIZES);
    for (int i = 0; i < s->n_pools; i++) {
        snprintf(path, sizeof(path), POOL_DIR "/hugepages-%lukB/nr_hugepages", s->pool_kb[i]);
        int a = read_u64(path, &s->pool_total[i]) == 0;
        snprintf(path, sizeof(path), POOL_DIR "/hugepages-%lukB/free_hugepages", s->pool_kb[i]);
        s->have_pool[i] = a && read_u64(path, &s->pool_free[i]) == 0;
    }
    /* A kernel without per-size switches (before 6.8) has the PMD size
     * only, governed by "enabled" itself. */
    if (s->pmd && s->n == 0) {
        s->kb[0] = (unsigned long)(s->pmd >> 10);
        s->has_enabled[0] = 1;
        snprintf(s->mode[0], sizeof(s->mode[0]), "inherit");
        snprintf(s->eff[0], sizeof(s->eff[0]), "%s", s->thp);
        snprintf(s->shmem_size[0], sizeof(s->shmem_size[0]), "%s", s->shmem);
        s->n = 1;
    }
}

/* Is size i allowed in a mapping with (hg) or without MADV_HUGEPAGE? */
static int size_allowed(const struct sys *s, int i, int hg)
{
    return !strcmp(s->eff[i], "always") || (hg && !strcmp(s->eff[i], "madvise"));
}

static int shmem_allowed(const struct sys *s, int i, int hg)
{
    const char *m = s->shmem_size[i];
    return !strcmp(m, "always") || !strcmp(m, "within_size") || !strcmp(m, "force") ||
           (hg && !strcmp(m, "advise"));
}

/* ------------------------------------------------------------- cgroups */

/* The hugetlb limits of the process's cgroup: cgroup v2 ("0::/path",
 * hugetlb.<size>.max) or the v1 hugetlb hierarchy ("N:hugetlb:/path",
 * hugetlb.<size>.limit_in_bytes). Sizes as the files name them (2MB, 1GB). */
static void read_cgroup(int pid, struct cgroup *cg)
{
    char path[128], full[512], line[512], v1[256] = "", v2[256] = "";
    memset(cg, 0, sizeof(*cg));
    snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        if (c1 == line + 1 && line[0] == '0' && c1[1] == '\0')
            snprintf(v2, sizeof(v2), "%s", c2 + 1);
        for (char *save = NULL, *w = strtok_r(c1 + 1, ",", &save); w; w = strtok_r(NULL, ",", &save))
            if (!strcmp(w, "hugetlb"))
                snprintf(v1, sizeof(v1), "%s", c2 + 1);
    }
    fclose(f);
    const char *base = v1[0] ? "/sys/fs/cgroup/hugetlb" : "/sys/fs/cgroup";
    const char *rel = v1[0] ? v1 : v2;
    cg->v2 = !v1[0];
    snprintf(cg->path, sizeof(cg->path), "%s", rel);
    static const char *const names[] = {"64KB", "2MB", "32MB", "1GB", "16GB"};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names) && rel[0]; i++) {
        char file[512], val[64];
        snprintf(file, sizeof(file), "%s%s/hugetlb.%s.%s", base, strcmp(rel, "/") ? rel : "",
                 names[i], cg->v2 ? "max" : "limit_in_bytes");
        if (!path_exists(file))
            continue;
        read_line(file, val, sizeof(val));
        uint64_t v;
        snprintf(cg->size_name[cg->n], sizeof(cg->size_name[0]), "%s", names[i]);
        cg->limit[cg->n] = parse_u64(val, &v) == 0 && v < (UINT64_C(1) << 62) ? v : UNKNOWN;
        cg->n++;
    }
}

/* ------------------------------------------------------------- smaps */

static int vmflag(const char *flags, const char *f)
{
    size_t n = strlen(f);
    for (const char *p = flags; (p = strstr(p, f)); p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0' || p[n] == '\n'))
            return 1;
    return 0;
}

static int kb_field(const char *line, const char *name, uint64_t *out)
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) || line[n] != ':')
        return 0;
    *out = strtoull(line + n + 1, NULL, 10);
    return 1;
}

/* Parse /proc/PID/smaps. 0, or -errno of the open or read. */
static int read_smaps(struct proc *p)
{
    char path[64], full[512];
    snprintf(path, sizeof(path), "/proc/%d/smaps", p->pid);
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0, alloc = 0;
    struct mapping *m = NULL;
    errno = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned long lo, hi;
        int off = 0;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s%n", &lo, &hi, perms, &off) == 3 && off > 0) {
            if ((size_t)p->n == alloc) {
                size_t na = alloc ? alloc * 2 : 64;
                struct mapping *nm = realloc(p->m, na * sizeof(*nm));
                if (!nm) {
                    free(line);
                    fclose(f);
                    return -ENOMEM;
                }
                p->m = nm, alloc = na;
            }
            m = &p->m[p->n++];
            memset(m, 0, sizeof(*m));
            m->start = lo, m->end = hi, m->eligible = -1, m->mthp_kb = UNKNOWN;
            snprintf(m->perms, sizeof(m->perms), "%s", perms);
            const char *name = line + off;
            name += strspn(name, " \t");
            snprintf(m->path, sizeof(m->path), "%.*s", (int)strcspn(name, "\n"), name);
            continue;
        }
        if (!m)
            continue;
        uint64_t v;
        if (kb_field(line, "Rss", &v))
            m->rss_kb = v;
        else if (kb_field(line, "AnonHugePages", &v))
            m->thp_kb = v;
        else if (kb_field(line, "ShmemPmdMapped", &v))
            m->shmem_pmd_kb = v;
        else if (kb_field(line, "FilePmdMapped", &v))
            m->file_pmd_kb = v;
        else if (kb_field(line, "Shared_Hugetlb", &v) || kb_field(line, "Private_Hugetlb", &v))
            m->hugetlb_kb += v;  /* 1 GiB private pages may be counted as shared */
        else if (kb_field(line, "KernelPageSize", &v))
            m->kernel_page_kb = v;
        else if (kb_field(line, "THPeligible", &v))
            m->eligible = v != 0;
        else if (!strncmp(line, "VmFlags:", 8)) {
            m->hg = vmflag(line + 8, "hg");
            m->nh = vmflag(line + 8, "nh");
            m->ht = vmflag(line + 8, "ht");
            m->io = vmflag(line + 8, "io") || vmflag(line + 8, "pf");
        }
    }
    int err = ferror(f) ? -(errno ? errno : EIO) : 0;
    free(line);
    fclose(f);
    return err;
}

static void read_status(struct proc *p)
{
    char path[64], full[512], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", p->pid);
    p->thp_enabled = -1;
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "Name:", 5))
            snprintf(p->name, sizeof(p->name), "%.*s", (int)strcspn(line + 5 + strspn(line + 5, " \t"), "\n"),
                     line + 5 + strspn(line + 5, " \t"));
        else if (!strncmp(line, "THP_enabled:", 12))
            p->thp_enabled = atoi(line + 12) != 0;
    }
    fclose(f);
}

/* ------------------------------------------- large folios (mTHP), as root */

/* Index of the mTHP size of n pages (rounded up to a power of two), or -1. */
static int size_index(const struct sys *s, uint64_t pages)
{
    uint64_t kb = 4;
    while (kb < pages * 4)
        kb <<= 1;
    for (int i = 0; i < s->n; i++)
        if (s->kb[i] == kb)
            return i;
    return -1;
}

static void folio_done(const struct sys *s, struct mapping *m, uint64_t pages)
{
    if (!pages || (uint64_t)pages * 4096 >= s->pmd)
        return;  /* PMD-sized folios are THP, counted by AnonHugePages */
    m->mthp_kb += pages * 4;
    int i = size_index(s, pages);
    if (i >= 0)
        m->mthp_by_size[i] += pages * 4;
}

/* PAGEMAP_SCAN (Linux 6.7; include/uapi/linux/fs.h, which Debian 12's
 * headers predate): the present ranges of a mapping, found by the kernel's
 * page-table walk, so that a sparse mapping (a sanitizer's shadow, a
 * runtime's reserved heap: terabytes with a few pages in them) is not read
 * entry by entry. */
#ifndef PAGEMAP_SCAN
struct page_region {
    uint64_t start, end, categories;
};
struct pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_PRESENT (1 << 3)
#endif

struct folio_walk {
    uint64_t folio, last_pfn;
};

/* One present stretch [lo, hi) of a mapping's pagemap: every page's flags;
 * a compound head with KPF_THP starts a large folio, the tails that follow
 * it at the next frame continue it. 0, or -1 when frame numbers are hidden
 * (not root). */
static int walk_range(int pm, int kf, const struct sys *s, struct mapping *m, uint64_t lo,
                      uint64_t hi, struct folio_walk *w)
{
    enum { CHUNK = 512 };
    uint64_t ent[CHUNK], flags[CHUNK];
    for (uint64_t va = lo; va < hi; va += CHUNK * 4096ull) {
        uint64_t n = (hi - va) / 4096;
        n = n > CHUNK ? CHUNK : n;
        ssize_t got = pread(pm, ent, n * 8, (off_t)(va / 4096 * 8));
        if (got < (ssize_t)(n * 8))
            return -1;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t pfn = ent[i] & ((UINT64_C(1) << 55) - 1);
            flags[i] = 0;
            if (!(ent[i] >> 63))
                continue;
            if (!pfn)
                return -1;  /* present, frame hidden: no CAP_SYS_ADMIN */
            /* Read a run of consecutive frames at once. */
            uint64_t j = i;
            while (j + 1 < n && (ent[j + 1] >> 63) &&
                   (ent[j + 1] & ((UINT64_C(1) << 55) - 1)) == pfn + (j + 1 - i))
                j++;
            if (pread(kf, flags + i, (j - i + 1) * 8, (off_t)(pfn * 8)) != (ssize_t)((j - i + 1) * 8))
                return -1;
            i = j;
        }
        for (uint64_t i = 0; i < n; i++) {
            uint64_t pfn = ent[i] & ((UINT64_C(1) << 55) - 1);
            uint64_t fl = flags[i];
            int present = (int)(ent[i] >> 63);
            if (present && (fl >> KPF_THP & 1) && (fl >> KPF_COMPOUND_TAIL & 1) && w->folio &&
                pfn == w->last_pfn + 1) {
                w->folio++;
            } else {
                folio_done(s, m, w->folio);
                w->folio = present && (fl >> KPF_THP & 1) ? 1 : 0;
            }
            w->last_pfn = pfn;
        }
    }
    return 0;
}

/* Walk one mapping: its present stretches as PAGEMAP_SCAN finds them, or,
 * where the kernel has no PAGEMAP_SCAN (before 6.7) or the file is no real
 * pagemap, the whole of it. 0, or -1 (walk_range). */
static int walk(int pm, int kf, const struct sys *s, struct mapping *m)
{
    struct folio_walk w = {0, 0};
    struct page_region reg[64];
    m->mthp_kb = 0;
    for (uint64_t at = m->start; at < m->end;) {
        struct pm_scan_arg a = {sizeof(a), 0, at, m->end, 0, (uintptr_t)reg, 64, 0,
                                0, PAGE_IS_PRESENT, 0, PAGE_IS_PRESENT};
        long n = ioctl(pm, PAGEMAP_SCAN, &a);
        if (n < 0) {
            if (at != m->start)
                return -1;
            int rc = walk_range(pm, kf, s, m, m->start, m->end, &w);
            folio_done(s, m, w.folio);
            return rc;
        }
        for (long i = 0; i < n; i++) {
            if (i == 0 || reg[i].start != reg[i - 1].end) {
                folio_done(s, m, w.folio);  /* a hole ends a folio */
                w.folio = 0;
            }
            if (walk_range(pm, kf, s, m, reg[i].start, reg[i].end, &w) != 0)
                return -1;
        }
        if (a.walk_end <= at)
            break;
        at = a.walk_end;
    }
    folio_done(s, m, w.folio);
    return 0;
}

static int is_shmem(const struct mapping *m);
static int is_file(const struct mapping *m);

static void measure_large(struct proc *p, const struct sys *s)
{
    char path[64], full[512];
    snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
    int pm = open(hpctl_path(path, full, sizeof(full)), O_RDONLY | O_CLOEXEC);
    int kf = open(hpctl_path("/proc/kpageflags", full, sizeof(full)), O_RDONLY | O_CLOEXEC);
    p->large_why = NULL;
    if (pm < 0 || kf < 0) {
        p->large_why = "needs root: /proc/kpageflags and the process's page frames";
    } else {
        for (int i = 0; i < p->n && !p->large_why; i++) {
            struct mapping *m = &p->m[i];
            /* A regular file's large folios are the file system's page
             * cache, not mTHP (the hugepages-<size>kB switches govern
             * anonymous memory and shmem): only FilePmdMapped counts. */
            if (m->ht || m->io || m->rss_kb == 0 || m->rss_kb <= m->thp_kb ||
                (is_file(m) && !is_shmem(m))) {
                m->mthp_kb = 0;
                continue;
            }
            if (walk(pm, kf, s, m) != 0)
                p->large_why = "needs root (CAP_SYS_ADMIN): page frame numbers are hidden";
        }
    }
    if (pm >= 0)
        close(pm);
    if (kf >= 0)
        close(kf);
    p->large_measured = !p->large_why;
    if (!p->large_measured)
        for (int i = 0; i < p->n; i++) {
            p->m[i].mthp_kb = UNKNOWN;
            memset(p->m[i].mthp_by_size, 0, sizeof(p->m[i].mthp_by_size));
        }
}

/* ------------------------------------------------------------ reasons */

static int special(const struct mapping *m)
{
    return m->io || !strcmp(m->path, "[vdso]") || !strcmp(m->path, "[vvar]") ||
           !strcmp(m->path, "[vsyscall]") || !strcmp(m->path, "[uprobes]") ||
           !strncmp(m->path, "[vvar_", 6);
}

static int is_shmem(const struct mapping *m)
{
    return !strncmp(m->path, "/dev/shm/", 9) ||
           !strncmp(m->path, "/memfd:", 7) || !strncmp(m->path, "/SYSV", 5) ||
           !strncmp(m->path, "/dev/zero", 9);
}

static int is_file(const struct mapping *m)
{
    return m->path[0] == '/';
}

static const char *kind(const struct mapping *m)
{
    if (m->ht || m->kernel_page_kb > 4)
        return "hugetlb";
    if (special(m))
        return "special";
    if (is_shmem(m))
        return "shmem";
    if (is_file(m))
        return "file";
    if (!strcmp(m->path, "[heap]"))
        return "heap";
    if (!strncmp(m->path, "[stack", 6))
        return "stack";
    return "anon";
}

/* Bytes of [start, end) in whole pages of size ps, aligned to ps. */
static uint64_t aligned_bytes(const struct mapping *m, uint64_t ps)
{
    uint64_t a = (m->start + ps - 1) / ps * ps, b = m->end / ps * ps;
    return b > a ? b - a : 0;
}

static uint64_t huge_kb(const struct mapping *m)
{
    return m->thp_kb + m->shmem_pmd_kb + m->file_pmd_kb +
           (m->mthp_kb == UNKNOWN ? 0 : m->mthp_kb);
}

/* Base-page resident KiB of a mapping. */
static uint64_t rest_kb(const struct mapping *m)
{
    uint64_t h = huge_kb(m);
    return m->ht ? 0 : m->rss_kb > h ? m->rss_kb - h : 0;
}

static void sizes_text(const struct sys *s, int (*ok)(const struct sys *, int, int), int hg,
                       char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n && used + 16 < cap; i++)
        if (ok(s, i, hg)) {
            char hs[32];
            human_size((uint64_t)s->kb[i] << 10, hs, sizeof(hs));
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "," : "", hs);
        }
}

static void classify(struct mapping *m, const struct proc *p, const struct sys *s)
{
    char hs[32], sizes[160];
    uint64_t pmd = s->pmd ? s->pmd : (2u << 20);
    human_size(pmd, hs, sizeof(hs));
    if (m->ht || m->kernel_page_kb > 4) {
        human_size(m->kernel_page_kb << 10, hs, sizeof(hs));
        m->why = W_HUGETLB;
        if (m->hugetlb_kb)
            snprintf(m->text, sizeof(m->text), "hugetlb %s pages from the pool", hs);
        else
            snprintf(m->text, sizeof(m->text), "hugetlb %s pages, none touched yet (the pool "
                     "holds them in reserve)", hs);
        return;
    }
    if (special(m)) {
        m->why = W_SPECIAL;
        snprintf(m->text, sizeof(m->text), "kernel or device mapping (vdso, VM_IO, VM_PFNMAP): "
                 "never on THP");
        return;
    }
    if (m->rss_kb && rest_kb(m) == 0) {
        m->why = W_HUGE;
        snprintf(m->text, sizeof(m->text), "every resident page is huge");
        return;
    }
    if (p->thp_enabled == 0) {
        m->why = W_PROCESS_OFF;
        snprintf(m->text, sizeof(m->text), "THP disabled for the whole process "
                 "(prctl PR_SET_THP_DISABLE, inherited across fork and exec; THP_enabled: 0 "
                 "in /proc/%d/status)", p->pid);
        return;
    }
    if (m->nh) {
        m->why = W_NOHUGEPAGE;
        snprintf(m->text, sizeof(m->text), "the mapping refuses THP: MADV_NOHUGEPAGE, or "
                 "MAP_STACK (VmFlags nh)");
        return;
    }
    if (is_shmem(m)) {
        sizes_text(s, shmem_allowed, m->hg, sizes, sizeof(sizes));
        if (!sizes[0]) {
            m->why = W_SHMEM_NEVER;
            snprintf(m->text, sizeof(m->text), "shared memory, and shmem_enabled=%s allows no "
                     "huge size%s", s->shmem, m->hg ? "" : " (advise needs MADV_HUGEPAGE)");
            return;
        }
    } else if (is_file(m)) {
        m->why = W_FILE;
        snprintf(m->text, sizeof(m->text), "file mapping: anonymous THP settings do not apply; "
                 "huge only when mapped by PMD (FilePmdMapped: khugepaged or the "
                 "file system's PMD-sized folios)");
        return;
    }
    int shmem = is_shmem(m);
    /* The largest allowed size with a whole aligned page inside the mapping. */
    int any = 0, fits = -1, smallest = -1;
    for (int i = 0; i < s->n; i++) {
        if (!(shmem ? shmem_allowed(s, i, m->hg) : size_allowed(s, i, m->hg)))
            continue;
        any = 1;
        if (smallest < 0)
            smallest = i;
        if (aligned_bytes(m, (uint64_t)s->kb[i] << 10))
            fits = i;
    }
    if (!shmem && !any) {
        int never = 1;
        for (int i = 0; i < s->n; i++)
            never &= !strcmp(s->eff[i], "never");
        if (never || !s->pmd) {
            m->why = W_SYSTEM_NEVER;
            snprintf(m->text, sizeof(m->text), "THP is off for every size system-wide "
                     "(enabled=%s%s)", s->pmd ? s->thp : "unavailable",
                     s->n > 1 ? ", every mTHP size never or inherit" : "");
        } else {
            sizes_text(s, size_allowed, 1, sizes, sizeof(sizes));
            m->why = W_NOT_ADVISED;
            snprintf(m->text, sizeof(m->text), "THP mode madvise (sizes %s) and this mapping "
                     "has no MADV_HUGEPAGE (VmFlags hg)", sizes);
        }
        return;
    }
    if (fits < 0) {
        char sm[32];
        human_size((uint64_t)s->kb[smallest] << 10, sm, sizeof(sm));
        m->why = W_TOO_SMALL;
        snprintf(m->text, sizeof(m->text), "smaller than, or not aligned to, the smallest "
                 "allowed huge page (%s): no whole aligned %s page inside it", sm, sm);
        return;
    }
    if (m->rss_kb == 0) {
        m->why = W_NOT_RESIDENT;
        snprintf(m->text, sizeof(m->text), "nothing touched yet: pages are allocated at the "
                 "first touch");
        return;
    }
    if (m->eligible == 0 && s->kb[fits] << 10 >= pmd) {
        m->why = W_NOT_ELIGIBLE;
        snprintf(m->text, sizeof(m->text), "the kernel says it is not eligible for THP "
                 "(THPeligible: 0)");
        return;
    }
    uint64_t cap_kb = aligned_bytes(m, (uint64_t)s->kb[fits] << 10) >> 10;
    if (huge_kb(m) && huge_kb(m) >= cap_kb) {
        human_size((uint64_t)s->kb[fits] << 10, hs, sizeof(hs));
        m->why = W_EDGES;
        snprintf(m->text, sizeof(m->text), "the rest lies outside whole aligned %s pages "
                 "(the mapping's unaligned start or end)", hs);
        return;
    }
    m->why = W_FALLBACK;
    snprintf(m->text, sizeof(m->text), "allowed and resident, but on base pages: faults fell "
             "back (defrag=%s; no free huge block), or it was touched before MADV_HUGEPAGE; "
             "khugepaged may collapse it later (max_ptes_none=%s)%s", s->defrag,
             s->kh_ptes_none[0] ? s->kh_ptes_none : "?",
             m->mthp_kb == UNKNOWN && s->kb[fits] << 10 < pmd
                 ? "; mTHP use is not measured without root" : "");
}

/* --------------------------------------------------------------- output */

struct rollup {
    uint64_t size, rss, mappings;
};

static void json_sys(const struct sys *s, const struct cgroup *cg)
{
    printf(", \"system\": {\"thp_enabled\": ");
    s->pmd ? json_string(s->thp) : (void)printf("null");
    printf(", \"thp_defrag\": ");
    s->pmd ? json_string(s->defrag) : (void)printf("null");
    printf(", \"shmem_enabled\": ");
    s->shmem[0] && strcmp(s->shmem, "unavailable") ? json_string(s->shmem) : (void)printf("null");
    printf(", \"pmd_size\": ");
    s->pmd ? printf("%llu", (unsigned long long)s->pmd) : printf("null");
    printf(", \"sizes\": [");
    for (int i = 0; i < s->n; i++) {
        printf("%s{\"page_size\": %llu, \"enabled\": ", i ? ", " : "",
               (unsigned long long)s->kb[i] << 10);
        s->has_enabled[i] ? json_string(s->mode[i]) : (void)printf("null");
        printf(", \"effective\": ");
        json_string(s->eff[i]);
        printf("}");
    }
    printf("], \"khugepaged\": {\"defrag\": %s, \"max_ptes_none\": %s, \"pages_to_scan\": %s, "
           "\"scan_sleep_millisecs\": %s}",
           s->kh_defrag[0] ? s->kh_defrag : "null", s->kh_ptes_none[0] ? s->kh_ptes_none : "null",
           s->kh_to_scan[0] ? s->kh_to_scan : "null", s->kh_sleep[0] ? s->kh_sleep : "null");
    printf(", \"pools\": [");
    for (int i = 0; i < s->n_pools; i++) {
        printf("%s{\"page_size\": %llu, \"total\": ", i ? ", " : "",
               (unsigned long long)s->pool_kb[i] << 10);
        s->have_pool[i] ? printf("%llu, \"free\": %llu}", (unsigned long long)s->pool_total[i],
                                 (unsigned long long)s->pool_free[i])
                        : printf("null, \"free\": null}");
    }
    printf("]}, \"cgroup\": {\"path\": ");
    cg->path[0] ? json_string(cg->path) : (void)printf("null");
    printf(", \"version\": ");
    cg->path[0] ? printf("%d", cg->v2 ? 2 : 1) : printf("null");
    printf(", \"hugetlb_limits\": [");
    for (int i = 0; i < cg->n; i++) {
        printf("%s{\"size\": ", i ? ", " : "");
        json_string(cg->size_name[i]);
        printf(", \"limit\": ");
        cg->limit[i] == UNKNOWN ? printf("null") : printf("%llu", (unsigned long long)cg->limit[i]);
        printf("}");
    }
    printf("]}");
}

static void json_mapping(const struct mapping *m, const struct sys *s, int first)
{
    printf("%s\n  {\"start\": %llu, \"end\": %llu, \"perms\": ", first ? "" : ",",
           (unsigned long long)m->start, (unsigned long long)m->end);
    json_string(m->perms);
    printf(", \"path\": ");
    json_string(m->path);
    printf(", \"kind\": \"%s\", \"size\": %llu, \"rss\": %llu, \"thp\": %llu, \"mthp\": ",
           kind(m), (unsigned long long)(m->end - m->start),
           (unsigned long long)((m->ht ? m->hugetlb_kb : m->rss_kb) << 10),
           (unsigned long long)((m->thp_kb + m->shmem_pmd_kb + m->file_pmd_kb) << 10));
    m->mthp_kb == UNKNOWN ? printf("null") : printf("%llu", (unsigned long long)m->mthp_kb << 10);
    /* Every mTHP size below the PMD size, 0 bytes included; null unmeasured. */
    printf(", \"mthp_sizes\": ");
    if (m->mthp_kb == UNKNOWN)
        printf("null");
    int f = 1;
    for (int i = 0; i < s->n && m->mthp_kb != UNKNOWN; i++)
        if (((uint64_t)s->kb[i] << 10) < s->pmd && s->has_enabled[i]) {
            printf("%s{\"page_size\": %llu, \"bytes\": %llu}", f ? "[" : ", ",
                   (unsigned long long)s->kb[i] << 10, (unsigned long long)m->mthp_by_size[i] << 10);
            f = 0;
        }
    printf("%s, \"hugetlb\": %llu, \"kernel_page_size\": %llu, \"advice\": ",
           m->mthp_kb == UNKNOWN ? "" : f ? "[]" : "]", (unsigned long long)m->hugetlb_kb << 10, (unsigned long long)m->kernel_page_kb << 10);
    printf(m->nh ? "\"nohugepage\"" : m->hg ? "\"hugepage\"" : "null");
    printf(", \"thp_eligible\": %s, \"why\": \"%s\", \"text\": ",
           m->eligible < 0 ? "null" : m->eligible ? "true" : "false", why_name[m->why]);
    json_string(m->text);
    printf("}");
}

static void verdict(const struct proc *p, const struct rollup r[], uint64_t rss, uint64_t huge,
                    char *buf, size_t cap)
{
    /* The reason for most base-page bytes, the program's own memory (not
     * file or kernel mappings) first: that is what THP settings govern. */
    int top = -1;
    for (int pass = 0; pass < 2 && top < 0; pass++)
        for (int w = 0; w < W_COUNT; w++)
            if (w != W_HUGE && w != W_HUGETLB && r[w].rss &&
                (pass || (w != W_FILE && w != W_SPECIAL)) && (top < 0 || r[w].rss > r[top].rss))
                top = w;
    char a[32], b[32];
    approx(huge, a, sizeof(a));
    approx(rss, b, sizeof(b));
    if (p->n == 0) {
        snprintf(buf, cap, "no user memory (a kernel thread, or a process that has exited)");
        return;
    }
    const char *text = NULL;
    for (int i = 0; top >= 0 && i < p->n; i++)
        if ((int)p->m[i].why == top)
            text = p->m[i].text;
    if (top < 0)
        snprintf(buf, cap, "%s of %s resident is on huge pages%s", a, b,
                 huge ? "" : " (nothing is resident on base pages either)");
    else
        snprintf(buf, cap, "%s of %s resident is on huge pages; most of the rest because: %s",
                 a, b, text ? text : why_name[top]);
}

static int why_usage(void)
{
    fprintf(stderr, "usage: hpctl why PID [--mappings] [--json]\n");
    return HPCTL_USAGE;
}

/* The document of a failure: same fields, nulls. */
static int fail(int json, int pid, int rc, const char *msg)
{
    fprintf(stderr, "hpctl why: %s\n", msg);
    if (json) {
        printf("{\"schema\": %d, \"command\": \"why\", \"pid\": ", HPCTL_SCHEMA);
        pid > 0 ? printf("%d", pid) : printf("null");
        printf(", \"status\": %d, \"error\": ", rc);
        json_string(msg);
        printf(", \"name\": null, \"thp_enabled\": null, \"system\": null, \"cgroup\": null, "
               "\"totals\": null, \"reasons\": [], \"verdict\": null, \"mappings\": null}\n");
    }
    return rc;
}

int hpctl_why(int argc, char **argv)
{
    int json = 0, show = 0, pid = 0;
    const char *pid_arg = NULL;
    for (int i = 0; i < argc; i++)
        json |= !strcmp(argv[i], "--json");  /* errors print the document too */
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            continue;
        else if (!strcmp(argv[i], "--mappings"))
            show = 1;
        else if (argv[i][0] == '-' && (argv[i][1] < '0' || argv[i][1] > '9')) {
            char msg[300];
            snprintf(msg, sizeof(msg), "unknown option \"%.200s\"", argv[i]);
            fail(json, 0, HPCTL_USAGE, msg);
            return why_usage();
        } else if (!pid_arg)
            pid_arg = argv[i];
        else {
            char msg[300];
            snprintf(msg, sizeof(msg), "one PID only (\"%.200s\" is extra)", argv[i]);
            fail(json, 0, HPCTL_USAGE, msg);
            return why_usage();
        }
    }
    uint64_t v;
    if (!pid_arg) {
        fail(json, 0, HPCTL_USAGE, "a PID is required");
        return why_usage();
    }
    if (parse_u64(pid_arg, &v) != 0 || v == 0 || v > 4194304) {
        char msg[300];
        snprintf(msg, sizeof(msg), "\"%.200s\" is not a process ID (a number from 1 to 4194304)",
                 pid_arg);
        fail(json, 0, HPCTL_USAGE, msg);
        return why_usage();
    }
    pid = (int)v;
    struct proc p = {.pid = pid};
    struct sys s;
    char dir[64], msg[400];
    snprintf(dir, sizeof(dir), "/proc/%d", pid);
    if (!path_exists(dir)) {
        snprintf(msg, sizeof(msg), "no process %d", pid);
        return fail(json, pid, HPCTL_ENOENT, msg);
    }
    read_status(&p);
    int err = read_smaps(&p);
    if (err == -EACCES || err == -EPERM) {
        snprintf(msg, sizeof(msg), "cannot read /proc/%d/smaps: %s; reading another user's "
                 "memory map needs root or the same user (ptrace access mode read)",
                 pid, strerror(-err));
        free(p.m);
        return fail(json, pid, HPCTL_EPERM, msg);
    }
    if (err == -ENOENT || err == -ESRCH) {
        snprintf(msg, sizeof(msg), "no process %d (it has exited)", pid);
        free(p.m);
        return fail(json, pid, HPCTL_ENOENT, msg);
    }
    if (err) {
        snprintf(msg, sizeof(msg), "cannot read /proc/%d/smaps: %s", pid, strerror(-err));
        free(p.m);
        return fail(json, pid, HPCTL_FAIL, msg);
    }
    read_sys(&s);
    read_cgroup(pid, &p.cg);
    measure_large(&p, &s);
    struct rollup r[W_COUNT] = {{0}};
    uint64_t size = 0, rss = 0, thp = 0, mthp = 0, hugetlb = 0, pmd_other = 0;
    for (int i = 0; i < p.n; i++) {
        struct mapping *m = &p.m[i];
        classify(m, &p, &s);
        r[m->why].mappings++;
        r[m->why].size += m->end - m->start;
        r[m->why].rss += m->why == W_HUGETLB ? 0 : rest_kb(m) << 10;
        size += m->end - m->start;
        rss += (m->ht ? m->hugetlb_kb : m->rss_kb) << 10;
        thp += m->thp_kb << 10;
        pmd_other += (m->shmem_pmd_kb + m->file_pmd_kb) << 10;
        mthp += m->mthp_kb == UNKNOWN ? 0 : m->mthp_kb << 10;
        hugetlb += m->hugetlb_kb << 10;
    }
    uint64_t huge = thp + pmd_other + mthp + hugetlb;
    char vd[600];
    verdict(&p, r, rss, huge, vd, sizeof(vd));
    if (json) {
        printf("{\"schema\": %d, \"command\": \"why\", \"pid\": %d, \"status\": 0, "
               "\"error\": null, \"name\": ", HPCTL_SCHEMA, pid);
        json_string(p.name);
        printf(", \"thp_enabled\": %s", p.thp_enabled < 0 ? "null"
                                       : p.thp_enabled ? "true" : "false");
        json_sys(&s, &p.cg);
        printf(", \"totals\": {\"size\": %llu, \"rss\": %llu, \"huge\": %llu, \"thp\": %llu, "
               "\"shmem_file_pmd\": %llu, \"mthp\": ",
               (unsigned long long)size, (unsigned long long)rss, (unsigned long long)huge,
               (unsigned long long)thp, (unsigned long long)pmd_other);
        p.large_measured ? printf("%llu", (unsigned long long)mthp) : printf("null");
        printf(", \"mthp_unmeasured\": ");
        p.large_why ? json_string(p.large_why) : (void)printf("null");
        printf(", \"hugetlb\": %llu}, \"reasons\": [", (unsigned long long)hugetlb);
        int first = 1;
        for (int pass = 0; pass < W_COUNT; pass++) {
            /* by resident bytes, largest first; ties in reason order */
            int best = -1;
            for (int w = 0; w < W_COUNT; w++) {
                if (!r[w].mappings)
                    continue;
                if (best < 0 || r[w].rss > r[best].rss)
                    best = w;
            }
            if (best < 0)
                break;
            const char *text = "";
            for (int i = 0; i < p.n; i++)
                if ((int)p.m[i].why == best) {
                    text = p.m[i].text;
                    break;
                }
            printf("%s{\"why\": \"%s\", \"text\": ", first ? "" : ", ", why_name[best]);
            json_string(text);
            printf(", \"mappings\": %llu, \"size\": %llu, \"rss\": %llu}",
                   (unsigned long long)r[best].mappings, (unsigned long long)r[best].size,
                   (unsigned long long)r[best].rss);
            r[best].mappings = 0;
            first = 0;
        }
        printf("], \"verdict\": ");
        json_string(vd);
        printf(", \"mappings\": ");
        if (show) {
            printf("[");
            for (int i = 0; i < p.n; i++)
                json_mapping(&p.m[i], &s, i == 0);
            printf("]");
        } else {
            printf("null");
        }
        printf("}\n");
        free(p.m);
        return HPCTL_OK;
    }
    /* text */
    char a[32], b[32], c[32], d[32], e[32];
    printf("pid %d (%s)\n", pid, p.name[0] ? p.name : "?");
    if (p.thp_enabled == 0)
        printf("  THP for this process: DISABLED (prctl PR_SET_THP_DISABLE; THP_enabled: 0)\n");
    else
        printf("  THP for this process: %s\n", p.thp_enabled ? "allowed (THP_enabled: 1)"
                                                             : "allowed (kernel does not say)");
    if (s.pmd) {
        printf("  system: THP enabled=%s defrag=%s shmem_enabled=%s; sizes:", s.thp, s.defrag,
               s.shmem);
        for (int i = 0; i < s.n; i++) {
            human_size((uint64_t)s.kb[i] << 10, a, sizeof(a));
            if (s.has_enabled[i] && strcmp(s.eff[i], "never"))
                printf(" %s=%s", a, s.eff[i]);
        }
        int off = 0;
        for (int i = 0; i < s.n; i++)
            off += !strcmp(s.eff[i], "never");
        printf(off == s.n ? " all never\n" : off ? " (others never)\n" : "\n");
        printf("  khugepaged: defrag=%s max_ptes_none=%s pages_to_scan=%s "
               "scan_sleep_millisecs=%s\n", s.kh_defrag[0] ? s.kh_defrag : "?",
               s.kh_ptes_none[0] ? s.kh_ptes_none : "?", s.kh_to_scan[0] ? s.kh_to_scan : "?",
               s.kh_sleep[0] ? s.kh_sleep : "?");
    } else {
        printf("  system: this kernel has no THP (%s is missing)\n", THP_DIR);
    }
    printf("  hugetlb pools:");
    for (int i = 0; i < s.n_pools; i++) {
        human_size((uint64_t)s.pool_kb[i] << 10, a, sizeof(a));
        if (s.have_pool[i])
            printf(" %s %llu free of %llu;", a, (unsigned long long)s.pool_free[i],
                   (unsigned long long)s.pool_total[i]);
    }
    printf("%s cgroup %s", s.n_pools ? "" : " none;", p.cg.path[0] ? p.cg.path : "?");
    int limited = 0;
    for (int i = 0; i < p.cg.n; i++)
        if (p.cg.limit[i] != UNKNOWN) {
            approx(p.cg.limit[i], a, sizeof(a));
            printf("%s hugetlb.%s limit %s", limited ? "," : ":", p.cg.size_name[i], a);
            limited = 1;
        }
    printf("%s\n", limited ? "" : ": no hugetlb limit");
    approx(rss, a, sizeof(a));
    approx(size, b, sizeof(b));
    approx(thp + pmd_other, c, sizeof(c));
    approx(mthp, d, sizeof(d));
    approx(hugetlb, e, sizeof(e));
    printf("\nmemory: %s resident of %s mapped; on huge pages: THP %s, mTHP %s, hugetlb %s\n", a,
           b, c, p.large_measured ? d : "?", e);
    if (!p.large_measured)
        printf("  (mTHP not measured: %s)\n", p.large_why);
    printf("\nby reason (base-page resident / mapped, mappings):\n");
    for (int pass = 0; pass < W_COUNT; pass++) {
        int best = -1;
        for (int w = 0; w < W_COUNT; w++)
            if (r[w].mappings && (best < 0 || r[w].rss > r[best].rss))
                best = w;
        if (best < 0)
            break;
        const char *text = "";
        for (int i = 0; i < p.n; i++)
            if ((int)p.m[i].why == best) {
                text = p.m[i].text;
                break;
            }
        approx(r[best].rss, a, sizeof(a));
        approx(r[best].size, b, sizeof(b));
        printf("  %7s / %-7s (%3llu)  %-22s %s\n", a, b, (unsigned long long)r[best].mappings,
               why_name[best], text);
        r[best].mappings = 0;
    }
    if (show) {
        printf("\n%-12s %-12s %7s %7s %7s %-7s %-20s %s\n", "START", "END", "SIZE", "RSS", "HUGE",
               "KIND", "WHY", "PATH");
        for (int i = 0; i < p.n; i++) {
            const struct mapping *m = &p.m[i];
            approx(m->end - m->start, a, sizeof(a));
            approx((m->ht ? m->hugetlb_kb : m->rss_kb) << 10, b, sizeof(b));
            approx((m->ht ? m->hugetlb_kb : huge_kb(m)) << 10, c, sizeof(c));
            printf("%012llx %012llx %7s %7s %7s %-7s %-20s %s\n", (unsigned long long)m->start,
                   (unsigned long long)m->end, a, b, c, kind(m), why_name[m->why], m->path);
            if (m->why != W_HUGE)
                printf("%36s %s\n", "", m->text);
        }
    }
    printf("\nverdict: %s\n", vd);
    free(p.m);
    return HPCTL_OK;
}
