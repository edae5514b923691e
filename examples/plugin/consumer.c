/* The smallest libhp program: what README's quick start shows. */
#include <hp.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    size_t size = 64u << 20;
    char *p = hp_alloc(size, 0);
    if (!p) {
        fprintf(stderr, "hp_alloc: %s: %s\n", hp_strerror(hp_last_error()), hp_last_error_detail());
        return 1;
    }
    memset(p, 1, size);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (hp_info(p, &info) != HP_OK)
        return 1;
    printf("backend %s, page size %llu, %llu of %llu bytes on huge pages, NUMA node %d\n",
           info.backend, (unsigned long long)info.page_size, (unsigned long long)info.huge_bytes,
           (unsigned long long)info.usable_size, (int)info.numa_node);  /* -1: not known */
    return hp_free(p) == HP_OK ? 0 : 1;
}
