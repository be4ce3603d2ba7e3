/*
 * text.h — numbers and names as people read them, for every room's messages
 * (status and backend names and the version string are public, in carve.h).
 */
#ifndef CARVE_BASE_TEXT_H
#define CARVE_BASE_TEXT_H

#include <stddef.h>

#include "base/util.h"

/* Human-readable byte count ("1.50 GiB", "512 B", "unlimited" for SIZE_MAX)
 * into buf; returns buf. */
char *carve_fmt_bytes(char *buf, size_t len, size_t bytes) CARVE_INTERNAL;

#endif
