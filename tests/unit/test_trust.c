/*
 * Plugin trust, attacked the way another user would: the victim is a root
 * process that uses libhp; the attacker is user nobody (a child that drops
 * to uid/gid 65534 after opening the directories it is given, so it needs
 * no access to the path above them). The attacker's library has a
 * constructor that appends a byte to a marker file (fixtures/evil.c): a
 * single byte means attacker code ran as root, and fails the test.
 *
 * Every directory a test loads from is made (mkdtemp) inside a 0755 root
 * directory under the build tree, whose chain up to "/" the loader must
 * trust; if it does not, the tests skip and say why.
 */
#include <hp.h>

#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define NOBODY 65534
/* The race is proven in the plain build (1,000 loads). Under valgrind and
 * ASan, which look for memory errors, not races, a fork costs 5 to 50 times
 * more: the race runs fewer rounds there. */
#if defined(__SANITIZE_ADDRESS__)
#define RACE_ROUNDS 200
#else
#define RACE_ROUNDS 1000
#endif
#define RACE_ROUNDS_VALGRIND 40

static const char *fixture_dir, *backend_dir, *evil_lib, *many_lib, *base_dir;
static char *root_dir;      /* 0755, root's, inside the build tree */
static char *good_lib;      /* fixtures/fx_good.so, a working plugin */
static char marker[600];    /* the attacker's constructor appends here */
static const char *skip_why;

/* Every string a test allocates is kept here until the test ends (and the
 * group's until the group ends): a forked child then never holds the only
 * pointer in a register, which valgrind would report as lost at its exit. */
static char *kept[256];
static size_t n_kept, n_kept_group;

static char *keep(char *p)
{
    assert_non_null(p);
    assert_true(n_kept < sizeof(kept) / sizeof(*kept));
    return kept[n_kept++] = p;
}

static void release_to(size_t n)
{
    while (n_kept > n)
        free(kept[--n_kept]);
}

static int release(void **state)
{
    (void)state;
    release_to(n_kept_group);
    return 0;
}

static char *path_of(const char *dir, const char *name)
{
    char *p = keep(malloc(strlen(dir) + strlen(name) + 2));
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static void copy_fd(int in, int dirfd, const char *name, mode_t mode)
{
    int out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(out >= 0);
    char buf[65536];
    ssize_t got;
    off_t off = 0;
    while ((got = pread(in, buf, sizeof(buf), off)) > 0) {
        assert_int_equal(write(out, buf, (size_t)got), got);
        off += got;
    }
    assert_int_equal(fchmod(out, mode), 0);
    close(out);
}

static void copy_file(const char *from, const char *dir, const char *name, mode_t mode)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), d = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(in >= 0 && d >= 0);
    copy_fd(in, d, name, mode);
    close(in);
    close(d);
}

/* Copy every *.so of src into dst. */
static void copy_plugins(const char *src, const char *dst)
{
    DIR *d = opendir(src);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".so"))
            continue;
        char *from = path_of(src, e->d_name);
        copy_file(from, dst, e->d_name, 0755);
    }
    closedir(d);
}

static char *make_dir_in(const char *parent, mode_t mode)
{
    char *dir = path_of(parent, "d-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, mode), 0);
    return dir;
}

/* A root-owned 0755 copy of lib named name, alone in a fresh trusted
 * directory (*dir_out): a "system library" for links to point at. */
static char *trusted_copy(const char *lib, const char *name, char **dir_out)
{
    *dir_out = make_dir_in(root_dir, 0755);
    copy_file(lib, *dir_out, name, 0755);
    return path_of(*dir_out, name);
}

static void remove_tree(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static long marks(void)
{
    struct stat st;
    return stat(marker, &st) == 0 ? (long)st.st_size : 0;
}

/* Run fn(arg) in a child that is user nobody (uid, gid 65534, no
 * supplementary groups); returns its exit status. */
static int as_nobody(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
            setresuid(NOBODY, NOBODY, NOBODY))
            _exit(90);
        _exit(fn(arg));
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int loaded(const char *name)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && !strcmp(bi.name, name) &&
            !strstr(bi.reason, "rejected"))
            return 1;
    }
    return 0;
}

