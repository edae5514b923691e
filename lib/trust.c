#include "trust.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Owner and write bits, shared by directories and files. Group write is
 * accepted for gid 0 only: its members can become root anyway on a stock
 * system (they may write /etc files of group root), so they add nobody. */
static const char *untrusted_owner_or_mode(const struct stat *st)
{
    if (st->st_uid != 0 && st->st_uid != hp_os_euid())
        return "owned by neither root nor the running user";
    if (st->st_mode & S_IWOTH)
        return "writable by others (sticky bit or not)";
    if ((st->st_mode & S_IWGRP) && st->st_gid != 0)
        return "writable by a group other than root's";
    return NULL;
}

const char *hp_trust_dir(const struct stat *st)
{
    if (!S_ISDIR(st->st_mode))
        return "not a directory";
    return untrusted_owner_or_mode(st);
}

const char *hp_trust_file(const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        return "not a regular file";
    return untrusted_owner_or_mode(st);
}

/* The walk's state: the chain of checked directories from "/" (each an
 * O_PATH descriptor), the path still to walk, and the path walked so far
 * (for messages only). */
struct walk {
    int *fds;
    size_t depth, cap;
    char *todo;
    size_t pos;
    char *seen;
    unsigned links;
    char *why;
    size_t why_cap;
};

static int walk_fail(struct walk *w, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int walk_fail(struct walk *w, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, w->why_cap, fmt, ap);
    va_end(ap);
    return -err;
}

static int top(const struct walk *w)
{
    return w->fds[w->depth - 1];
}

/* Check the directory open at fd and push it on the chain. */
static int push(struct walk *w, int fd)
{
    struct stat st;
    int rc = hp_os_fstat(fd, &st);
    if (rc < 0) {
        hp_os_close(fd);
        return walk_fail(w, -rc, "%s: cannot stat: %s", w->seen, strerror(-rc));
    }
    const char *bad = hp_trust_dir(&st);
    if (bad) {
        hp_os_close(fd);
        return walk_fail(w, EPERM, "%s is %s", w->seen, bad);
    }
    if (w->depth == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        int *fds = realloc(w->fds, cap * sizeof(*fds));
        if (!fds) {
            hp_os_close(fd);
            return walk_fail(w, ENOMEM, "out of memory");
        }
        w->fds = fds;
        w->cap = cap;
    }
    w->fds[w->depth++] = fd;
    return 0;
}

static void pop_to(struct walk *w, size_t depth)
{
    while (w->depth > depth)
        hp_os_close(w->fds[--w->depth]);
}

/* Restart from "/" (an absolute path or link target). */
static int restart_at_root(struct walk *w)
{
    pop_to(w, 0);
    w->seen[0] = '/';
    w->seen[1] = '\0';
    int fd = hp_os_openat(AT_FDCWD, "/", O_PATH | O_DIRECTORY);
    if (fd < 0)
        return walk_fail(w, -fd, "/: cannot open: %s", strerror(-fd));
    return push(w, fd);
}

static int seen_append(struct walk *w, const char *comp, size_t len)
{
    size_t n = strlen(w->seen);
    char *s = realloc(w->seen, n + len + 2);
    if (!s)
        return walk_fail(w, ENOMEM, "out of memory");
    if (n > 1)
        s[n++] = '/';
    memcpy(s + n, comp, len);
    s[n + len] = '\0';
    w->seen = s;
    return 0;
}

static void seen_up(struct walk *w)
{
    char *slash = strrchr(w->seen, '/');
    if (slash)
        slash[slash == w->seen ? 1 : 0] = '\0';
}

/* The target of the symbolic link comp in the current directory, spliced in
 * front of what is left to walk. */
static int splice_link(struct walk *w, const char *comp)
{
    if (++w->links > HP_TRUST_MAX_LINKS)
        return walk_fail(w, ELOOP, "%s: more than %d symbolic links", w->seen,
                         HP_TRUST_MAX_LINKS);
    size_t cap = 256;
    char *target = NULL;
    for (;;) {
        char *t = realloc(target, cap);
        if (!t) {
            free(target);
            return walk_fail(w, ENOMEM, "out of memory");
        }
        target = t;
        int64_t n = hp_os_readlinkat(top(w), comp, target, cap);
        if (n < 0) {
            free(target);
            return walk_fail(w, (int)-n, "%s/%s: cannot read link: %s", w->seen, comp,
                             strerror((int)-n));
        }
        if ((size_t)n < cap) {
            target[n] = '\0';
            break;
        }
        cap *= 2;
    }
    const char *rest = w->todo + w->pos;
    size_t tl = strlen(target), rl = strlen(rest);
    char *todo = malloc(tl + rl + 2);
    if (!todo) {
        free(target);
        return walk_fail(w, ENOMEM, "out of memory");
    }
    memcpy(todo, target, tl);
    todo[tl] = '/';
    memcpy(todo + tl + 1, rest, rl + 1);
    int absolute = target[0] == '/';
    free(target);
    free(w->todo);
    w->todo = todo;
    w->pos = 0;
    return absolute ? restart_at_root(w) : 0;
}

