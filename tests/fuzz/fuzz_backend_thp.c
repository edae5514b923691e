/* backends/thp-madvise/thp_madvise.c with a renamed entry. */
#include "fuzz_backends.h"

#define hp_backend_entry_v2 fz_thp_entry
#include "../../backends/thp-madvise/thp_madvise.c"