/* A rejected entry whose reason holds every one of the words. */
static int refused_with(const char *why)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK)
            return 0;
        if (strstr(bi.reason, "rejected") && strstr(bi.reason, why)) {
            fprintf(stderr, "# %s: %s\n", bi.path, bi.reason);
            return 1;
        }
    }
    return 0;
}

/* The base-page fallback is there and serves. */
static int fallback_serves(void)
{
    void *p = hp_alloc(4096, 0);
    return p && hp_free(p) == HP_OK && loaded("fallback");
}

struct victim {
    const char *dir;
    const char *refused;    /* a rejection reason that must be listed, or NULL */
    int good_loads;         /* fixture-good must (1) or must not (0) be loaded */
};

static int child_victim(void *arg)
{
    const struct victim *v = arg;
    setenv("HP_BACKEND_PATH", v->dir, 1);
    CHILD_CHECK(fallback_serves());
    CHILD_CHECK(loaded("fixture-good") == v->good_loads);
    if (v->refused)
        CHILD_CHECK(refused_with(v->refused));
    return 0;
}

/* A root process loads dir; returns the child's status (0: as expected). */
static int victim_run(const char *dir, const char *refused, int good_loads)
{
    struct victim v = {dir, refused, good_loads};
    return run_in_child(child_victim, &v);
}

static void victim_loads(const char *dir, const char *refused, int good_loads)
{
    assert_int_equal(victim_run(dir, refused, good_loads), 0);
}

/* The victim loads dir; first of all, the attacker's code must not have run. */
static void victim_unharmed(const char *dir, const char *refused, int good_loads)
{
    long before = marks();
    int rc = victim_run(dir, refused, good_loads);
    long ran = marks() - before;
    if (ran)
        print_message("# the attacker's constructor ran %ld times in the victim\n", ran);
    assert_int_equal(ran, 0);
    assert_int_equal(rc, 0);
}

/* ---- what the attacker does (as nobody, on descriptors from root) ---- */

struct attack {
    int dirfd;          /* the directory the attacker works in */
    int evilfd;         /* the attacker's library, to copy */
    const char *name;   /* where to plant it */
    const char *link;   /* a symlink to create, or NULL */
    const char *target; /* its target */
};

