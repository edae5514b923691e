#include "hp/introspect.h"
#include "loader.h"
#include "error.h"
#include "measure.h"
#include "options.h"
#include "os.h"
#include "trust.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(HP_BACKEND_OPS_SIZE_V2_MIN ==
                   offsetof(struct hp_backend_ops, unmap) + sizeof(((struct hp_backend_ops *)0)->unmap),
               "the ABI 2 minimum descriptor ends after unmap");

static struct hp_core core;
static pthread_once_t core_once = PTHREAD_ONCE_INIT;

/* A plugin's text, as far as it is readable (a wild pointer reads as
 * ""), made printable: never read past what the plugin's memory holds. */
static void plugin_text(char *dst, size_t cap, const char *src)
{
    int64_t n = src ? hp_os_copy_in(dst, src, cap - 1) : 0;
    dst[n > 0 ? n : 0] = '\0';
    hp_printable(dst, cap, dst);
}

static void host_log(const char *backend, const char *msg)
{
    char who[HP_BACKEND_NAME_MAX + 1], text[512];
    plugin_text(who, sizeof(who), backend ? backend : "?");
    plugin_text(text, sizeof(text), msg);
    hp_log("%s: %s", who, text);
}

static void host_set_detail(const char *msg)
{
    char text[512];
    plugin_text(text, sizeof(text), msg);
    hp_set_detail(text);
}

/* The upcalls a plugin may call with any arguments: checked here, so that
 * a wild range or pointer gets -errno, never a crash or a walk of the
 * whole address space. */
static int64_t host_measure(const void *addr, size_t len)
{
    uintptr_t base = hp_os_page_size(), a = (uintptr_t)addr & ~(base - 1);
    if (!len || (uintptr_t)addr + len < (uintptr_t)addr)
        return len ? -EINVAL : 0;
    size_t span = (size_t)((uintptr_t)addr + len - a);
    if (hp_os_check_mapped((void *)a, span) != 0)
        return -ENOMEM;  /* not all of it is mapped (hp/backend.h) */
    return hp_measure_huge_bytes(addr, len);
}

static int host_map(void *hint, size_t len, int prot, int flags, int fd, int64_t off, void **out)
{
    return out ? hp_os_map(hint, len, prot, flags, fd, off, out) : -EINVAL;
}

static int host_remap(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr,
                      void **out)
{
    return out ? hp_os_remap(old_addr, old_len, new_len, flags, new_addr, out) : -EINVAL;
}

static int host_page_node(const void *addr, int *node)
{
    return node ? hp_os_page_node(addr, node) : -EINVAL;
}

/* /proc and /sys files only, named without "." or ".." components (under
 * HP_SYSFS_ROOT too: a plugin's path never leaves the tree). */
