/* _hp_numpy: a numpy data-memory handler (NEP 49) that serves large array
 * buffers from libhp, for hp.numpy (bindings/python/hp/numpy.py).
 *
 * Which libhp: the one the cffi binding already loaded. hp.numpy passes the
 * path of that file (from /proc/self/maps) and the address cffi resolved for
 * hp_alloc; configure() opens the path with RTLD_NOLOAD, so it can only get
 * the copy already in the process, checks that its hp_alloc is the same
 * function, and keeps the handle open for good: arrays may be freed during
 * interpreter shutdown, after cffi has let go of its own handle. One libhp
 * per process means one registry, so every hp_* call below sees every block.
 *
 * Which allocator serves what: malloc/calloc of at least min_size bytes go
 * to hp_alloc (malloc with HP_F_NOZERO, as malloc does not clear); smaller
 * requests, and any request libhp fails, go to numpy's default handler.
 * The pointers libhp returned are remembered in a set, so free and realloc
 * know which allocator a pointer belongs to without asking libhp about every
 * small array. With a NUMA placement configured, hp_alloc_ex takes it (the
 * same options as hp.alloc's node=, nodes=, mode=); hp_realloc keeps the
 * placement a block was made with. realloc keeps a pointer with its allocator: hp_realloc for
 * libhp blocks (page tables move, bytes do not), the default realloc for the
 * rest (numpy's free passes sizes the default handler's small-block cache
 * relies on, so a default block is never moved into libhp behind its back).
 *
 * numpy keeps the handler capsule of every array it allocates and frees the
 * array through it, so arrays made while the handler was installed stay
 * valid after it is uninstalled. Nothing here touches Python objects: numpy
 * may call the allocator without the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>

#include <dlfcn.h>
#include <hp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*hp_alloc_fn)(size_t, uint64_t);
typedef void *(*hp_alloc_ex_fn)(size_t, const struct hp_alloc_opts *);
typedef void *(*hp_realloc_fn)(void *, size_t, uint64_t);
typedef int32_t (*hp_free_fn)(void *);

static struct {
    void *dl;                     /* pins libhp for the life of the process */
    hp_alloc_fn alloc;
    hp_alloc_ex_fn alloc_ex;
    hp_realloc_fn realloc;
    hp_free_fn free;
    PyDataMemAllocator deflt;     /* numpy's default handler */
    _Atomic size_t min_size;
    _Atomic uint64_t flags;
    _Atomic uint64_t n_alloc, n_realloc, n_free, n_fallback;
} hpn;

/* The NUMA placement of new buffers (HP_NUMA_DEFAULT: none), copied under
 * place_lock by each allocation so that mode and nodes always match. */
#define HPN_MAX_NODE 1024
static pthread_mutex_t place_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t place_mode;
static uint64_t place_nodes[HPN_MAX_NODE / 64];

/* The set of live libhp pointers: open addressing, linear probing. */
#define SLOT_EMPTY ((uintptr_t)0)
#define SLOT_GONE ((uintptr_t)1)
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *set_slots;
static size_t set_cap, set_used;       /* used counts live + gone slots */
static _Atomic size_t set_live;        /* read without the lock: 0 means none */