static int plant(void *arg)
{
    const struct attack *a = arg;
    if (a->link && symlinkat(a->target, a->dirfd, a->link) != 0)
        return 10;
    if (a->name) {
        int out = openat(a->dirfd, a->name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (out < 0)
            return 11;
        char buf[65536];
        ssize_t got;
        off_t off = 0;
        while ((got = pread(a->evilfd, buf, sizeof(buf), off)) > 0) {
            if (write(out, buf, (size_t)got) != got)
                return 12;
            off += got;
        }
        struct stat st;
        if (fstat(out, &st) != 0 || (st.st_uid == geteuid() && fchmod(out, 0666) != 0))
            return 13;
        close(out);
    }
    return 0;
}

static void attack_as_nobody(const char *dir, const char *name, const char *link,
                             const char *target)
{
    struct attack a = {open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
                       open(evil_lib, O_RDONLY | O_CLOEXEC), name, link, target};
    assert_true(a.dirfd >= 0 && a.evilfd >= 0);
    assert_int_equal(as_nobody(plant, &a), 0);
    close(a.dirfd);
    close(a.evilfd);
}

static int need_trust(void)
{
    if (skip_why) {
        print_message("# SKIP: %s\n", skip_why);
        return 0;
    }
    return 1;
}

/* A skipped test passes (it says why): cmocka's skip() is "not ok # SKIP",
 * which meson counts as a failure. */
#define NEED_TRUST()       \
    do {                   \
        if (!need_trust()) \
            return;        \
    } while (0)

static int need_root(void)
{
    if (skip_why) {
        print_message("# SKIP: %s\n", skip_why);
        return 0;
    }
    if (!is_root()) {
        print_message("# SKIP: needs root (the victim) and user nobody (the attacker)\n");
        return 0;
    }
    return 1;
}

#define NEED_ROOT()       \
    do {                  \
        if (!need_root()) \
            return;       \
    } while (0)

/* A trusted plugin with a long name (into name[256]), and the attacker's
 * file named by the part of "dir/name" that fits 255 bytes (returned): a
 * loader that builds the dlopen name in a 256-byte buffer loads the
 * attacker's file. NULL if dir is too long for the trick. */
static char *long_name_attack(const char *dir, char *name)
{
    size_t dl = strlen(dir);
    if (dl > 200)
        return NULL;
    memset(name, 'p', 247);
    memcpy(name + 247, ".so", 4);
    return keep(strndup(name, 255 - dl - 1));
}

static void truncated_name_in_sticky_dir(void **state)
{
    (void)state;
    NEED_ROOT();
    char *dir = make_dir_in(root_dir, 01777), name[256];
    char *prefix = long_name_attack(dir, name);
    if (!prefix) {
        print_message("# SKIP: the test directory's path is too long for the attack\n");
        remove_tree(dir);
        return;
    }
    copy_file(good_lib, dir, name, 0755);
    attack_as_nobody(dir, prefix, NULL, NULL);
    victim_unharmed(dir, "writable by others (sticky bit or not)", 0);
    remove_tree(dir);
}

static void truncated_name_through_symlink_in_nobodys_dir(void **state)
{
    (void)state;
    NEED_ROOT();
    char *trusted, *target = trusted_copy(evil_lib, "libz.so.1", &trusted);
    char *dir = make_dir_in(root_dir, 0755), name[256];
    assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
    char *prefix = long_name_attack(dir, name);
    if (!prefix) {
        print_message("# SKIP: the test directory's path is too long for the attack\n");
        remove_tree(dir);
        remove_tree(trusted);
            return;
    }
    /* The checked name is a link to a root-owned library (whose constructor
     * would leave a mark too); the loaded name is the attacker's file. */
    attack_as_nobody(dir, prefix, name, target);
    victim_unharmed(dir, "owned by neither root nor the running user", 0);
    remove_tree(dir);
    remove_tree(trusted);
}

/* A long name in a trusted directory loads (by descriptor, not by name). */
static int child_long_name(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    CHILD_CHECK(loaded("fixture-good"));
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fixture-good";
    void *p = hp_alloc_ex(8192, &o);
    CHILD_CHECK(p && hp_free(p) == HP_OK);
    return 0;
}

static void long_names_load_from_a_trusted_dir(void **state)
{
    (void)state;
    NEED_ROOT();
    char *dir = make_dir_in(root_dir, 0755);
    char name[256];
    memset(name, 'q', 251);
    strcpy(name + 251, ".so");
    copy_file(good_lib, dir, name, 0755);
    assert_int_equal(run_in_child(child_long_name, dir), 0);
    remove_tree(dir);
}

static void symlink_is_never_opened(void **state)
{
    (void)state;
    NEED_ROOT();
    char *trusted, *target = trusted_copy(evil_lib, "libz.so.1", &trusted);
    char *dir = make_dir_in(root_dir, 0755);
    copy_file(good_lib, dir, "fx_good.so", 0755);
    char *link = path_of(dir, "z.so");
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(lchown(link, NOBODY, NOBODY), 0);
    /* The directory is read (fixture-good loads), the link is refused
     * without being opened: the library's constructor never runs. */
    victim_unharmed(dir, "a symbolic link", 1);
    remove_tree(dir);
    remove_tree(trusted);
}

/* ---- files that are not regular files ---- */

struct special {
    const char *dir;
    const char *fifo;     /* a FIFO named *.so, no writer */
    const char *device;   /* a character device named *.so, or NULL */
};

/* The entry listed for path is a rejected one whose reason holds why. */
static int refused_at(const char *path, const char *why)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK)
            return 0;
        if (!strcmp(bi.path, path)) {
            fprintf(stderr, "# %s: %s\n", bi.path, bi.reason);
            return !bi.available && strstr(bi.reason, "rejected") && strstr(bi.reason, why);
        }
    }
    fprintf(stderr, "# %s not listed\n", path);
    return 0;
}

