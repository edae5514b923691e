/*
 * Call every function of abi/functions.txt through libffi, from a dlopen'd
 * libhp, the way a foreign binding would: types come from the manifest, not
 * from the header. A manifest entry without a recipe here fails, and so does
 * a recipe whose function left the manifest.
 * usage: test_ffi LIBRARY MANIFEST
 */
#include <hp.h>

#include <dlfcn.h>
#include <ffi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 8

union value {
    int32_t i32;
    uint32_t u32;
    uint64_t u64;
    size_t size;
    void *ptr;
    const char *str;
    ffi_arg widened;   /* integer returns narrower than a register */
};

struct call {
    unsigned nargs;
    union value args[MAX_ARGS];
    union value ret;
};

/* State threaded through the recipes, in manifest order. */
static void *block;
static struct hp_block_info info = HP_BLOCK_INFO_INIT;
static struct hp_backend_info binfo = HP_BACKEND_INFO_INIT;
static struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;

struct recipe {
    const char *name;
    void (*prepare)(struct call *c);
    int (*check)(const struct call *c);
};

static void no_args(struct call *c) { (void)c; }

static void alloc_args(struct call *c) { c->args[0].size = 3 << 20; c->args[1].u64 = 0; }
static int got_block(const struct call *c) { return (block = c->ret.ptr) != NULL; }
static int32_t (*direct_free)(void *);  /* to drop hp_alloc's block between recipes */
static void alloc_ex_args(struct call *c) { direct_free(block); opts.flags = HP_F_POPULATE; c->args[0].size = 12345; c->args[1].ptr = &opts; }
static void count_args(struct call *c) { (void)c; }
static int count_ok(const struct call *c) { return (int32_t)c->ret.widened >= 1; }
static void backend_get_args(struct call *c) { c->args[0].u32 = 0; c->args[1].ptr = &binfo; }
static int status_ok(const struct call *c) { return (int32_t)c->ret.widened == HP_OK; }
static void name_args(struct call *c) { c->args[0].i32 = HP_ENOHUGE; }
static int name_ok(const struct call *c) { return !strcmp(c->ret.str, "HP_ENOHUGE"); }
static void info_args(struct call *c) { c->args[0].ptr = block; c->args[1].ptr = &info; }
static int info_ok(const struct call *c) { return status_ok(c) && info.usable_size >= 12345; }
static uint64_t node_bytes[4];
static void block_nodes_args(struct call *c) { memset(block, 1, 12345); c->args[0].ptr = block; c->args[1].ptr = node_bytes; c->args[2].u32 = 4; }
/* One node holds the touched pages, or none is known (no NUMA support). */
static int block_nodes_ok(const struct call *c) { int32_t n = (int32_t)c->ret.widened; return n == 1 || (n == 0 && !node_bytes[0]); }
static void realloc_args(struct call *c) { c->args[0].ptr = block; c->args[1].size = 5 << 20; c->args[2].u64 = 0; }
static void free_args(struct call *c) { c->args[0].ptr = block; }
static void bad_free_args(struct call *c) { c->args[0].ptr = &info; }
static int last_error_ok(const struct call *c) { return (int32_t)c->ret.widened == HP_EFOREIGN; }
static int detail_ok(const struct call *c) { return strstr(c->ret.str, "not a pointer returned by libhp") != NULL; }
static void flag_args(struct call *c) { c->args[0].u64 = 2u << 20; }
static int flag_ok(const struct call *c) { return c->ret.u64 == HP_F_PAGE_2M; }
static void strerror_args(struct call *c) { c->args[0].i32 = HP_EDOUBLEFREE; }
static int strerror_ok(const struct call *c) { return !strcmp(c->ret.str, "block was already freed"); }
static int version_ok(const struct call *c) { return (uint32_t)c->ret.widened == HP_VERSION_NUMBER; }
static int version_string_ok(const struct call *c) { return !strcmp(c->ret.str, "1.4.0"); }

static void *stack;
static struct hp_stack_info sinfo = HP_STACK_INFO_INIT;
static struct hp_stack_opts sopts = HP_STACK_OPTS_INIT;
static struct hp_stack_cache_config scfg = HP_STACK_CACHE_CONFIG_INIT;
static struct hp_stack_cache_stats sstats = HP_STACK_CACHE_STATS_INIT;
static void *thread_ret;
static struct hp_cache_config ccfg = HP_CACHE_CONFIG_INIT;
static struct hp_cache_stats cstats = HP_CACHE_STATS_INIT;
static void block_cache_configure_args(struct call *c) { ccfg.idle_ms = 1234; c->args[0].ptr = &ccfg; }
static void block_cache_stats_args(struct call *c) { c->args[0].ptr = &cstats; }
static int block_cache_stats_ok(const struct call *c) { return status_ok(c) && cstats.idle_ms == 1234; }

