/* The backends' sources, compiled into the sysfs fuzz target with their
 * entry points renamed (one translation unit each, fuzz_backend_*.c). */
#ifndef HP_FUZZ_BACKENDS_H
#define HP_FUZZ_BACKENDS_H

#include <hp/backend.h>

const struct hp_backend_ops *fz_hugetlbfs_entry(const struct hp_host *h);
const struct hp_backend_ops *fz_thp_entry(const struct hp_host *h);
const struct hp_backend_ops *fz_orders_entry(const struct hp_host *h);
/* Forget what hugetlbfs looked up once (page sizes, memfd, mounts). */
void fz_hugetlbfs_reset(void);

#endif
