/*
 * gpu_device.c — the per-device default arenas: setters before first use,
 * CARVE_CONF, bad configurations, bad device numbers, memory info and
 * release.
 *
 * Default arenas are process-wide and CARVE_CONF is read when one is
 * created, so each mode runs in a process of its own (meson runs this
 * program three times):
 *   setters   CARVE_CONF unset; carve_device_set_* before and after first use
 *   conf      CARVE_CONF with an all-device section and deviceN: sections
 *   badconf   malformed CARVE_CONF values, each refused naming the key
 */
#include "gpu_util.h"

static int ndev;
static cudaStream_t s0;

static size_t granule_down(size_t x) { return x & ~(CARVE_SEGMENT_GRANULE - 1); }

static size_t device_total(int dev) {
    size_t f, t;
    CHECK_OK(NULL, carve_device_mem_info(dev, &f, &t));
    return t;
}

static carve_arena *default_arena(int dev) {
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_device_arena(dev, &a));
    CHECK(a != NULL);
    return a;
}

static carve_config config_of(const carve_arena *a) {
    carve_config c;
    memset(&c, 0, sizeof(c));
    CHECK_OK(a, carve_arena_get_config(a, &c));
    return c;
}

/* Allocate, fill and verify a few buffers through device dev's default arena. */
static void use(int dev) {
    carve_arena *a = default_arena(dev);
    if (!a)
        return;
    void *p[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(a, carve_alloc(a, (size_t)(i + 1) * 3 * MiB + 17, s0, &p[i]));
        if (p[i])
            gpu_fill(p[i], (size_t)(i + 1) * 3 * MiB + 17, 100 + (uint64_t)i, s0);
    }
    for (int i = 0; i < 4; i++) {
        if (p[i])
            CHECK(gpu_mismatches(gpu_counter_of(0, 1), p[i], (size_t)(i + 1) * 3 * MiB + 17, 100 + (uint64_t)i, s0) ==
                  0);
        CHECK_OK(a, carve_free(a, p[i]));
    }
    CHECK_ARENA(a);
}

/* ---- setters ---- */

static void case_bad_devices(void) {
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_device_arena(-1, &a), CARVE_ERR_NO_DEVICE);
    CHECK(a == NULL);
    a = (carve_arena *)1;
    CHECK_ST(NULL, carve_device_arena(99, &a), CARVE_ERR_NO_DEVICE);
    CHECK(a == NULL);
    CHECK(strstr(carve_last_error(NULL), "99") != NULL);
    CHECK_ST(NULL, carve_device_arena(ndev, &a), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_arena(0, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit(99, GiB), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_limit(-1, GiB), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_growth(99, 1), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_initial(99, MiB), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_limit_fraction(99, 0.5), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 1.5), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 0.0), CARVE_ERR_INVALID);
    /* Values carve_arena_create would refuse are refused by the setters:
     * a limit below one granule, given in bytes or as a share of the device. */
    CHECK_ST(NULL, carve_device_set_limit(0, MiB), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "below one granule") != NULL);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 1e-9), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "below one granule") != NULL);
    size_t f = 1, t = 1;
    CHECK_ST(NULL, carve_device_mem_info(99, &f, &t), CARVE_ERR_NO_DEVICE);
    CHECK(f == 0 && t == 0);
    CHECK_ST(NULL, carve_device_mem_info(-1, &f, &t), CARVE_ERR_NO_DEVICE);
    CHECK(carve_device_count() == ndev);
    CHECK(cudaGetLastError() == cudaSuccess);
}

static void case_mem_info(void) {
    size_t f, t, cf, ct;
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(NULL, carve_device_mem_info(0, &f, &t));
    CUDA_CHECK(cudaMemGetInfo(&cf, &ct));
    CHECK(t == ct);
    CHECK(f <= t);
    CHECK(f + gpu_slack() >= cf && cf + gpu_slack() >= f);
    CHECK_OK(NULL, carve_device_mem_info(0, NULL, &t)); /* either output may be NULL */
    char b1[32], b2[32];
    printf("  device 0: %s free of %s\n", gpu_fmt(b1, sizeof(b1), f), gpu_fmt(b2, sizeof(b2), t));
}

