/* HP_STACKS=lean|huge: libhp thread stacks for unmodified programs.
 *
 * pthread_create is interposed (the next definition, glibc's, is found with
 * dlsym(RTLD_NEXT)). With HP_STACKS set, a thread created without a stack of
 * the caller's own (pthread_attr_setstack) runs on a stack from
 * hp_stack_create_ex (include/hp/stack.h):
 *   lean  HP_STACK_LEAN: never on huge pages, whatever THP says;
 *   huge  HP_STACK_THP first (no hugetlb fork hazard), else, with
 *         HP_MALLOC_POOL=all only, HP_STACK_HUGE with HP_STACK_ALLOW_LEAN
 *         (the hugetlb pool, else lean), else lean.
 * Its size is the attribute's stack size, or glibc's default for new
 * threads (pthread_getattr_default_np: RLIMIT_STACK at start-up, as glibc
 * computes it); its guard is the attribute's guard size. When no libhp stack
 * can be made, the thread gets glibc's stack, as without HP_STACKS.
 *
 * glibc keeps the thread descriptor and static TLS at the top of a
 * caller-supplied stack and uses them until the kernel clears the thread id
 * (CLONE_CHILD_CLEARTID, see clone(2)), after the thread's last instruction:
 * no thread can free its own stack. So every such thread is created
 * joinable, and its stack is released after a successful join:
 *   - joinable threads: in the program's own pthread_join (and the
 *     tryjoin/timedjoin/clockjoin variants), all interposed;
 *   - detached threads (by attribute or pthread_detach): a reaper thread,
 *     started at the first one, joins them when they have finished (a
 *     cleanup handler queues the thread as it exits, pthread_exit and
 *     cancellation included) and destroys their stacks. pthread_join and
 *     pthread_detach on a detached thread return EINVAL, as glibc's do.
 * Released stacks go to libhp's stack cache and serve the next threads.
 *
 * Fork: the child has no reaper and cannot join its parent's threads; it
 * starts with an empty queue (the queued stacks stay mapped in the child).
 * All locks here are leaves: nothing is allocated and no libhp call is made
 * while one is held.
 */
#include "hpm.h"

#include <hp.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*join_fn)(pthread_t, void **);
typedef int (*detach_fn)(pthread_t);
typedef int (*tryjoin_fn)(pthread_t, void **);
typedef int (*timedjoin_fn)(pthread_t, void **, const struct timespec *);
typedef int (*clockjoin_fn)(pthread_t, void **, clockid_t, const struct timespec *);

static struct {
    create_fn create;
    join_fn join;
    detach_fn detach;
    tryjoin_fn tryjoin;
    timedjoin_fn timedjoin;
    clockjoin_fn clockjoin;
} real;

enum { STACKS_OFF, STACKS_LEAN, STACKS_HUGE };
static int mode;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *libhp_base;  /* load address of libhp.so.1 */

/* One thread on a libhp stack. */
struct srec {
    pthread_t t;
    struct hp_stack *s;
    void *(*start)(void *);
    void *arg;
    int created;   /* t is set and the record is in the table */
    int detached;  /* nobody will join it: the reaper does */
    int finished;  /* its start routine returned or it exited */
    struct srec *next;  /* hash chain, then reaper queue */
};

#define NBUCKETS 256
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static struct srec *table[NBUCKETS];
static struct srec *queue;
static int reaper_running;
/* The record of the thread running, if it runs on a libhp stack (its
 * creator may not have put it in the table yet). initial-exec, as
 * hpm_busy. */
static __thread struct srec *self_rec __attribute__((tls_model("initial-exec")));

static size_t bucket(pthread_t t)
{
    uintptr_t v = (uintptr_t)t;
    return (size_t)((v >> 12) ^ (v >> 20)) % NBUCKETS;
}

/* Call with lock held. */
static void table_insert(struct srec *r)
{
    size_t b = bucket(r->t);
    r->next = table[b];
    table[b] = r;
}

/* Call with lock held: the record of t, unlinked from the table if take. */
static struct srec *table_find(pthread_t t, int take)
{
    for (struct srec **pp = &table[bucket(t)]; *pp; pp = &(*pp)->next) {
        if (pthread_equal((*pp)->t, t)) {
            struct srec *r = *pp;
            if (take)
                *pp = r->next;
            return r;
        }
    }
    return NULL;
}

/* Call with lock held; r is in the table. */
static void enqueue(struct srec *r)
{
    table_find(r->t, 1);
    r->next = queue;
    queue = r;
    pthread_cond_signal(&queue_cond);
}

static void release(struct srec *r)
{
    hpm_busy++;
    hp_stack_destroy(r->s);
    hpm_busy--;
    free(r);
}

