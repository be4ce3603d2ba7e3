/*
 * utf8.c — UTF-8 where names may hold any bytes (utf8.h). The one idea: a
 * character is well formed exactly when its lead byte names its length and
 * the range of its second byte (RFC 3629, table 3-7 of the Unicode
 * standard), and every later byte is a continuation; so one table lookup
 * and a range check per byte decide it, with no decoding.
 */
#include "base/utf8.h"

static int cont(unsigned char c) { return c >= 0x80 && c <= 0xBF; }

size_t carve_utf8_char(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong below */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates above */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong below */
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF above */
    } else {
        return 0; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
    }
    if (u[1] < lo || u[1] > hi)
        return 0; /* a NUL fails here too, so nothing past it is read */
    for (size_t i = 2; i < n; i++)
        if (!cont(u[i]))
            return 0;
    return n;
}

size_t carve_utf8_prefix(const char *s, size_t max) {
    size_t at = 0;
    while (s[at]) {
        size_t n = carve_utf8_char(s + at);
        if (n == 0)
            n = 1;
        if (at + n > max)
            break;
        at += n;
    }
    return at;
}