static void case_setters_before_first_use(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    CHECK_OK(NULL, carve_device_set_limit(0, 512 * MiB));
    CHECK_OK(NULL, carve_device_set_growth(0, 1));
    CHECK_OK(NULL, carve_device_set_initial(0, 64 * MiB));
    carve_arena *a = default_arena(0);
    if (!a)
        return;
    carve_config c = config_of(a);
    CHECK(c.backend == CARVE_BACKEND_CUDA && c.device == 0);
    CHECK(c.limit_bytes == 512 * MiB);
    CHECK(c.initial_bytes == 64 * MiB);
    CHECK(c.growth == 1);
    CHECK(c.name && strcmp(c.name, "device0") == 0);
    CHECK(carve_memory_reserved(a) == 64 * MiB);
    GPU_CHECK_USAGE(&m, 64 * MiB, 1, "default arena's initial block");
    carve_arena *again = NULL;
    CHECK_OK(NULL, carve_device_arena(0, &again));
    CHECK(again == a);

    /* Too late now: the arena exists. */
    CHECK_ST(NULL, carve_device_set_limit(0, GiB), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "already exists") != NULL);
    CHECK_ST(NULL, carve_device_set_growth(0, 0), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_initial(0, MiB), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_device_set_limit_fraction(0, 0.5), CARVE_ERR_INVALID);
    CHECK(config_of(a).limit_bytes == 512 * MiB);

    use(0);
    /* The limit holds: 512 MiB in 64 MiB pieces, then OOM. */
    void *p[16];
    int n = 0;
    while (n < 16 && carve_alloc(a, 64 * MiB, s0, &p[n]) == CARVE_OK)
        n++;
    CHECK(n == 8);
    CHECK(carve_memory_reserved(a) <= 512 * MiB);
    for (int i = 0; i < n; i++)
        CHECK_OK(a, carve_free(a, p[i]));

    carve_device_arenas_release();
    GPU_CHECK_BACK(&m, "carve_device_arenas_release");
}

/* After release, the next use creates a fresh arena with the defaults (the
 * setters' values are gone with the old one). */
static void case_defaults_after_release(void) {
    carve_arena *a = default_arena(0);
    if (!a)
        return;
    carve_config c = config_of(a);
    CHECK(c.limit_bytes == granule_down(device_total(0)));
    CHECK(c.initial_bytes == 0);
    CHECK(c.growth == 1);
    CHECK(carve_memory_reserved(a) == 0);
    use(0);
    CHECK_ST(NULL, carve_device_set_initial(0, MiB), CARVE_ERR_INVALID);
    carve_device_arenas_release();
}

static void case_limit_fraction_setter(void) {
    CHECK_OK(NULL, carve_device_set_limit(0, GiB));
    CHECK_OK(NULL, carve_device_set_limit_fraction(0, 0.05)); /* the later setter wins */
    carve_arena *a = default_arena(0);
    if (a)
        CHECK(config_of(a).limit_bytes == granule_down((size_t)((double)device_total(0) * 0.05)));
    carve_device_arenas_release();
}