static int64_t host_read_text(const char *path, char *buf, size_t cap)
{
    if (!buf || !cap)
        return -EINVAL;
    buf[0] = '\0';
    if (!path || (strncmp(path, "/proc/", 6) && strncmp(path, "/sys/", 5)) ||
        strstr(path, "/./") || strstr(path, "/../") ||
        (strlen(path) >= 2 && !strcmp(path + strlen(path) - 2, "/.")) ||
        (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")))
        return -EACCES;
    return hp_os_read_text(path, buf, cap);
}

static void init_host(struct hp_host *h)
{
    h->abi_version = HP_BACKEND_ABI_VERSION;
    h->size = sizeof(*h);
    h->log = host_log;
    h->set_detail = host_set_detail;
    h->os_map = host_map;
    h->os_unmap = hp_os_unmap;
    h->os_remap = host_remap;
    h->os_advise = hp_os_advise;
    h->os_protect = hp_os_protect;
    h->read_text = host_read_text;
    h->measure_huge_bytes = host_measure;
    h->base_page_size = hp_os_page_size();
    h->os_memfd = hp_os_memfd;
    h->os_ftruncate = hp_os_ftruncate;
    h->os_close = hp_os_close_fd;
    h->os_mbind = hp_os_mbind;
    h->os_getcpu = hp_os_getcpu;
    h->os_page_node = host_page_node;
}

/* dir/file on the heap, or NULL. */
static char *join_path(const char *dir, const char *file)
{
    size_t d = strlen(dir), f = strlen(file);
    int slash = d > 0 && dir[d - 1] == '/';
    char *p = malloc(d + f + 2);
    if (p)
        snprintf(p, d + f + 2, "%s%s%s", dir, slash ? "" : "/", file);
    return p;
}

/* Record a refused file or directory (path is taken over; NULL is fine). */
static void add_rejected(char *path, const char *name, const char *reason)
{
    hp_log("loader: rejected %s: %s", path ? path : "?", reason);
    struct hp_rejected *r = realloc(core.rejected, (core.n_rejected + 1) * sizeof(*r));
    if (!r) {
        free(path);
        return;
    }
    core.rejected = r;
    r += core.n_rejected++;
    r->path = path;
    snprintf(r->name, sizeof(r->name), "%s", name);
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
}

/* The next free slot of the table, cleared; it joins the table only when
 * its backend is adopted. */
static struct hp_backend *scratch(char *path)
{
    struct hp_backend *b = &core.backends[core.n];
    memset(b, 0, sizeof(*b));
    b->fd = -1;
    b->path = path;
    return b;
}

static int reject(struct hp_backend *b, const char *fmt, const char *arg)
{
    char reason[256];
    snprintf(reason, sizeof(reason), fmt, arg ? arg : "");
    if (b->dl)
        dlclose(b->dl);
    hp_os_close(b->fd);
    add_rejected(b->path, b->name, reason);
    memset(b, 0, sizeof(*b));
    return -1;
}

static uint64_t now_ns(void);

/* Why a capability record cannot be believed, in buf; NULL if it can. The
 * selection relies on these (hp/backend.h: ascending powers of two). */
static const char *invalid_caps(const struct hp_backend_caps *c, char *buf, size_t cap)
{
    if (c->available > 1) {
        snprintf(buf, cap, "available is %u, not 0 or 1", c->available);
        return buf;
    }
    if (c->n_page_sizes > HP_MAX_PAGE_SIZES) {
        snprintf(buf, cap, "n_page_sizes is %u, at most %d", c->n_page_sizes, HP_MAX_PAGE_SIZES);
        return buf;
    }
    if (c->available && c->n_page_sizes == 0) {
        snprintf(buf, cap, "available with no page size (n_page_sizes is 0)");
        return buf;
    }
    for (uint32_t i = 0; i < c->n_page_sizes; i++) {
        unsigned long long s = c->page_sizes[i];
        if (s == 0 || (s & (s - 1))) {
            snprintf(buf, cap, "page size %llu is not a power of two", s);
            return buf;
        }
        if (s < core.host.base_page_size) {
            snprintf(buf, cap, "page size %llu is below the base page size", s);
            return buf;
        }
        if (i && s <= c->page_sizes[i - 1]) {
            snprintf(buf, cap, "page sizes not ascending (%llu after %llu)", s,
                     (unsigned long long)c->page_sizes[i - 1]);
            return buf;
        }
    }
    return NULL;
}

/* Call b's probe into *out; on failure, why says so with the plugin's own
 * words (its error detail and its caps reason). */
static int probe(struct hp_backend *b, struct hp_backend_caps *out, char *why, size_t cap)
{
    struct hp_backend_caps caps;
    memset(&caps, 0, sizeof(caps));
    caps.size = sizeof(caps);
    /* Logged before the call: if the probe crashes, the log names the file. */
    hp_log("loader: probing %s (%s)", b->path ? b->path : "?", b->name);
    hp_set_detail("");
    int rc = b->ops->probe(b->self, &caps);
    hp_printable(caps.reason, sizeof(caps.reason), caps.reason);
    if (rc != HP_OK) {
        const char *detail = hp_last_error_detail();
        int both = detail[0] && caps.reason[0];
        snprintf(why, cap, "probe failed: %s: %.100s%s%.100s", hp_error_name(rc),
                 detail[0] || caps.reason[0] ? detail : "(the plugin gave no reason)",
                 both ? "; " : "", caps.reason);
        return rc;
    }
    char buf[128];
    const char *bad = invalid_caps(&caps, buf, sizeof(buf));
    if (bad) {
        snprintf(why, cap, "invalid capability record: %s", bad);
        return HP_EBACKEND;
    }
    /* Bits hp/backend.h does not define mean nothing: dropped. */
    caps.flags &= HP_CAPS_REPROBE;
    for (unsigned i = 0; i < HP_MAX_PAGE_SIZES; i++)
        caps.page_flags[i] &= HP_PAGE_GUARANTEED | HP_PAGE_ADVISED;
    *out = caps;
    return HP_OK;
}

/* A third-party backend is probed only once a request or HP_BACKENDS names
 * it: nobody else's process depends on its probe. */
static void defer_probe(struct hp_backend *b)
{
    memset(&b->caps, 0, sizeof(b->caps));
    b->caps.size = sizeof(b->caps);
    snprintf(b->caps.reason, sizeof(b->caps.reason),
             "not probed: kind other, probed when named (hp_alloc_opts.backend or HP_BACKENDS)");
    b->deferred = 1;
}

static int named_in_env(const char *name)
{
    const struct hp_options *o = hp_options();
    for (unsigned i = 0; i < o->n_only; i++)
        if (!strcmp(o->only[i], name))
            return 1;
    return 0;
}

/* The plugin's teardown, once: the table forgets its context. */
static void fini(struct hp_backend *b)
{
    void (*op)(void *) = b->ops ? HP_OP(b->ops, fini) : NULL;
    void *self = b->self;
    b->self = NULL;
    if (op)
        op(self);
}

/* The in-core fallback's descriptor. */
static const struct hp_backend_ops *fallback_ops;

/* The names of the backends that ship with libhp: the plugins below and
 * the fallback compiled into the core. Only a file in the built-ins'
 * directory (HP_BACKEND_DIR) may provide one, so that no plugin found
 * through HP_BACKEND_PATH takes a built-in's place, and the core's fallback
 * serves whenever that directory does not provide it. The build passes the
 * names (builtin_plugin_names in meson.build); this is the only place that
 * uses them. */
static const char *const builtin_names[] = {HP_BUILTIN_PLUGIN_NAMES};

static int is_builtin_name(const char *name)
{
    for (size_t i = 0; i < sizeof(builtin_names) / sizeof(*builtin_names); i++)
        if (!strcmp(name, builtin_names[i]))
            return 1;
    return fallback_ops && !strcmp(name, fallback_ops->name);
}

/* Why name is not a backend name, or NULL if it is one. */
static const char *invalid_name(const char *name)
{
    if (!name)
        return "no backend name (name is NULL)";
    size_t n = strnlen(name, HP_BACKEND_NAME_MAX + 1);
    if (n == 0)
        return "empty backend name";
    if (n > HP_BACKEND_NAME_MAX)
        return "backend name longer than 31 characters";
    if (name[0] == '-')
        return "backend name starts with '-' (HP_BACKENDS reads \"-name\" as \"never name\", "
               "so no list could name it)";
    if (!hp_valid_backend_name(name))
        return "backend name has a character outside [a-z0-9_-]";
    return NULL;
}

/* Check a descriptor and adopt the scratch slot b into the table; on
 * failure the file is listed as rejected with the reason. from_builtin_dir:
 * the file is in HP_BACKEND_DIR (or b is the in-core fallback). */
static int adopt(struct hp_backend *b, const struct hp_backend_ops *ops, int from_builtin_dir)
{
    if (!ops)
        return reject(b, "entry point returned NULL%s", NULL);
    if (ops->abi_version != HP_BACKEND_ABI_VERSION) {
        char v[64];
        snprintf(v, sizeof(v), "%u, libhp speaks %u", ops->abi_version, HP_BACKEND_ABI_VERSION);
        return reject(b, "backend ABI version %s", v);
    }
    if (ops->size < HP_BACKEND_OPS_SIZE_V2_MIN) {
        char v[96];
        snprintf(v, sizeof(v), "%u bytes, at least %u", ops->size,
                 (unsigned)HP_BACKEND_OPS_SIZE_V2_MIN);
        return reject(b, "descriptor too short (size field below the mandatory ops: %s)", v);
    }
    /* The name is read into a buffer of its largest size plus one, as far
     * as it is readable: one without its NUL may end where the plugin's
     * memory does, and is then cut there (and refused), never read past. */
    char name[HP_BACKEND_NAME_MAX + 2] = "";
    int64_t got = ops->name ? hp_os_copy_in(name, ops->name, sizeof(name) - 1) : 0;
    name[got > 0 ? got : 0] = '\0';
    const char *bad_name = invalid_name(ops->name ? name : NULL);
    if (!bad_name && (size_t)got < sizeof(name) - 1 && !memchr(name, '\0', (size_t)got))
        bad_name = "backend name not terminated (its memory ends before the NUL)";
    if (bad_name) {
        /* The name as read, anything but printable ASCII as '?'
         * (hp_printable): the plugin's author sees what was read. */
        char shown[sizeof(name)], why[160];
        hp_printable(shown, sizeof(shown), name);
        snprintf(why, sizeof(why), "%s%s%s%s", bad_name, ops->name ? " (\"" : "",
                 ops->name ? shown : "", ops->name ? "\")" : "");
        return reject(b, "missing or invalid backend name: %s", why);
    }
    snprintf(b->name, sizeof(b->name), "%s", name);
    if (!ops->probe || !ops->map || !ops->unmap)
        return reject(b, "mandatory op missing (probe, map and unmap are required)%s", NULL);
    if (ops->kind > HP_KIND_BASE) {
        char v[32];
        snprintf(v, sizeof(v), "%u", ops->kind);
        return reject(b, "unknown kind %s (enum hp_backend_kind is 0 to 4)", v);
    }
    if (!from_builtin_dir && is_builtin_name(b->name)) {
        char v[256];
        snprintf(v, sizeof(v), "\"%s\" is reserved for the built-in backend (from %.150s, or "
                 "compiled into libhp)", b->name, hp_options()->backend_dir);
        return reject(b, "the name %s; a plugin elsewhere may not take it", v);
    }
    struct hp_backend *winner = hp_backend_by_name(&core, b->name);
    if (winner) {
        char v[320];
        snprintf(v, sizeof(v), "\"%s\": %.200s provides it already (the first file found wins)",
                 b->name, winner->path ? winner->path : "?");
        return reject(b, "duplicate backend name %s", v);
    }
    memset(&b->ops_copy, 0, sizeof(b->ops_copy));
    memcpy(&b->ops_copy, ops, ops->size < sizeof(b->ops_copy) ? ops->size : sizeof(b->ops_copy));
    if (b->ops_copy.size > sizeof(b->ops_copy))
        b->ops_copy.size = sizeof(b->ops_copy);
    b->ops = ops = &b->ops_copy;
    b->kind = ops->kind;
    b->own = from_builtin_dir && is_builtin_name(b->name);
    /* Read as far as it is readable (hp_os_copy_in), like the name. */
    char desc[sizeof(b->description)] = "";
    int64_t dn = ops->description
                     ? hp_os_copy_in(desc, ops->description, sizeof(desc) - 1) : 0;
    desc[dn > 0 ? dn : 0] = '\0';
    hp_printable(b->description, sizeof(b->description), desc);
    int (*init)(const struct hp_host *, void **) = HP_OP(ops, init);
    if (init) {
        hp_log("loader: init %s (%s)", b->path ? b->path : "?", b->name);
        hp_set_detail("");
        int rc = init(&core.host, &b->self);
        if (rc != HP_OK) {
            char why[256];
            const char *detail = hp_last_error_detail();
            snprintf(why, sizeof(why), "init failed: %s: %.200s", hp_error_name(rc),
                     detail[0] ? detail : "(the plugin gave no reason)");
            return reject(b, "%s", why);
        }
    }
    if (ops->kind == HP_KIND_OTHER && !named_in_env(b->name)) {
        defer_probe(b);
    } else {
        char why[256];
        if (probe(b, &b->caps, why, sizeof(why)) != HP_OK) {
            fini(b);
            return reject(b, "%s", why);
        }
        b->probed_ns = now_ns();
    }
    pthread_mutex_init(&b->caps_lock, NULL);
    pthread_cond_init(&b->probed, NULL);
    core.n++;
    hp_log("loader: %s from %s: %s, %s", b->name, b->path ? b->path : "?",
           b->caps.available ? "available" : "unavailable", b->caps.reason);
    return 0;
}

static int named(struct dl_phdr_info *info, size_t size, void *name)
{
    (void)size;
    return info->dlpi_name && !strcmp(info->dlpi_name, name);
}

/* dlopen the file open at b->fd, by its /proc/self/fd name: the dynamic
 * linker then opens that very inode, whatever happens to the name in the
 * directory (fs/proc/base.c, proc_fd_link). glibc returns an object that
 * is already loaded under the same name without opening anything
 * (_dl_map_object), so a name in use is first made unique by moving the
 * descriptor to a higher number. Once dlopen returned, the object is
 * mapped and the descriptor is of no further use: it is closed, so that no
 * descriptor of libhp outlives loading (a program that closes every
 * descriptor above 2, or hands its descriptors to a child, meets none of
 * libhp's). */
static int load_fd(struct hp_backend *b)
{
    char name[40];
    struct stat st, via;
    /* Each earlier plugin keeps the name of a descriptor that is closed
     * now, so the numbers in use as names are at most the plugins loaded
     * so far, plus the program's own dlopen'ed /proc/self/fd names. */
    for (int tries = 0;; tries++) {
        snprintf(name, sizeof(name), "/proc/self/fd/%d", b->fd);
        if (!dl_iterate_phdr(named, name))
            break;
        int fd = tries < 256 ? hp_os_dup_above(b->fd, b->fd) : -EMFILE;
        if (fd < 0) {
            char why[80];
            snprintf(why, sizeof(why), "%s (%s)", name, strerror(-fd));
            return reject(b, "cannot load through %s: the name is taken, and no other "
                          "descriptor could be had", why);
        }
        hp_os_close(b->fd);
        b->fd = fd;
    }
    int rc = hp_os_fstat(b->fd, &st);
    if (rc == 0)
        rc = hp_os_stat(name, &via);
    if (rc < 0)
        return reject(b, "cannot load through /proc/self/fd (%s); plugins are only ever loaded "
                      "by descriptor, and that needs /proc", strerror(-rc));
    if (st.st_dev != via.st_dev || st.st_ino != via.st_ino)
        return reject(b, "%s is not the opened file (/proc is not the kernel's procfs)", name);
    hp_log("loader: loading %s (as %s)", b->path, name);
    /* RTLD_NODELETE: a plugin that dlcloses itself stays loaded, as
     * hp/backend.h promises until fini. */
    b->dl = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    hp_os_close(b->fd);
    b->fd = -1;
    if (!b->dl)
        return reject(b, "dlopen failed: %s", dlerror());
    return 0;
}

static int load_plugin(int dirfd, const char *dir, const char *file, int builtin_dir)
{
    char *path = join_path(dir, file);
    if (!path) {
        hp_log("loader: out of memory, ignoring %s", file);
        return -1;
    }
    struct hp_backend *b = scratch(path);
    /* The built-ins' slots are kept for them (HP_BACKEND_DIR is read
     * last): plugins found through HP_BACKEND_PATH never crowd them out. */
    unsigned n_builtin = (unsigned)(sizeof(builtin_names) / sizeof(*builtin_names)) + 1;
    int have_fallback = hp_backend_by_name(&core, fallback_ops->name) != NULL;
    unsigned room = !builtin_dir    ? HP_MAX_BACKENDS - n_builtin
                    : have_fallback ? HP_MAX_BACKENDS
                                    : HP_MAX_BACKENDS - 1;  /* the fallback's slot */
    if (core.n >= room) {
        char why[64];
        snprintf(why, sizeof(why), "%u", room);
        return reject(b, "not loaded: %s backends are loaded already, the most libhp keeps "
                      "for plugins of HP_BACKEND_PATH (the other slots are the built-ins')",
                      why);
    }
    char why[200];
    b->fd = hp_trust_open_file(dirfd, file, why, sizeof(why));
    if (b->fd < 0)
        return reject(b, "untrusted file: %s", why);
    if (load_fd(b) != 0)
        return -1;
    hp_backend_entry_fn entry;
    *(void **)&entry = dlsym(b->dl, HP_BACKEND_ENTRY_NAME);
    if (!entry && dlsym(b->dl, "hp_backend_entry_v1"))
        return reject(b, "built for backend ABI 1; this libhp loads ABI 2 (%s)",
                      HP_BACKEND_ENTRY_NAME);
    if (!entry)
        return reject(b, "missing entry symbol %s", HP_BACKEND_ENTRY_NAME);
    return adopt(b, entry(&core.host), builtin_dir);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with_so(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && !strcmp(name + n - 3, ".so");
}

struct name_list {
    char **names;
    size_t n, cap;
};

/* hp_os_each_dirent's callback: keep the *.so names. A name that cannot be
 * kept for lack of memory stops the listing. */
static int keep_plugin_name(const char *name, void *ctx)
{
    struct name_list *l = ctx;
    if (name[0] == '.' || !ends_with_so(name))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        char **more = realloc(l->names, cap * sizeof(*more));
        if (!more)
            return -ENOMEM;
        l->names = more;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name)))
        return -ENOMEM;
    l->n++;
    return 0;
}