static void *reaper(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!queue)
            pthread_cond_wait(&queue_cond, &lock);
        struct srec *r = queue;
        queue = r->next;
        pthread_mutex_unlock(&lock);
        /* Returns once the kernel has cleared the thread id: nothing of the
         * thread runs on its stack any more. */
        real.join(r->t, NULL);
        release(r);
        pthread_mutex_lock(&lock);
    }
    return NULL;
}

/* Start the reaper unless it runs; a glibc stack, every signal blocked. */
static void ensure_reaper(void)
{
    pthread_mutex_lock(&lock);
    int start = !reaper_running;
    reaper_running = 1;
    pthread_mutex_unlock(&lock);
    if (!start)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, (size_t)64 << 10);
    pthread_t t;
    int err = real.create(&t, &a, reaper, NULL);
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        pthread_mutex_lock(&lock);
        reaper_running = 0;
        pthread_mutex_unlock(&lock);
    }
}

static void atfork_prepare(void) { pthread_mutex_lock(&lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&lock); }
static void atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&queue_cond, NULL);
    queue = NULL;
    reaper_running = 0;
}

/* The next definition of name (glibc's), as a function pointer (through
 * memcpy: ISO C has no cast from an object pointer to a function pointer). */
#define NEXT(field, name)                                  \
    do {                                                   \
        void *f_ = dlsym(RTLD_NEXT, name);                 \
        memcpy(&real.field, &f_, sizeof(real.field));      \
    } while (0)

static void setup(void)
{
    NEXT(create, "pthread_create");
    NEXT(join, "pthread_join");
    NEXT(detach, "pthread_detach");
    NEXT(tryjoin, "pthread_tryjoin_np");
    NEXT(timedjoin, "pthread_timedjoin_np");
    NEXT(clockjoin, "pthread_clockjoin_np");
    const char *v = secure_getenv("HP_STACKS");
    if (!v || !*v || !strcmp(v, "off"))
        mode = STACKS_OFF;
    else if (!strcmp(v, "lean"))
        mode = STACKS_LEAN;
    else if (!strcmp(v, "huge"))
        mode = STACKS_HUGE;
    else
        hpm_warn("HP_STACKS=\"%.64s\" is invalid (accepted: lean, huge, off); threads get "
                 "glibc's stacks", v);
    Dl_info di;
    void *self;
    struct hp_stack *(*fn)(size_t, const struct hp_stack_opts *) = hp_stack_create_ex;
    memcpy(&self, &fn, sizeof(self));
    if (dladdr(self, &di))
        libhp_base = di.dli_fbase;
    if (mode != STACKS_OFF)
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* libhp's own threads (its cache's release thread, started with one of its
 * locks held) keep glibc stacks: making them a libhp stack would call back
 * into libhp under that lock. */
static int from_libhp(const void *ret)
{
    Dl_info di;
    return libhp_base && dladdr(ret, &di) && di.dli_fbase == libhp_base;
}

static void finished(void *p)
{
    struct srec *r = p;
    pthread_mutex_lock(&lock);
    r->finished = 1;
    if (r->detached && r->created)
        enqueue(r);
    pthread_mutex_unlock(&lock);
}

static void *trampoline(void *p)
{
    struct srec *r = p;
    void *ret;
    self_rec = r;
    pthread_cleanup_push(finished, r);
    ret = r->start(r->arg);
    pthread_cleanup_pop(1);
    return ret;
}

/* A libhp stack of at least size usable bytes, or NULL. */
static struct hp_stack *make_stack(size_t size, size_t guard)
{
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.guard_size = guard;
    o.flags = mode == STACKS_HUGE ? HP_STACK_THP : HP_STACK_LEAN;
    hpm_busy++;
    struct hp_stack *s = hp_stack_create_ex(size, &o);
    if (!s && mode == STACKS_HUGE && hp_last_error() == HP_ENOHUGE) {
        /* A thread that forks writes its stack in the child at once: pool
         * pages only when HP_MALLOC_POOL=all allows them. */
        o.flags = hpm_opt.pool == HPM_POOL_ALL ? HP_STACK_HUGE | HP_STACK_ALLOW_LEAN
                                               : HP_STACK_LEAN;
        s = hp_stack_create_ex(size, &o);
    }
    hpm_busy--;
    return s;
}

/* The attribute carries a stack of the caller's own (pthread_attr_setstack
 * or setstackaddr). pthread_attr_getstack reports the stack's lowest
 * address as the attribute's stack address (its top) less its size: the
 * sum is that top, 0 when none was set. */
static int user_stack(const pthread_attr_t *attr)
{
    void *addr = NULL;
    size_t size = 0;
    if (pthread_attr_getstack(attr, &addr, &size))
        return 0;
    return (uintptr_t)addr + size != 0;
}

EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg)
{
    pthread_once(&once, setup);
    if (!real.create)
        return EAGAIN;  /* no glibc pthread_create after us: cannot happen */
    if (mode == STACKS_OFF || hpm_busy || (attr && user_stack(attr)) ||
        from_libhp(__builtin_return_address(0)))
        return real.create(t, attr, start, arg);

    /* A copy of the caller's attribute (a plain value: its scheduling,
     * affinity and signal mask settings come along) with a stack set; the
     * copy is never destroyed, so what it points to stays the caller's. */
    pthread_attr_t a;
    size_t size = 0, guard = 0;
    int detach = PTHREAD_CREATE_JOINABLE;
    if (attr) {
        memcpy(&a, attr, sizeof(a));
        pthread_attr_getstacksize(attr, &size);
        pthread_attr_getguardsize(attr, &guard);
        pthread_attr_getdetachstate(attr, &detach);
    } else {
        pthread_attr_t d;
        if (pthread_getattr_default_np(&d) == 0) {
            pthread_attr_getstacksize(&d, &size);
            pthread_attr_getguardsize(&d, &guard);
            pthread_attr_destroy(&d);
        }
        pthread_attr_init(&a);
    }
    if (size < (size_t)PTHREAD_STACK_MIN)
        size = (size_t)PTHREAD_STACK_MIN;
    struct srec *r = calloc(1, sizeof(*r));
    struct hp_stack *s = r ? make_stack(size, guard) : NULL;
    if (!s) {
        free(r);
        if (!attr)
            pthread_attr_destroy(&a);
        return real.create(t, attr, start, arg);
    }
    if (detach == PTHREAD_CREATE_DETACHED)
        ensure_reaper();
    r->s = s;
    r->start = start;
    r->arg = arg;
    r->detached = detach == PTHREAD_CREATE_DETACHED;
    pthread_attr_setstack(&a, hp_stack_base(s), hp_stack_size(s));
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_JOINABLE);
    pthread_t id;
    int err = real.create(&id, &a, trampoline, r);
    if (!attr)
        pthread_attr_destroy(&a);
    if (err) {
        release(r);
        /* EINVAL: the stack cannot hold glibc's TLS; glibc sizes its own. */
        return err == EINVAL ? real.create(t, attr, start, arg) : err;
    }
    pthread_mutex_lock(&lock);
    r->t = id;
    r->created = 1;
    table_insert(r);
    if (r->detached && r->finished)
        enqueue(r);
    pthread_mutex_unlock(&lock);
    *t = id;
    return 0;
}

/* Before a join: EINVAL for a thread on a libhp stack that is detached;
 * whether t is on a libhp stack at all. */
static int before_join(pthread_t t, int *ours)
{
    *ours = 0;
    if (mode == STACKS_OFF)
        return 0;
    pthread_mutex_lock(&lock);
    struct srec *r = table_find(t, 0);
    int rc = r && r->detached ? EINVAL : 0;
    *ours = r != NULL;
    pthread_mutex_unlock(&lock);
    return rc;
}

static int after_join(pthread_t t, int ours, int rc)
{
    if (rc || !ours)
        return rc;
    pthread_mutex_lock(&lock);
    struct srec *r = table_find(t, 1);
    pthread_mutex_unlock(&lock);
    if (r)
        release(r);
    return rc;
}

#define JOIN_BODY(call)                                  \
    pthread_once(&once, setup);                          \
    int ours;                                            \
    int rc = before_join(t, &ours);                      \
    if (rc)                                              \
        return rc;                                       \
    return after_join(t, ours, call)

EXPORT int pthread_join(pthread_t t, void **ret)
{
    JOIN_BODY(real.join(t, ret));
}

EXPORT int pthread_tryjoin_np(pthread_t t, void **ret)
{
    JOIN_BODY(real.tryjoin ? real.tryjoin(t, ret) : ENOSYS);
}

EXPORT int pthread_timedjoin_np(pthread_t t, void **ret, const struct timespec *abstime)
{
    JOIN_BODY(real.timedjoin ? real.timedjoin(t, ret, abstime) : ENOSYS);
}

EXPORT int pthread_clockjoin_np(pthread_t t, void **ret, clockid_t clk,
                                const struct timespec *abstime)
{
    JOIN_BODY(real.clockjoin ? real.clockjoin(t, ret, clk, abstime) : ENOSYS);
}

EXPORT int pthread_detach(pthread_t t)
{
    pthread_once(&once, setup);
    if (mode != STACKS_OFF) {
        pthread_mutex_lock(&lock);
        struct srec *r = table_find(t, 0);
        if (!r && self_rec && pthread_equal(t, pthread_self()))
            r = self_rec;  /* detaching itself before its creator returned */
        int rc = 0;
        if (r) {
            if (r->detached) {
                rc = EINVAL;
            } else {
                r->detached = 1;
                if (r->finished && r->created)
                    enqueue(r);
            }
        }
        pthread_mutex_unlock(&lock);
        if (r) {
            if (!rc)
                ensure_reaper();
            return rc;
        }
    }
    return real.detach(t);
}
