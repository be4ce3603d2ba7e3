/*
 * test_config.c — carve_config_init defaults, carve_config_parse (sizes with
 * suffixes, fractions, booleans, errors naming the key, nothing changed on
 * error; decimal-only sizes, fractions judged on their digits, keys given
 * twice; the peers and ipc keys), how limits and initial blocks round,
 * CARVE_CONF sections through carve_conf_parse, the size rule that lets
 * carve_config grow (a smaller structure from an older program, a larger one
 * from a newer program, a missing size, a size that is garbage); the
 * per-device setters refuse, without a device, what carve_arena_create would
 * refuse; what carve_arena_create refuses before any device is asked (ipc=1
 * off the cuda backend, a negative device on the CUDA backends only, a
 * fail_backend_status that is no failure) and how it clamps min_grow.
 */
#include <math.h>

#include "test_util.h"

static void test_defaults(void) {
    carve_config c;
    memset(&c, 0x5A, sizeof(c));
    carve_config_init(&c);
    CHECK(c.backend == CARVE_BACKEND_CUDA && c.device == 0 && c.growth == 1);
    CHECK(c.initial_bytes == 0 && c.limit_bytes == 0 && c.min_grow_bytes == 0);
    CHECK(c.initial_fraction == 0 && c.limit_fraction == 0 && c.sim_event_polls == 0 && c.name == NULL);
    CHECK(c.size == sizeof(carve_config) && c.peers == CARVE_PEERS_AUTO && c.peer_devices == 0 &&
          c.ipc == CARVE_IPC_AUTO);
    carve_config_init(NULL);
}

static void test_peers_ipc_keys(void) {
    carve_config c;
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, "peers=1:3,ipc=1"));
    CHECK(c.peers == CARVE_PEERS_LIST && c.peer_devices == ((1u << 1) | (1u << 3)) && c.ipc == 1);
    CHECK_OK(NULL, carve_config_parse(&c, "peers=63:0:63"));
    CHECK(c.peers == CARVE_PEERS_LIST && c.peer_devices == ((uint64_t)1 << 63 | 1));
    CHECK_OK(NULL, carve_config_parse(&c, "peers=all,ipc=auto"));
    CHECK(c.peers == CARVE_PEERS_ALL && c.peer_devices == 0 && c.ipc == CARVE_IPC_AUTO);
    CHECK_OK(NULL, carve_config_parse(&c, "peers=NONE,ipc=off"));
    CHECK(c.peers == CARVE_PEERS_NONE && c.ipc == 0);
    CHECK_OK(NULL, carve_config_parse(&c, "peers=auto"));
    CHECK(c.peers == CARVE_PEERS_AUTO);
    carve_config before = c;
    const char *bad[] = {"peers=64", "peers=", "peers=1:", "peers=:1", "peers=1::2", "peers=x", "peers=-1",
                         "peers=0x1", "peers=12345678", "ipc=2", "ipc=", "ipc=maybe"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_ST(NULL, carve_config_parse(&c, bad[i]), CARVE_ERR_INVALID);
        CHECK(strstr(carve_last_error(NULL), strncmp(bad[i], "ipc", 3) == 0 ? "'ipc'" : "'peers'") != NULL);
        CHECK(memcmp(&c, &before, sizeof(c)) == 0);
    }
    /* Per device in CARVE_CONF. */
    CHECK_OK(NULL, carve_conf_parse("peers=none;device1:peers=0:2", 1, &c));
    CHECK(c.peers == CARVE_PEERS_LIST && c.peer_devices == 5);
    CHECK_OK(NULL, carve_conf_parse("peers=none;device1:peers=0:2", 0, &c));
    CHECK(c.peers == CARVE_PEERS_NONE);

    /* What carve_arena_create refuses before any device is asked. */
    carve_arena *a = (carve_arena *)1;
    const char *refused[][2] = {
        {"backend=host,peers=all", "cuda backend"},
        {"backend=virtual,peers=1", "cuda backend"},
        {"backend=cuda_driver,peers=all", "cuda backend"},
        /* ipc=1 is a requirement: refused where no buffer could ever be
         * exported (it used to be accepted, then ignored: ipc 0). */
        {"backend=host,ipc=1", "ipc=1 needs the cuda backend"},
        {"backend=host,ipc=1,vmm=0", "ipc=1 needs the cuda backend"},
        {"backend=virtual,ipc=1", "ipc=1 needs the cuda backend"},
        {"backend=virtual,ipc=1,vmm=0", "ipc=1 needs the cuda backend"},
        {"backend=virtual,ipc=1,vmm=1", "ipc=1 needs the cuda backend"},
        {"backend=cuda_driver,ipc=1", "ipc=1 needs the cuda backend"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        carve_config_init(&c);
        CHECK_OK(NULL, carve_config_parse(&c, refused[i][0]));
        CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
        CHECK(strstr(carve_last_error(NULL), refused[i][1]) != NULL);
        CHECK(a == NULL);
    }
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.peer_devices = 2; /* without CARVE_PEERS_LIST */
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "peer_devices") != NULL);
    c.peer_devices = 0;
    c.peers = 7;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    c.peers = CARVE_PEERS_AUTO;
    c.ipc = 2;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    /* auto and none are fine anywhere: there is nothing to grant. */
    c.ipc = CARVE_IPC_AUTO;
    c.peers = CARVE_PEERS_NONE;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    carve_config got;
    CHECK_OK(a, carve_arena_get_config(a, &got));
    CHECK(got.peers == CARVE_PEERS_NONE && got.ipc == 0); /* host memory cannot be exported */
    carve_arena_destroy(a);
    c.ipc = 0; /* never: fine anywhere too */
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    carve_arena_destroy(a);
}

