/*
 * text.h — numbers and names as people read them, for every room's messages.
 * They are all public (carve.h): status and backend names, the version
 * string, byte counts; rooms include this header to say where they come from.
 */
#ifndef CARVE_BASE_TEXT_H
#define CARVE_BASE_TEXT_H

#include <stddef.h>

#include "base/util.h"

/* carve_format_bytes (public, carve.h) is defined here too. */
#include "carve.h"

#endif
