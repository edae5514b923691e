/*
 * Helper of test_loader: prints 1 if a backend named "fixture-good" was
 * loaded (i.e. HP_BACKEND_PATH was honoured), 0 if not. Linked with the
 * static core so that it needs no libhp.so: the loader ignores
 * LD_LIBRARY_PATH in the setuid run, and so would this program.
 */
#include <hp.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    int found = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && !strcmp(bi.name, "fixture-good"))
            found = 1;
    }
    printf("%d\n", found);
    return 0;
}