/* The device is ignored by HOST and VIRTUAL, as carve.h says, so a negative
 * one is refused only on the CUDA backends (before any device is asked). */
static void test_device_field(void) {
    const carve_backend ignored[] = {CARVE_BACKEND_HOST, CARVE_BACKEND_VIRTUAL};
    for (int i = 0; i < 2; i++) {
        carve_config c;
        carve_config_init(&c);
        c.backend = ignored[i];
        c.device = -1;
        carve_arena *a = NULL;
        CHECK_OK(NULL, carve_arena_create(&c, &a));
        carve_arena_destroy(a);
    }
    const carve_backend device[] = {CARVE_BACKEND_CUDA, CARVE_BACKEND_CUDA_DRIVER};
    for (int i = 0; i < 2; i++) {
        carve_config c;
        carve_config_init(&c);
        c.backend = device[i];
        c.device = -1;
        carve_arena *a = (carve_arena *)1;
        CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
        CHECK(a == NULL && strstr(carve_last_error(NULL), "device -1 is negative") != NULL);
    }
}

/* carve_config as programs built against other versions of carve.h pass it. */
static void test_config_size(void) {
    /* A program that filled the fields by hand, without carve_config_init:
     * no size, refused with a message that says what to do. */
    carve_config c;
    memset(&c, 0, sizeof(c));
    c.backend = CARVE_BACKEND_HOST;
    c.growth = 1;
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "carve_config_init") != NULL);
    CHECK_ST(NULL, carve_config_parse(&c, "growth=1"), CARVE_ERR_INVALID);

    /* An older program: its structure ends at CARVE_CONFIG_SIZE_MIN, and
     * nothing past it is read or written. */
    size_t min = CARVE_CONFIG_SIZE_MIN;
    CHECK(min <= sizeof(carve_config) && min > offsetof(carve_config, name));
    unsigned char buf[sizeof(carve_config) + 64];
    memset(buf, 0xA5, sizeof(buf));
    carve_config *old = (carve_config *)(void *)buf;
    carve_config_init_sized(old, min);
    CHECK(old->size == min && old->growth == 1 && old->vmm == CARVE_VMM_AUTO);
    for (size_t i = min; i < sizeof(buf); i++)
        CHECK(buf[i] == 0xA5);
    CHECK_OK(NULL, carve_config_parse(old, "backend=host,limit=64MiB"));
    for (size_t i = min; i < sizeof(buf); i++)
        CHECK(buf[i] == 0xA5);
    CHECK_OK(NULL, carve_arena_create(old, &a));
    memset(buf, 0xA5, sizeof(buf));
    CHECK_OK(a, carve_arena_get_config_sized(a, old, min));
    CHECK(old->size == min && old->limit_bytes == (64u << 20) && old->backend == CARVE_BACKEND_HOST);
    for (size_t i = min; i < sizeof(buf); i++)
        CHECK(buf[i] == 0xA5);
    CHECK_ST(a, carve_arena_get_config_sized(a, old, min - 1), CARVE_ERR_INVALID);
    carve_arena_destroy(a);
    memset(buf, 0xA5, sizeof(buf));
    CHECK_OK(NULL, carve_conf_parse_sized("limit=1GiB", 0, old, min));
    CHECK(old->limit_bytes == ((size_t)1 << 30));
    for (size_t i = min; i < sizeof(buf); i++)
        CHECK(buf[i] == 0xA5);
    CHECK_ST(NULL, carve_conf_parse_sized("limit=1GiB", 0, old, 8), CARVE_ERR_INVALID);
    /* Below the minimum nothing is written. */
    memset(buf, 0xA5, sizeof(buf));
    carve_config_init_sized(old, min - 1);
    CHECK(buf[0] == 0xA5 && buf[min - 2] == 0xA5);

    /* A newer program: a larger structure is fine while the fields this
     * library does not know are zero, refused once one is set. */
    memset(buf, 0xA5, sizeof(buf));
    carve_config_init_sized(old, sizeof(buf));
    CHECK(old->size == sizeof(buf) && buf[sizeof(carve_config)] == 0 && buf[sizeof(buf) - 1] == 0);
    CHECK_OK(NULL, carve_config_parse(old, "backend=host"));
    CHECK(old->size == sizeof(buf));
    CHECK_OK(NULL, carve_arena_create(old, &a));
    carve_arena_destroy(a);
    buf[sizeof(buf) - 1] = 1;
    CHECK_ST(NULL, carve_arena_create(old, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "newer carve.h") != NULL);
    CHECK_ST(NULL, carve_config_parse(old, "growth=1"), CARVE_ERR_INVALID);
    CHECK(buf[sizeof(buf) - 1] == 1);
    /* carve_arena_get_config of a newer program: the unknown tail zeroed. */
    CHECK_OK(NULL, carve_arena_create(&(carve_config){.size = sizeof(carve_config), .backend = CARVE_BACKEND_HOST,
                                                      .growth = 1, .peers = CARVE_PEERS_NONE},
                                      &a));
    CHECK_OK(a, carve_arena_get_config_sized(a, old, sizeof(buf)));
    CHECK(old->size == sizeof(buf) && buf[sizeof(buf) - 1] == 0);
    carve_arena_destroy(a);

    /* A size above CARVE_CONFIG_SIZE_MAX is garbage, not a newer header:
     * refused before anything past the size field is read (it used to be
     * scanned up to the first byte that was set), and nothing is written
     * for it. */
    carve_config g;
    carve_config_init(&g);
    g.backend = CARVE_BACKEND_HOST;
    g.size = CARVE_CONFIG_SIZE_MAX + 1;
    a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&g, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "above the largest carve_config") != NULL);
    CHECK_ST(NULL, carve_config_parse(&g, "growth=1"), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_config_check(&g), CARVE_ERR_INVALID);
    g.size = (size_t)0xABABABABABABABABull; /* a structure left unfilled */
    CHECK_ST(NULL, carve_arena_create(&g, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
    memset(buf, 0xA5, sizeof(buf));
    carve_config_init_sized(old, CARVE_CONFIG_SIZE_MAX + 1);
    CHECK(buf[0] == 0xA5 && buf[sizeof(buf) - 1] == 0xA5);
    CHECK_ST(NULL, carve_conf_parse_sized("", 0, old, CARVE_CONFIG_SIZE_MAX + 1), CARVE_ERR_INVALID);
    CHECK(buf[0] == 0xA5 && buf[sizeof(buf) - 1] == 0xA5);
    /* CARVE_CONFIG_SIZE_MAX itself is a size a newer carve.h may have. */
    unsigned char *big = calloc(1, CARVE_CONFIG_SIZE_MAX);
    CHECK(big != NULL);
    if (big) {
        carve_config_init_sized((carve_config *)(void *)big, CARVE_CONFIG_SIZE_MAX);
        ((carve_config *)(void *)big)->backend = CARVE_BACKEND_HOST;
        CHECK_OK(NULL, carve_arena_create((carve_config *)(void *)big, &a));
        carve_arena_destroy(a);
        free(big);
    }
}

static void test_parse(void) {
    carve_config c;
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, "growth=0,limit=4GiB,initial=1GiB,backend=virtual,device=3"));
    CHECK(c.growth == 0 && c.limit_bytes == ((size_t)4 << 30) && c.initial_bytes == ((size_t)1 << 30));
    CHECK(c.backend == CARVE_BACKEND_VIRTUAL && c.device == 3);
    CHECK_OK(NULL, carve_config_parse(&c, " limit = 1.5 GB , growth=on,, "));
    CHECK(c.limit_bytes == 1500000000u && c.growth == 1);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=0.5,initial=0.25"));
    CHECK(c.limit_fraction == 0.5 && c.limit_bytes == 0 && c.initial_fraction == 0.25 && c.initial_bytes == 0);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=512MiB,initial=0"));
    CHECK(c.limit_fraction == 0 && c.limit_bytes == (512u << 20) && c.initial_fraction == 0);
    CHECK_OK(NULL, carve_config_parse(&c, "min_grow=64m,sim_event_polls=7,initial=100KB,limit=2kib"));
    CHECK(c.min_grow_bytes == (64u << 20) && c.sim_event_polls == 7 && c.initial_bytes == 100000 &&
          c.limit_bytes == 2048);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=123"));
    CHECK(c.limit_bytes == 123);
    CHECK_OK(NULL, carve_config_parse(&c, ""));

    /* Errors: the bad key is named, the config is untouched. */
    carve_config before = c;
    const char *bad[][2] = {
        {"limit=4XB", "limit"},       {"limit=-1", "limit"},    {"limit=1.5", "limit"},
        {"limit=0.0", "limit"},       {"color=blue", "color"},  {"growth=maybe", "growth"},
        {"growth", "growth"},         {"backend=opencl", "backend"}, {"device=-2", "device"},
        {"initial=", "initial"},      {"limit=1e99GiB", "limit"}, {"min_grow=0.5", "min_grow"},
        {"limit=4GiB,bogus=1", "bogus"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_ST(NULL, carve_config_parse(&c, bad[i][0]), CARVE_ERR_INVALID);
        CHECK(strstr(carve_last_error(NULL), bad[i][1]) != NULL);
        CHECK(memcmp(&c, &before, sizeof(c)) == 0);
    }
    CHECK_ST(NULL, carve_config_parse(NULL, "growth=1"), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_config_parse(&c, NULL), CARVE_ERR_INVALID);
}