static void case_growth_off_setter(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    /* Growth off with no initial block is refused, and nothing is created... */
    CHECK_OK(NULL, carve_device_set_growth(0, 0));
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_device_arena(0, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
    /* ...so the setters still apply. */
    CHECK_OK(NULL, carve_device_set_initial(0, 128 * MiB));
    a = default_arena(0);
    if (a) {
        carve_config c = config_of(a);
        CHECK(c.growth == 0 && c.initial_bytes == 128 * MiB);
        carve_stats s = gpu_stats(a);
        CHECK(s.reserved_bytes == 128 * MiB && s.num_segments == 1);
        GPU_CHECK_USAGE(&m, 128 * MiB, 1, "one 128 MiB block");
        use(0);
        void *p = NULL;
        CHECK_ST(a, carve_alloc(a, 129 * MiB, s0, &p), CARVE_ERR_OOM);
    }
    carve_device_arenas_release();
    GPU_CHECK_BACK(&m, "release");
}

/* ---- CARVE_CONF ---- */

#define CONF "growth=1,limit=1GiB,initial=32MiB;device0:limit=512MiB;device1:limit=768MiB"

static void case_conf_parse(void) {
    carve_config c;
    CHECK_OK(NULL, carve_conf_parse(CONF, 0, &c));
    CHECK(c.limit_bytes == 512 * MiB && c.initial_bytes == 32 * MiB && c.growth == 1);
    CHECK_OK(NULL, carve_conf_parse(CONF, 1, &c));
    CHECK(c.limit_bytes == 768 * MiB && c.initial_bytes == 32 * MiB);
    CHECK_OK(NULL, carve_conf_parse(CONF, 2, &c));
    CHECK(c.limit_bytes == GiB);
    /* deviceN: sections win over all-device ones whatever their order. */
    CHECK_OK(NULL, carve_conf_parse("device0:limit=256MiB;limit=1GiB", 0, &c));
    CHECK(c.limit_bytes == 256 * MiB);
    CHECK_OK(NULL, carve_conf_parse("limit=0.25", 0, &c));
    CHECK(c.limit_fraction == 0.25 && c.limit_bytes == 0);
}

static void case_setter_overrides_conf(void) {
    CHECK_OK(NULL, carve_device_set_initial(0, 64 * MiB));
    carve_arena *a = default_arena(0);
    if (a) {
        carve_config c = config_of(a);
        CHECK(c.limit_bytes == 512 * MiB); /* from device0: */
        CHECK(c.initial_bytes == 64 * MiB); /* the setter beats initial=32MiB */
        CHECK(carve_memory_reserved(a) == 64 * MiB);
        use(0);
    }
    carve_device_arenas_release();
}

static void case_conf_applied(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    carve_arena *a = default_arena(0);
    if (!a)
        return;
    carve_config c = config_of(a);
    CHECK(c.limit_bytes == 512 * MiB);
    CHECK(c.initial_bytes == 32 * MiB);
    CHECK(c.growth == 1);
    GPU_CHECK_USAGE(&m, 32 * MiB, 1, "CARVE_CONF initial=32MiB");
    use(0);
    void *p = NULL;
    CHECK_ST(a, carve_alloc(a, 513 * MiB, s0, &p), CARVE_ERR_OOM);
    if (ndev > 1) {
        carve_arena *b = default_arena(1);
        if (b) {
            CHECK(config_of(b).limit_bytes == 768 * MiB);
            CHECK(config_of(b).initial_bytes == 32 * MiB);
        }
    }
    carve_device_arenas_release();
    GPU_CHECK_BACK(&m, "release");
}

/* CARVE_CONF is read each time a default arena is created. */
static void case_conf_fraction(void) {
    setenv("CARVE_CONF", "limit=0.05", 1);
    carve_arena *a = default_arena(0);
    if (a)
        CHECK(config_of(a).limit_bytes == granule_down((size_t)((double)device_total(0) * 0.05)));
    carve_device_arenas_release();
    setenv("CARVE_CONF", CONF, 1);
}

/* ---- bad CARVE_CONF ---- */

static void expect_bad(const char *conf, const char *names) {
    setenv("CARVE_CONF", conf, 1);
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_device_arena(0, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
    const char *msg = carve_last_error(NULL);
    test_checks++;
    if (!strstr(msg, names)) {
        char d[1200];
        snprintf(d, sizeof(d), "CARVE_CONF=\"%s\": message does not name \"%s\": %s", conf, names, msg);
        test_fail(__FILE__, __LINE__, "expect_bad", d);
    } else {
        printf("  CARVE_CONF=\"%s\" -> %s\n", conf, msg);
    }
}

static void case_bad_conf(void) {
    gpu_mark m;
    gpu_mark_take(&m, 0);
    expect_bad("growth=1,limt=1GiB", "limt");
    expect_bad("growth=1,limt=1GiB", "limt"); /* still refused: nothing was created */
    expect_bad("limit=12XB", "limit");
    expect_bad("limit=2.5", "limit");
    expect_bad("growth=maybe", "growth");
    expect_bad("initial", "initial");
    expect_bad("device0:backend=host", "backend");
    expect_bad("device=1", "device");
    expect_bad("device99:limit=1GiB", "device99");
    expect_bad("limit=1GiB;device0:min_grow=lots", "min_grow");
    /* Valid syntax, invalid arena: growth off with no block. */
    setenv("CARVE_CONF", "growth=0", 1);
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_device_arena(0, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
    /* A good value afterwards works: the configuration is read at creation. */
    setenv("CARVE_CONF", "limit=256MiB", 1);
    a = default_arena(0);
    if (a) {
        CHECK(config_of(a).limit_bytes == 256 * MiB);
        use(0);
    }
    carve_device_arenas_release();
    GPU_CHECK_BACK(&m, "release");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 && argv[1] ? argv[1] : "setters";
    if (strcmp(mode, "setters") == 0)
        unsetenv("CARVE_CONF");
    else if (strcmp(mode, "conf") == 0)
        setenv("CARVE_CONF", CONF, 1);
    else if (strcmp(mode, "badconf") != 0) {
        fprintf(stderr, "usage: %s setters|conf|badconf\n", argv[0]);
        return 2;
    }
    char name[64];
    snprintf(name, sizeof(name), "gpu_device_%s", mode);
    ndev = gpu_start(name, 1);
    s0 = gpu_stream_new();
    if (strcmp(mode, "setters") == 0) {
        GPU_CASE(case_bad_devices);
        GPU_CASE(case_mem_info);
        GPU_CASE(case_setters_before_first_use);
        GPU_CASE(case_defaults_after_release);
        GPU_CASE(case_limit_fraction_setter);
        GPU_CASE(case_growth_off_setter);
    } else if (strcmp(mode, "conf") == 0) {
        GPU_CASE(case_conf_parse);
        GPU_CASE(case_setter_overrides_conf);
        GPU_CASE(case_conf_applied);
        GPU_CASE(case_conf_fraction);
    } else {
        GPU_CASE(case_bad_conf);
    }
    gpu_stream_free(s0);
    carve_device_arenas_release();
    return gpu_finish();
}