static int child_special(void *arg)
{
    const struct special *s = arg;
    /* open(2) of a FIFO for reading without O_NONBLOCK waits for a writer
     * (fifo(7); fs/pipe.c fifo_open, wait_for_partner), here for ever: a
     * loader that does so ends the child with SIGALRM, not the suite with
     * a hang. */
    alarm(20);
    setenv("HP_BACKEND_PATH", s->dir, 1);
    CHILD_CHECK(fallback_serves());
    CHILD_CHECK(loaded("fixture-good"));
    CHILD_CHECK(refused_at(s->fifo, "not a regular file"));
    if (s->device)
        CHILD_CHECK(refused_at(s->device, "not a regular file"));
    return 0;
}

/* The names of the files that got IN_OPEN on the watch ifd, each after a
 * space, into seen[cap]. */
static void opened_names(int ifd, char *seen, size_t cap)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    seen[0] = '\0';
    while ((n = read(ifd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            size_t used = strlen(seen);
            if ((e->mask & IN_OPEN) && e->len)
                snprintf(seen + used, cap - used, " %s", e->name);
            p += sizeof(*e) + e->len;
        }
    }
}

/* 1 if name is one of the space-separated names in seen. */
static int listed(const char *seen, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = seen; (s = strchr(s, ' ')); ) {
        s++;
        if (!strncmp(s, name, n) && (s[n] == ' ' || s[n] == '\0'))
            return 1;
    }
    return 0;
}

/* README "Plugin trust", rule 4: a FIFO or a device named *.so is refused
 * after fstatat, without an open(2), which for a FIFO with no writer
 * blocks and for a device runs its driver's open. Loading goes on, and
 * inotify (IN_OPEN, inotify(7)) shows which files the loader opened: the
 * plugin beside them, never them. */
static void fifos_and_devices_are_never_opened(void **state)
{
    (void)state;
    NEED_TRUST();
    char *dir = make_dir_in(root_dir, 0755);
    copy_file(good_lib, dir, "fx_good.so", 0755);
    struct special s = {dir, path_of(dir, "x.so"), NULL};
    assert_int_equal(mkfifo(s.fifo, 0644), 0);
    char *device = path_of(dir, "y.so");
    if (mknod(device, S_IFCHR | 0644, makedev(1, 3)) == 0)  /* /dev/null's numbers */
        s.device = device;
    else
        print_message("# SKIP: the device part (mknod: %s)\n", strerror(errno));
    int ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(ifd >= 0);
    assert_true(inotify_add_watch(ifd, dir, IN_OPEN) >= 0);
    int rc = run_in_child(child_special, &s);
    if (rc == 128 + SIGALRM)
        print_message("# the loader blocked on the FIFO (killed by SIGALRM after 20 s)\n");
    assert_int_equal(rc, 0);
    char seen[1024];
    opened_names(ifd, seen, sizeof(seen));
    print_message("# files the loader opened:%s\n", seen);
    assert_true(listed(seen, "fx_good.so"));  /* inotify sees the loader's opens */
    assert_false(listed(seen, "x.so"));
    assert_false(listed(seen, "y.so"));
    close(ifd);
    remove_tree(dir);
}

/* ---- the check-then-use race ---- */

struct race {
    atomic_long swaps;
    atomic_int stop;
    int dirfd;
};

static int swapper(void *arg)
{
    struct race *r = arg;
    while (!atomic_load(&r->stop) && !getenv("XNOSWAP")) {
        if (renameat2(r->dirfd, "x.so", r->dirfd, "y", RENAME_EXCHANGE) != 0)
            return 20;
        atomic_fetch_add(&r->swaps, 1);
    }
    return 0;
}

