/*
 * alloc_probe SIZE FLAGS [BACKEND|-] [EXCLUDE|-]: hp_alloc_ex through
 * libhp.so, as a program would call it, then one JSON line with what
 * hp_info says it really used (or the error). check-explain.py compares it
 * with hpctl explain in the same environment.
 */
#include <hp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    size_t size = (size_t)strtoull(argv[1], NULL, 0);
    opts.flags = strtoull(argv[2], NULL, 0);
    if (argc > 3 && strcmp(argv[3], "-"))
        opts.backend = argv[3];
    if (argc > 4 && strcmp(argv[4], "-"))
        opts.exclude = argv[4];
    void *p = hp_alloc_ex(size, &opts);
    if (!p) {
        printf("{\"status\": \"%s\", \"backend\": null, \"page_size\": null}\n",
               hp_error_name(hp_last_error()));
        return 0;
    }
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (hp_info(p, &info) != HP_OK)
        return 1;
    printf("{\"status\": \"HP_OK\", \"backend\": \"%s\", \"page_size\": %llu}\n", info.backend,
           (unsigned long long)info.page_size);
    return hp_free(p) == HP_OK ? 0 : 1;
}
