/*
 * HP_* environment values (lib/options.c): the input is split at NUL bytes
 * into one value per variable, in the order the option table asks for
 * them (a missing piece leaves the variable unset). Whatever the values,
 * parsing ends with either a consistent result or HP_EENV and a detail that
 * names the variable. The comma-separated name lists are also fed to
 * hp_parse_name_list, as hp_alloc_opts.exclude would be.
 */
#include "fuzz.h"
#include "hp/errors.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *pieces[16];
static unsigned n_pieces, next_piece;

static char *fake_getenv(const char *name)
{
    (void)name;
    return next_piece < n_pieces ? pieces[next_piece++] : NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    n_pieces = next_piece = 0;
    for (char *s = copy; n_pieces < 16;) {
        pieces[n_pieces++] = s;
        size_t len = strlen(s);
        if (s + len >= copy + size)
            break;
        s += len + 1;
    }
    /* A piece starting with byte 0x01 leaves its variable unset. */
    for (unsigned i = 0; i < n_pieces; i++)
        if (pieces[i][0] == '\x01')
            pieces[i] = NULL;

    struct hp_options o;
    hp_options_parse_into(&o, fake_getenv);
    FUZZ_CHECK(o.error == HP_OK || o.error == HP_EENV);
    FUZZ_CHECK(memchr(o.error_detail, '\0', sizeof(o.error_detail)));
    if (o.error == HP_EENV)
        FUZZ_CHECK(!strncmp(o.error_detail, "HP_", 3) && strstr(o.error_detail, "accepted"));
    FUZZ_CHECK(o.n_only <= HP_OPT_MAX_NAMES && o.n_never <= HP_OPT_MAX_NAMES);
    for (unsigned i = 0; i < o.n_only; i++)
        FUZZ_CHECK(hp_valid_backend_name(o.only[i]));
    for (unsigned i = 0; i < o.n_never; i++)
        FUZZ_CHECK(hp_valid_backend_name(o.never[i]));
    FUZZ_CHECK(o.backend_dir && o.backend_dir[0] == '/');
    /* HP_BACKEND_PATH: n_backend_path non-empty absolute entries, or unset. */
    FUZZ_CHECK(!o.backend_path == !o.n_backend_path);
    for (const char *e = o.backend_path; e; e = strchr(e, ':') ? strchr(e, ':') + 1 : NULL)
        FUZZ_CHECK(e[0] == '/');
    FUZZ_CHECK(!o.sysfs_root || o.sysfs_root[0] == '/');

    for (unsigned i = 0; i < n_pieces; i++) {
        if (!pieces[i])
            continue;
        char names[HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN], why[160];
        int n = hp_parse_name_list(pieces[i], names, HP_OPT_MAX_NAMES, why, sizeof(why));
        FUZZ_CHECK(n >= -1 && n <= HP_OPT_MAX_NAMES);
        for (int k = 0; k < n; k++)
            FUZZ_CHECK(hp_valid_backend_name(names[k]));
    }
    free(copy);
    return 0;
}
