#include "hp/introspect.h"
#include "loader.h"
#include "error.h"
#include "measure.h"
#include "options.h"
#include "os.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct hp_core core;
static pthread_once_t core_once = PTHREAD_ONCE_INIT;

static void host_log(const char *backend, const char *msg)
{
    hp_log("%s: %s", backend ? backend : "?", msg ? msg : "");
}

static int64_t host_measure(const void *addr, size_t len)
{
    return hp_measure_huge_bytes(addr, len);
}

static void init_host(struct hp_host *h)
{
    h->abi_version = HP_BACKEND_ABI_VERSION;
    h->size = sizeof(*h);
    h->log = host_log;
    h->set_detail = hp_set_detail;
    h->os_map = hp_os_map;
    h->os_unmap = hp_os_unmap;
    h->os_remap = hp_os_remap;
    h->os_advise = hp_os_advise;
    h->os_protect = hp_os_protect;
    h->read_text = hp_os_read_text;
    h->measure_huge_bytes = host_measure;
    h->base_page_size = hp_os_page_size();
}

static struct hp_backend *new_entry(const char *path)
{
    if (core.n == HP_MAX_BACKENDS) {
        hp_log("loader: more than %d backends, ignoring %s", HP_MAX_BACKENDS, path);
        return NULL;
    }
    struct hp_backend *b = &core.backends[core.n++];
    memset(b, 0, sizeof(*b));
    pthread_mutex_init(&b->caps_lock, NULL);
    snprintf(b->path, sizeof(b->path), "%s", path);
    return b;
}

static int reject(struct hp_backend *b, const char *fmt, const char *arg)
{
    snprintf(b->reason, sizeof(b->reason), fmt, arg ? arg : "");
    b->ops = NULL;
    if (b->dl)
        dlclose(b->dl);
    b->dl = NULL;
    hp_log("loader: rejected %s: %s", b->path, b->reason);
    return -1;
}

static uint64_t now_ns(void);

static int probe(struct hp_backend *b)
{
    memset(&b->caps, 0, sizeof(b->caps));
    b->caps.size = sizeof(b->caps);
    hp_set_detail("");
    int rc = b->ops->probe(&b->caps);
    b->probed_ns = now_ns();
    b->caps.reason[sizeof(b->caps.reason) - 1] = '\0';
    if (b->caps.n_page_sizes > HP_MAX_PAGE_SIZES)
        b->caps.n_page_sizes = HP_MAX_PAGE_SIZES;
    return rc;
}

/* Check a descriptor and adopt it; on failure the entry keeps the reason. */
static int adopt(struct hp_backend *b, const struct hp_backend_ops *ops)
{
    const size_t min_size = offsetof(struct hp_backend_ops, unmap) + sizeof(ops->unmap);
    if (!ops)
        return reject(b, "entry point returned NULL%s", NULL);
    if (ops->abi_version != HP_BACKEND_ABI_VERSION) {
        char v[32];
        snprintf(v, sizeof(v), "%u", ops->abi_version);
        return reject(b, "backend ABI version %s, libhp speaks 1", v);
    }
    if (ops->size < min_size)
        return reject(b, "descriptor too short (size field below the mandatory ops)%s", NULL);
    if (!ops->name || !hp_valid_backend_name(ops->name))
        return reject(b, "missing or invalid backend name%s", NULL);
    snprintf(b->name, sizeof(b->name), "%s", ops->name);
    if (!ops->probe || !ops->map || !ops->unmap)
        return reject(b, "mandatory op missing (probe, map and unmap are required)%s", NULL);
    for (unsigned i = 0; i + 1 < core.n; i++)
        if (core.backends[i].ops && !strcmp(core.backends[i].name, ops->name))
            return reject(b, "duplicate backend name \"%s\"", ops->name);
    b->ops = ops;
    b->kind = ops->kind;
    int rc = probe(b);
    if (rc != HP_OK) {
        char why[200];
        snprintf(why, sizeof(why), "%s (%.150s)", hp_error_name(rc), hp_last_error_detail());
        return reject(b, "probe failed: %s", why);
    }
    hp_log("loader: %s from %s: %s, %s", b->name, b->path,
           b->caps.available ? "available" : "unavailable", b->caps.reason);
    return 0;
}