/* Load every plugin of the trusted directory open at fd (taken over),
 * named dir in messages, in byte order of the file names (so the load
 * order does not depend on the directory's). */
static int open_dir(const char *dir, const char *var, int builtin_dir);

/* Is fd still the directory (dev, ino)? A plugin's constructor, init or
 * probe may close any descriptor, and the number may then be another
 * file's. An fstat that fails otherwise than with EBADF says nothing
 * either way: the descriptor is taken to be ours still. */
static int same_dir(int fd, const struct stat *was)
{
    struct stat st;
    int rc = hp_os_fstat(fd, &st);
    if (rc != 0)
        return rc != -EBADF;
    return st.st_dev == was->st_dev && st.st_ino == was->st_ino;
}

static void scan_fd(int fd, const char *dir, int builtin_dir)
{
    struct name_list l = {0};
    struct stat was;
    int rc = hp_os_fstat(fd, &was);
    if (rc != 0) {
        char reason[256];
        snprintf(reason, sizeof(reason), "cannot read the backend directory: %s",
                 strerror(-rc));
        add_rejected(strdup(dir), "", reason);
        hp_os_close(fd);
        return;
    }
    rc = hp_os_each_dirent(fd, keep_plugin_name, &l);
    if (rc < 0) {
        char reason[256];
        snprintf(reason, sizeof(reason), "cannot read the backend directory: %s%s",
                 strerror(-rc), l.n ? " (the plugins listed before that are loaded)" : "");
        add_rejected(strdup(dir), "", reason);
    }
    if (l.n)
        qsort(l.names, l.n, sizeof(*l.names), by_name);
    for (size_t i = 0; i < l.n; i++) {
        if (fd >= 0 && i && !same_dir(fd, &was)) {
            /* The last plugin closed it: open the directory again (checked
             * again, and only if it is the same one), never use the
             * number, which is no longer ours. */
            char shown[256], reason[512];
            hp_printable(shown, sizeof(shown), l.names[i - 1]);
            hp_log("loader: the descriptor of %s was closed while %s loaded; opening the "
                   "directory again", dir, shown);
            fd = open_dir(dir, builtin_dir ? "HP_BACKEND_DIR" : "HP_BACKEND_PATH", builtin_dir);
            if (fd >= 0 && !same_dir(fd, &was)) {
                hp_os_close(fd);
                fd = -1;
            }
            if (fd < 0) {
                snprintf(reason, sizeof(reason), "the rest of the directory is not loaded: its "
                         "descriptor was closed while %s loaded, and it cannot be opened again "
                         "as the same directory", shown);
                add_rejected(strdup(dir), "", reason);
            }
        }
        if (fd >= 0)
            load_plugin(fd, dir, l.names[i], builtin_dir);
        free(l.names[i]);
    }
    free(l.names);
    if (fd >= 0 && same_dir(fd, &was))
        hp_os_close(fd);
}

