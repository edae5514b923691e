/*
 * libhp — huge pages made easy, safe and fast.
 *
 * Include this header only; it pulls in the per-concern headers below.
 * Link with `pkg-config --cflags --libs libhp`.
 */
#ifndef HP_H
#define HP_H

#include "hp/common.h"
#include "hp/version.h"
#include "hp/errors.h"
#include "hp/alloc.h"
#include "hp/introspect.h"
#include "hp/stack.h"
#include "hp/cache.h"

#endif /* HP_H */
