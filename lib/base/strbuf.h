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

/* `s` as a JSON string literal: quotes, backslashes and control characters escaped. */
void carve_strbuf_json_string(carve_strbuf *b, const char *s);

#endif
