/*
 * Replays a committed corpus through a fuzz target, for CI with any
 * compiler: every regular file of the directory given (sorted), plus the
 * empty input. A crash, a sanitizer report or a broken invariant (abort)
 * fails the test. Prints TAP: one line for the whole corpus.
 */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_file(const char *path, size_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                break;
            buf = bigger;
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    *bytes += len;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    printf("1..1\n");
    fflush(stdout);
    DIR *d = opendir(argv[1]);
    if (!d) {
        printf("not ok 1 - cannot open corpus %s\n", argv[1]);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **bigger = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
            if (!bigger)
                return 1;
            names = bigger;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name);
    size_t bytes = 0, done = 0;
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && replay_file(path, &bytes) == 0)
            done++;
        free(names[i]);
    }
    free(names);
    printf("%s 1 - %zu corpus inputs (%zu bytes) replayed\n", done ? "ok" : "not ok", done, bytes);
    return done ? 0 : 1;
}
