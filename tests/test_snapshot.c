/*
 * test_snapshot.c — carve_snapshot_json: well-formed JSON (checked with a
 * small validator), the documented keys, every live block listed with its
 * offset, size, state and stream, and totals that match the statistics.
 */
#include "test_util.h"

#include <ctype.h>

/* Minimal JSON validator: returns the position after one value, or NULL. */
static const char *ws(const char *p) {
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

static const char *value(const char *p);

static const char *string(const char *p) {
    if (*p != '"')
        return NULL;
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && !*++p)
            return NULL;
    return *p == '"' ? p + 1 : NULL;
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
    const char *s = p;
    if (*p == '-')
        p++;
    while (isdigit((unsigned char)*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')
        p++;
    return p > s ? p : NULL;
}

static size_t count(const char *s, const char *needle) {
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

int main(void) {
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
    const char *end = json ? value(json) : NULL;
    CHECK(end != NULL && *ws(end) == '\0');
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
    return test_finish();
}
