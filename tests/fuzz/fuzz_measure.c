/*
 * What libhp reads to measure a block (lib/measure.c): /proc/self/smaps,
 * and /proc/self/pagemap with /proc/kpageflags, all served from a test
 * root (HP_SYSFS_ROOT, set before the first libhp call) that this target
 * rewrites for every input.
 *
 * Input: byte 0 picks the path (even: smaps; odd: pagemap + kpageflags),
 * byte 1 the number of pages measured (1..64). For smaps the rest is the
 * file. For pagemap the next 8 * pages bytes are the entries of the pages
 * [4096, 4096 + pages * 4096) and the rest is the start of kpageflags.
 * Whatever the files say, the result is -errno or at most the bytes
 * measured.
 */
#include "fuzz.h"
#include "measure.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static void put(const char *rel, const void *data, size_t len, off_t off)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    if (len && pwrite(fd, data, len, off) != (ssize_t)len)
        abort();
    close(fd);
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(root, sizeof(root), "/tmp/hp-fuzz-measure-XXXXXX");
    if (!mkdtemp(root))
        abort();
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/proc", root);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/proc/self", root);
    mkdir(dir, 0700);
    setenv("HP_SYSFS_ROOT", root, 1);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint64_t pages = 1 + data[1] % 64, len = pages * 4096;
    void *addr = (void *)(uintptr_t)4096;
    if (!(data[0] & 1)) {
        put("proc/self/smaps", data + 2, size - 2, 0);
        int64_t got = hp_measure_smaps_huge_bytes(addr, len);
        FUZZ_CHECK(got <= (int64_t)len);
        /* The whole user address space, so every mapping line counts. */
        got = hp_measure_smaps_huge_bytes((void *)(uintptr_t)0, UINT64_C(1) << 47);
        FUZZ_CHECK(got <= (int64_t)(UINT64_C(1) << 47));
        return 0;
    }
    size_t map_bytes = size - 2 < pages * 8 ? size - 2 : pages * 8;
    put("proc/self/smaps", "", 0, 0);  /* what hidden PFNs fall back to */
    /* Entries at the offsets of pages 1..pages (vpn * 8). */
    put("proc/self/pagemap", data + 2, map_bytes, 8);
    put("proc/kpageflags", data + 2 + map_bytes, size - 2 - map_bytes, 0);
    int64_t got = hp_measure_folio_huge_bytes(addr, len);
    FUZZ_CHECK(got <= (int64_t)len);
    got = hp_measure_huge_bytes(addr, len);
    FUZZ_CHECK(got <= (int64_t)len);
    return 0;
}