static size_t slot_of(uintptr_t p, size_t cap)
{
    return (size_t)(((p >> 12) * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (cap - 1);
}

static uintptr_t *set_find(uintptr_t p)
{
    if (!set_cap)
        return NULL;
    for (size_t i = slot_of(p, set_cap);; i = (i + 1) & (set_cap - 1)) {
        if (set_slots[i] == p)
            return &set_slots[i];
        if (set_slots[i] == SLOT_EMPTY)
            return NULL;
    }
}

static int set_grow(void)
{
    size_t cap = set_cap ? set_cap * 2 : 64;
    while (set_live * 2 >= cap)
        cap *= 2;
    uintptr_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t j = 0; j < set_cap; j++) {
        uintptr_t p = set_slots[j];
        if (p == SLOT_EMPTY || p == SLOT_GONE)
            continue;
        size_t i = slot_of(p, cap);
        while (slots[i] != SLOT_EMPTY)
            i = (i + 1) & (cap - 1);
        slots[i] = p;
    }
    free(set_slots);
    set_slots = slots;
    set_cap = cap;
    set_used = set_live;
    return 0;
}

/* Room for one more entry; caller holds set_lock. */
static int set_reserve(void)
{
    if ((set_used + 1) * 4 < set_cap * 3)
        return 0;
    if (set_grow() == 0 || set_used + 1 < set_cap)
        return 0;
    return -1;
}

/* Caller holds set_lock and has reserved room. */
static void set_add(uintptr_t p)
{
    size_t i = slot_of(p, set_cap);
    while (set_slots[i] != SLOT_EMPTY && set_slots[i] != SLOT_GONE)
        i = (i + 1) & (set_cap - 1);
    if (set_slots[i] == SLOT_EMPTY)
        set_used++;
    set_slots[i] = p;
    set_live++;
}

/* Remove p if it is a libhp pointer; 1 if it was. */
static int set_take(void *ptr)
{
    if (!ptr || !atomic_load(&set_live))
        return 0;
    pthread_mutex_lock(&set_lock);
    uintptr_t *slot = set_find((uintptr_t)ptr);
    if (slot) {
        *slot = SLOT_GONE;
        set_live--;
    }
    pthread_mutex_unlock(&set_lock);
    return slot != NULL;
}

/* A fork while another thread holds set_lock must not leave it locked in
 * the child (numpy may allocate there): hold it across fork. */
static void set_lock_prepare(void)
{
    pthread_mutex_lock(&set_lock);
    pthread_mutex_lock(&place_lock);
}

static void set_lock_release(void)
{
    pthread_mutex_unlock(&place_lock);
    pthread_mutex_unlock(&set_lock);
}

static void *alloc_placed(size_t size, uint64_t flags)
{
    uint64_t nodes[HPN_MAX_NODE / 64];
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    pthread_mutex_lock(&place_lock);
    opts.numa_mode = place_mode;
    memcpy(nodes, place_nodes, sizeof(nodes));
    pthread_mutex_unlock(&place_lock);
    if (opts.numa_mode == HP_NUMA_DEFAULT)
        return hpn.alloc(size, flags);
    opts.flags = flags;
    opts.numa_max_node = HPN_MAX_NODE;
    opts.numa_nodes = nodes;
    return hpn.alloc_ex(size, &opts);
}

static void *from_libhp(size_t size, uint64_t extra_flags)
{
    void *p = alloc_placed(size, atomic_load(&hpn.flags) | extra_flags);
    if (!p) {
        atomic_fetch_add(&hpn.n_fallback, 1);
        return NULL;
    }
    pthread_mutex_lock(&set_lock);
    int rc = set_reserve();
    if (rc == 0)
        set_add((uintptr_t)p);
    pthread_mutex_unlock(&set_lock);
    if (rc < 0) {
        hpn.free(p);
        atomic_fetch_add(&hpn.n_fallback, 1);
        return NULL;
    }
    atomic_fetch_add(&hpn.n_alloc, 1);
    return p;
}

static void *hpn_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= atomic_load(&hpn.min_size)) {
        void *p = from_libhp(size, HP_F_NOZERO);
        if (p)
            return p;
    }
    return hpn.deflt.malloc(hpn.deflt.ctx, size);
}

static void *hpn_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    size_t size;
    if (!__builtin_mul_overflow(nelem, elsize, &size) && size >= atomic_load(&hpn.min_size)) {
        void *p = from_libhp(size, 0);   /* libhp hands out zeroed memory */
        if (p)
            return p;
    }
    return hpn.deflt.calloc(hpn.deflt.ctx, nelem, elsize);
}

static void *hpn_realloc(void *ctx, void *ptr, size_t new_size)
{
    (void)ctx;
    if (!ptr)
        return hpn_malloc(ctx, new_size);
    if (!atomic_load(&set_live))
        return hpn.deflt.realloc(hpn.deflt.ctx, ptr, new_size);
    /* The lock is held across hp_realloc so that the new pointer always has
     * a slot: a large block moves page tables, so this is short. */
    pthread_mutex_lock(&set_lock);
    uintptr_t *slot = set_find((uintptr_t)ptr);
    if (!slot) {
        pthread_mutex_unlock(&set_lock);
        return hpn.deflt.realloc(hpn.deflt.ctx, ptr, new_size);
    }
    void *p = NULL;
    if (set_reserve() == 0) {
        /* hp_realloc(p, 0) would free p; numpy asks for at least one byte.
         * On failure ptr is untouched and stays in the set. */
        p = hpn.realloc(ptr, new_size ? new_size : 1, atomic_load(&hpn.flags) | HP_F_NOZERO);
        if (p) {
            slot = set_find((uintptr_t)ptr);   /* set_reserve may have rehashed */
            *slot = SLOT_GONE;
            set_live--;
            set_add((uintptr_t)p);
            atomic_fetch_add(&hpn.n_realloc, 1);
        }
    }
    pthread_mutex_unlock(&set_lock);
    return p;
}