/* One step: the next component of todo. 1 when done, 0 to go on, <0 error. */
static int step(struct walk *w)
{
    const char *p = w->todo + w->pos;
    while (*p == '/')
        p++;
    if (!*p)
        return 1;
    size_t len = strcspn(p, "/");
    w->pos = (size_t)(p - w->todo) + len;
    if (len == 1 && p[0] == '.')
        return 0;
    if (len == 2 && p[0] == '.' && p[1] == '.') {
        /* The parent is the directory checked before this one ("/" is its own). */
        if (w->depth > 1) {
            pop_to(w, w->depth - 1);
            seen_up(w);
        }
        return 0;
    }
    char *comp = strndup(p, len);
    if (!comp)
        return walk_fail(w, ENOMEM, "out of memory");
    int rc = 0;
    int fd = hp_os_openat(top(w), comp, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    if (fd == -ENOTDIR || fd == -ELOOP) {
        struct stat st;
        int st_rc = hp_os_fstatat(top(w), comp, &st, AT_SYMLINK_NOFOLLOW);
        if (st_rc == 0 && S_ISLNK(st.st_mode))
            rc = splice_link(w, comp);
        else if (st_rc == 0)
            rc = walk_fail(w, ENOTDIR, "%s/%s is not a directory", w->seen, comp);
        else
            rc = walk_fail(w, -st_rc, "%s/%s: cannot stat: %s", w->seen, comp,
                           strerror(-st_rc));
    } else if (fd < 0) {
        rc = walk_fail(w, -fd, "%s/%s: %s", strcmp(w->seen, "/") ? w->seen : "", comp,
                       strerror(-fd));
    } else {
        rc = seen_append(w, comp, len);
        rc = rc ? (hp_os_close(fd), rc) : push(w, fd);
    }
    free(comp);
    return rc;
}

int hp_trust_open_dir(const char *path, char *why, size_t why_cap)
{
    struct walk w = {.why = why, .why_cap = why_cap};
    why[0] = '\0';
    if (path[0] != '/')
        return walk_fail(&w, EINVAL, "%s is not an absolute path", path);
    w.todo = strdup(path);
    w.seen = malloc(2);
    int rc = -ENOMEM;
    if (!w.todo || !w.seen) {
        walk_fail(&w, ENOMEM, "out of memory");
        goto out;
    }
    rc = restart_at_root(&w);
    while (rc == 0)
        rc = step(&w);
    if (rc < 0)
        goto out;
    /* Reopen the last checked directory itself for reading. */
    rc = hp_os_openat(top(&w), ".", O_RDONLY | O_DIRECTORY);
    if (rc < 0)
        rc = walk_fail(&w, -rc, "%s: cannot open: %s", w.seen, strerror(-rc));
out:
    pop_to(&w, 0);
    free(w.fds);
    free(w.todo);
    free(w.seen);
    return rc;
}

int hp_trust_open_file(int dirfd, const char *name, char *why, size_t why_cap)
{
    static const char link_msg[] = "a symbolic link (the loader never follows links)";
    struct stat st;
    const char *bad;
    /* A first look without opening: opening a device or a FIFO can have
     * effects of its own. The descriptor is checked again below. */
    int rc = hp_os_fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW);
    if (rc < 0) {
        snprintf(why, why_cap, "cannot stat: %s", strerror(-rc));
        return -1;
    }
    bad = S_ISLNK(st.st_mode) ? link_msg : hp_trust_file(&st);
    if (bad) {
        snprintf(why, why_cap, "%s", bad);
        return -1;
    }
    int fd = hp_os_openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, why_cap, "%s", fd == -ELOOP ? link_msg : strerror(-fd));
        return -1;
    }
    rc = hp_os_fstat(fd, &st);
    if (rc < 0)
        snprintf(why, why_cap, "cannot stat the opened file: %s", strerror(-rc));
    else if ((bad = hp_trust_file(&st)))
        snprintf(why, why_cap, "%s", bad);
    if (rc < 0 || bad) {
        hp_os_close(fd);
        return -1;
    }
    return fd;
}
