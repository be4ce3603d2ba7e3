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

size_t carve_utf8_char(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (u[1] < lo || u[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (u[i] < 0x80 || u[i] > 0xbf)
            return 0;
    return n;
}

void carve_strbuf_json_string(carve_strbuf *b, const char *s) {
    carve_strbuf_printf(b, "\"");
    while (*s) {
        unsigned char c = (unsigned char)*s;
        size_t n = carve_utf8_char(s);
        if (c == '"' || c == '\\')
            carve_strbuf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            carve_strbuf_printf(b, "\\u%04x", c);
        else if (n == 0)
            carve_strbuf_printf(b, "\\ufffd");
        else
            carve_strbuf_printf(b, "%.*s", (int)n, s);
        s += n ? n : 1;
    }
    carve_strbuf_printf(b, "\"");
}
