"""The C declarations the binding uses: the one place they are written down.

This text is what cffi parses (``ffi.cdef``). It mirrors ``include/hp.h``
after the preprocessor has run, with each integer ``#define`` written as its
value. ``tests/test_cdef_drift.py`` preprocesses the real headers and fails
when a prototype, struct, enum or integer macro here differs from them, so
edit this text together with the headers.
"""

CDEF = r"""
/* hp/version.h */
#define HP_VERSION_MAJOR 1
#define HP_VERSION_MINOR 4
#define HP_VERSION_PATCH 0
#define HP_VERSION_NUMBER 10400

uint32_t hp_version(void);
const char *hp_version_string(void);

/* hp/errors.h */
enum hp_error {
    HP_OK = 0,
    HP_EINVAL = -1,
    HP_ENOMEM = -2,
    HP_ESIZE = -3,
    HP_EFLAGS = -4,
    HP_EFOREIGN = -5,
    HP_EINTERIOR = -6,
    HP_EDOUBLEFREE = -7,
    HP_ENOHUGE = -8,
    HP_ENOBACKEND = -9,
    HP_EBACKEND = -10,
    HP_EENV = -11,
    HP_ENOTSUP = -12,
    HP_ERANGE = -13,
    HP_EOS = -14
};

const char *hp_strerror(int32_t code);
const char *hp_error_name(int32_t code);
const char *hp_last_error_detail(void);
int32_t hp_last_error(void);

/* hp/alloc.h */
#define HP_F_REQUIRE_HUGE 0x1
#define HP_F_POPULATE 0x2
#define HP_F_COLLAPSE 0x4
#define HP_F_NOZERO 0x8
#define HP_F_NOPOOL 0x10
#define HP_F_PAGE_SHIFT_POS 56
#define HP_F_PAGE_SHIFT_MASK 0x3f00000000000000
#define HP_F_PAGE_4K 0x0c00000000000000
#define HP_F_PAGE_64K 0x1000000000000000
#define HP_F_PAGE_2M 0x1500000000000000
#define HP_F_PAGE_1G 0x1e00000000000000

uint64_t hp_page_size_flag(uint64_t page_size);

#define HP_NUMA_DEFAULT 0
#define HP_NUMA_PREFER 1
#define HP_NUMA_BIND 2
#define HP_NUMA_INTERLEAVE 3

struct hp_alloc_opts {
    uint32_t size;
    uint32_t reserved;
    uint64_t flags;
    const char *backend;
    const char *exclude;
    uint32_t numa_mode;
    uint32_t numa_max_node;
    const uint64_t *numa_nodes;
};

void *hp_alloc(size_t size, uint64_t flags);
void *hp_alloc_ex(size_t size, const struct hp_alloc_opts *opts);
int32_t hp_free(void *p);
void *hp_realloc(void *p, size_t new_size, uint64_t flags);

struct hp_block_info {
    uint32_t size;
    uint32_t reserved;
    char backend[32];
    uint64_t requested_page_size;
    uint64_t page_size;
    uint64_t usable_size;
    uint64_t mapped_size;
    uint64_t huge_bytes;
    uint64_t flags;
    int32_t numa_node;
    int32_t fd;
    uint64_t fd_offset;
    uint32_t pin;
    uint32_t reserved2;
    uint32_t numa_mode;
    uint32_t numa_count;
    uint64_t numa_mask;
};
#define HP_BLOCK_PIN_NONE 0
#define HP_BLOCK_PIN_NAMED 1
#define HP_BLOCK_PIN_ENV 2

int32_t hp_info(const void *p, struct hp_block_info *info);
int32_t hp_block_nodes(const void *p, uint64_t *bytes, uint32_t n_nodes);

/* hp/introspect.h */
#define HP_MAX_PAGE_SIZES 16

enum hp_backend_kind {
    HP_KIND_OTHER = 0,
    HP_KIND_HUGETLB = 1,
    HP_KIND_THP = 2,
    HP_KIND_MTHP = 3,
    HP_KIND_BASE = 4
};

struct hp_backend_info {
    uint32_t size;
    uint32_t available;
    uint32_t kind;
    uint32_t n_page_sizes;
    char name[32];
    char path[256];
    char reason[256];
    uint64_t page_sizes[16];
    uint64_t pool_free[16];
    char description[128];
};

int32_t hp_backend_count(void);
int32_t hp_backend_get(uint32_t index, struct hp_backend_info *info);
int32_t hp_reprobe(void);

/* hp/stack.h */
struct hp_stack;

#define HP_STACK_LEAN 0x0
#define HP_STACK_HUGE 0x1
#define HP_STACK_HUGETLB 0x2
#define HP_STACK_THP 0x4
#define HP_STACK_ALLOW_LEAN 0x8
#define HP_STACK_POPULATE 0x10
#define HP_STACK_NOCACHE 0x20
#define HP_STACK_MAX_SIZE 0x10000000000
#define HP_STACK_MAX_GUARD 0x40000000
#define HP_STACK_MAX_HANDLES 131072
#define HP_STACK_HANDLE_QUARANTINE 1024

struct hp_stack_opts {
    uint32_t size;
    uint32_t reserved;
    uint64_t flags;
    uint64_t guard_size;
    uint32_t numa_mode;
    uint32_t numa_max_node;
    const uint64_t *numa_nodes;
};

struct hp_stack *hp_stack_create(size_t size, uint64_t flags);
struct hp_stack *hp_stack_create_ex(size_t size, const struct hp_stack_opts *opts);
int32_t hp_stack_destroy(struct hp_stack *s);
void *hp_stack_base(const struct hp_stack *s);
size_t hp_stack_size(const struct hp_stack *s);

#define HP_STACK_MODE_LEAN 0
#define HP_STACK_MODE_HUGE 1

struct hp_stack_info {
    uint32_t size;
    uint32_t mode;
    uint32_t kind;
    uint32_t from_cache;
    char source[32];
    uint64_t flags;
    uint64_t base_addr;
    uint64_t usable_size;
    uint64_t guard_addr;
    uint64_t guard_size;
    uint64_t page_size;
    uint64_t resident_bytes;
    uint64_t huge_bytes;
};

int32_t hp_stack_get_info(const struct hp_stack *s, struct hp_stack_info *info);
int32_t hp_stack_thread_create(struct hp_stack **out, size_t size,
                               const struct hp_stack_opts *opts,
                               void *(*start)(void *arg), void *arg);
int32_t hp_stack_thread_join(struct hp_stack *s, void **retval);

#define HP_STACK_CACHE_DEFAULT_STACKS 64
#define HP_STACK_CACHE_DEFAULT_BYTES 0x40000000
#define HP_STACK_CACHE_DEFAULT_KEEP_BYTES 0x800000
#define HP_STACK_CACHE_MAX_STACKS 16384

struct hp_stack_cache_config {
    uint32_t size;
    uint32_t reserved;
    uint64_t max_stacks;
    uint64_t max_bytes;
    uint64_t keep_bytes;
};

int32_t hp_stack_cache_configure(const struct hp_stack_cache_config *cfg);

struct hp_stack_cache_stats {
    uint32_t size;
    uint32_t reserved;
    uint64_t max_stacks;
    uint64_t max_bytes;
    uint64_t keep_bytes;
    uint64_t cached_stacks;
    uint64_t cached_bytes;
    uint64_t kept_bytes;
    uint64_t hits;
    uint64_t misses;
    uint64_t released;
    uint64_t evictions;
};

int32_t hp_stack_cache_get_stats(struct hp_stack_cache_stats *stats);
int32_t hp_stack_cache_trim(void);
#define HP_CACHE_DEFAULT_IDLE_MS 10000
#define HP_CACHE_DEFAULT_POOL_IDLE_MS 1000
#define HP_CACHE_MAX_IDLE_MS 86400000
#define HP_CACHE_MAX_BYTES 0x400000000000

struct hp_cache_config {
    uint32_t size;
    uint32_t reserved;
    uint64_t max_bytes;
    uint64_t idle_ms;
    uint64_t pool_idle_ms;
};

int32_t hp_cache_configure(const struct hp_cache_config *cfg);
int32_t hp_cache_trim(void);

struct hp_cache_stats_entry {
    char backend[32];
    uint64_t page_size;
    uint64_t bytes;
    uint64_t ranges;
};

#define HP_CACHE_STATS_MAX_ENTRIES 16

struct hp_cache_stats {
    uint32_t size;
    uint32_t n_entries;
    uint64_t bytes;
    uint64_t ranges;
    uint64_t hits;
    uint64_t misses;
    uint64_t releases;
    uint64_t released_bytes;
    uint64_t adopted_bytes;
    uint64_t max_bytes;
    uint64_t idle_ms;
    uint64_t pool_idle_ms;
    uint32_t reaper_running;
    uint32_t reserved;
    struct hp_cache_stats_entry entries[16];
};

int32_t hp_cache_get_stats(struct hp_cache_stats *stats);
"""