/* Refuse files a stranger could have written (README "Plugin trust"). */
static const char *untrusted_file(const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        return "not a regular file";
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return "owned by neither root nor the running user";
    if (st->st_mode & S_IWOTH)
        return "writable by others";
    return NULL;
}

static int load_plugin(int dirfd, const char *dir, const char *file)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    struct hp_backend *b = new_entry(path);
    if (!b)
        return -1;
    struct stat st;
    if (fstatat(dirfd, file, &st, 0) != 0)
        return reject(b, "cannot stat: %s", strerror(errno));
    const char *why = untrusted_file(&st);
    if (why)
        return reject(b, "untrusted file: %s", why);
    b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->dl)
        return reject(b, "dlopen failed: %s", dlerror());
    hp_backend_entry_fn entry;
    *(void **)&entry = dlsym(b->dl, HP_BACKEND_ENTRY_NAME);
    if (!entry)
        return reject(b, "missing entry symbol %s", HP_BACKEND_ENTRY_NAME);
    return adopt(b, entry(&core.host));
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

static void scan_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        hp_log("loader: no backend directory %s (%s); built-in fallback only", dir,
               strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode) || ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))) {
        struct hp_backend *b = new_entry(dir);
        if (b)
            reject(b, "untrusted backend directory: %s",
                   S_ISDIR(st.st_mode) ? "world-writable without the sticky bit"
                                       : "not a directory");
        return;
    }
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[HP_MAX_BACKENDS];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < HP_MAX_BACKENDS) {
        if (e->d_name[0] != '.' && ends_with_so(e->d_name))
            names[n] = strdup(e->d_name), n += names[n] != NULL;
    }
    /* Sorted, so the table order does not depend on the directory's. */
    qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        load_plugin(dirfd(d), dir, names[i]);
        free(names[i]);
    }
    closedir(d);
}

/* A fork while another thread re-probes would leave that backend's
 * caps_lock locked for ever in the child (its next allocation hangs);
 * holding every one across fork prevents that. No caps_lock holder ever
 * waits for another lock, so this cannot deadlock with the registry's
 * handlers. */
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

static void load_all(void)
{
    const struct hp_options *o = hp_options();
    init_host(&core.host);
    if (o->error != HP_OK) {
        core.init_error = o->error;
        snprintf(core.init_detail, sizeof(core.init_detail), "%s", o->error_detail);
    }
    scan_dir(o->backend_path);
    /* The base-page backend is always there, even with no plugin directory. */
    if (!hp_backend_by_name(&core, "fallback")) {
        struct hp_backend *b = new_entry("builtin");
        if (b)
            adopt(b, hp_builtin_fallback(&core.host));
    }
    /* HP_BACKENDS must name backends that exist (loaded or rejected). */
    for (unsigned pass = 0; pass < 2 && core.init_error == HP_OK; pass++) {
        unsigned n = pass ? o->n_never : o->n_only;
        for (unsigned i = 0; i < n; i++) {
            const char *name = pass ? o->never[i] : o->only[i];
            int known = 0;
            for (unsigned k = 0; k < core.n; k++)
                known |= !strcmp(core.backends[k].name, name);
            if (!known) {
                core.init_error = HP_EENV;
                snprintf(core.init_detail, sizeof(core.init_detail),
                         "HP_BACKENDS names unknown backend \"%s\"; see hpctl status", name);
                break;
            }
        }
    }
    pthread_atfork(caps_lock_all, caps_unlock_all, caps_unlock_all);
}

struct hp_core *hp_core(void)
{
    pthread_once(&core_once, load_all);
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
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Probe again; keep the old figures if the probe fails. Caller holds caps_lock. */
static void reprobe_locked(struct hp_backend *b)
{
    struct hp_backend_caps fresh = {.size = sizeof(fresh)};
    if (b->ops->probe(&fresh) == HP_OK) {
        fresh.reason[sizeof(fresh.reason) - 1] = '\0';
        if (fresh.n_page_sizes > HP_MAX_PAGE_SIZES)
            fresh.n_page_sizes = HP_MAX_PAGE_SIZES;
        b->caps = fresh;
    }
    b->probed_ns = now_ns();
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

void hp_backend_mark_stale(struct hp_backend *b)
{
    pthread_mutex_lock(&b->caps_lock);
    b->probed_ns = 0;
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
