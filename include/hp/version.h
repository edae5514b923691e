/* libhp — version of the library. */
#ifndef HP_VERSION_H
#define HP_VERSION_H

#include "common.h"

HP_BEGIN_DECLS

#define HP_VERSION_MAJOR 1
#define HP_VERSION_MINOR 4
#define HP_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch, as returned by hp_version(). */
#define HP_VERSION_NUMBER (HP_VERSION_MAJOR * 10000 + HP_VERSION_MINOR * 100 + HP_VERSION_PATCH)

/* Version of the library actually loaded, encoded as HP_VERSION_NUMBER.
 * Thread-safe and async-signal-safe. */
HP_EXTERN(uint32_t) hp_version(void);

/* The same as "major.minor.patch". Static string. Thread-safe and
 * async-signal-safe. */
HP_EXTERN(const char *) hp_version_string(void);

HP_END_DECLS

#endif /* HP_VERSION_H */
