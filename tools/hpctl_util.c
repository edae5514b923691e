/* Helpers shared by hpctl's subcommands: sysfs reads and writes under the
 * test root, JSON strings, sizes. */
#include "hpctl.h"

#include <hp.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *hpctl_path(const char *path, char *buf, size_t cap)
{
    const char *root = secure_getenv("HP_SYSFS_ROOT");
    if (!root || !root[0] || (strncmp(path, "/sys/", 5) && strncmp(path, "/proc/", 6)))
        return path;
    int n = snprintf(buf, cap, "%s%s", root, path);
    return n > 0 && (size_t)n < cap ? buf : path;
}

void read_line(const char *path, char *buf, size_t cap)
{
    char full[512];
    FILE *f = fopen(hpctl_path(path, full, sizeof(full)), "re");
    buf[0] = '\0';
    if (!f)
        return;
    if (!fgets(buf, (int)cap, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

void selected(const char *path, char *buf, size_t cap)
{
    char raw[256];
    read_line(path, raw, sizeof(raw));
    const char *open_br = strchr(raw, '['), *close_br = open_br ? strchr(open_br, ']') : NULL;
    if (open_br && close_br)
        snprintf(buf, cap, "%.*s", (int)(close_br - open_br - 1), open_br + 1);
    else
        snprintf(buf, cap, "%.*s", (int)(cap - 1), raw[0] ? raw : "unavailable");
}

int read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    read_line(path, buf, sizeof(buf));
    return parse_u64(buf, out);
}

int path_exists(const char *path)
{
    char full[512];
    return access(hpctl_path(path, full, sizeof(full)), F_OK) == 0;
}

int write_knob(const char *path, const char *value)
{
    char full[512];
    int fd = open(hpctl_path(path, full, sizeof(full)), O_WRONLY | O_CLOEXEC | O_TRUNC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(value);
    ssize_t n = write(fd, value, len);
    int err = n < 0 ? errno : 0;
    if (close(fd) != 0 && !err)
        err = errno;
    if (err)
        return -err;
    return n == (ssize_t)len ? 0 : -EIO;
}

int knob_error(const char *path, const char *value, int err)
{
    if (err == -EACCES || err == -EPERM || err == -EROFS) {
        fprintf(stderr, "hpctl: cannot write %s: %s; changing kernel knobs needs root "
                        "(CAP_SYS_ADMIN) and a writable /sys\n", path, strerror(-err));
        return HPCTL_EPERM;
    }
    if (err == -ENOENT) {
        fprintf(stderr, "hpctl: %s does not exist on this machine\n", path);
        return HPCTL_ENOENT;
    }
    fprintf(stderr, "hpctl: the kernel rejected \"%s\" for %s: %s\n", value, path, strerror(-err));
    return HPCTL_FAIL;
}

void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

void human_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "K", "M", "G", "T"};
    unsigned u = 0;
    while (bytes >= 1024 && bytes % 1024 == 0 && u < 4)
        bytes /= 1024, u++;
    snprintf(buf, cap, "%llu%s", (unsigned long long)bytes, units[u]);
}

int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')  /* strtoull would skip blanks and take a sign */
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end += (*end == 'i') + (end[*end == 'i'] == 'B');
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int size_dirs(const char *dir, unsigned long kb[], int max)
{
    char full[512];
    DIR *d = opendir(hpctl_path(dir, full, sizeof(full)));
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        unsigned long v;
        if (sscanf(e->d_name, "hugepages-%lukB", &v) == 1)
            kb[n++] = v;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && kb[j] < kb[j - 1]; j--) {
            unsigned long t = kb[j];
            kb[j] = kb[j - 1];
            kb[j - 1] = t;
        }
    return n;
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int hpctl_bad(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "hpctl %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return HPCTL_USAGE;
}

int hpctl_size_arg(const char *cmd, const char *what, const char *arg, uint64_t *out)
{
    if (parse_size(arg, out) == 0)
        return HPCTL_OK;
    return hpctl_bad(cmd, "%s \"%s\" is not a size: a whole number of bytes with an optional "
                     "K, M or G suffix (powers of 1024), such as 64M", what, arg);
}

int hpctl_unexpected(const char *cmd, char **argv, int i, int argc, const char *const valued[])
{
    for (int k = 0; valued && valued[k]; k++)
        if (!strcmp(argv[i], valued[k]) && i + 1 >= argc)
            return hpctl_bad(cmd, "%s needs a value", argv[i]);
    if (argv[i][0] == '-' && (argv[i][1] < '0' || argv[i][1] > '9'))
        return hpctl_bad(cmd, "unknown option \"%s\"", argv[i]);
    return hpctl_bad(cmd, "unexpected argument \"%s\"", argv[i]);
}

int hpctl_page_size_arg(const char *cmd, const char *arg, uint64_t *flag)
{
    uint64_t ps;
    if (hpctl_size_arg(cmd, "--page-size", arg, &ps) != HPCTL_OK)
        return HPCTL_USAGE;
    *flag = hp_page_size_flag(ps);
    if (!*flag)
        return hpctl_bad(cmd, "--page-size \"%s\" is not a page size libhp has a flag for "
                         "(a power of two from 4K)", arg);
    return HPCTL_OK;
}

int hpctl_list_nodes(int nodes[], int max, const char *sub)
{
    char full[512];
    DIR *d = opendir(hpctl_path(NODE_DIR, full, sizeof(full)));
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        int v;
        char tail, path[256];
        if (sscanf(e->d_name, "node%d%c", &v, &tail) != 1 || v < 0 || v >= 1024)
            continue;
        snprintf(path, sizeof(path), NODE_DIR "/node%d/%s", v, sub ? sub : "");
        if (!sub || path_exists(path))
            nodes[n++] = v;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && nodes[j] < nodes[j - 1]; j--) {
            int t = nodes[j];
            nodes[j] = nodes[j - 1];
            nodes[j - 1] = t;
        }
    return n;
}
