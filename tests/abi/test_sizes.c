/*
 * Every function that takes a sized struct, called as a program built
 * against the release that introduced the struct calls it: with the size of
 * that release (accepted; an out-struct gets no byte past that size), with
 * one byte less (HP_EINVAL, nothing written), and with a larger size whose
 * extra bytes are zero, as a program built against a later release passes
 * (accepted, nothing written past it). The sizes are lib/abi_sizes.h's, the
 * floor libhp keeps for ever. Output: TAP.
 */
#include <hp.h>

#include "abi_sizes.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CANARY 0xA5
#define NEWER 64   /* bytes a later release added past this build's struct */

/* The caller's struct: its bytes up to size, then a canary. */
static _Alignas(16) unsigned char buf[4096], before[4096];

static void *prepare(const void *init, size_t n, uint32_t size)
{
    memset(buf, CANARY, sizeof(buf));
    memcpy(buf, init, n < size ? n : size);
    if (size > n)
        memset(buf + n, 0, size - n);
    memcpy(buf, &size, sizeof(size));  /* every sized struct starts with uint32_t size */
    memcpy(before, buf, sizeof(buf));
    return buf;
}

static int untouched_from(size_t off)
{
    for (size_t i = off; i < sizeof(buf); i++)
        if (buf[i] != CANARY)
            return 0;
    return 1;
}

static char *block;            /* for hp_info */
static struct hp_stack *stack; /* for hp_stack_get_info */

static int32_t call_alloc_ex(void *s)
{
    char *p = hp_alloc_ex(8192, s);
    if (!p)
        return hp_last_error();
    p[8191] = 1;
    return hp_free(p);
}

static int32_t call_info(void *s) { return hp_info(block, s); }
static int ok_info(const void *s)
{
    const struct hp_block_info *i = s;
    return i->usable_size >= 8192 && i->backend[0] && i->page_size >= 4096;
}

/* A 1.1 caller also gets the backend's query answer: no descriptor for a
 * built-in's block, and a node that is -1 (unknown) or a real one. */
static int ok_info_v1_1(const void *s)
{
    const struct hp_block_info *i = s;
    return ok_info(s) && i->fd == -1 && i->fd_offset == 0 && i->numa_node >= -1;
}

static int32_t call_backend_get(void *s) { return hp_backend_get(0, s); }
static int ok_backend(const void *s)
{
    const struct hp_backend_info *b = s;
    return b->name[0] && b->path[0];
}

static int32_t call_stack_create_ex(void *s)
{
    struct hp_stack *st = hp_stack_create_ex(256 << 10, s);
    if (!st)
        return hp_last_error();
    return hp_stack_destroy(st);
}

static int32_t call_stack_info(void *s) { return hp_stack_get_info(stack, s); }
static int ok_stack_info(const void *s)
{
    const struct hp_stack_info *i = s;
    return i->usable_size >= (256 << 10) && i->base_addr && i->page_size >= 4096;
}

static int32_t call_stack_cache_configure(void *s) { return hp_stack_cache_configure(s); }
static int32_t call_stack_cache_stats(void *s) { return hp_stack_cache_get_stats(s); }
static int ok_stack_cache_stats(const void *s)
{
    const struct hp_stack_cache_stats *st = s;
    return st->max_stacks == HP_STACK_CACHE_DEFAULT_STACKS;
}

static int32_t call_cache_configure(void *s) { return hp_cache_configure(s); }
static int32_t call_cache_stats(void *s) { return hp_cache_get_stats(s); }
static int ok_cache_stats(const void *s)
{
    const struct hp_cache_stats *st = s;
    return st->max_bytes == (UINT64_C(1) << 30) && st->idle_ms == 10000;
}

struct sized_call {
    const char *name;
    uint32_t release_size;
    const void *init;
    size_t init_len;
    int32_t (*call)(void *s);
    int (*filled)(const void *s);    /* out-structs: the answer is there; NULL for in */
    int later;                       /* a later release's size of a struct whose minimum
                                      * is an earlier one's: one byte short is accepted */
};