/* Sizes are decimal: hexadecimal, exponents, signs, infinities are refused
 * (strtod would take them), and a fraction is judged on its digits. */
static void test_size_syntax(void) {
    carve_config c;
    carve_config_init(&c);
    carve_config before = c;
    const char *bad[] = {"limit=0x100", "limit=0X1p3", "limit=1e3", "limit=1E3GiB", "limit=inf", "limit=nan",
                         "limit=+5", "limit=5.", "limit=.5", "limit=1.0000000000000000001",
                         "limit=1.01", "limit=2.0", "limit=0.", "limit=1.5B", "limit=0.1 B",
                         "limit=123456789012345678901", "limit=20000000TB", "initial=0x10GiB",
                         "limit=4 GiB extra", "limit=4GiB GiB",
                         /* Whole bytes with every suffix: these used to be cut
                          * (to 1024, and to 0, which means unlimited). */
                         "limit=1.0001K", "limit=0.0001K", "limit=0.0001KiB", "initial=1.0000001GiB",
                         "min_grow=0.1K", "limit=0.5B", "limit=1.0000000000000000001GB"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_ST(NULL, carve_config_parse(&c, bad[i]), CARVE_ERR_INVALID);
        const char *val = strchr(bad[i], '=') + 1;
        CHECK(strstr(carve_last_error(NULL), val) != NULL); /* the message quotes the value given */
        CHECK(memcmp(&c, &before, sizeof(c)) == 0);
    }
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1.0"));
    CHECK(c.limit_fraction == 1.0 && c.limit_bytes == 0);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1.000000000000000000000000"));
    CHECK(c.limit_fraction == 1.0);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=00.5"));
    CHECK(c.limit_fraction == 0.5);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=0.0000000000000000001")); /* tiny, but in (0, 1] */
    CHECK(c.limit_fraction > 0 && c.limit_fraction < 1e-18);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1.5GB"));
    CHECK(c.limit_bytes == 1500000000u && c.limit_fraction == 0);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=0.5KiB"));
    CHECK(c.limit_bytes == 512);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=0.001KB")); /* 1 byte: whole */
    CHECK(c.limit_bytes == 1);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=0.0009765625KiB"));
    CHECK(c.limit_bytes == 1);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1.50GiB"));
    CHECK(c.limit_bytes == (size_t)3 << 29);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=0.0K")); /* zero is zero: the default */
    CHECK(c.limit_bytes == 0 && c.limit_fraction == 0);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=007"));
    CHECK(c.limit_bytes == 7);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=18446744073709551615"));
    CHECK(c.limit_bytes == SIZE_MAX);
    CHECK_ST(NULL, carve_config_parse(&c, "limit=18446744073709551616"), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_config_parse(&c, "limit=15TiB"));
    CHECK(c.limit_bytes == (size_t)15 << 40);
}

