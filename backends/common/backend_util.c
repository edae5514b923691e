#include "backend_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int hpb_fail(const struct hp_host *h, int code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    h->set_detail(msg);
    return code;
}

void hpb_reason(struct hp_backend_caps *caps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(caps->reason, sizeof(caps->reason), fmt, ap);
    va_end(ap);
}

int hpb_map_aligned(const struct hp_host *h, uint64_t len, uint64_t align, int extra_flags,
                    void **out)
{
    uint64_t base = h->base_page_size;
    uint64_t slack = align > base ? align - base : 0;
    void *raw;
    int rc = h->os_map(NULL, len + slack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0, &raw);
    if (rc < 0)
        return hpb_fail(h, HP_ENOMEM, "mmap of %llu bytes failed: %s",
                        (unsigned long long)(len + slack), strerror(-rc));
    uintptr_t start = (uintptr_t)raw, aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
    uintptr_t head = aligned - start, tail = slack - head;
    /* Trimming cannot fail for lack of memory: it only splits our own VMA. */
    if (head)
        h->os_unmap(raw, head);
    if (tail)
        h->os_unmap((void *)(aligned + len), tail);
    *out = (void *)aligned;
    return HP_OK;
}

int hpb_populate(const struct hp_host *h, void *addr, uint64_t len)
{
    int rc = h->os_advise(addr, len, MADV_POPULATE_WRITE);
    if (rc == 0)
        return HP_OK;
    if (rc != -EINVAL)
        return hpb_fail(h, HP_ENOMEM, "MADV_POPULATE_WRITE of %llu bytes failed: %s",
                        (unsigned long long)len, strerror(-rc));
    volatile char *p = addr;
    for (uint64_t off = 0; off < len; off += h->base_page_size)
        p[off] = p[off];
    return HP_OK;
}

int hpb_read_mode(const struct hp_host *h, const char *path, char *mode, size_t cap)
{
    char buf[256];
    int64_t n = h->read_text(path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    const char *start = strchr(buf, '[');
    if (!start)
        return -EINVAL;
    start++;
    const char *stop = strchr(start, ']');
    if (!stop || stop == start || (size_t)(stop - start) >= cap)
        return -EINVAL;
    memcpy(mode, start, (size_t)(stop - start));
    mode[stop - start] = '\0';
    static const char *known[] = {"always", "madvise", "never", "inherit"};
    for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
        if (!strcmp(mode, known[i]))
            return 0;
    return -EINVAL;
}
