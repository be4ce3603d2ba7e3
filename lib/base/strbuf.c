/*
 * strbuf.c — the growing string (strbuf.h).
 */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void carve_strbuf_printf(carve_strbuf *b, const char *fmt, ...) {
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)k + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

void carve_strbuf_json_string(carve_strbuf *b, const char *s) {
    carve_strbuf_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            carve_strbuf_printf(b, "\\%c", c);
        else if (c < 0x20)
            carve_strbuf_printf(b, "\\u%04x", c);
        else
            carve_strbuf_printf(b, "%c", c);
    }
    carve_strbuf_printf(b, "\"");
}
