/*
 * fuzz_config.c — fuzz target for the textual configuration: the input, as a
 * NUL-terminated string, goes to carve_config_parse and to carve_conf_parse
 * (CARVE_CONF with its "deviceN:" sections) for devices 0, 1 and 63.
 *
 * The one idea: the parser's contract can be checked without knowing the
 * right answer. A failure leaves the configuration untouched and explains
 * itself; a parse is a pure function of its text that changes only the keys
 * it names; what it accepts is in range, prints back to a text that parses
 * to the same values, agrees with CARVE_CONF read section by section; and an
 * arena made from it (on the virtual backend, where any size is cheap) is
 * created exactly when carve.h says it should be, or refused with a reason.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "carve.h"
#include "fuzz_common.h"

#define GRANULE CARVE_SEGMENT_GRANULE

/* ---- the last-error message ------------------------------------------------ */

/* A failing call must leave an explanation. Before each call that may fail,
 * a known message is planted (a NULL-argument failure of another function),
 * so a failure that forgot to set its own is caught even when an older
 * message is still there. */
static char sentinel[256];

static void plant_sentinel(void) {
    carve_arena *a;
    carve_arena_create(NULL, &a);
    if (!sentinel[0])
        snprintf(sentinel, sizeof(sentinel), "%s", carve_last_error(NULL));
}

static void check_explained(const char *call) {
    const char *msg = carve_last_error(NULL);
    FUZZ_CHECK(msg[0] != '\0', "%s failed with an empty carve_last_error(NULL)", call);
    FUZZ_CHECK(strcmp(msg, sentinel) != 0, "%s failed without setting carve_last_error(NULL)", call);
}

/* ---- comparing the fields this target knows --------------------------------- */

static int classic_equal(const carve_config *a, const carve_config *b) {
    return a->backend == b->backend && a->device == b->device && a->initial_bytes == b->initial_bytes &&
           a->limit_bytes == b->limit_bytes && a->growth == b->growth &&
           a->initial_fraction == b->initial_fraction && a->limit_fraction == b->limit_fraction &&
           a->min_grow_bytes == b->min_grow_bytes && a->vmm == b->vmm &&
           a->sim_event_polls == b->sim_event_polls && a->name == b->name && a->peers == b->peers &&
           a->peer_devices == b->peer_devices && a->ipc == b->ipc;
}

static void describe(char *buf, size_t cap, const carve_config *c) {
    snprintf(buf, cap,
             "backend=%d device=%d growth=%d initial=%zu (%.17g) limit=%zu (%.17g) min_grow=%zu "
             "polls=%u vmm=%d peers=%d/%#llx ipc=%d",
             (int)c->backend, c->device, c->growth, c->initial_bytes, c->initial_fraction, c->limit_bytes,
             c->limit_fraction, c->min_grow_bytes, c->sim_event_polls, c->vmm, c->peers,
             (unsigned long long)c->peer_devices, c->ipc);
}

static void check_same(const carve_config *got, const carve_config *want, const char *what) {
    if (!classic_equal(got, want)) {
        char g[512], w[512];
        describe(g, sizeof(g), got);
        describe(w, sizeof(w), want);
        FUZZ_CHECK(0, "%s: got {%s}, want {%s}", what, g, w);
    }
}

/* Accepted values are in range: fractions in (0, 1] or 0, and a fraction
 * replaces the byte count of its key. */
static void check_ranges(const carve_config *c, const char *who) {
    FUZZ_CHECK(c->initial_fraction == 0 || (c->initial_fraction > 0 && c->initial_fraction <= 1),
               "%s accepted initial_fraction %.17g", who, c->initial_fraction);
    FUZZ_CHECK(c->limit_fraction == 0 || (c->limit_fraction > 0 && c->limit_fraction <= 1),
               "%s accepted limit_fraction %.17g", who, c->limit_fraction);
    FUZZ_CHECK(c->initial_fraction == 0 || c->initial_bytes == 0,
               "%s: initial is both %zu bytes and the fraction %.17g", who, c->initial_bytes,
               c->initial_fraction);
    FUZZ_CHECK(c->limit_fraction == 0 || c->limit_bytes == 0, "%s: limit is both %zu bytes and the fraction %.17g",
               who, c->limit_bytes, c->limit_fraction);
    /* A backend the library can name (the round trip then parses the name
     * back to the same value); new backends need no change here. */
    FUZZ_CHECK(strcmp(carve_backend_str(c->backend), "unknown") != 0, "%s accepted backend %d, which has no name",
               who, (int)c->backend);
    FUZZ_CHECK(c->device >= 0, "%s accepted device %d", who, c->device);
}

