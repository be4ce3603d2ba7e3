/*
 * test_snapshot.c — carve_snapshot_json: valid JSON (checked by a strict
 * reader of RFC 8259, UTF-8 included), the documented keys, every live
 * block listed with its offset, size, state and stream, totals that match
 * the statistics; and valid JSON whatever bytes the arena's name holds (a
 * name cut at 63 bytes used to split a character, and bytes that are no
 * UTF-8 went out as they came), with the default stream as "0x0" (it was
 * "(nil)").
 */
#include "test_util.h"

/* ---- a strict JSON reader: the position after one value, or NULL ---- */

static const char *ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *value(const char *p);

static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return 0;
        *v = *v * 16 + d;
    }
    return 1;
}

/* One well-formed UTF-8 character of 2 to 4 bytes at p (first byte >= 0x80),
 * decoded here from the code points it may encode, not from carve's own
 * table: its length, or 0. */
static size_t utf8_len(const unsigned char *p) {
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
    if (!n || p[0] > 0xF7)
        return 0;
    unsigned long cp = p[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    static const unsigned long least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0; /* overlong, past Unicode, or a surrogate */
    return n;
}

static const char *string(const char *p) {
    if (*p != '"')
        return NULL;
    for (p++; *p != '"';) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) /* a control character, or the end of the text */
            return NULL;
        if (c == '\\') {
            unsigned v;
            if (p[1] == 'u' && hex4(p + 2, &v))
                p += 6;
            else if (p[1] && strchr("\"\\/bfnrt", p[1]))
                p += 2;
            else
                return NULL;
        } else if (c < 0x80) {
            p++;
        } else {
            size_t n = utf8_len((const unsigned char *)p);
            if (!n)
                return NULL;
            p += n;
        }
    }
    return p + 1;
}

static const char *digits(const char *p) {
    const char *s = p;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > s ? p : NULL;
}

static const char *number(const char *p) {
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (!(p = digits(p)))
        return NULL;
    if (*p == '.' && !(p = digits(p + 1)))
        return NULL;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(p = digits(p)))
            return NULL;
    }
    return p;
}

static const char *value(const char *p) {
    p = ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                p = string(ws(p));
                if (!p || *(p = ws(p)) != ':')
                    return NULL;
                p++;
            }
            if (!(p = value(p)))
                return NULL;
            p = ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (*p == '"')
        return string(p);
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    return number(p);
}

/* The whole text is one JSON value. */
static int is_json(const char *text) {
    const char *end = text ? value(text) : NULL;
    return end && *ws(end) == '\0';
}

static size_t count(const char *s, const char *needle) {
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* The arena named name: its snapshot is JSON, and its name there is want
 * (as escaped) when want is not NULL. */
static void name_case(const char *name, const char *want) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.name = name;
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    if (!a)
        return;
    char *json = NULL;
    CHECK_OK(a, carve_snapshot_json(a, &json));
    CHECK(is_json(json));
    if (want && json) {
        char field[256];
        snprintf(field, sizeof(field), "\"name\":\"%s\",", want);
        CHECK(strstr(json, field) != NULL);
        if (!strstr(json, field))
            fprintf(stderr, "want %s in %.200s\n", field, json);
    }
    if (json && !is_json(json))
        fprintf(stderr, "not JSON: %.200s\n", json);
    carve_snapshot_free(json);
    carve_arena_destroy(a);
}