/* Open the directory dir for scanning; -1 if it cannot be (listed as
 * rejected with the reason, or only logged for a missing HP_BACKEND_DIR:
 * a system without plugins installed is normal). */
static int open_dir(const char *dir, const char *var, int builtin_dir)
{
    char why[512], reason[700];
    int fd = hp_trust_open_dir(dir, why, sizeof(why));
    if (fd >= 0)
        return fd;
    if (fd == -ENOENT && builtin_dir) {
        hp_log("loader: no backend directory %s (%s)", dir, why);
        return -1;
    }
    if (fd == -ENOENT)
        snprintf(reason, sizeof(reason), "%s entry does not exist: %s", var, why);
    else
        snprintf(reason, sizeof(reason), "untrusted backend directory: %s", why);
    add_rejected(strdup(dir), "", reason);
    return -1;
}

struct dir_id {
    dev_t dev;
    ino_t ino;
};

/* 1 if the directory open at fd is one of ids[0..n); else adds it. */
static int seen_dir(int fd, struct dir_id *ids, size_t *n)
{
    struct stat st;
    if (hp_os_fstat(fd, &st) != 0)
        return 0;
    for (size_t i = 0; i < *n; i++)
        if (ids[i].dev == st.st_dev && ids[i].ino == st.st_ino)
            return 1;
    ids[(*n)++] = (struct dir_id){st.st_dev, st.st_ino};
    return 0;
}