/* A key given twice is refused, in carve_config_parse and in CARVE_CONF,
 * except once more in a device's own section. */
static void test_duplicate_keys(void) {
    carve_config c;
    carve_config_init(&c);
    carve_config before = c;
    CHECK_ST(NULL, carve_config_parse(&c, "limit=1GiB,limit=2GiB"), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "limit") && strstr(carve_last_error(NULL), "twice"));
    CHECK(memcmp(&c, &before, sizeof(c)) == 0);
    CHECK_ST(NULL, carve_config_parse(&c, "growth=1,limit=0.5,growth=0"), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "growth") != NULL);
    /* Separate calls are separate texts. */
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1GiB"));
    CHECK_OK(NULL, carve_config_parse(&c, "limit=2GiB"));
    CHECK(c.limit_bytes == (size_t)2 << 30);

    CHECK_ST(NULL, carve_conf_parse("limit=1GiB;limit=2GiB", 0, &c), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "twice") != NULL);
    CHECK_ST(NULL, carve_conf_parse("device0:limit=1GiB;device0:limit=2GiB", 0, &c), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_conf_parse("limit=1GiB,growth=0;device2:growth=1;device2:growth=1", 0, &c),
             CARVE_ERR_INVALID); /* reported even for another device's sections */
    CHECK_OK(NULL, carve_conf_parse("limit=1GiB;device0:limit=2GiB", 0, &c));
    CHECK(c.limit_bytes == (size_t)2 << 30);
    CHECK_OK(NULL, carve_conf_parse("device0:limit=2GiB;limit=1GiB;device1:limit=3GiB", 1, &c));
    CHECK(c.limit_bytes == (size_t)3 << 30);
}