static void test_names(void) {
    char name[128], want[128];
    /* 62 bytes and a 2-byte character: the cut at 63 bytes would split it,
     * so the name ends before it. */
    memset(name, 'a', 62);
    strcpy(name + 62, "\xc3\xa9");
    memcpy(want, name, 62);
    want[62] = '\0';
    name_case(name, want);
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.name = name;
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    CHECK_OK(a, carve_arena_get_config(a, &c));
    CHECK(strcmp(c.name, want) == 0);
    carve_arena_destroy(a);
    /* 61 bytes and the character: 63 bytes, kept whole. */
    strcpy(name + 61, "\xc3\xa9");
    name_case(name, name);
    /* A 4-byte character across the cut, and one that ends at it. */
    strcpy(name + 60, "\xf0\x9f\x98\x80");
    memcpy(want, name, 60);
    want[60] = '\0';
    name_case(name, want);
    strcpy(name + 59, "\xf0\x9f\x98\x80");
    name_case(name, name);
    /* Bytes that are no UTF-8 become U+FFFD; control characters and quotes
     * are escaped. */
    name_case("\xff", "\\ufffd");
    name_case("a\x80z", "a\\ufffdz");
    name_case("\xc0\xaf", "\\ufffd\\ufffd");                  /* overlong '/' */
    name_case("\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd");          /* a surrogate */
    name_case("\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd"); /* past U+10FFFF */
    name_case("\xe2\x82", "\\ufffd\\ufffd");                  /* cut short */
    name_case("\x01\x1f\x7f\"\\", "\\u0001\\u001f\x7f\\\"\\\\");
    name_case("\xe2\x82\xac \xf0\x9f\x98\x80", "\xe2\x82\xac \xf0\x9f\x98\x80");
    /* Any bytes at all. */
    test_rng r;
    test_rng_seed(&r, test_seed(9));
    for (int i = 0; i < 1000; i++) {
        size_t n = 1 + test_rng_below(&r, 100);
        for (size_t k = 0; k < n; k++) {
            uint64_t x = test_rng_next(&r);
            /* mostly high bytes, where UTF-8 can go wrong, and some leads
             * followed by continuations */
            name[k] = (char)(x % 4 == 0 ? 1 + (x >> 8) % 127 : x % 4 == 1 ? 0x80 + (x >> 8) % 64
                                                               : 0x80 + (x >> 8) % 128);
        }
        name[n] = '\0';
        name_case(name, NULL);
    }
}

/* Addresses and streams are "0x..." strings, the default stream's too. */
static void test_default_stream(void) {
    carve_arena *a = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 4096, NULL, &p));
    char *json = NULL;
    CHECK_OK(a, carve_snapshot_json(a, &json));
    CHECK(is_json(json));
    CHECK(json && strstr(json, "(nil)") == NULL);
    CHECK(json && strstr(json, "{\"stream\":\"0x0\",") != NULL);
    CHECK(json && count(json, "\"stream\":\"0x0\"") >= 3); /* the stream, its span and a block */
    carve_snapshot_free(json);
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);
}

static void test_structure(void) {
    char *json = (char *)1;
    CHECK_ST(NULL, carve_snapshot_json(NULL, &json), CARVE_ERR_INVALID);
    CHECK(json == NULL);
    carve_snapshot_free(NULL);

    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.name = "snap \"quoted\"";
    c.limit_bytes = (size_t)1 << 30;
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    CHECK_ST(a, carve_snapshot_json(a, NULL), CARVE_ERR_INVALID);
    void *p[5];
    size_t sizes[5] = {100, 5000, 1 << 20, 3 << 20, 50 << 20};
    for (int i = 0; i < 5; i++)
        CHECK_OK(a, carve_alloc(a, sizes[i], i % 2 ? (carve_stream)(uintptr_t)0xabc000 : NULL, &p[i]));
    CHECK_OK(a, carve_free(a, p[2]));
    CHECK_OK(a, carve_snapshot_json(a, &json));
    CHECK(is_json(json));
    const char *keys[] = {"\"carve_snapshot\":1", "\"arena\":", "\"stats\":", "\"streams\":", "\"segments\":",
                          "\"ranges\":", "\"blocks\":", "\"offset\":", "\"requested\":", "\"limit_bytes\":1073741824",
                          "\"backend\":\"virtual\"", "snap \\\"quoted\\\""};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        CHECK(strstr(json, keys[i]) != NULL);
        if (!strstr(json, keys[i]))
            fprintf(stderr, "missing %s\n", keys[i]);
    }
    CHECK(count(json, "\"state\":\"used\"") == 4);
    CHECK(count(json, "\"requested\":") == 4);
    CHECK(strstr(json, "\"requested\":5000") != NULL && strstr(json, "\"requested\":52428800") != NULL);
    CHECK(strstr(json, "0xabc000") != NULL);
    carve_stats s;
    carve_get_stats(a, &s);
    char want[64];
    snprintf(want, sizeof(want), "\"allocated_bytes\":%zu", s.allocated_bytes);
    CHECK(strstr(json, want) != NULL);
    carve_snapshot_free(json);
    for (int i = 0; i < 5; i++)
        if (i != 2)
            CHECK_OK(a, carve_free(a, p[i]));
    carve_arena_destroy(a);
}

int main(void) {
    test_structure();
    test_names();
    test_default_stream();
    return test_finish();
}
