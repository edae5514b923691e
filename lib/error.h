/* Setting and reading the thread-local error of the current call. */
#ifndef HP_LIB_ERROR_H
#define HP_LIB_ERROR_H

#include <stdint.h>
#include <stddef.h>

/* Record code and a printf-style detail for this thread; returns code so
 * callers can write `return hp_fail(HP_EINVAL, "...")`. */
int32_t hp_fail(int32_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record a detail verbatim (plugins' set_detail upcall). */
void hp_set_detail(const char *msg);

/* Mark this thread's last call as successful (hp_realloc(p, 0) uses it). */
void hp_clear_error(void);

/* Debug log line to stderr when HP_DEBUG is on. */
void hp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Text from outside libhp (a plugin's description, caps reason, error
 * details and log lines; file names) as it may be shown on a terminal: cut
 * to fit cap and with anything but printable ASCII replaced by '?', since
 * an escape sequence, CR, LF or BEL would rewrite or forge other lines.
 * "" for NULL; dst may be src. */
void hp_printable(char *dst, size_t cap, const char *src);

#endif