static int child_load_once(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    return hp_backend_count() >= 1 ? 0 : 1;
}

/* x.so flips between a link to a root-owned plugin and the attacker's
 * file; a victim process loads the directory RACE_ROUNDS times (and until
 * the helper has swapped that often). The helper runs as swap_uid. */
static void race(const char *dir, uid_t swap_uid)
{
    struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
    assert_true(r != MAP_FAILED);
    r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(r->dirfd >= 0);
    fflush(NULL);
    pid_t helper = fork();
    if (helper == 0) {
        if (swap_uid != 0 && (setgroups(0, NULL) || setresgid(swap_uid, swap_uid, swap_uid) ||
                              setresuid(swap_uid, swap_uid, swap_uid)))
            _exit(90);
        _exit(swapper(r));
    }
    long before = marks();
    int rounds = 0, want = getenv("HPTEST_VALGRIND") ? RACE_ROUNDS_VALGRIND : RACE_ROUNDS;
    while (rounds < want || atomic_load(&r->swaps) < want) {
        assert_int_equal(run_in_child(child_load_once, (void *)dir), 0);
        rounds++;
        if (rounds > 100 * want)
            break;
    }
    atomic_store(&r->stop, 1);
    int status;
    waitpid(helper, &status, 0);
    long ran = marks() - before;
    print_message("# %d loads while the helper (uid %u) swapped %ld times: the attacker's "
                  "constructor ran %ld times\n", rounds, (unsigned)swap_uid,
                  atomic_load(&r->swaps), ran);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(atomic_load(&r->swaps) >= want);
    assert_int_equal(ran, 0);
    close(r->dirfd);
    munmap(r, sizeof(*r));
}

/* As the attacker would: nobody owns the directory and swaps in it. */
static void rename_exchange_race_by_nobody(void **state)
{
    (void)state;
    NEED_ROOT();
    char *trusted, *target = trusted_copy(good_lib, "fx_good.so", &trusted);
    char *dir = make_dir_in(root_dir, 0755);
    assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
    attack_as_nobody(dir, "y", "x.so", target);
    race(dir, NOBODY);
    remove_tree(dir);
    remove_tree(trusted);
}

/* The same swap in a trusted directory (a helper of root's), with the
 * attacker's file owned by nobody: the descriptor that is checked is the
 * one that is loaded, so the swap never gets it loaded either. */
static void rename_exchange_race_in_trusted_dir(void **state)
{
    (void)state;
    NEED_ROOT();
    char *trusted, *target = trusted_copy(good_lib, "fx_good.so", &trusted);
    char *dir = make_dir_in(root_dir, 0755);
    char *link = path_of(dir, "x.so"), *evil = path_of(dir, "y");
    assert_int_equal(symlink(target, link), 0);
    copy_file(evil_lib, dir, "y", 0644);
    assert_int_equal(chown(evil, NOBODY, NOBODY), 0);
    race(dir, 0);
    remove_tree(dir);
    remove_tree(trusted);
}

/* ---- the directory chain ---- */

static int swap_in_own_dir(void *arg)
{
    const struct attack *a = arg;
    if (renameat(a->dirfd, "plugins", a->dirfd, "plugins.orig") != 0)
        return 30;
    if (mkdirat(a->dirfd, "plugins", 0755) != 0)
        return 31;
    int d = openat(a->dirfd, "plugins", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || symlinkat(a->target, d, "x.so") != 0)
        return 32;
    close(d);
    return 0;
}

