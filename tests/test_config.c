/*
 * test_config.c — carve_config_init defaults, carve_config_parse (sizes with
 * suffixes, fractions, booleans, errors naming the key, nothing changed on
 * error) and CARVE_CONF sections through carve_conf_parse.
 */
#include "test_util.h"

static void test_defaults(void) {
    carve_config c;
    memset(&c, 0x5A, sizeof(c));
    carve_config_init(&c);
    CHECK(c.backend == CARVE_BACKEND_CUDA && c.device == 0 && c.growth == 1);
    CHECK(c.initial_bytes == 0 && c.limit_bytes == 0 && c.min_grow_bytes == 0);
    CHECK(c.initial_fraction == 0 && c.limit_fraction == 0 && c.sim_event_polls == 0 && c.name == NULL);
    carve_config_init(NULL);
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
    CHECK_ST(NULL, carve_device_set_growth(0, 0), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_device_set_initial(0, 0), CARVE_ERR_NO_DEVICE);
    size_t f = 1, t = 1;
    CHECK_ST(NULL, carve_device_mem_info(0, &f, &t), CARVE_ERR_NO_DEVICE);
    CHECK(f == 0 && t == 0);
    carve_device_arenas_release();
}

int main(void) {
    test_defaults();
    test_parse();
    test_conf_sections();
    test_device_api_without_gpu();
    return test_finish();
}
