/*
 * options.c — the textual form of a configuration
 * ("growth=1,limit=4GiB,initial=0.25"); the defaults themselves are in
 * base/defaults.c.
 *
 * One table lists every key with its parser, so carve_config_parse,
 * CARVE_CONF and the documentation share one definition. A parse applies to
 * a copy and commits only when every pair parsed: a bad string leaves the
 * configuration untouched and names the offending key. Each key also knows
 * where its field ends, so a program whose carve_config is older than the
 * key is told so instead of having bytes past its structure written.
 */
#include "config/options.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/defaults.h"
#include "engine/error.h"

__extension__ typedef unsigned __int128 u128; /* exact products of up to 20 digits and 2^40 */

/* Suffixes: powers of 1024 (K, KiB, ...) and of 1000 (KB, ...), any case. */
static const struct {
    const char *name;
    uint64_t mult;
} suffixes[] = {
    {"", 1},
    {"b", 1},
    {"k", (uint64_t)1 << 10},
    {"kib", (uint64_t)1 << 10},
    {"kb", 1000},
    {"m", (uint64_t)1 << 20},
    {"mib", (uint64_t)1 << 20},
    {"mb", 1000000},
    {"g", (uint64_t)1 << 30},
    {"gib", (uint64_t)1 << 30},
    {"gb", 1000000000},
    {"t", (uint64_t)1 << 40},
    {"tib", (uint64_t)1 << 40},
    {"tb", 1000000000000ull},
};

/*
 * The grammar is decimal only: DIGITS [ "." DIGITS ] [ " " ] [ SUFFIX ].
 * No sign, no hexadecimal, no exponent, no "inf": strtod would take all of
 * those (0x100, 1e3, infinity), so the number is read digit by digit into an
 * exact integer mantissa and a count of decimals. A value with a point and no
 * suffix is a fraction and must lie in (0, 1], judged on the digits
 * themselves (1.0000000000000000001 is above 1 even though it rounds to 1.0
 * as a double). Everything else is a byte count, which must come to whole
 * bytes with whatever multiplier (1.5KiB is 1536 bytes; 1.0001KiB is refused
 * rather than cut to 1024, and 0.0001KiB rather than cut to 0, which would
 * mean "unlimited") and fit in size_t.
 */