/* The directories of HP_BACKEND_PATH in their order, then HP_BACKEND_DIR.
 * Each directory is read once: an entry listed twice at its first place,
 * HP_BACKEND_DIR (even when HP_BACKEND_PATH lists it too) last. */
static void scan_dirs(const struct hp_options *o)
{
    struct dir_id *ids = calloc(o->n_backend_path + 1, sizeof(*ids));
    size_t n_ids = 0;
    if (!ids) {
        hp_log("loader: out of memory, no plugin loaded");
        return;
    }
    /* HP_BACKEND_DIR is read last, but known first (so that
     * HP_BACKEND_PATH does not read it twice); it is opened again then, as
     * a plugin loaded meanwhile may close any descriptor. */
    int builtin_fd = open_dir(o->backend_dir, "HP_BACKEND_DIR", 1);
    if (builtin_fd >= 0) {
        seen_dir(builtin_fd, ids, &n_ids);
        hp_os_close(builtin_fd);
    }
    const char *p = o->backend_path;
    for (unsigned i = 0; p && i < o->n_backend_path; i++) {
        size_t len = strcspn(p, ":");
        char *dir = strndup(p, len);
        p += len + (p[len] == ':');
        if (!dir)
            continue;
        int fd = open_dir(dir, "HP_BACKEND_PATH", 0);
        if (fd >= 0 && seen_dir(fd, ids, &n_ids)) {
            hp_log("loader: %s is listed already (or is HP_BACKEND_DIR, read last): read once",
                   dir);
            hp_os_close(fd);
        } else if (fd >= 0) {
            scan_fd(fd, dir, 0);
        }
        free(dir);
    }
    if (builtin_fd >= 0 && (builtin_fd = open_dir(o->backend_dir, "HP_BACKEND_DIR", 1)) >= 0)
        scan_fd(builtin_fd, o->backend_dir, 1);
    free(ids);
}

