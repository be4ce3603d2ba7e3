/*
 * strbuf.h — a growing string on the host heap, for the rooms that build
 * documents (the snapshot's JSON, the trace picture's SVG paths).
 *
 * Appends never fail loudly: the first failed realloc (or a formatting
 * error) sets `oom`, later appends do nothing, and the owner checks `oom`
 * once at the end. A zeroed carve_strbuf is empty and ready; free `p`.
 */
#ifndef CARVE_BASE_STRBUF_H
#define CARVE_BASE_STRBUF_H

#include <stddef.h>

typedef struct carve_strbuf {
    char *p;       /* NUL-terminated while len > 0 and !oom; NULL until first append */
    size_t len, cap;
    int oom;
} carve_strbuf;

void carve_strbuf_printf(carve_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* `s` as a JSON string literal: quotes, backslashes and control characters
 * escaped, and a byte that begins no valid UTF-8 character (a file name
 * with byte 0xff, say) written as U+FFFD, so the document stays valid. */
void carve_strbuf_json_string(carve_strbuf *b, const char *s);

/* The length (1 to 4) of the valid UTF-8 character that s starts with, or 0
 * when its first byte begins none (overlong forms, surrogates and code
 * points above U+10FFFF are not valid). s must not be empty. */
size_t carve_utf8_char(const char *s);

#endif