static void foreign_owned_directory_chain(void **state)
{
    (void)state;
    NEED_ROOT();
    char *trusted, *target = trusted_copy(evil_lib, "libz.so.1", &trusted);
    char *parent = make_dir_in(root_dir, 0755);
    char *dir = path_of(parent, "plugins");
    assert_int_equal(mkdir(dir, 0755), 0);
    copy_file(good_lib, dir, "fx_good.so", 0755);
    victim_loads(dir, NULL, 1);  /* control: a trusted chain loads */

    /* The parent is nobody's: nobody replaces the plugin directory with
     * their own, holding a link to a root-owned library. */
    assert_int_equal(chown(parent, NOBODY, NOBODY), 0);
    struct attack a = {open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1, NULL, NULL, target};
    assert_true(a.dirfd >= 0);
    assert_int_equal(as_nobody(swap_in_own_dir, &a), 0);
    close(a.dirfd);
    victim_unharmed(dir, "owned by neither root nor the running user", 0);
    /* Back to the original directory, then the other parent modes. */
    assert_int_equal(chown(parent, 0, 0), 0);
    char *orig = path_of(parent, "plugins.orig"), cmd[1400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mv '%s' '%s'", dir, orig, dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(chmod(parent, 01777), 0);
    victim_loads(dir, "writable by others (sticky bit or not)", 0);
    assert_int_equal(chmod(parent, 0775), 0);
    assert_int_equal(chown(parent, 0, NOBODY), 0);
    victim_loads(dir, "writable by a group other than root's", 0);
    assert_int_equal(chown(parent, 0, 0), 0);  /* group-writable by root's group: trusted */
    victim_loads(dir, NULL, 1);
    remove_tree(parent);
    remove_tree(trusted);
}

/* A link in a trusted directory is followed, and its target checked. */
static void directory_links_are_walked_and_checked(void **state)
{
    (void)state;
    NEED_ROOT();
    char *top = make_dir_in(root_dir, 0755);
    char *real = path_of(top, "real"), *via = path_of(top, "via"), *open_dir = path_of(top, "open");
    assert_int_equal(mkdir(real, 0755), 0);
    copy_file(good_lib, real, "fx_good.so", 0755);
    assert_int_equal(symlink("real", via), 0);  /* relative */
    victim_loads(via, NULL, 1);
    /* A relative target that climbs with "..": back to a checked directory. */
    const char *top_name = strrchr(top, '/') + 1;
    char *dotdot = keep(malloc(strlen(top_name) + 16));
    sprintf(dotdot, "../%s/real", top_name);
    assert_int_equal(unlink(via), 0);
    assert_int_equal(symlink(dotdot, via), 0);
    victim_loads(via, NULL, 1);
    /* A link that leads through a world-writable directory is refused. */
    assert_int_equal(mkdir(open_dir, 0755), 0);
    char *inner = path_of(open_dir, "plugins");
    assert_int_equal(mkdir(inner, 0755), 0);
    copy_file(good_lib, inner, "fx_good.so", 0755);
    assert_int_equal(chmod(open_dir, 0777), 0);
    assert_int_equal(unlink(via), 0);
    assert_int_equal(symlink("open/plugins", via), 0);
    victim_loads(via, "writable by others", 0);
    remove_tree(top);
}

static void group_writable_plugin_file(void **state)
{
    (void)state;
    NEED_ROOT();
    char *dir = make_dir_in(root_dir, 0755);
    char *file = path_of(dir, "fx_good.so");
    copy_file(good_lib, dir, "fx_good.so", 0775);
    assert_int_equal(chown(file, 0, 0), 0);
    victim_loads(dir, NULL, 1);  /* group-writable by root's group: trusted */
    /* Group nogroup may write it: a member overwrites it with their code. */
    assert_int_equal(chown(file, 0, NOBODY), 0);
    assert_int_equal(chmod(file, 0775), 0);
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct attack a = {d, open(evil_lib, O_RDONLY | O_CLOEXEC), "fx_good.so", NULL, NULL};
    assert_true(a.dirfd >= 0 && a.evilfd >= 0);
    assert_int_equal(as_nobody(plant, &a), 0);
    close(a.dirfd);
    close(a.evilfd);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_uid, 0);  /* overwritten in place: still root's */
    victim_unharmed(dir, "writable by a group other than root's", 0);
    remove_tree(dir);
}