/* A fork while another thread holds a caps_lock would leave it locked for
 * ever in the child (its next allocation hangs); holding every one across
 * fork prevents that. No caps_lock holder ever waits for another lock or
 * calls a plugin, so a fork never waits for a probe. A probe in flight in
 * the parent has no thread in the child: the child forgets it (a deferred
 * backend stays deferred there and is probed when named), and its
 * condition variables start afresh, without the parent's waiters. */
static void caps_lock_all(void)
{
    for (unsigned i = 0; i < core.n; i++)
        pthread_mutex_lock(&core.backends[i].caps_lock);
}

static void caps_unlock_all(void)
{
    for (unsigned i = core.n; i-- > 0;)
        pthread_mutex_unlock(&core.backends[i].caps_lock);
}

static void caps_unlock_all_child(void)
{
    for (unsigned i = 0; i < core.n; i++) {
        core.backends[i].probing = 0;
        core.backends[i].stale_in_probe = 0;
        pthread_cond_init(&core.backends[i].probed, NULL);
    }
    caps_unlock_all();
}

static void load_all(void)
{
    const struct hp_options *o = hp_options();
    init_host(&core.host);
    if (o->error != HP_OK) {
        core.init_error = o->error;
        snprintf(core.init_detail, sizeof(core.init_detail), "%s", o->error_detail);
    }
    fallback_ops = hp_builtin_backend(&core.host);
    /* A bad variable fails every call; loading plugins anyway would show a
     * list (hpctl status) that no call can use. */
    if (o->error == HP_OK)
        scan_dirs(o);
    else
        hp_log("loader: no plugin loaded: %s", o->error_detail);
    /* The base-page backend is always there, even with no plugin directory. */
    if (!hp_backend_by_name(&core, fallback_ops->name))
        adopt(scratch(strdup("builtin")), fallback_ops, 1);
    /* HP_BACKENDS must name backends that exist (loaded or rejected). */
    for (unsigned pass = 0; pass < 2 && core.init_error == HP_OK; pass++) {
        unsigned n = pass ? o->n_never : o->n_only;
        for (unsigned i = 0; i < n; i++) {
            const char *name = pass ? o->never[i] : o->only[i];
            int known = 0;
            for (unsigned k = 0; k < core.n; k++)
                known |= !strcmp(core.backends[k].name, name);
            for (unsigned k = 0; k < core.n_rejected; k++)
                known |= !strcmp(core.rejected[k].name, name);
            if (!known) {
                core.init_error = HP_EENV;
                snprintf(core.init_detail, sizeof(core.init_detail),
                         "HP_BACKENDS names unknown backend \"%s\"; known:", name);
                unsigned listed = 0, nameless = 0;
                const struct hp_rejected *first_nameless = NULL;
                for (unsigned k = 0; k < core.n + core.n_rejected; k++) {
                    size_t used = strlen(core.init_detail);
                    const char *known_name = k < core.n ? core.backends[k].name
                                                        : core.rejected[k - core.n].name;
                    if (!known_name[0]) {  /* refused before its name was read */
                        if (!nameless++)
                            first_nameless = &core.rejected[k - core.n];
                        continue;
                    }
                    if (used + strlen(known_name) + 6 >= sizeof(core.init_detail)) {
                        snprintf(core.init_detail + used, sizeof(core.init_detail) - used, " ...");
                        break;
                    }
                    snprintf(core.init_detail + used, sizeof(core.init_detail) - used, "%s %s",
                             listed++ ? "," : "", known_name);
                }
                /* It may be one of those, which hpctl status lists. */
                if (first_nameless) {
                    size_t used = strlen(core.init_detail);
                    char path[256];  /* a file's name may hold any byte */
                    hp_printable(path, sizeof(path),
                                 first_nameless->path ? first_nameless->path : "?");
                    snprintf(core.init_detail + used, sizeof(core.init_detail) - used,
                             "; %u plugin file(s) refused before their name was read, the "
                             "first %s: %s", nameless, path, first_nameless->reason);
                }
                break;
            }
        }
    }
    pthread_atfork(caps_lock_all, caps_unlock_all, caps_unlock_all_child);
}