static void *thread_body(void *arg) { return (char *)arg + 1; }
static void stack_create_args(struct call *c) { c->args[0].size = 1 << 20; c->args[1].u64 = HP_STACK_LEAN; }
static int got_stack(const struct call *c) { return (stack = c->ret.ptr) != NULL; }
static void stack_create_ex_args(struct call *c) { sopts.guard_size = 8192; c->args[0].size = 1 << 20; c->args[1].ptr = &sopts; }
static void stack_only(struct call *c) { c->args[0].ptr = stack; }
static int base_ok(const struct call *c) { return c->ret.ptr != NULL && ((uintptr_t)c->ret.ptr & 4095) == 0; }
static int size_ok(const struct call *c) { return c->ret.size >= (1 << 20); }
static void stack_info_args(struct call *c) { c->args[0].ptr = stack; c->args[1].ptr = &sinfo; }
static int stack_info_ok(const struct call *c) { return status_ok(c) && sinfo.guard_size >= 8192; }
static void cache_configure_args(struct call *c) { scfg.max_stacks = 4; c->args[0].ptr = &scfg; }
static void cache_stats_args(struct call *c) { c->args[0].ptr = &sstats; }
static int cache_stats_ok(const struct call *c) { return status_ok(c) && sstats.max_stacks == 4; }
static void thread_create_args(struct call *c)
{
    c->args[0].ptr = &stack;
    c->args[1].size = 1 << 20;
    c->args[2].ptr = NULL;
    void *(*body)(void *) = thread_body;
    memcpy(&c->args[3].ptr, &body, sizeof(body));  /* a function pointer, as bytes */
    c->args[4].ptr = &sinfo;
}
static void thread_join_args(struct call *c) { c->args[0].ptr = stack; c->args[1].ptr = &thread_ret; }
static int joined_ok(const struct call *c) { return status_ok(c) && thread_ret == (char *)&sinfo + 1; }

/* Run in this order; free and last_error go last so they see each other. */
static const struct recipe recipes[] = {
    {"hp_version", no_args, version_ok},
    {"hp_version_string", no_args, version_string_ok},
    {"hp_page_size_flag", flag_args, flag_ok},
    {"hp_strerror", strerror_args, strerror_ok},
    {"hp_error_name", name_args, name_ok},
    {"hp_backend_count", count_args, count_ok},
    {"hp_backend_get", backend_get_args, status_ok},
    {"hp_reprobe", no_args, status_ok},
    {"hp_alloc", alloc_args, got_block},
    {"hp_alloc_ex", alloc_ex_args, got_block},
    {"hp_info", info_args, info_ok},
    {"hp_block_nodes", block_nodes_args, block_nodes_ok},
    {"hp_realloc", realloc_args, got_block},
    {"hp_free", free_args, status_ok},
    {"hp_cache_configure", block_cache_configure_args, status_ok},
    {"hp_cache_get_stats", block_cache_stats_args, block_cache_stats_ok},
    {"hp_cache_trim", no_args, status_ok},
    {"hp_stack_cache_configure", cache_configure_args, status_ok},
    {"hp_stack_cache_get_stats", cache_stats_args, cache_stats_ok},
    {"hp_stack_create", stack_create_args, got_stack},
    {"hp_stack_destroy", stack_only, status_ok},
    {"hp_stack_create_ex", stack_create_ex_args, got_stack},
    {"hp_stack_base", stack_only, base_ok},
    {"hp_stack_size", stack_only, size_ok},
    {"hp_stack_get_info", stack_info_args, stack_info_ok},
    {"hp_stack_cache_trim", no_args, status_ok},
    {"hp_stack_thread_create", thread_create_args, status_ok},
    {"hp_stack_thread_join", thread_join_args, joined_ok},
    {"hp_last_error_detail", NULL, NULL},   /* filled below: after a failing free */
    {"hp_last_error", NULL, NULL},
};

