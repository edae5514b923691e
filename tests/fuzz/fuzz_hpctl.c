/*
 * hpctl's SIZE parser ("64M", "2MiB", "1G", "4096") and page-count parser:
 * tools/hpctl_util.c compiled in. Any string: no crash, an accepted size is
 * a whole multiple of its unit, an accepted count is all digits, and
 * human_size prints any value into its buffer. (The fuzzer's first find: strtoull's leading blanks and signs get
 * through, so " -1" is accepted as 18446744073709551615; reported, see
 * docs/robustness.md. hp_alloc then refuses the size with HP_ESIZE.)
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/hpctl_util.c"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    uint64_t v = 0;
    if (parse_size(s, &v) == 0) {
        const char *unit = s + strspn(s, " \t\n\v\f\r+-");
        unit += strspn(unit, "0123456789");
        uint64_t mult = *unit == 'k' || *unit == 'K' ? 1u << 10
                        : *unit == 'm' || *unit == 'M' ? 1u << 20
                        : *unit == 'g' || *unit == 'G' ? 1u << 30 : 1;
        FUZZ_CHECK(v % mult == 0);
    }
    uint64_t count;
    if (parse_u64(s, &count) == 0)
        FUZZ_CHECK(s[0] && strspn(s, "0123456789") == strlen(s));
    char human[32];
    human_size(v, human, sizeof(human));
    FUZZ_CHECK(memchr(human, '\0', sizeof(human)));
    free(s);
    return 0;
}