/* ---- printing a configuration back ----------------------------------------- */

/* A fraction in plain decimal with 17 significant digits (exponents are not
 * part of the grammar); 0 when it would not fit in one key=value pair. */
static int print_fraction(char *buf, size_t cap, double f) {
    int zeros = 0;
    for (double x = f; x < 0.1 && zeros < 400; x *= 10)
        zeros++;
    if (zeros > 200)
        return 0;
    snprintf(buf, cap, "%.*f", zeros + 17, f);
    return 1;
}

/* What was accepted prints back to a text that parses to the same values. */
static void check_round_trip(const carve_config *c) {
    char init[256], limit[256], peers[256], text[1400];
    if (c->initial_fraction > 0) {
        if (!print_fraction(init, sizeof(init), c->initial_fraction))
            return;
    } else {
        snprintf(init, sizeof(init), "%zuB", c->initial_bytes);
    }
    if (c->limit_fraction > 0) {
        if (!print_fraction(limit, sizeof(limit), c->limit_fraction))
            return;
    } else {
        snprintf(limit, sizeof(limit), "%zu", c->limit_bytes);
    }
    if (c->peers == CARVE_PEERS_LIST) { /* ordinals separated by ':' */
        size_t n = 0;
        for (int d = 0; d < 64; d++)
            if (c->peer_devices >> d & 1)
                n += (size_t)snprintf(peers + n, sizeof(peers) - n, "%s%d", n ? ":" : "", d);
        if (n == 0)
            return; /* an empty list has no text */
    } else {
        snprintf(peers, sizeof(peers), "%s",
                 c->peers == CARVE_PEERS_NONE ? "none" : c->peers == CARVE_PEERS_ALL ? "all" : "auto");
    }
    snprintf(text, sizeof(text),
             "backend=%s, device=%d,growth=%s,initial=%s,limit=%s,min_grow=%zu b,sim_event_polls=%u,vmm=%s,"
             "peers=%s,ipc=%s",
             carve_backend_str(c->backend), c->device, c->growth ? "on" : "off", init, limit,
             c->min_grow_bytes, c->sim_event_polls, c->vmm == CARVE_VMM_AUTO ? "auto" : c->vmm ? "1" : "0", peers,
             c->ipc == CARVE_IPC_AUTO ? "auto" : c->ipc ? "1" : "0");
    carve_config back;
    carve_config_init(&back);
    carve_status st = carve_config_parse(&back, text);
    FUZZ_CHECK(st == CARVE_OK, "the accepted configuration printed as \"%s\" does not parse: %s", text,
               carve_last_error(NULL));
    carve_config want = *c;
    want.growth = c->growth != 0;
    want.vmm = c->vmm == CARVE_VMM_AUTO ? CARVE_VMM_AUTO : c->vmm != 0;
    want.ipc = c->ipc == CARVE_IPC_AUTO ? CARVE_IPC_AUTO : c->ipc != 0;
    check_same(&back, &want, "round trip through the printed text");
}

/* ---- CARVE_CONF read section by section ------------------------------------- */

/* Where a section's body starts and which device it names (-1: every
 * device), the way conf.c reads a prefix; -2 for a malformed prefix. */
static int section_target(char *sec, char **body) {
    char *b = sec;
    while (isspace((unsigned char)*b))
        b++;
    *body = b;
    if (strncmp(b, "device", 6) != 0 || !isdigit((unsigned char)b[6]))
        return -1;
    char *colon;
    long d = strtol(b + 6, &colon, 10);
    if (*colon != ':' || d < 0 || d >= 64)
        return -2;
    *body = colon + 1;
    return (int)d;
}

/* A successful carve_conf_parse equals the defaults, then every section
 * for all devices, then every section of the device, each applied with
 * carve_config_parse in order. */
static void check_sections(const char *text, int device, const carve_config *got) {
    carve_config want;
    carve_config_init(&want);
    want.device = device;
    for (int pass = 0; pass < 2; pass++) {
        const char *p = text;
        while (*p) {
            const char *end = strchr(p, ';');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            char *sec = malloc(len + 1);
            FUZZ_CHECK(sec != NULL, "host memory");
            memcpy(sec, p, len);
            sec[len] = '\0';
            p = end ? end + 1 : p + len;
            char *body;
            int target = section_target(sec, &body);
            FUZZ_CHECK(target != -2, "carve_conf_parse accepted the section prefix of '%s'", sec);
            if ((pass == 0 && target == -1) || (pass == 1 && target == device)) {
                carve_status st = carve_config_parse(&want, body);
                FUZZ_CHECK(st == CARVE_OK, "carve_conf_parse accepted section '%s' that carve_config_parse refuses: %s",
                           sec, carve_last_error(NULL));
            }
            free(sec);
        }
    }
    check_same(got, &want, "carve_conf_parse against its sections applied one by one");
}

