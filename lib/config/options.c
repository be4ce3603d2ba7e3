/*
 * options.c — configuration defaults and the textual form of a
 * configuration ("growth=1,limit=4GiB,initial=0.25").
 *
 * One table lists every key with its parser, so carve_config_parse,
 * CARVE_CONF and the documentation share one definition. A parse applies to
 * a copy and commits only when every pair parsed: a bad string leaves the
 * configuration untouched and names the offending key.
 */
#include "config/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "engine/error.h"

void carve_config_init(carve_config *c) {
    if (!c)
        return;
    memset(c, 0, sizeof(*c));
    c->backend = CARVE_BACKEND_CUDA;
    c->growth = 1;
}

static const struct {
    const char *name;
    double mult;
} suffixes[] = {
    {"", 1},           {"b", 1},
    {"k", 1024.0},     {"kib", 1024.0},          {"kb", 1e3},
    {"m", 1048576.0},  {"mib", 1048576.0},       {"mb", 1e6},
    {"g", 1073741824.0}, {"gib", 1073741824.0},  {"gb", 1e9},
    {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
};

int carve_parse_size(const char *v, size_t *bytes, double *fraction) {
    *bytes = 0;
    *fraction = 0;
    if (!v || !*v || *v == '-' || *v == '+' || isspace((unsigned char)*v))
        return -1;
    errno = 0;
    char *end;
    double num = strtod(v, &end);
    if (end == v || errno || !isfinite(num) || num < 0)
        return -1;
    int has_point = memchr(v, '.', (size_t)(end - v)) != NULL || memchr(v, 'e', (size_t)(end - v)) ||
                    memchr(v, 'E', (size_t)(end - v));
    while (*end == ' ') /* "1.5 GB" */
        end++;
    if (*end == '\0' && has_point) {
        if (!(num > 0 && num <= 1))
            return -1;
        *fraction = num;
        return 0;
    }
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        if (strcasecmp(end, suffixes[i].name) == 0) {
            double b = num * suffixes[i].mult;
            if (b >= 18446744073709551615.0 || (b != floor(b) && suffixes[i].mult == 1))
                return -1;
            *bytes = (size_t)b;
            return 0;
        }
    }
    return -1;
}

static int parse_bool(const char *v, int *out) {
    static const char *yes[] = {"1", "true", "on", "yes"}, *no[] = {"0", "false", "off", "no"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_uint(const char *v, unsigned long *out) {
    if (!*v || !isdigit((unsigned char)*v))
        return -1;
    errno = 0;
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    if (*end || errno)
        return -1;
    *out = x;
    return 0;
}

static int set_backend(carve_config *c, const char *v) {
    static const carve_backend all[] = {CARVE_BACKEND_CUDA, CARVE_BACKEND_HOST, CARVE_BACKEND_VIRTUAL};
    for (int i = 0; i < 3; i++)
        if (strcasecmp(v, carve_backend_str(all[i])) == 0)
            return c->backend = all[i], 0;
    return -1;
}

static int set_device(carve_config *c, const char *v) {
    unsigned long x;
    if (parse_uint(v, &x) || x > 1024)
        return -1;
    c->device = (int)x;
    return 0;
}

static int set_growth(carve_config *c, const char *v) { return parse_bool(v, &c->growth); }

static int set_initial(carve_config *c, const char *v) {
    return carve_parse_size(v, &c->initial_bytes, &c->initial_fraction);
}

static int set_limit(carve_config *c, const char *v) {
    return carve_parse_size(v, &c->limit_bytes, &c->limit_fraction);
}

static int set_min_grow(carve_config *c, const char *v) {
    double f;
    return carve_parse_size(v, &c->min_grow_bytes, &f) || f != 0 ? -1 : 0;
}

static int set_vmm(carve_config *c, const char *v) { return parse_bool(v, &c->vmm); }

static int set_polls(carve_config *c, const char *v) {
    unsigned long x;
    if (parse_uint(v, &x) || x > 1000000)
        return -1;
    c->sim_event_polls = (unsigned)x;
    return 0;
}

const carve_option carve_options[] = {
    {"backend", "cuda|host|virtual", set_backend},
    {"device", "device ordinal", set_device},
    {"growth", "0|1", set_growth},
    {"initial", "size (e.g. 1GiB) or fraction of device memory (e.g. 0.25)", set_initial},
    {"limit", "size (e.g. 4GiB) or fraction of device memory (e.g. 0.5)", set_limit},
    {"min_grow", "size", set_min_grow},
    {"sim_event_polls", "count", set_polls},
    {"vmm", "0|1", set_vmm},
    {NULL, NULL, NULL},
};

carve_status carve_config_parse_keys(carve_config *config, const char *text, const char *const *denied,
                                     const char *where) {
    if (!config || !text)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: NULL argument", where);
    carve_config c = *config;
    const char *p = text;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *end = p;
        while (*end && *end != ',')
            end++;
        char pair[256];
        size_t len = (size_t)(end - p);
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (len >= sizeof(pair))
            return carve_fail(NULL, CARVE_ERR_INVALID, "%s: '%.40s...' is too long", where, p);
        memcpy(pair, p, len);
        pair[len] = '\0';
        p = end;
        char *eq = strchr(pair, '=');
        if (!eq)
            return carve_fail(NULL, CARVE_ERR_INVALID, "%s: '%s' is not key=value", where, pair);
        *eq = '\0';
        char *key = pair, *val = eq + 1;
        while (isspace((unsigned char)*val))
            val++;
        for (char *k = key + strlen(key); k > key && isspace((unsigned char)k[-1]);)
            *--k = '\0';
        for (const char *const *d = denied; d && *d; d++)
            if (strcmp(key, *d) == 0)
                return carve_fail(NULL, CARVE_ERR_INVALID, "%s: key '%s' is not allowed here", where, key);
        const carve_option *o = carve_options;
        while (o->name && strcmp(o->name, key) != 0)
            o++;
        if (!o->name)
            return carve_fail(NULL, CARVE_ERR_INVALID, "%s: unknown key '%s'", where, key);
        if (o->set(&c, val) != 0)
            return carve_fail(NULL, CARVE_ERR_INVALID, "%s: bad value '%s' for key '%s' (expected %s)", where,
                              val, key, o->help);
    }
    *config = c;
    return CARVE_OK;
}

carve_status carve_config_parse(carve_config *config, const char *text) {
    return carve_config_parse_keys(config, text, NULL, "carve_config_parse");
}
