/*
 * Plugin trust: which directories and files the loader may run code from.
 *
 * The rules (README "Plugin trust"; every check is made on an open file
 * descriptor, never on a name that could change before it is used):
 * - a trusted object is owned by root or by the effective user;
 * - it is not writable by others, sticky bit or not;
 * - it is not writable by its group, unless that group is root's (gid 0);
 * - the plugin directory and every directory above it, up to "/", is a
 *   trusted directory (as OpenSSH's safe_path() checks ~/.ssh);
 * - a plugin file is a trusted regular file, opened with O_NOFOLLOW: a
 *   symbolic link is refused without being opened.
 */
#ifndef HP_LIB_TRUST_H
#define HP_LIB_TRUST_H

#include <stddef.h>
#include <sys/stat.h>

/* Symbolic links followed in a directory path at most (the kernel's
 * MAXSYMLINKS, include/linux/namei.h). */
#define HP_TRUST_MAX_LINKS 40

/* NULL if a directory with status st may hold plugins or lead to them, else
 * why not (a static string). */
const char *hp_trust_dir(const struct stat *st);

/* NULL if a file with status st may be loaded, else why not. */
const char *hp_trust_file(const struct stat *st);

/* Open the absolute directory path for reading, one component at a time
 * from "/" (openat with O_NOFOLLOW | O_DIRECTORY), checking each directory
 * with hp_trust_dir on the descriptor that is then used to open the next
 * one, so that the directory read is the directory checked. A symbolic link
 * found in a trusted directory is followed by walking its target the same
 * way (at most HP_TRUST_MAX_LINKS); ".." goes back to the directory already
 * checked above. Returns a descriptor (O_RDONLY | O_DIRECTORY | O_CLOEXEC),
 * -ENOENT if a component does not exist, or another negative errno
 * (-EPERM when a rule refused a directory) with the reason in why. */
int hp_trust_open_dir(const char *path, char *why, size_t why_cap);

/* Open name in the trusted directory dirfd for loading: refuse symbolic
 * links and untrusted files (checked again on the opened descriptor),
 * without ever opening a device or a FIFO. Returns a descriptor
 * (O_RDONLY | O_CLOEXEC), or -1 with the reason in why. */
int hp_trust_open_file(int dirfd, const char *name, char *why, size_t why_cap);

#endif