/* ---- an arena from what was accepted ---------------------------------------- */

static size_t align_down(size_t x) { return x / GRANULE * GRANULE; }

/* Build the configuration on the virtual backend (fractions need a device:
 * zeroed) and check that carve_arena_create accepts or refuses it as
 * carve.h documents. */
static int strict_mode(void) {
    const char *v = getenv("CARVE_FUZZ_STRICT");
    return v && strcmp(v, "1") == 0;
}

static void check_arena(const carve_config *parsed, const char *text) {
    carve_config c = *parsed;
    /* The virtual backend maps granules, so the automatic mode is
     * virtual-memory mode there whenever growth is on. */
    int vm = c.vmm == 1 || (c.vmm == CARVE_VMM_AUTO && c.growth && c.initial_bytes == 0);
    /* Virtual-memory mode keeps host metadata per 2 MiB granule of its
     * address space, twice the limit (carve.h; under ASan 4 PiB costs a
     * gigabyte and seconds): to keep the fuzzer fast, such arenas beyond
     * 16 TiB are only built with CARVE_FUZZ_STRICT=1. */
    if (vm && !strict_mode()) {
        size_t va = c.limit_bytes ? (c.limit_bytes > ((size_t)1 << 62) ? SIZE_MAX : 2 * c.limit_bytes)
                                  : (size_t)64 << 30;
        if (va > ((size_t)16 << 40) || c.initial_bytes > ((size_t)16 << 40))
            return;
    }
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.initial_fraction = 0;
    c.limit_fraction = 0;
    c.name = "fuzz \"config\"";
    size_t limit = c.limit_bytes ? c.limit_bytes : SIZE_MAX; /* unlimited on virtual */
    size_t rlimit = limit == SIZE_MAX ? SIZE_MAX : align_down(limit);
    /* peers=all and lists, and ipc=1 (required), need the cuda backend. */
    int invalid = (!c.growth && c.initial_bytes == 0) || rlimit < GRANULE || c.initial_bytes > limit ||
                  c.peers == CARVE_PEERS_ALL || c.peers == CARVE_PEERS_LIST || c.ipc == 1;
    int faults = strstr(text, "fail_backend") != NULL; /* injected failures may be configured */

    plant_sentinel();
    carve_arena *a = (carve_arena *)&c; /* must be overwritten */
    carve_status st = carve_arena_create(&c, &a);
    if (st != CARVE_OK) {
        FUZZ_CHECK(a == NULL, "carve_arena_create failed (%s) but *out is not NULL", carve_status_str(st));
        check_explained("carve_arena_create");
        if (invalid)
            FUZZ_CHECK(st == CARVE_ERR_INVALID, "carve_arena_create: want CARVE_ERR_INVALID, got %s: %s",
                       carve_status_str(st), carve_last_error(NULL));
        else
            FUZZ_CHECK(st == CARVE_ERR_OOM || (faults && st == CARVE_ERR_BACKEND),
                       "carve_arena_create of a valid configuration failed with %s: %s", carve_status_str(st),
                       carve_last_error(NULL));
        return;
    }
    FUZZ_CHECK(!invalid, "carve_arena_create accepted a configuration carve.h calls invalid "
               "(growth %d, initial %zu, limit %zu)", c.growth, c.initial_bytes, c.limit_bytes);
    FUZZ_CHECK(a != NULL, "carve_arena_create returned CARVE_OK and a NULL arena");

    /* Limits round down to the granule, initial blocks up, never past the limit. */
    carve_config eff;
    FUZZ_CHECK(carve_arena_get_config(a, &eff) == CARVE_OK, "carve_arena_get_config failed");
    if (!vm || c.growth)
        FUZZ_CHECK(eff.limit_bytes == rlimit, "effective limit %zu, want %zu", eff.limit_bytes, rlimit);
    size_t init = c.initial_bytes;
    size_t want_init = init == 0 ? 0 : init > SIZE_MAX - (GRANULE - 1) ? rlimit : align_down(init + GRANULE - 1);
    if (want_init > rlimit)
        want_init = rlimit;
    FUZZ_CHECK(eff.initial_bytes == want_init, "effective initial %zu, want %zu (given %zu, limit %zu)",
               eff.initial_bytes, want_init, init, rlimit);
    FUZZ_CHECK(eff.backend == CARVE_BACKEND_VIRTUAL && eff.growth == c.growth && eff.vmm == vm,
               "carve_arena_get_config changed the backend or growth, or reports the mode wrongly");
    FUZZ_CHECK(carve_memory_reserved(a) <= eff.limit_bytes, "reserved %zu above the limit %zu",
               carve_memory_reserved(a), eff.limit_bytes);

    /* carve_check is O(blocks + reserved bytes / 2 MiB) (carve.h): on an
     * arena of petabytes it takes minutes, so it runs here only up to 64 GiB
     * of address space, or always with CARVE_FUZZ_STRICT=1. */
    size_t va = vm ? (eff.limit_bytes == SIZE_MAX ? (size_t)64 << 30 : 2 * eff.limit_bytes) : 0;

    /* The arena works: one small buffer, stream-ordered on a fake stream. */
    void *p = NULL;
    st = carve_alloc(a, 1000, (carve_stream)(uintptr_t)0x1000, &p);
    FUZZ_CHECK(st == CARVE_OK || st == CARVE_ERR_OOM || (faults && st == CARVE_ERR_BACKEND),
               "carve_alloc on a fresh arena: %s: %s", carve_status_str(st), carve_last_error(a));
    FUZZ_CHECK((st == CARVE_OK) == (p != NULL), "carve_alloc: status %s with pointer %p", carve_status_str(st), p);
    /* (what is reserved now: a huge min_grow makes a huge segment too) */
    size_t space = carve_memory_reserved(a) > va ? carve_memory_reserved(a) : va;
    int check = space <= ((size_t)64 << 30) || strict_mode();
    FUZZ_CHECK(!check || carve_check(a) == CARVE_OK, "carve_check after one allocation: %s", carve_last_error(a));
    if (p)
        FUZZ_CHECK(carve_free(a, p) == CARVE_OK, "carve_free of the one buffer: %s", carve_last_error(a));
    st = carve_empty_cache(a);
    FUZZ_CHECK(st == CARVE_OK || (faults && st == CARVE_ERR_BACKEND), "carve_empty_cache: %s",
               carve_status_str(st));
    FUZZ_CHECK(!check || carve_check(a) == CARVE_OK, "carve_check after carve_empty_cache: %s", carve_last_error(a));
    carve_arena_destroy(a);
}

