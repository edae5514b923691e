/* backends/anon-orders/anon_orders.c with a renamed entry. */
#include "fuzz_backends.h"

#define hp_backend_entry_v2 fz_orders_entry
#include "../../backends/anon-orders/anon_orders.c"
