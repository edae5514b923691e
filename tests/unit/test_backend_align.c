/*
 * The built-in backends honour a map request's alignment and guard
 * (hp/backend.h): for every page size each one offers, a block asked for
 * with an alignment above its page size and a guard starts at an aligned
 * address, is writable, has the guard directly below it as PROT_NONE
 * (/proc/self/maps), and unmap releases all of it. The ops are called the
 * way the core calls them (linked with the internal core for its table).
 */
#include <hp.h>

#include "loader.h"
#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void builtins_honour_align_and_guard(void **state)
{
    (void)state;
    struct hp_core *c = hp_core();
    const uint64_t base = c->host.base_page_size, guard = 16 * base;
    unsigned tried = 0;
    for (unsigned i = 0; i < c->n; i++) {
        struct hp_backend *b = &c->backends[i];
        if (!b->ops || b->kind == HP_KIND_OTHER || !b->caps.available)
            continue;
        for (uint32_t k = 0; k < b->caps.n_page_sizes; k++) {
            uint64_t ps = b->caps.page_sizes[k];
            if (ps > (UINT64_C(2) << 20))
                continue;  /* no 1 GiB pages for a unit test */
            uint64_t align = ps * 4 > (UINT64_C(4) << 20) ? ps * 4 : UINT64_C(4) << 20;
            long maps = maps_count();
            struct hp_map_request req = {sizeof(req), 0, 0, ps, ps, align, guard};
            struct hp_mapping m = {.size = sizeof(m)};
            int rc = b->ops->map(b->self, &req, &m);
            print_message("# %s %llu KiB: %s\n", b->name, (unsigned long long)(ps >> 10),
                          hp_error_name(rc));
            if (rc == HP_ENOMEM && b->kind == HP_KIND_HUGETLB)
                continue;  /* an empty pool says nothing about alignment */
            assert_int_equal(rc, HP_OK);
            tried++;
            assert_int_equal((uintptr_t)m.addr % align, 0);
            assert_true(m.len >= ps && m.page_size == ps);
            assert_true((char *)m.map_addr + guard <= (char *)m.addr);
            assert_true((char *)m.addr + m.len <= (char *)m.map_addr + m.map_len);
            assert_false(m.flags & HP_MAP_CARVABLE);  /* addr != map_addr */
            memset(m.addr, 0x5c, m.len);
            char perms[5];
            assert_true(perms_at((char *)m.addr - 1, perms));
            assert_string_equal(perms, "---p");
            assert_true(perms_at((char *)m.addr - guard, perms));
            assert_string_equal(perms, "---p");
            assert_true(perms_at(m.addr, perms));
            assert_memory_equal(perms, "rw", 2);
            assert_int_equal(b->ops->unmap(b->self, &m), HP_OK);
            assert_int_equal(maps_count(), maps);
        }
    }
    print_message("# %u backend page sizes mapped with align and guard\n", tried);
    assert_true(tried > 0);  /* the built-in base-page backend at least */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(builtins_honour_align_and_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