/* ---- a full directory never leaves libhp without a fallback ---- */

static void write_junk(const char *dir, int n)
{
    for (int i = 0; i < n; i++) {
        char file[32];
        snprintf(file, sizeof(file), "00-junk-%03d.so", i);
        char *name = path_of(dir, file);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
        close(fd);
    }
}

static int count_refused(const char *word)
{
    int n = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && strstr(bi.reason, "rejected") &&
            strstr(bi.path, word))
            n++;
    }
    return n;
}

static int child_junk_and_plugins(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    void *p = hp_alloc(4096, 0);
    CHILD_CHECK(p && hp_free(p) == HP_OK);
    CHILD_CHECK(count_refused("00-junk-") == 40);
    CHILD_CHECK(loaded("fallback") && loaded("thp-madvise") && loaded("hugetlbfs") &&
                loaded("anon-orders"));
    return 0;
}

static void junk_files_do_not_crowd_out_plugins(void **state)
{
    (void)state;
    NEED_TRUST();
    char *dir = make_dir_in(root_dir, 0755);
    write_junk(dir, 40);
    copy_plugins(backend_dir, dir);
    assert_int_equal(run_in_child(child_junk_and_plugins, dir), 0);
    remove_tree(dir);
}

static int child_junk_only(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKEND_DIR", "/nonexistent/hp-backends", 1);  /* the junk alone */
    void *p = hp_alloc(4096, 0);
    CHILD_CHECK(p != NULL);
    CHILD_CHECK(hp_free(p) == HP_OK);
    CHILD_CHECK(count_refused("00-junk-") == 100);
    CHILD_CHECK(loaded("fallback") && hp_backend_count() == 101);
    return 0;
}

static void hundred_junk_files_alloc_works(void **state)
{
    (void)state;
    NEED_TRUST();
    char *dir = make_dir_in(root_dir, 0755);
    write_junk(dir, 100);
    assert_int_equal(run_in_child(child_junk_only, dir), 0);
    remove_tree(dir);
}

/* 40 loadable plugins: 31 load, each of the 9 others is listed with the
 * reason and logged, and the built-in fallback still has its slot. */
static int child_many(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKEND_DIR", "/nonexistent/hp-backends", 1);  /* the 40 plugins alone */
    setenv("HP_DEBUG", "1", 1);
    char log[] = "/tmp/hp-trust-log-XXXXXX";
    int fd = mkstemp(log);
    CHILD_CHECK(fd >= 0);
    unlink(log);
    int saved = dup(2);
    CHILD_CHECK(dup2(fd, 2) == 2);
    int32_t count = hp_backend_count();
    fflush(stderr);
    dup2(saved, 2);
    char text[65536];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    CHILD_CHECK(n > 0);
    text[n] = '\0';
    int logged = 0;
    for (const char *s = text; (s = strstr(s, "backends are loaded already")); s++)
        logged++;
    /* 28 of them: the slots of the three built-in plugins and the
     * fallback are kept for the built-ins' directory. */
    CHILD_CHECK(count == 41);
    CHILD_CHECK(count_refused("many-") == 12);
    CHILD_CHECK(logged == 12);
    CHILD_CHECK(refused_with("not loaded: 28 backends are loaded already"));
    CHILD_CHECK(loaded("fixture-many-27") && !loaded("fixture-many-28"));
    CHILD_CHECK(fallback_serves());
    return 0;
}

/* The same 40 plugins with the built-ins' directory: every built-in loads
 * all the same (the plugins never crowd them out). */
static int child_many_builtins(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    setenv("HP_BACKEND_DIR", backend_dir, 1);
    CHILD_CHECK(hp_backend_count() > 0);
    CHILD_CHECK(loaded("hugetlbfs") && loaded("thp-madvise") && loaded("anon-orders") &&
                loaded("fallback"));
    CHILD_CHECK(loaded("fixture-many-27") && !loaded("fixture-many-28"));
    return 0;
}