/* Limits round down to the granule, initial blocks up but never past the
 * rounded limit; the two are compared as given. Messages show what the user
 * gave. */
static void test_rounding(void) {
    const size_t MiB = (size_t)1 << 20;
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.growth = 0;
    c.initial_bytes = c.limit_bytes = 3 * MiB; /* equal sizes, not granule multiples */
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    carve_config eff;
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.limit_bytes == 2 * MiB && eff.initial_bytes == 2 * MiB);
    CHECK(carve_memory_reserved(a) == 2 * MiB);
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 2 * MiB, NULL, &p));
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);

    c.initial_bytes = 3 * MiB; /* rounds up to 4 MiB = the rounded limit */
    c.limit_bytes = 5 * MiB;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.limit_bytes == 4 * MiB && eff.initial_bytes == 4 * MiB);
    carve_arena_destroy(a);

    c.initial_bytes = 5 * MiB + 1;
    c.limit_bytes = 5 * MiB;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "5242881 bytes") && strstr(carve_last_error(NULL), "5242880 bytes"));

    /* The message names the limit as given, not as rounded (it used to say 0 bytes). */
    c.initial_bytes = 0;
    c.growth = 1;
    CHECK_OK(NULL, carve_config_parse(&c, "limit=1MiB"));
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "1048576 bytes") != NULL);
    CHECK(strstr(carve_last_error(NULL), "(0 bytes)") == NULL);
    c.limit_bytes = 256;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "256 bytes") != NULL);

    /* Fault-injection keys. */
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, "fail_backend_at=7,fail_backend_every=3,fail_backend_status=backend"));
    CHECK(c.fail_backend_at == 7 && c.fail_backend_every == 3 && c.fail_backend_status == CARVE_ERR_BACKEND);
    CHECK_ST(NULL, carve_config_parse(&c, "fail_backend_status=sometimes"), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_config_parse(&c, "fail_backend_at=-1"), CARVE_ERR_INVALID);
    c.backend = CARVE_BACKEND_HOST;
    c.fail_backend_status = CARVE_ERR_BAD_POINTER;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    /* 0 (CARVE_OK) stands for the default, CARVE_ERR_OOM, as carve.h says
     * (a structure zeroed before its fields are set), and the effective
     * configuration says so. */
    c.fail_backend_status = CARVE_OK;
    c.growth = 1;
    c.fail_backend_at = 0;
    c.fail_backend_every = 1; /* every reserve fails */
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.fail_backend_status == CARVE_ERR_OOM);
    CHECK_ST(a, carve_alloc(a, 4096, NULL, &p), CARVE_ERR_OOM); /* the first reserve fails, as out of memory */
    CHECK(p == NULL);
    carve_arena_destroy(a);

    /* min_grow is clamped to the rounded limit before it is rounded up: one
     * within a granule of SIZE_MAX used to wrap around to 0 (automatic). */
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - (2 * MiB - 2), SIZE_MAX - 2 * MiB, SIZE_MAX / 2 + 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        carve_config_init(&c);
        c.backend = CARVE_BACKEND_VIRTUAL;
        c.vmm = 0;
        c.min_grow_bytes = sizes[i];
        CHECK_OK(NULL, carve_arena_create(&c, &a));
        CHECK_OK(a, carve_arena_get_config(a, &eff));
        CHECK(eff.min_grow_bytes != 0 && eff.min_grow_bytes % (2 * MiB) == 0);
        CHECK(eff.min_grow_bytes >= (sizes[i] & ~(2 * MiB - 1)));
        carve_arena_destroy(a);
        c.limit_bytes = (size_t)1 << 40; /* with a limit: the limit */
        CHECK_OK(NULL, carve_arena_create(&c, &a));
        CHECK_OK(a, carve_arena_get_config(a, &eff));
        CHECK(eff.min_grow_bytes == (size_t)1 << 40);
        carve_arena_destroy(a);
    }
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.min_grow_bytes = 3 * MiB; /* an ordinary one rounds up */
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    CHECK_OK(a, carve_arena_get_config(a, &eff));
    CHECK(eff.min_grow_bytes == 4 * MiB);
    carve_arena_destroy(a);
}