/* Teardown (lib/lifecycle.c): each backend's fini when call_fini, then the
 * table's strings, which nothing can reach any more once libhp itself is
 * unloaded (dlclose); LeakSanitizer counts them otherwise. The plugins stay
 * loaded (their code may still be running in other threads at exit). */
void hp_loader_fini(int call_fini)
{
    for (unsigned i = 0; call_fini && i < core.n; i++)
        fini(&core.backends[i]);
    for (unsigned i = 0; i < core.n; i++) {
        char *path = core.backends[i].path;
        core.backends[i].path = NULL;
        free(path);
    }
    for (unsigned i = 0; i < core.n_rejected; i++) {
        char *path = core.rejected[i].path;
        core.rejected[i].path = NULL;
        free(path);
    }
    struct hp_rejected *rejected = core.rejected;
    core.n_rejected = 0;
    core.rejected = NULL;
    free(rejected);
}

/* Nonzero while this thread runs load_all. load_all allocates (its tables,
 * dlopen): a malloc interposed on libhp's own start-up that calls libhp
 * back (libhp-malloc, set up by that very allocation) would wait on
 * core_once for ever. It gets a core that refuses every request instead,
 * and the allocation goes on without libhp. */
static _Thread_local int loading;
/* Set once load_all has returned: the path every call takes reads it, and
 * neither the thread-local above nor pthread_once. */
static _Atomic int core_ready;
static struct hp_core reentered = {
    .init_error = HP_ENOTSUP,
    .init_detail = "libhp was called back while it starts up on this thread (from an "
                   "allocation of its own start-up); it serves nothing until that returns",
};

/* Start-up runs to its end: a thread cancelled inside it (at any of the
 * cancellation points its file reads and a plugin's init and probe reach)
 * would leave it half done, and pthread_once would run it again on top. */
static void load_all_here(void)
{
    int was;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &was);
    loading = 1;
    load_all();
    loading = 0;
    atomic_store_explicit(&core_ready, 1, memory_order_release);
    pthread_setcancelstate(was, NULL);
}

struct hp_core *hp_core(void)
{
    if (atomic_load_explicit(&core_ready, memory_order_acquire))
        return &core;
    if (loading)
        return &reentered;
    pthread_once(&core_once, load_all_here);
    return &core;
}

struct hp_backend *hp_backend_by_name(struct hp_core *c, const char *name)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->backends[i].ops && !strcmp(c->backends[i].name, name))
            return &c->backends[i];
    return NULL;
}

static int could_use(const struct hp_backend_caps *caps, uint64_t len, uint64_t wanted)
{
    for (uint32_t i = 0; i < caps->n_page_sizes; i++)
        if (wanted ? caps->page_sizes[i] == wanted : caps->page_sizes[i] <= len)
            return 1;
    return 0;
}

