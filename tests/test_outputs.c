/*
 * test_outputs.c — carve.h's convention that output parameters are set on
 * every call, to NULL / 0 on failure, checked for every public function with
 * one (carve.h, carve_trace.h, carve_frameworks.h): each output is filled
 * with 0xAB first, the function is called with a bad argument, and the
 * output must then hold zeros (or what the function's comment promises
 * instead: the defaults for carve_conf_parse, the configuration unchanged
 * for carve_config_parse). carve_arena_get_config used to leave *out as it
 * was.
 */
#include "carve_frameworks.h"
#include "carve_trace.h"
#include "test_util.h"

#define FILL(x) memset(&(x), 0xAB, sizeof(x))

/* Every byte of the n bytes at p is zero. */
static int zeroed(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

static void test_config_outputs(void) {
    carve_config c;
    /* A NULL arena: *out zeroed but for its size. */
    FILL(c);
    CHECK_ST(NULL, carve_arena_get_config(NULL, &c), CARVE_ERR_INVALID);
    CHECK(c.size == sizeof(c) && c.limit_bytes == 0 && c.name == NULL && c.growth == 0);
    CHECK(zeroed((const char *)&c + sizeof(c.size), sizeof(c) - sizeof(c.size)));
    /* Sized: the first size bytes, nothing past them. */
    unsigned char buf[sizeof(carve_config) + 32];
    memset(buf, 0xAB, sizeof(buf));
    CHECK_ST(NULL, carve_arena_get_config_sized(NULL, (carve_config *)(void *)buf, CARVE_CONFIG_SIZE_MIN),
             CARVE_ERR_INVALID);
    CHECK(((carve_config *)(void *)buf)->size == CARVE_CONFIG_SIZE_MIN);
    CHECK(zeroed(buf + sizeof(size_t), CARVE_CONFIG_SIZE_MIN - sizeof(size_t)));
    CHECK(buf[CARVE_CONFIG_SIZE_MIN] == 0xAB && buf[sizeof(buf) - 1] == 0xAB);
    /* A size the caller's structure cannot have: nothing is written. */
    carve_arena *a = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    memset(buf, 0xAB, sizeof(buf));
    CHECK_ST(a, carve_arena_get_config_sized(a, (carve_config *)(void *)buf, CARVE_CONFIG_SIZE_MIN - 1),
             CARVE_ERR_INVALID);
    CHECK(buf[0] == 0xAB && buf[CARVE_CONFIG_SIZE_MIN - 2] == 0xAB);
    CHECK_ST(a, carve_arena_get_config_sized(a, (carve_config *)(void *)buf, CARVE_CONFIG_SIZE_MAX + 1),
             CARVE_ERR_INVALID);
    CHECK(buf[0] == 0xAB && buf[sizeof(buf) - 1] == 0xAB);
    carve_arena_destroy(a);

    /* carve_conf_parse: the defaults on failure, as its comment says. */
    FILL(c);
    CHECK_ST(NULL, carve_conf_parse("limit=lots", 0, &c), CARVE_ERR_INVALID);
    carve_config d;
    carve_config_init(&d);
    CHECK(memcmp(&c, &d, sizeof(c)) == 0);
    FILL(c);
    CHECK_ST(NULL, carve_conf_parse("", -1, &c), CARVE_ERR_INVALID);
    CHECK(memcmp(&c, &d, sizeof(c)) == 0);
    /* carve_config_parse: unchanged on failure, as its comment says. */
    carve_config before = d;
    CHECK_ST(NULL, carve_config_parse(&d, "limit=lots"), CARVE_ERR_INVALID);
    CHECK(memcmp(&d, &before, sizeof(d)) == 0);
}

static void test_arena_outputs(void) {
    carve_arena *a;
    FILL(a);
    CHECK_ST(NULL, carve_arena_create(NULL, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_HOST;
    c.growth = 0; /* and no initial block */
    FILL(a);
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL);

    a = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    void *p;
    FILL(p);
    CHECK_ST(NULL, carve_alloc(NULL, 64, NULL, &p), CARVE_ERR_INVALID);
    CHECK(p == NULL);
    FILL(p);
    CHECK_ST(a, carve_alloc(a, SIZE_MAX, NULL, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);

    size_t size;
    carve_stream s;
    int here;
    FILL(size);
    FILL(s);
    CHECK_ST(a, carve_buffer_info(a, &here, &size, &s), CARVE_ERR_BAD_POINTER);
    CHECK(size == 0 && s == NULL);
    FILL(size);
    FILL(s);
    CHECK_ST(NULL, carve_buffer_info(NULL, &here, &size, &s), CARVE_ERR_INVALID);
    CHECK(size == 0 && s == NULL);

    carve_stats st;
    FILL(st);
    CHECK_ST(NULL, carve_get_stats(NULL, &st), CARVE_ERR_INVALID);
    CHECK(zeroed(&st, sizeof(st)));

    char *json;
    FILL(json);
    CHECK_ST(NULL, carve_snapshot_json(NULL, &json), CARVE_ERR_INVALID);
    CHECK(json == NULL);

    carve_ipc_desc desc;
    int *fds;
    FILL(desc);
    FILL(fds);
    CHECK_ST(a, carve_ipc_export(a, &here, &desc, &fds), CARVE_ERR_BAD_POINTER);
    CHECK(zeroed(&desc, sizeof(desc)) && fds == NULL);
    CHECK_OK(a, carve_alloc(a, 64, NULL, &p));
    FILL(desc);
    FILL(fds);
    CHECK_ST(a, carve_ipc_export(a, p, &desc, &fds), CARVE_ERR_INVALID); /* host memory cannot be exported */
    CHECK(zeroed(&desc, sizeof(desc)) && fds == NULL);
    CHECK_OK(a, carve_free(a, p));

    carve_ipc_mapping *map;
    void *ptr;
    FILL(desc); /* no magic */
    FILL(map);
    FILL(ptr);
    CHECK_ST(NULL, carve_ipc_import(&desc, NULL, 0, &map, &ptr), CARVE_ERR_INVALID);
    CHECK(map == NULL && ptr == NULL);
    carve_arena_destroy(a);

    size_t f, t;
    FILL(f);
    FILL(t);
    CHECK_ST(NULL, carve_device_mem_info(-1, &f, &t), CARVE_ERR_NO_DEVICE);
    CHECK(f == 0 && t == 0);
    FILL(a);
    CHECK(carve_device_arena(-1, &a) != CARVE_OK);
    CHECK(a == NULL);
}

static void test_trace_outputs(void) {
    carve_trace_writer *w;
    FILL(w);
    CHECK_ST(NULL, carve_trace_writer_open(NULL, "title", &w), CARVE_ERR_INVALID);
    CHECK(w == NULL);
    FILL(w);
    CHECK_ST(NULL, carve_trace_writer_open("/nonexistent-directory/trace.csv", NULL, &w), CARVE_ERR_BACKEND);
    CHECK(w == NULL);

    carve_replay_streams rs;
    FILL(rs);
    CHECK(carve_replay_streams_open(&rs, 1, CARVE_BACKEND_CUDA, -1) != CARVE_OK);
    CHECK(zeroed(&rs, sizeof(rs)));

    carve_trace t;
    FILL(t);
    CHECK(carve_trace_load_path("/nonexistent-directory/trace.csv", &t, NULL, NULL) == -1);
    CHECK(t.n == 0 && t.nslots == 0 && t.nallocs == 0 && t.nbad == 0);
    carve_trace_free(&t);

    carve_replay_result res;
    carve_replay_warm warm;
    FILL(res);
    FILL(warm);
    CHECK_ST(NULL, carve_replay_run_warm(NULL, NULL, NULL, NULL, 0, 1, NULL, NULL, &res, &warm), CARVE_ERR_INVALID);
    CHECK(zeroed(&res, sizeof(res)) && zeroed(&warm, sizeof(warm)));
    carve_replay_rec rec;
    FILL(rec);
    FILL(res);
    CHECK_ST(NULL, carve_replay_record(NULL, NULL, NULL, 4, &rec, &res), CARVE_ERR_INVALID);
    CHECK(zeroed(&rec, sizeof(rec)) && zeroed(&res, sizeof(res)));
    carve_capacity_result cap;
    FILL(cap);
    CHECK_ST(NULL, carve_replay_min_capacity(NULL, NULL, NULL, NULL, NULL, &cap), CARVE_ERR_INVALID);
    CHECK(zeroed(&cap, sizeof(cap)));
}

static void test_route_outputs(void) {
    int destroyed;
    destroyed = 0x55;
    CHECK_ST(NULL, carve_route_retire(NULL, &destroyed), CARVE_ERR_INVALID);
    CHECK(destroyed == 0);
    carve_arena *a;
    int here;
    FILL(a);
    CHECK_ST(NULL, carve_route_owner(&here, 0, &a), CARVE_ERR_BAD_POINTER);
    CHECK(a == NULL);
    void *p;
    carve_arena *host = test_arena(CARVE_BACKEND_HOST, 1, 0, 4 << 20);
    FILL(p);
    CHECK_ST(host, carve_route_alloc(host, SIZE_MAX, 0, NULL, &p), CARVE_ERR_OOM);
    CHECK(p == NULL);
    int gone = 0;
    CHECK_OK(NULL, carve_route_retire(host, &gone));
    CHECK(gone == 1);
}

int main(void) {
    test_config_outputs();
    test_arena_outputs();
    test_trace_outputs();
    test_route_outputs();
    return test_finish();
}