static ffi_type *ffi_of(const char *t)
{
    if (!strcmp(t, "void")) return &ffi_type_void;
    if (!strcmp(t, "i32")) return &ffi_type_sint32;
    if (!strcmp(t, "u32")) return &ffi_type_uint32;
    if (!strcmp(t, "u64")) return &ffi_type_uint64;
    if (!strcmp(t, "size")) return sizeof(size_t) == 8 ? &ffi_type_uint64 : &ffi_type_uint32;
    if (!strcmp(t, "ptr") || !strcmp(t, "cptr") || !strcmp(t, "str")) return &ffi_type_pointer;
    return NULL;
}

struct entry {
    char name[64];
    char types[MAX_ARGS + 1][8];   /* [0] is the return type */
    unsigned ntypes;
    int called;
};

static struct entry entries[64];
static unsigned nentries;

static int load_manifest(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    while (fgets(line, sizeof(line), f) && nentries < 64) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        struct entry *e = &entries[nentries];
        char *tok = strtok(line, " \t\n");
        if (!tok)
            continue;
        snprintf(e->name, sizeof(e->name), "%s", tok);
        while ((tok = strtok(NULL, " \t\n")) && e->ntypes <= MAX_ARGS)
            snprintf(e->types[e->ntypes++], sizeof(e->types[0]), "%s", tok);
        nentries++;
    }
    fclose(f);
    return 0;
}

static struct entry *entry_named(const char *name)
{
    for (unsigned i = 0; i < nentries; i++)
        if (!strcmp(entries[i].name, name))
            return &entries[i];
    return NULL;
}

static int call(void *lib, struct entry *e, struct call *c)
{
    ffi_cif cif;
    ffi_type *atypes[MAX_ARGS];
    void *avalues[MAX_ARGS];
    c->nargs = e->ntypes - 1;
    for (unsigned i = 0; i < c->nargs; i++) {
        atypes[i] = ffi_of(e->types[i + 1]);
        avalues[i] = &c->args[i];
        if (!atypes[i])
            return -1;
    }
    ffi_type *rtype = ffi_of(e->types[0]);
    void (*fn)(void);
    *(void **)&fn = dlsym(lib, e->name);
    if (!rtype || !fn || ffi_prep_cif(&cif, FFI_DEFAULT_ABI, c->nargs, rtype, atypes) != FFI_OK)
        return -1;
    ffi_call(&cif, fn, &c->ret, avalues);
    e->called = 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || load_manifest(argv[2]) != 0) {
        fprintf(stderr, "usage: %s LIBRARY MANIFEST\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("1..1\nnot ok 1 - dlopen: %s\n", dlerror());
        return 1;
    }
    *(void **)&direct_free = dlsym(lib, "hp_free");
    if (!direct_free)
        return 1;
    unsigned n = sizeof(recipes) / sizeof(*recipes), test = 0, fail = 0;
    printf("1..%u\n", n + 2);
    for (unsigned i = 0; i < n; i++) {
        const struct recipe *r = &recipes[i];
        struct entry *e = entry_named(r->name);
        struct call c;
        memset(&c, 0, sizeof(c));
        int ok = 0;
        if (!strcmp(r->name, "hp_last_error_detail") || !strcmp(r->name, "hp_last_error")) {
            /* Make a call fail first, through ffi too. */
            struct call f;
            memset(&f, 0, sizeof(f));
            bad_free_args(&f);
            ok = e && call(lib, entry_named("hp_free"), &f) == 0 && call(lib, e, &c) == 0 &&
                 (!strcmp(r->name, "hp_last_error") ? last_error_ok(&c) : detail_ok(&c));
        } else if (e) {
            r->prepare(&c);
            ok = call(lib, e, &c) == 0 && r->check(&c);
        }
        printf("%s %u - %s through ffi_call%s\n", ok ? "ok" : "not ok", ++test, r->name,
               e ? "" : " (not in the manifest)");
        fail += !ok;
    }
    unsigned uncalled = 0;
    for (unsigned i = 0; i < nentries; i++)
        if (!entries[i].called) {
            printf("# no recipe calls %s\n", entries[i].name);
            uncalled++;
        }
    printf("%s %u - every manifest function was called (%u entries)\n", uncalled ? "not ok" : "ok",
           ++test, nentries);
    fail += uncalled != 0;
    void *hidden = dlsym(lib, "hp_registry_count");
    printf("%s %u - internal symbols are not reachable by dlsym\n", hidden ? "not ok" : "ok", ++test);
    fail += hidden != NULL;
    dlclose(lib);
    return fail ? 1 : 0;
}