/* ---- the target --------------------------------------------------------------- */

/* A configuration whose every known field differs from the defaults. */
static void init_unusual(carve_config *c) {
    carve_config_init(c);
    c->backend = CARVE_BACKEND_HOST;
    c->device = 7;
    c->initial_bytes = 3;
    c->limit_bytes = 5;
    c->growth = 0;
    c->initial_fraction = 0.125;
    c->limit_fraction = 0.75;
    c->min_grow_bytes = 11;
    c->vmm = 1;
    c->sim_event_polls = 13;
    c->name = "unusual";
    c->peers = CARVE_PEERS_LIST;
    c->peer_devices = 6;
    c->ipc = 0;
}

/* Keys not given keep their value: each field of `from_unusual` is either
 * the value parsed from the defaults (the key was given) or, when that
 * equals the default, the unusual starting value. */
#define KEPT_OR_SET(field)                                                                           \
    FUZZ_CHECK(u->field == p->field || (p->field == d->field && u->field == s->field),              \
               "carve_config_parse from a non-default configuration: field " #field " is neither " \
               "kept nor the value the text gives")

static void check_kept(const carve_config *u, const carve_config *p, const carve_config *d,
                       const carve_config *s) {
    KEPT_OR_SET(backend);
    KEPT_OR_SET(device);
    KEPT_OR_SET(initial_bytes);
    KEPT_OR_SET(limit_bytes);
    KEPT_OR_SET(growth);
    KEPT_OR_SET(initial_fraction);
    KEPT_OR_SET(limit_fraction);
    KEPT_OR_SET(min_grow_bytes);
    KEPT_OR_SET(vmm);
    KEPT_OR_SET(sim_event_polls);
    KEPT_OR_SET(peers);
    KEPT_OR_SET(peer_devices);
    KEPT_OR_SET(ipc);
    FUZZ_CHECK(u->name == s->name, "carve_config_parse changed the name");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* an embedded NUL ends the string there */

    /* carve_config_parse from the defaults. */
    carve_config defaults, c1, c2;
    carve_config_init(&defaults);
    carve_config_init(&c1);
    plant_sentinel();
    carve_status st1 = carve_config_parse(&c1, text);
    char msg1[1100] = "";
    FUZZ_CHECK(st1 == CARVE_OK || st1 == CARVE_ERR_INVALID, "carve_config_parse returned %s",
               carve_status_str(st1));
    if (st1 != CARVE_OK) {
        FUZZ_CHECK(memcmp(&c1, &defaults, sizeof(c1)) == 0, "carve_config_parse failed but changed the config");
        check_explained("carve_config_parse");
        snprintf(msg1, sizeof(msg1), "%s", carve_last_error(NULL));
    }

    /* The same text again: the same status, configuration and message. */
    carve_config_init(&c2);
    carve_status st2 = carve_config_parse(&c2, text);
    FUZZ_CHECK(st2 == st1, "parsing the same text twice gave %s then %s", carve_status_str(st1),
               carve_status_str(st2));
    FUZZ_CHECK(memcmp(&c1, &c2, sizeof(c1)) == 0, "parsing the same text twice gave different configurations");
    if (st1 != CARVE_OK)
        FUZZ_CHECK(strcmp(msg1, carve_last_error(NULL)) == 0, "the same failure explained differently: '%s' / '%s'",
                   msg1, carve_last_error(NULL));

    /* From a configuration with unusual values: the same status, and only
     * the keys the text names change. */
    carve_config start, u;
    init_unusual(&start);
    u = start;
    carve_status stu = carve_config_parse(&u, text);
    FUZZ_CHECK(stu == st1, "the status depends on the starting configuration: %s from the defaults, %s otherwise",
               carve_status_str(st1), carve_status_str(stu));
    if (stu == CARVE_OK)
        check_kept(&u, &c1, &defaults, &start);
    else
        FUZZ_CHECK(memcmp(&u, &start, sizeof(u)) == 0, "carve_config_parse failed but changed the config");

    if (st1 == CARVE_OK) {
        check_ranges(&c1, "carve_config_parse");
        check_round_trip(&c1);
        check_arena(&c1, text);
    }

    /* CARVE_CONF for three devices: the same status for each (every section
     * is checked whichever device asks), defaults on failure. */
    static const int devices[] = {0, 1, 63};
    carve_status stc[3];
    for (int i = 0; i < 3; i++) {
        carve_config out, again;
        memset(&out, 0xA5, sizeof(out));
        plant_sentinel();
        stc[i] = carve_conf_parse(text, devices[i], &out);
        FUZZ_CHECK(stc[i] == CARVE_OK || stc[i] == CARVE_ERR_INVALID, "carve_conf_parse returned %s",
                   carve_status_str(stc[i]));
        FUZZ_CHECK(stc[i] == stc[0], "carve_conf_parse: %s for device %d but %s for device 0",
                   carve_status_str(stc[i]), devices[i], carve_status_str(stc[0]));
        if (stc[i] != CARVE_OK) {
            check_explained("carve_conf_parse");
            FUZZ_CHECK(memcmp(&out, &defaults, sizeof(out)) == 0,
                       "carve_conf_parse failed but *out is not the defaults");
        } else {
            check_ranges(&out, "carve_conf_parse");
            FUZZ_CHECK(out.backend == CARVE_BACKEND_CUDA && out.device == devices[i],
                       "carve_conf_parse for device %d gave backend %d, device %d", devices[i], (int)out.backend,
                       out.device);
            check_sections(text, devices[i], &out);
        }
        memset(&again, 0x5A, sizeof(again));
        carve_status sta = carve_conf_parse(text, devices[i], &again);
        FUZZ_CHECK(sta == stc[i] && memcmp(&out, &again, sizeof(out)) == 0,
                   "carve_conf_parse of the same text twice differs (device %d)", devices[i]);
    }

    /* One section for all devices is a plain configuration: what CARVE_CONF
     * accepts, carve_config_parse accepts with the same values. */
    char *body;
    if (stc[0] == CARVE_OK && !strchr(text, ';') && section_target(text, &body) == -1) {
        FUZZ_CHECK(st1 == CARVE_OK, "CARVE_CONF accepts '%s' but carve_config_parse refuses it: %s", text, msg1);
        carve_config want = c1;
        want.device = 0;
        carve_config out;
        carve_conf_parse(text, 0, &out);
        check_same(&out, &want, "carve_conf_parse of one section against carve_config_parse");
    }
    free(text);
    return 0;
}