/* A limit near the size of the address space: creation answers with the
 * statuses carve.h gives it, OK or (virtual-memory mode, which reserves
 * address space for twice the limit and bookkeeping for every granule of
 * it) CARVE_ERR_OOM naming the address space; segments mode reserves
 * nothing at creation. The limits are ones whose address space the virtual
 * backend cannot hold (2^56 bytes and more), so that no bookkeeping is
 * allocated: 2^54 bytes would need 16 GiB of it, which a sanitizer's
 * calloc fills with zeros. */
static void test_large_limits(void) {
    const size_t limits[] = {(size_t)1 << 55, SIZE_MAX - 1};
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        for (int vmm = 0; vmm <= 1; vmm++) {
            carve_config c;
            carve_config_init(&c);
            c.backend = CARVE_BACKEND_VIRTUAL;
            c.vmm = vmm;
            c.limit_bytes = limits[i];
            carve_arena *a = (carve_arena *)1;
            carve_status st = carve_arena_create(&c, &a);
            if (vmm == 0)
                CHECK(st == CARVE_OK);
            else
                CHECK(st == CARVE_OK || (st == CARVE_ERR_OOM && a == NULL &&
                                         strstr(carve_last_error(NULL), "address space") != NULL));
            if (st == CARVE_OK) {
                void *p = NULL;
                CHECK_OK(a, carve_alloc(a, 4096, NULL, &p));
                CHECK_OK(a, carve_free(a, p));
                carve_arena_destroy(a);
            }
        }
    }
}

