/*
 * The registry when two records share an address (lib/registry.c find()):
 * hp_realloc keeps a block registered under its old address, marked busy,
 * until the move is published; once the old range is unmapped the kernel
 * may give the same address to a new block (mmap(2) reuses freed ranges).
 * Every lookup must then name the new block, whichever of the two comes
 * first in the hash chain (a new record is linked at the head; a rehash
 * when the table grows reverses the chain).
 *
 * The records are fabricated: the registry never touches the memory it
 * describes, so no mapping is needed.
 */
#include "registry.h"

#include "hp/errors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MiB (UINT64_C(1) << 20)

/* No block of this process lives here: the test owns the address. */
static void *const addr = (void *)(uintptr_t)UINT64_C(0x7e5700000000);

static struct hp_block moving, fresh;

static void record(struct hp_block *b, uint64_t len)
{
    memset(b, 0, sizeof(*b));
    b->m.size = sizeof(b->m);
    b->m.addr = addr;
    b->m.len = len;
    b->m.map_addr = addr;
    b->m.map_len = len;
}

/* Every lookup by address names the record that is not busy. */
static void lookups_name_fresh(void)
{
    struct hp_block seen;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(hp_registry_peek(addr, &seen), HP_OK);
    assert_int_equal(seen.m.len, fresh.m.len);
    assert_int_equal(seen.busy, 0);

    /* A resize of the new block starts on the new block, not on the busy one
     * (which would fail with HP_EINVAL). */
    int32_t code = -1;
    struct hp_block copy;
    assert_ptr_equal(hp_registry_begin(addr, &code, &copy), &fresh);
    assert_int_equal(code, HP_OK);
    assert_int_equal(copy.m.len, fresh.m.len);
    assert_int_equal(hp_registry_end(&fresh, &copy), HP_OK);

    /* hp_free of the address frees the new block... */
    assert_ptr_equal(hp_registry_take(addr, 0, &code), &fresh);
    assert_int_equal(code, HP_OK);

    /* ...and leaves the busy record alone: it is still there, still busy. */
    assert_int_equal(hp_registry_count(), 1);
    assert_int_equal(hp_registry_peek(addr, &seen), HP_OK);
    assert_int_equal(seen.m.len, moving.m.len);
    assert_null(hp_registry_take(addr, 0, &code));
    assert_int_equal(code, HP_EINVAL);

    hp_registry_drop(&moving);
    assert_int_equal(hp_registry_count(), 0);
}

/* The natural order: the block at addr starts moving, then a new block gets
 * addr (and is linked ahead of it). */
static void new_record_after_busy_one(void **state)
{
    (void)state;
    record(&moving, 2 * MiB);
    record(&fresh, 6 * MiB);
    assert_int_equal(hp_registry_insert(&moving), HP_OK);
    int32_t code = -1;
    struct hp_block copy;
    assert_ptr_equal(hp_registry_begin(addr, &code, &copy), &moving);
    assert_int_equal(code, HP_OK);
    assert_int_equal(hp_registry_insert(&fresh), HP_OK);
    assert_int_equal(hp_registry_count(), 2);
    lookups_name_fresh();
}

/* The busy record ahead of the new one in the chain, as after a rehash. */
static void busy_record_ahead_in_the_chain(void **state)
{
    (void)state;
    record(&moving, 2 * MiB);
    record(&fresh, 6 * MiB);
    assert_int_equal(hp_registry_insert(&fresh), HP_OK);
    assert_int_equal(hp_registry_insert(&moving), HP_OK);  /* linked at the head */
    /* Both idle: the first in the chain (moving) is the one begin takes. */
    int32_t code = -1;
    struct hp_block copy;
    assert_ptr_equal(hp_registry_begin(addr, &code, &copy), &moving);
    assert_int_equal(code, HP_OK);
    assert_int_equal(hp_registry_count(), 2);
    lookups_name_fresh();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_record_after_busy_one),
        cmocka_unit_test(busy_record_ahead_in_the_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
