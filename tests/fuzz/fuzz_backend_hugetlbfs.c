/* backends/hugetlbfs/hugetlbfs.c with a renamed entry and a reset. */
#include "fuzz_backends.h"

#define hp_backend_entry_v2 fz_hugetlbfs_entry
#include "../../backends/hugetlbfs/hugetlbfs.c"

void fz_hugetlbfs_reset(void)
{
    size_shifts = 0;
    fixed_probed = 0;
    memfd_ok = 0;
    mounted = 0;
}