int main(void)
{
    static const struct hp_alloc_opts alloc_opts = HP_ALLOC_OPTS_INIT;
    static const struct hp_block_info block_info = HP_BLOCK_INFO_INIT;
    static const struct hp_backend_info backend_info = HP_BACKEND_INFO_INIT;
    static const struct hp_stack_opts stack_opts = HP_STACK_OPTS_INIT;
    static const struct hp_stack_info stack_info = HP_STACK_INFO_INIT;
    static const struct hp_stack_cache_config stack_cache_config = HP_STACK_CACHE_CONFIG_INIT;
    static const struct hp_stack_cache_stats stack_cache_stats = HP_STACK_CACHE_STATS_INIT;
    /* The documented defaults, set again: configuring changes nothing. */
    static const struct hp_cache_config cache_config = {sizeof(struct hp_cache_config), 0,
                                                        UINT64_C(1) << 30, 10000, 1000};
    static struct hp_cache_stats cache_stats = HP_CACHE_STATS_INIT;
#define CASE(name, v, init, call, filled) {name, v, &init, sizeof(init), call, filled, 0}
#define LATER(name, v, init, call, filled) {name, v, &init, sizeof(init), call, filled, 1}
    const struct sized_call calls[] = {
        CASE("hp_alloc_ex", HP_ALLOC_OPTS_SIZE_V1_0, alloc_opts, call_alloc_ex, NULL),
        CASE("hp_info", HP_BLOCK_INFO_SIZE_V1_0, block_info, call_info, ok_info),
        LATER("hp_info", HP_BLOCK_INFO_SIZE_V1_1, block_info, call_info, ok_info_v1_1),
        CASE("hp_backend_get", HP_BACKEND_INFO_SIZE_V1_0, backend_info, call_backend_get,
             ok_backend),
        CASE("hp_stack_create_ex", HP_STACK_OPTS_SIZE_V1_0, stack_opts, call_stack_create_ex,
             NULL),
        CASE("hp_stack_get_info", HP_STACK_INFO_SIZE_V1_0, stack_info, call_stack_info,
             ok_stack_info),
        CASE("hp_stack_cache_configure", HP_STACK_CACHE_CONFIG_SIZE_V1_0, stack_cache_config,
             call_stack_cache_configure, NULL),
        CASE("hp_stack_cache_get_stats", HP_STACK_CACHE_STATS_SIZE_V1_0, stack_cache_stats,
             call_stack_cache_stats, ok_stack_cache_stats),
        CASE("hp_cache_configure", HP_CACHE_CONFIG_SIZE_V1_1, cache_config, call_cache_configure,
             NULL),
        CASE("hp_cache_get_stats", HP_CACHE_STATS_SIZE_V1_1, cache_stats, call_cache_stats,
             ok_cache_stats),
    };
    block = hp_alloc(8192, 0);
    stack = hp_stack_create(256 << 10, 0);
    if (!block || !stack) {
        printf("Bail out! hp_alloc or hp_stack_create failed: %s\n", hp_last_error_detail());
        return 1;
    }
    int n = 0, failed = 0;
    for (size_t i = 0; i < sizeof(calls) / sizeof(*calls); i++) {
        const struct sized_call *c = &calls[i];
        static const char *const how[] = {"the release's size", "one byte short",
                                          "a later release's size, zero tail"};
        /* Later: past every field this build knows, too. */
        const uint32_t sizes[] = {c->release_size, c->release_size - 1,
                                  (uint32_t)c->init_len + NEWER};
        for (int v = 0; v < 3; v++) {
            void *s = prepare(c->init, c->init_len, sizes[v]);
            int32_t rc = c->call(s);
            int good;
            if (v == 1 && c->later)  /* the earlier fields, and nothing past the size */
                good = rc == HP_OK && untouched_from(sizes[v]);
            else if (v == 1)  /* refused, and nothing of the struct written */
                good = rc == HP_EINVAL && !memcmp(buf, before, sizeof(buf));
            else
                good = rc == HP_OK && untouched_from(sizes[v]) && (!c->filled || c->filled(s));
            failed += !good;
            printf("%s %d - %s with %s (%u bytes): %s%s%s\n", good ? "ok" : "not ok", ++n,
                   c->name, how[v], sizes[v], hp_error_name(rc), rc ? ": " : "",
                   rc ? hp_last_error_detail() : "");
        }
    }
    hp_free(block);
    hp_stack_destroy(stack);
    printf("1..%d\n", n);
    return failed ? 1 : 0;
}