static void table_limit_is_logged_and_keeps_the_fallback(void **state)
{
    (void)state;
    NEED_TRUST();
    char *dir = make_dir_in(root_dir, 0755);
    for (int i = 0; i < 40; i++) {
        char name[32];
        snprintf(name, sizeof(name), "many-%02d.so", i);
        copy_file(many_lib, dir, name, 0755);
    }
    unsetenv("FX_MANY_SEQ");
    assert_int_equal(run_in_child(child_many, dir), 0);
    unsetenv("FX_MANY_SEQ");
    assert_int_equal(run_in_child(child_many_builtins, dir), 0);
    remove_tree(dir);
}

/* ---- loading by descriptor needs /proc; without it, refuse ---- */

static int child_no_proc(void *unused)
{
    (void)unused;
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("none", "/proc", "tmpfs", 0, NULL) != 0)
        return 77;
    setenv("HP_BACKEND_PATH", backend_dir, 1);
    CHILD_CHECK(refused_with("needs /proc"));
    CHILD_CHECK(!loaded("thp-madvise"));
    CHILD_CHECK(fallback_serves());
    return 0;
}

static void without_proc_plugins_are_refused(void **state)
{
    (void)state;
    NEED_ROOT();
    int rc = run_in_child(child_no_proc, NULL);
    if (rc == 77) {
        print_message("# SKIP: cannot mount over /proc in a private mount namespace\n");
        return;
    }
    assert_int_equal(rc, 0);
}

/* The tests need a directory of root's, 0755, whose chain the loader trusts. */
static int child_probe_base(void *dir)
{
    setenv("HP_BACKEND_PATH", dir, 1);
    if (loaded("fixture-good"))
        return 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) == HP_OK && strstr(bi.reason, "rejected"))
            fprintf(stderr, "# %s\n", bi.reason);
    }
    return 1;
}

static int setup(void **state)
{
    (void)state;
    root_dir = make_dir_in(base_dir, 0755);
    snprintf(marker, sizeof(marker), "%s", path_of(root_dir, "marker"));
    setenv("HP_TEST_MARKER", marker, 1);
    good_lib = path_of(fixture_dir, "fx_good.so");
    copy_file(good_lib, root_dir, "fx_good.so", 0755);
    if (run_in_child(child_probe_base, root_dir) != 0)
        skip_why = "the build directory is not in a trusted chain (see the reason above)";
    unlink(path_of(root_dir, "fx_good.so"));
    n_kept_group = n_kept;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove_tree(root_dir);
    release_to(0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s FIXTURE_DIR BACKEND_DIR EVIL_LIB MANY_LIB BASE_DIR\n",
                argv[0]);
        return 2;
    }
    fixture_dir = argv[1];
    backend_dir = argv[2];
    evil_lib = argv[3];
    many_lib = argv[4];
    base_dir = argv[5];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(truncated_name_in_sticky_dir, release),
        cmocka_unit_test_teardown(truncated_name_through_symlink_in_nobodys_dir, release),
        cmocka_unit_test_teardown(long_names_load_from_a_trusted_dir, release),
        cmocka_unit_test_teardown(symlink_is_never_opened, release),
        cmocka_unit_test_teardown(fifos_and_devices_are_never_opened, release),
        cmocka_unit_test_teardown(rename_exchange_race_by_nobody, release),
        cmocka_unit_test_teardown(rename_exchange_race_in_trusted_dir, release),
        cmocka_unit_test_teardown(foreign_owned_directory_chain, release),
        cmocka_unit_test_teardown(directory_links_are_walked_and_checked, release),
        cmocka_unit_test_teardown(group_writable_plugin_file, release),
        cmocka_unit_test_teardown(junk_files_do_not_crowd_out_plugins, release),
        cmocka_unit_test_teardown(hundred_junk_files_alloc_works, release),
        cmocka_unit_test_teardown(table_limit_is_logged_and_keeps_the_fallback, release),
        cmocka_unit_test_teardown(without_proc_plugins_are_refused, release),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
