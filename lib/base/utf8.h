/*
 * utf8.h — names as UTF-8 where they may hold any bytes (utf8.c): how long
 * the character at a place is, if it is one, and where a name can be cut
 * without splitting one. The snapshot's JSON and the arena's copy of its
 * name rely on them, so that a document carve writes is always valid UTF-8.
 */
#ifndef CARVE_BASE_UTF8_H
#define CARVE_BASE_UTF8_H

#include <stddef.h>

#include "base/util.h"

/* The length (1 to 4) of the well-formed UTF-8 character that starts at s
 * (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), or 0
 * when the bytes there are not one, or s is at its terminating NUL. Reads
 * no further than the NUL. */
size_t carve_utf8_char(const char *s) CARVE_INTERNAL;

/* The length of the longest prefix of s (NUL-terminated) of at most max
 * bytes that does not end inside a well-formed character. Bytes that form
 * no character count one by one. */
size_t carve_utf8_prefix(const char *s, size_t max) CARVE_INTERNAL;

#endif