static void test_conf_sections(void) {
    carve_config c;
    CHECK_OK(NULL, carve_conf_parse("growth=1,limit=4GiB,initial=1GiB;device1:limit=2GiB", 0, &c));
    CHECK(c.limit_bytes == ((size_t)4 << 30) && c.initial_bytes == ((size_t)1 << 30) && c.device == 0);
    CHECK_OK(NULL, carve_conf_parse("growth=1,limit=4GiB,initial=1GiB;device1:limit=2GiB", 1, &c));
    CHECK(c.limit_bytes == ((size_t)2 << 30) && c.initial_bytes == ((size_t)1 << 30) && c.device == 1);
    /* Device sections win whatever their position. */
    CHECK_OK(NULL, carve_conf_parse("device0:limit=0.25;limit=0.5", 0, &c));
    CHECK(c.limit_fraction == 0.25);
    CHECK_OK(NULL, carve_conf_parse(NULL, 0, &c));
    CHECK(c.growth == 1 && c.limit_bytes == 0);
    CHECK_OK(NULL, carve_conf_parse("", 5, &c));
    /* Errors name the key or the section. */
    CHECK_ST(NULL, carve_conf_parse("limit=4GiB;device1:growht=0", 0, &c), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "growht") != NULL);
    CHECK(c.limit_bytes == 0); /* defaults on error */
    CHECK_ST(NULL, carve_conf_parse("backend=host", 0, &c), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "backend") != NULL);
    CHECK_ST(NULL, carve_conf_parse("device=2", 0, &c), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_conf_parse("devicex:limit=1GiB", 0, &c), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_conf_parse("device1limit=1GiB", 0, &c), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_conf_parse("device99:limit=1GiB", 0, &c), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_conf_parse("limit=1GiB", -1, &c), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_conf_parse("limit=1GiB", 0, NULL), CARVE_ERR_INVALID);
}