int carve_parse_size(const char *v, size_t *bytes, double *fraction) {
    *bytes = 0;
    *fraction = 0;
    if (!v)
        return -1;
    const char *ip = v, *ie = v;               /* integer digits */
    while (*ie >= '0' && *ie <= '9')
        ie++;
    const char *fp = ie, *fe = ie;             /* decimals, after the point */
    int point = *ie == '.';
    if (point) {
        fp = fe = ie + 1;
        while (*fe >= '0' && *fe <= '9')
            fe++;
    }
    if (ie == ip || (point && fe == fp))
        return -1;                             /* "", ".5", "5.", "-1", "0x..." */
    const char *p = fe;
    while (*p == ' ')                          /* "1.5 GB" */
        p++;
    while (ip < ie - 1 && *ip == '0')          /* leading zeros carry no value */
        ip++;
    int frac_zero = 1;
    for (const char *q = fp; q < fe; q++)
        frac_zero &= *q == '0';
    if (point && *p == '\0') {                  /* a fraction of device memory: (0, 1] */
        int int_zero = ie - ip == 1 && *ip == '0', int_one = ie - ip == 1 && *ip == '1';
        if (!((int_zero && !frac_zero) || (int_one && frac_zero)))
            return -1;
        *fraction = strtod(v, NULL);           /* the digits are checked; rounding is harmless now */
        return 0;
    }
    size_t ndec = (size_t)(fe - fp), nint = (size_t)(ie - ip);
    if (nint + ndec > 20)                      /* beyond any size, and keeps the arithmetic exact */
        return -1;
    u128 mant = 0, scale = 1;
    for (const char *q = ip; q < ie; q++)
        mant = mant * 10 + (unsigned)(*q - '0');
    for (const char *q = fp; q < fe; q++) {
        mant = mant * 10 + (unsigned)(*q - '0');
        scale *= 10;
    }
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        if (strcasecmp(p, suffixes[i].name) != 0)
            continue;
        u128 num = mant * suffixes[i].mult;
        if (num % scale != 0)
            return -1;                         /* fractional bytes: 1.5B, 1.0001K, 0.0001K (not 0 = unlimited) */
        num /= scale;
        if (num > SIZE_MAX)
            return -1;
        *bytes = (size_t)num;
        return 0;
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
    static const carve_backend all[] = {CARVE_BACKEND_CUDA, CARVE_BACKEND_HOST, CARVE_BACKEND_VIRTUAL,
                                        CARVE_BACKEND_CUDA_DRIVER};
    for (int i = 0; i < 4; i++)
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

static int set_vmm(carve_config *c, const char *v) {
    if (strcasecmp(v, "auto") == 0)
        return c->vmm = CARVE_VMM_AUTO, 0;
    return parse_bool(v, &c->vmm);
}

static int set_polls(carve_config *c, const char *v) {
    unsigned long x;
    if (parse_uint(v, &x) || x > 1000000)
        return -1;
    c->sim_event_polls = (unsigned)x;
    return 0;
}

static int parse_count(const char *v, unsigned long *out) {
    unsigned long x;
    if (parse_uint(v, &x) || x > 1000000000000ul)
        return -1;
    *out = x;
    return 0;
}

static int set_fail_at(carve_config *c, const char *v) { return parse_count(v, &c->fail_backend_at); }
static int set_fail_every(carve_config *c, const char *v) { return parse_count(v, &c->fail_backend_every); }

static int set_fail_status(carve_config *c, const char *v) {
    if (strcasecmp(v, "oom") == 0)
        return c->fail_backend_status = CARVE_ERR_OOM, 0;
    if (strcasecmp(v, "backend") == 0)
        return c->fail_backend_status = CARVE_ERR_BACKEND, 0;
    return -1;
}

/* auto, none, all, or device ordinals separated by ':' ("1:3"). */
static int set_peers(carve_config *c, const char *v) {
    static const struct {
        const char *name;
        int mode;
    } words[] = {{"auto", CARVE_PEERS_AUTO}, {"none", CARVE_PEERS_NONE}, {"all", CARVE_PEERS_ALL}};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcasecmp(v, words[i].name) == 0) {
            c->peers = words[i].mode;
            c->peer_devices = 0;
            return 0;
        }
    uint64_t mask = 0;
    const char *p = v;
    for (;;) {
        char item[8];
        size_t n = strcspn(p, ":");
        if (n == 0 || n >= sizeof(item))
            return -1;
        memcpy(item, p, n);
        item[n] = '\0';
        unsigned long d;
        if (parse_uint(item, &d) || d >= 64)
            return -1;
        mask |= (uint64_t)1 << d;
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    c->peers = CARVE_PEERS_LIST;
    c->peer_devices = mask;
    return 0;
}

static int set_ipc(carve_config *c, const char *v) {
    if (strcasecmp(v, "auto") == 0)
        return c->ipc = CARVE_IPC_AUTO, 0;
    return parse_bool(v, &c->ipc);
}

/* Where a field ends: a key may set it only in a carve_config that long. */
#define END(field) (offsetof(carve_config, field) + sizeof(((carve_config *)0)->field))

const carve_option carve_options[] = {
    {"backend", "cuda|host|virtual|cuda_driver", set_backend, END(backend)},
    {"device", "device ordinal", set_device, END(device)},
    {"growth", "0|1", set_growth, END(growth)},
    {"initial", "size (e.g. 1GiB) or fraction of device memory (e.g. 0.25)", set_initial, END(initial_fraction)},
    {"limit", "size (e.g. 4GiB) or fraction of device memory (e.g. 0.5)", set_limit, END(limit_fraction)},
    {"min_grow", "size", set_min_grow, END(min_grow_bytes)},
    {"sim_event_polls", "count", set_polls, END(sim_event_polls)},
    {"vmm", "auto|0|1", set_vmm, END(vmm)},
    {"fail_backend_at", "call number (testing: that backend call fails; 0 = none)", set_fail_at,
     END(fail_backend_at)},
    {"fail_backend_every", "count (testing: every Nth backend call fails; 0 = none)", set_fail_every,
     END(fail_backend_every)},
    {"fail_backend_status", "oom|backend", set_fail_status, END(fail_backend_status)},
    {"peers", "auto|none|all or device ordinals below 64 separated by ':' (e.g. 1:3)", set_peers,
     END(peer_devices)},
    {"ipc", "auto|0|1", set_ipc, END(ipc)},
    {NULL, NULL, NULL, 0},
};

carve_status carve_config_parse_keys(carve_config *config, const char *text, const char *const *denied,
                                     const char *where, unsigned *seen) {
    if (!config || !text)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: NULL argument", where);
    carve_config c;
    char why[256];
    if (carve_config_read(config, &c, why, sizeof(why)) != 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: %s", where, why);
    unsigned local = 0, *keys = seen ? seen : &local, given = *keys;
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
        if (o->end > config->size)
            return carve_fail(NULL, CARVE_ERR_INVALID,
                              "%s: key '%s' sets a field past the caller's carve_config (%zu bytes; the program "
                              "was built against an older carve.h)",
                              where, key, config->size);
        unsigned bit = 1u << (o - carve_options);
        if (given & bit)
            return carve_fail(NULL, CARVE_ERR_INVALID,
                              "%s: key '%s' is given twice (each key may appear once%s)", where, key,
                              seen ? " in the sections for all devices, and once more in a device's section"
                                   : "");
        given |= bit;
        if (o->set(&c, val) != 0)
            return carve_fail(NULL, CARVE_ERR_INVALID, "%s: bad value '%s' for key '%s' (expected %s)", where,
                              val, key, o->help);
    }
    carve_config_write(&c, config, config->size);
    *keys = given;
    return CARVE_OK;
}

carve_status carve_config_parse(carve_config *config, const char *text) {
    return carve_config_parse_keys(config, text, NULL, "carve_config_parse", NULL);
}

/* "limit=1 (1 B)": a size key as given, for messages. */
static const char *size_key(char *buf, size_t len, const char *key, size_t bytes, double fraction) {
    char b[32];
    if (fraction > 0)
        snprintf(buf, len, "%s=%g", key, fraction);
    else
        snprintf(buf, len, "%s=%zu (%s)", key, bytes, carve_format_bytes(b, sizeof(b), bytes));
    return buf;
}

carve_status carve_config_check(const carve_config *user) {
    if (!user)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_config_check: config is NULL");
    char b1[96], b2[96], g[32], why[160];
    carve_config full; /* the caller's fields over the defaults (the size rule) */
    if (carve_config_read(user, &full, why, sizeof(why)) != 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_config_check: %s", why);
    const carve_config *c = &full;
    if (!(c->initial_fraction >= 0 && c->initial_fraction <= 1) || !(c->limit_fraction >= 0 && c->limit_fraction <= 1))
        return carve_fail(NULL, CARVE_ERR_INVALID, "initial=%g, limit=%g: a fraction of device memory lies in (0, 1]",
                          c->initial_fraction, c->limit_fraction);
    int has_initial = c->initial_bytes > 0 || c->initial_fraction > 0;
    if (!c->growth && !has_initial)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "growth=0 and no initial block: the arena would hold no byte (give initial=SIZE, the one "
                          "block it holds)");
    carve_format_bytes(g, sizeof(g), CARVE_SEGMENT_GRANULE);
    if (c->limit_fraction == 0 && c->limit_bytes > 0 && c->limit_bytes < CARVE_SEGMENT_GRANULE)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "%s is below one granule (%s): the arena would hold no byte",
                          size_key(b1, sizeof(b1), "limit", c->limit_bytes, 0), g);
    int bytes_both = c->limit_fraction == 0 && c->limit_bytes > 0 && c->initial_fraction == 0;
    int fractions_both = c->limit_fraction > 0 && c->initial_fraction > 0;
    if ((bytes_both && c->initial_bytes > c->limit_bytes) ||
        (fractions_both && c->initial_fraction > c->limit_fraction))
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s is larger than %s: the arena cannot hold its initial block",
                          size_key(b1, sizeof(b1), "initial", c->initial_bytes, c->initial_fraction),
                          size_key(b2, sizeof(b2), "limit", c->limit_bytes, c->limit_fraction));
    return CARVE_OK;
}