static void hpn_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (set_take(ptr)) {
        hpn.free(ptr);
        atomic_fetch_add(&hpn.n_free, 1);
        return;
    }
    hpn.deflt.free(hpn.deflt.ctx, ptr, size);
}

static PyDataMem_Handler handler = {
    "libhp",
    1,
    {NULL, hpn_malloc, hpn_calloc, hpn_realloc, hpn_free},
};

static PyObject *handler_capsule;

/* The placement of configure(): mode 0 with no nodes, or an HP_NUMA_* mode
 * with a tuple of node numbers below HPN_MAX_NODE, into *mode and nodes. */
static int parse_placement(PyObject *mode_obj, PyObject *nodes_obj, uint32_t *mode,
                           uint64_t nodes[HPN_MAX_NODE / 64])
{
    unsigned long m = PyLong_AsUnsignedLong(mode_obj);
    if (m == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    if (m > HP_NUMA_INTERLEAVE) {
        PyErr_Format(PyExc_ValueError, "numa_mode %lu is not an HP_NUMA_* mode", m);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(nodes_obj);
    if ((m == HP_NUMA_DEFAULT) != (n == 0)) {
        PyErr_SetString(PyExc_ValueError, "nodes must be given with a mode, and only then");
        return -1;
    }
    memset(nodes, 0, HPN_MAX_NODE / 8);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long node = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(nodes_obj, i));
        if (node == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        if (node >= HPN_MAX_NODE) {
            PyErr_Format(PyExc_ValueError, "node %lu is out of range 0..%d", node,
                         HPN_MAX_NODE - 1);
            return -1;
        }
        nodes[node / 64] |= UINT64_C(1) << (node % 64);
    }
    *mode = (uint32_t)m;
    return 0;
}

/* configure(path, hp_alloc_address, min_size, flags, numa_mode=0, nodes=()) */
static PyObject *configure(PyObject *self, PyObject *args)
{
    const char *path;
    PyObject *addr_obj, *min_obj, *flags_obj, *mode_obj = NULL, *nodes_obj = NULL;
    (void)self;
    /* "K" would wrap an int past 2^64 silently (2**64 + 5 becoming 5):
     * PyLong_AsUnsignedLongLong refuses it with OverflowError instead. */
    if (!PyArg_ParseTuple(args, "sO!O!O!|O!O!", &path, &PyLong_Type, &addr_obj, &PyLong_Type,
                          &min_obj, &PyLong_Type, &flags_obj, &PyLong_Type, &mode_obj,
                          &PyTuple_Type, &nodes_obj))
        return NULL;
    uint32_t mode = HP_NUMA_DEFAULT;
    uint64_t nodes[HPN_MAX_NODE / 64] = {0};
    if (mode_obj && !nodes_obj && PyLong_AsLong(mode_obj) != 0)
        return PyErr_Format(PyExc_ValueError, "a numa_mode needs nodes");
    if (nodes_obj && parse_placement(mode_obj, nodes_obj, &mode, nodes) < 0)
        return NULL;
    unsigned long long alloc_addr = PyLong_AsUnsignedLongLong(addr_obj);
    if (alloc_addr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    unsigned long long min_size = PyLong_AsUnsignedLongLong(min_obj);
    if (min_size == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    unsigned long long flags = PyLong_AsUnsignedLongLong(flags_obj);
    if (flags == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (min_size == 0 || min_size > SIZE_MAX)
        return PyErr_Format(PyExc_ValueError, "min_size %llu is out of range 1..%zu", min_size,
                            (size_t)SIZE_MAX);
    if (!hpn.dl) {
        void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (!dl)
            return PyErr_Format(PyExc_ImportError,
                                "hp.numpy: %s is not the libhp loaded in this process: %s",
                                path, dlerror());
        hp_alloc_fn a = (hp_alloc_fn)dlsym(dl, "hp_alloc");
        hp_alloc_ex_fn ax = (hp_alloc_ex_fn)dlsym(dl, "hp_alloc_ex");
        hp_realloc_fn r = (hp_realloc_fn)dlsym(dl, "hp_realloc");
        hp_free_fn f = (hp_free_fn)dlsym(dl, "hp_free");
        if (!a || !ax || !r || !f || (uintptr_t)a != (uintptr_t)alloc_addr) {
            dlclose(dl);
            return PyErr_Format(PyExc_ImportError,
                                "hp.numpy: %s does not export the hp_alloc the binding uses", path);
        }
        hpn.alloc = a;
        hpn.alloc_ex = ax;
        hpn.realloc = r;
        hpn.free = f;
        hpn.dl = dl;
    }
    atomic_store(&hpn.min_size, (size_t)min_size);
    atomic_store(&hpn.flags, (uint64_t)flags);
    pthread_mutex_lock(&place_lock);
    place_mode = mode;
    memcpy(place_nodes, nodes, sizeof(place_nodes));
    pthread_mutex_unlock(&place_lock);
    Py_INCREF(handler_capsule);
    return handler_capsule;
}

static PyObject *stats(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    pthread_mutex_lock(&set_lock);
    size_t live = set_live;
    pthread_mutex_unlock(&set_lock);
    uint64_t nodes[HPN_MAX_NODE / 64];
    pthread_mutex_lock(&place_lock);
    uint32_t mode = place_mode;
    memcpy(nodes, place_nodes, sizeof(nodes));
    pthread_mutex_unlock(&place_lock);
    PyObject *node_list = PyList_New(0);
    for (unsigned n = 0; node_list && n < HPN_MAX_NODE; n++) {
        if (!(nodes[n / 64] >> (n % 64) & 1u))
            continue;
        PyObject *item = PyLong_FromUnsignedLong(n);
        if (!item || PyList_Append(node_list, item) < 0)
            Py_CLEAR(node_list);
        Py_XDECREF(item);
    }
    PyObject *node_tuple = node_list ? PyList_AsTuple(node_list) : NULL;
    Py_XDECREF(node_list);
    if (!node_tuple)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:n,s:K,s:K,s:I,s:N}",
                         "allocs", (unsigned long long)atomic_load(&hpn.n_alloc),
                         "reallocs", (unsigned long long)atomic_load(&hpn.n_realloc),
                         "frees", (unsigned long long)atomic_load(&hpn.n_free),
                         "fallbacks", (unsigned long long)atomic_load(&hpn.n_fallback),
                         "live", (Py_ssize_t)live,
                         "min_size", (unsigned long long)atomic_load(&hpn.min_size),
                         "flags", (unsigned long long)atomic_load(&hpn.flags),
                         "numa_mode", (unsigned)mode, "nodes", node_tuple);
}

/* set_handler(capsule) -> previous handler capsule (PyDataMem_SetHandler). */
static PyObject *set_handler(PyObject *self, PyObject *capsule)
{
    (void)self;
    return PyDataMem_SetHandler(capsule == Py_None ? NULL : capsule);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(libhp_path, hp_alloc_address, min_size, flags, numa_mode=0, nodes=()) -> "
     "handler capsule"},
    {"stats", stats, METH_NOARGS, "counters of the handler"},
    {"set_handler", set_handler, METH_O,
     "PyDataMem_SetHandler(capsule or None); returns the previous handler"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hp_numpy", "numpy data-memory handler on libhp", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hp_numpy(void);
PyMODINIT_FUNC PyInit__hp_numpy(void)
{
    import_array();
    PyDataMem_Handler *def = PyCapsule_GetPointer(PyDataMem_DefaultHandler, "mem_handler");
    if (!def)
        return NULL;
    hpn.deflt = def->allocator;
    if (pthread_atfork(set_lock_prepare, set_lock_release, set_lock_release) != 0) {
        PyErr_SetString(PyExc_ImportError, "_hp_numpy: pthread_atfork failed");
        return NULL;
    }
    atomic_store(&hpn.min_size, (size_t)1 << 20);
    handler_capsule = PyCapsule_New(&handler, "mem_handler", NULL);
    if (!handler_capsule)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObject(m, "handler", handler_capsule) == 0) {
        Py_INCREF(handler_capsule);
        return m;
    }
    Py_XDECREF(m);
    return NULL;
}
