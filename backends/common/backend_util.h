/*
 * Helpers shared by libhp's own backend plugins (linked statically into each
 * plugin; not part of the plugin contract). Everything goes through the
 * host's OS upcalls so fault injection reaches the backends too.
 */
#ifndef HP_BACKEND_UTIL_H
#define HP_BACKEND_UTIL_H

#include "hp/backend.h"

/* MADV_* values newer than some libc headers. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static inline uint64_t hpb_round_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) / align * align;
}

/* Map len bytes of private anonymous read-write memory whose start is
 * aligned to align (a power of two >= the base page). extra_flags are or-ed
 * into the mmap flags. Returns HP_OK or HP_ENOMEM (detail set). */
int hpb_map_aligned(const struct hp_host *h, uint64_t len, uint64_t align, int extra_flags,
                    void **out);

/* Fault in [addr, addr+len) for writing. Uses MADV_POPULATE_WRITE, which
 * reports failure instead of raising SIGBUS (Linux 5.14). Returns HP_OK or
 * HP_ENOMEM. Kernels without it get the pages touched one by one. */
int hpb_populate(const struct hp_host *h, void *addr, uint64_t len);

/* THP mode from a sysfs "enabled" file: "always", "madvise", "never", or
 * "inherit" (per-size files only). Writes it into mode; returns 0 or -errno. */
int hpb_read_mode(const struct hp_host *h, const char *path, char *mode, size_t cap);

/* Format into caps->reason. */
void hpb_reason(struct hp_backend_caps *caps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Set the host's error detail with printf formatting; returns code. */
int hpb_fail(const struct hp_host *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
