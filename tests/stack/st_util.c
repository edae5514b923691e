#include "st_util.h"
#include "support.h"

#include <hp.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long field_kb(const char *line, const char *name)
{
    size_t n = strlen(name);
    return strncmp(line, name, n) ? -1 : strtol(line + n, NULL, 10);
}

int st_vma_at(uintptr_t addr, struct st_vma *out)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    char line[512];
    int in = 0, found = 0;
    while (fgets(line, sizeof(line), f)) {
        uintptr_t s, e;
        char perms[5];
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &s, &e, perms) == 3 &&
            strchr(line, '-') < strchr(line, ' ')) {
            if (found)
                break;
            in = addr >= s && addr < e;
            if (in) {
                memset(out, 0, sizeof(*out));
                out->start = s;
                out->end = e;
                memcpy(out->perms, perms, 5);
                found = 1;
            }
            continue;
        }
        if (!in)
            continue;
        long v;
        if ((v = field_kb(line, "Rss:")) >= 0)
            out->rss_kb = v;
        else if ((v = field_kb(line, "AnonHugePages:")) >= 0)
            out->anon_huge_kb = v;
        else if ((v = field_kb(line, "KernelPageSize:")) >= 0)
            out->kernel_page_kb = v;
        else if ((v = field_kb(line, "Private_Hugetlb:")) >= 0 ||
                 (v = field_kb(line, "Shared_Hugetlb:")) >= 0)
            out->hugetlb_kb += v;
        else if (!strncmp(line, "VmFlags:", 8)) {
            out->nohuge = strstr(line, " nh") != NULL;
            out->huge = strstr(line, " hg") != NULL;
        }
    }
    fclose(f);
    return found ? 0 : -1;
}

int st_run_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(fn(arg));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

long st_rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long size, rss = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2)
            rss = -1;
        fclose(f);
    }
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int st_huge_possible(uint64_t flags)
{
    struct hp_stack *s = hp_stack_create(1, flags | HP_STACK_NOCACHE);
    if (!s) {
        printf("# huge stacks unavailable here: %s\n", hp_last_error_detail());
        return 0;
    }
    hp_stack_destroy(s);
    return 1;
}

int st_maps_back_to(long before)
{
    long now = maps_count();
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    if (now != before)
        printf("# maps lines %ld -> %ld (the sanitizer maps shadow memory; not checked here, the plain build checks it)\n", before, now);
    return 1;
#else
    if (now != before)
        printf("# maps lines %ld -> %ld: a mapping leaked\n", before, now);
    return now == before;
#endif
}