static uint64_t now_ns(void)
{
    return hp_os_clock_ns(CLOCK_MONOTONIC_COARSE);
}

/* The backend whose probe this thread is in (a probe that names its own
 * backend in a request must not wait for itself). */
static _Thread_local const struct hp_backend *probing_here;

/* Probe b without its caps_lock (which every selection takes for a copy
 * of the caps: a probe that hangs must not stop requests for other
 * backends), one probe per backend at a time. Called and returns with
 * caps_lock held; the caller has set b->probing. A failed or invalid
 * probe keeps the last figures, or, for a first probe (deferred), leaves
 * the backend unavailable with the reason. */
static void probe_unlocked(struct hp_backend *b)
{
    /* Not cancelled half way: b->probing must be cleared (probe_done),
     * or every request naming b would wait for ever. */
    int was;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &was);
    int first = b->deferred;
    struct hp_backend_caps fresh;
    char why[256];
    const struct hp_backend *outer = probing_here;
    pthread_mutex_unlock(&b->caps_lock);
    probing_here = b;
    int rc = probe(b, &fresh, why, sizeof(why));
    probing_here = outer;
    pthread_mutex_lock(&b->caps_lock);
    if (rc == HP_OK) {
        b->caps = fresh;
    } else if (first) {
        memset(&b->caps, 0, sizeof(b->caps));
        b->caps.size = sizeof(b->caps);
        snprintf(b->caps.reason, sizeof(b->caps.reason), "%s", why);
        hp_log("loader: %s: %s", b->name, why);
    } else {
        hp_log("loader: %s keeps its last figures: %s", b->name, why);
    }
    /* A pool change reported while the probe ran may postdate what it
     * read: then the figures stay stale, and the next request probes. */
    b->probed_ns = b->stale_in_probe ? 0 : now_ns();
    b->stale_in_probe = 0;
    b->deferred = 0;
    b->probing = 0;
    pthread_cond_broadcast(&b->probed);
    pthread_setcancelstate(was, NULL);
}

/* Probe again unless a first probe is due (it waits for a request that
 * names the backend) or another thread is probing it now (its figures are
 * as fresh). Caller holds caps_lock. */
static void reprobe_locked(struct hp_backend *b)
{
    if (b->deferred || b->probing)
        return;
    b->probing = 1;
    probe_unlocked(b);
}

void hp_backend_use_named(struct hp_core *c, const char *name)
{
    struct hp_backend *b = hp_backend_by_name(c, name);
    if (!b)
        return;
    /* No cancellation while caps_lock is held (pthread_cond_wait is a
     * cancellation point that returns with the lock held). */
    int was;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &was);
    pthread_mutex_lock(&b->caps_lock);
    /* Only requests that name b wait for its first probe; one made from
     * inside that probe goes on without it (b unavailable, not probed). */
    while (b->deferred && b->probing && probing_here != b)
        pthread_cond_wait(&b->probed, &b->caps_lock);
    if (b->deferred && b->probing) {
        pthread_mutex_unlock(&b->caps_lock);
        pthread_setcancelstate(was, NULL);
        hp_log("loader: %s named from inside its own first probe; not waiting for itself",
               b->name);
        return;
    }
    if (b->deferred) {
        b->probing = 1;
        probe_unlocked(b);
    }
    pthread_mutex_unlock(&b->caps_lock);
    pthread_setcancelstate(was, NULL);
}

void hp_backend_caps_now(struct hp_backend *b, uint64_t len, uint64_t wanted,
                         struct hp_backend_caps *out)
{
    pthread_mutex_lock(&b->caps_lock);
    if (b->ops && (b->caps.flags & HP_CAPS_REPROBE) && could_use(&b->caps, len, wanted) &&
        now_ns() - b->probed_ns >= HP_REPROBE_NS)
        reprobe_locked(b);
    *out = b->caps;
    pthread_mutex_unlock(&b->caps_lock);
}

int hp_backend_unproven(const struct hp_backend *b)
{
    return !b->own && (b->kind == HP_KIND_HUGETLB || b->kind == HP_KIND_THP) &&
           !atomic_load_explicit(&b->delivered, memory_order_relaxed);
}

void hp_backend_mark_stale(struct hp_backend *b)
{
    pthread_mutex_lock(&b->caps_lock);
    b->probed_ns = 0;
    b->stale_in_probe = b->probing;
    pthread_mutex_unlock(&b->caps_lock);
}

int32_t hp_backends_reprobe(struct hp_core *c)
{
    for (unsigned i = 0; i < c->n; i++) {
        struct hp_backend *b = &c->backends[i];
        if (!b->ops)
            continue;
        pthread_mutex_lock(&b->caps_lock);
        reprobe_locked(b);
        pthread_mutex_unlock(&b->caps_lock);
    }
    return HP_OK;
}

HP_EXTERN(int32_t) hp_reprobe(void)
{
    struct hp_core *c = hp_core();
    if (c->init_error != HP_OK)
        return hp_fail(c->init_error, "%s", c->init_detail);
    return hp_backends_reprobe(c);
}