static void test_device_api_without_gpu(void) {
    if (carve_device_count() > 0)
        return; /* covered by the gpu suite */
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_device_arena(0, &a), CARVE_ERR_NO_DEVICE);
    CHECK(a == NULL);
    CHECK_ST(NULL, carve_device_arena(0, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit(0, 1 << 30), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 2.0), CARVE_ERR_INVALID);
    /* A bad value is judged before the device, by carve_arena_create's rule
     * (a limit below one granule), with its words. */
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_VIRTUAL;
    c.limit_bytes = (2 << 20) - 1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "below one granule") != NULL);
    CHECK_ST(NULL, carve_device_set_limit(0, (2 << 20) - 1), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "carve_device_set_limit: the limit") != NULL);
    CHECK(strstr(carve_last_error(NULL), "below one granule") != NULL);
    CHECK_ST(NULL, carve_device_set_limit(0, 1), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit(0, 2 << 20), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_limit(0, 0), CARVE_ERR_NO_DEVICE); /* 0: the device's memory */
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 0.0), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, -0.5), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, NAN), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 0.5), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_growth(0, 0), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_initial(0, 0), CARVE_ERR_NO_DEVICE);
    size_t f = 1, t = 1;
    CHECK_ST(NULL, carve_device_mem_info(0, &f, &t), CARVE_ERR_NO_DEVICE);
    CHECK(f == 0 && t == 0);
    carve_device_arenas_release();
}

/* carve_config_check refuses, without a device, what carve_arena_create
 * would refuse for a size given in bytes, naming the keys and values; and
 * agrees with carve_arena_create on every case (virtual backend). */
static void test_config_check(void) {
    static const struct {
        const char *text;
        const char *words; /* NULL: accepted */
    } cases[] = {
        {"", NULL},
        {"limit=2MiB", NULL},
        {"limit=1", "limit=1 (1 B) is below one granule"},
        {"limit=2097151", "limit=2097151"},
        {"growth=0", "growth=0 and no initial block"},
        {"growth=0,initial=4MiB", NULL},
        {"initial=2GiB,limit=1GiB", "initial=2147483648 (2.00 GiB) is larger than limit=1073741824"},
        {"initial=1GiB,limit=1GiB", NULL},
        {"initial=0.5,limit=0.25", "initial=0.5 is larger than limit=0.25"},
        {"initial=0.25,limit=0.5", NULL},
        {"initial=1GiB,limit=0.5", NULL}, /* needs the device: left to carve_arena_create */
        {"limit=0.000001", NULL},         /* the same */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        carve_config c;
        carve_config_init(&c);
        CHECK_OK(NULL, carve_config_parse(&c, cases[i].text));
        carve_status st = carve_config_check(&c);
        if (!cases[i].words) {
            CHECK_OK(NULL, st);
        } else {
            CHECK(st == CARVE_ERR_INVALID && strstr(carve_last_error(NULL), cases[i].words));
            if (st == CARVE_OK || !strstr(carve_last_error(NULL), cases[i].words))
                fprintf(stderr, "carve_config_check(%s): %s\n", cases[i].text, carve_last_error(NULL));
        }
        /* The arena agrees, where no device is needed. */
        if (c.initial_fraction == 0 && c.limit_fraction == 0) {
            c.backend = CARVE_BACKEND_VIRTUAL;
            carve_arena *a = NULL;
            carve_status cst = carve_arena_create(&c, &a);
            CHECK((cst == CARVE_OK) == (st == CARVE_OK));
            carve_arena_destroy(a);
        }
    }
    CHECK_ST(NULL, carve_config_check(NULL), CARVE_ERR_INVALID);
    carve_config c;
    carve_config_init(&c);
    c.limit_fraction = 1.5;
    CHECK_ST(NULL, carve_config_check(&c), CARVE_ERR_INVALID);
    /* the size rule: a structure without its size is refused, one from an
     * older program (the smallest size) is read with defaults for the rest */
    carve_config_init(&c);
    c.size = 0;
    CHECK_ST(NULL, carve_config_check(&c), CARVE_ERR_INVALID);
    carve_config_init_sized(&c, CARVE_CONFIG_SIZE_MIN);
    CHECK_ST(NULL, carve_config_check(&c), CARVE_OK);
}

int main(void) {
    test_defaults();
    test_peers_ipc_keys();
    test_device_field();
    test_config_size();
    test_parse();
    test_size_syntax();
    test_duplicate_keys();
    test_rounding();
    test_large_limits();
    test_conf_sections();
    test_device_api_without_gpu();
    test_config_check();
    return test_finish();
}
