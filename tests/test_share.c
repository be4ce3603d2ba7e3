/*
 * test_share.c — what an arena's memory is shared with, on any machine: the
 * list of devices granted access (the access descriptors the virtual-memory
 * backend sets on every mapping), over made-up peer topologies; and the
 * export and import of buffers between processes, up to where a GPU is
 * needed: argument checks, the clear refusals of the backends that cannot
 * share, and descriptions that cannot be one.
 */
#include <fcntl.h>
#include <unistd.h>

#include "backend/peers.h"
#include "test_util.h"

/* A topology: can[p][o] says device p can access device o's memory. */
typedef struct topo {
    int n;
    int can[8][8];
    int asked;
} topo;

static int topo_can(int peer, int owner, void *arg) {
    topo *t = arg;
    t->asked++;
    return t->can[peer][owner];
}

static int list_is(const int *got, int n, const int *want, int nwant) {
    if (n != nwant)
        return 0;
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            return 0;
    return 1;
}

static void test_peer_list(void) {
    /* Four devices: 0-1 and 2-3 are pairs; 1 can also reach 3, not back. */
    topo t = {.n = 4};
    t.can[0][1] = t.can[1][0] = t.can[2][3] = t.can[3][2] = 1;
    t.can[1][3] = 1;
    int out[CARVE_PEERS_MAX + 1], n = -1;

    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_AUTO, 0, 0, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){0, 1}, 2));
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_ALL, 0, 3, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){3, 1, 2}, 3)); /* owner first, then ascending */
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_AUTO, 0, 2, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){2, 3}, 2));
    t.asked = 0;
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_NONE, 0, 1, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){1}, 1) && t.asked == 0);
    /* One device: the owner alone, whatever the mode. */
    topo one = {.n = 1};
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_ALL, 0, 0, one.n, topo_can, &one, out, &n));
    CHECK(list_is(out, n, (int[]){0}, 1));

    /* A list: the owner's own bit changes nothing; each listed device must
     * exist and reach the owner. */
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_LIST, 1u << 1 | 1u << 3, 3, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){3, 1}, 2));
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_LIST, 1u << 3 | 1u << 2, 3, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){3, 2}, 2));
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_LIST, 0, 2, t.n, topo_can, &t, out, &n));
    CHECK(list_is(out, n, (int[]){2}, 1));
    CHECK_ST(NULL, carve_peer_list(CARVE_PEERS_LIST, 1u << 0, 3, t.n, topo_can, &t, out, &n), CARVE_ERR_INVALID);
    CHECK(strstr(carve_backend_msg(), "device 0 cannot access device 3") != NULL);
    CHECK_ST(NULL, carve_peer_list(CARVE_PEERS_LIST, 1u << 5, 0, t.n, topo_can, &t, out, &n), CARVE_ERR_INVALID);
    CHECK(strstr(carve_backend_msg(), "peer device 5 does not exist (4 devices visible)") != NULL);
    CHECK_ST(NULL, carve_peer_list(CARVE_PEERS_LIST, (uint64_t)1 << 63, 0, t.n, topo_can, &t, out, &n),
             CARVE_ERR_INVALID);

    /* Eight devices all connected: owner plus seven, room for all. */
    topo full = {.n = 8};
    for (int p = 0; p < 8; p++)
        for (int o = 0; o < 8; o++)
            full.can[p][o] = p != o;
    CHECK_OK(NULL, carve_peer_list(CARVE_PEERS_AUTO, 0, 5, full.n, topo_can, &full, out, &n));
    CHECK(list_is(out, n, (int[]){5, 0, 1, 2, 3, 4, 6, 7}, 8));
}

static int zeroed(const carve_ipc_desc *d) {
    static const carve_ipc_desc zero;
    return memcmp(d, &zero, sizeof(zero)) == 0;
}

/* Host and virtual arenas have nothing another process could map. */
static void test_export_refused(void) {
    const char *confs[] = {"backend=host", "backend=virtual", "backend=virtual,vmm=1",
                           "backend=host,fail_backend_every=1000"};
    for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
        carve_config c;
        carve_config_init(&c);
        CHECK_OK(NULL, carve_config_parse(&c, confs[i]));
        carve_arena *a = NULL;
        CHECK_OK(NULL, carve_arena_create(&c, &a));
        if (!a)
            continue;
        void *p = NULL;
        CHECK_OK(a, carve_alloc(a, 3 << 20, NULL, &p));
        carve_ipc_desc d;
        int *fds = (int *)1;
        memset(&d, 0x5A, sizeof(d));
        CHECK_ST(a, carve_ipc_export(a, p, &d, &fds), CARVE_ERR_INVALID);
        CHECK(strstr(carve_last_error(a), "cannot share memory with other processes") != NULL);
        CHECK(strstr(carve_last_error(a), carve_backend_str(c.backend)) != NULL);
        CHECK(zeroed(&d) && fds == NULL);
        /* A pointer that is not a live buffer's start is that, first. */
        fds = (int *)1;
        CHECK_ST(a, carve_ipc_export(a, (char *)p + 256, &d, &fds), CARVE_ERR_BAD_POINTER);
        CHECK(zeroed(&d) && fds == NULL);
        CHECK_ST(a, carve_ipc_export(a, &d, &d, &fds), CARVE_ERR_BAD_POINTER);
        CHECK_ST(a, carve_ipc_export(a, NULL, &d, &fds), CARVE_ERR_INVALID);
        CHECK_ST(a, carve_ipc_export(a, p, NULL, &fds), CARVE_ERR_INVALID);
        CHECK_ST(a, carve_ipc_export(a, p, &d, NULL), CARVE_ERR_INVALID);
        CHECK_ST(NULL, carve_ipc_export(NULL, p, &d, &fds), CARVE_ERR_INVALID);
        CHECK_OK(a, carve_free(a, p));
        CHECK_ST(a, carve_ipc_export(a, p, &d, &fds), CARVE_ERR_BAD_POINTER); /* freed */
        carve_config got;
        CHECK_OK(a, carve_arena_get_config(a, &got));
        CHECK(got.ipc == 0);
        carve_arena_destroy(a);
    }
    carve_ipc_fds_close(NULL, 3);
    /* carve_ipc_fds_close closes what it is given and frees the array. */
    int *fds = malloc(2 * sizeof(int));
    fds[0] = open("/dev/null", O_RDONLY);
    fds[1] = open("/dev/null", O_RDONLY);
    CHECK(fds[0] >= 0 && fds[1] >= 0);
    int kept = fds[1];
    carve_ipc_fds_close(fds, 2);
    CHECK(fcntl(kept, F_GETFD) == -1);
}

static carve_ipc_desc fds_desc(uint64_t size, uint64_t offset, uint32_t num_fds) {
    carve_ipc_desc d;
    memset(&d, 0, sizeof(d));
    d.magic = CARVE_IPC_MAGIC;
    d.kind = CARVE_IPC_FDS;
    d.size = size;
    d.offset = offset;
    d.piece_bytes = 2u << 20;
    d.num_fds = num_fds;
    return d;
}

/* Descriptions that cannot be one are refused before any device is asked. */
static void test_import_checks(void) {
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = open("/dev/null", O_RDONLY);
    carve_ipc_mapping *m = (carve_ipc_mapping *)1;
    void *p = (void *)1;
    carve_ipc_desc d = fds_desc(3 << 20, 4096, 2);
    CHECK_ST(NULL, carve_ipc_import(NULL, fds, 0, &m, &p), CARVE_ERR_INVALID);
    CHECK(m == NULL && p == NULL);
    CHECK_ST(NULL, carve_ipc_import(&d, fds, 0, NULL, &p), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_ipc_import(&d, fds, 0, &m, NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_ipc_import(&d, NULL, 0, &m, &p), CARVE_ERR_INVALID);
    struct {
        carve_ipc_desc d;
        const char *why;
    } bad[] = {
        {fds_desc(3 << 20, 4096, 3), "descriptors"},         /* one too many */
        {fds_desc(3 << 20, 4096, 1), "descriptors"},         /* one too few */
        {fds_desc(4 << 20, 0, 2), ""},                       /* fits: checked below */
        {fds_desc(1, 2u << 20, 1), "descriptors"},           /* offset past the first granule */
        {fds_desc(0, 0, 1), "0 bytes"},
        {fds_desc(UINT64_MAX, 0, 4), "descriptors"},
    };
    bad[2].d.piece_bytes = 4096;
    bad[2].why = "descriptors";
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        m = (carve_ipc_mapping *)1;
        CHECK_ST(NULL, carve_ipc_import(&bad[i].d, fds, 0, &m, &p), CARVE_ERR_INVALID);
        CHECK(strstr(carve_last_error(NULL), bad[i].why) != NULL && m == NULL && p == NULL);
    }
    d.magic = 0;
    CHECK_ST(NULL, carve_ipc_import(&d, fds, 0, &m, &p), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "not a carve_ipc_desc") != NULL);
    d = fds_desc(3 << 20, 4096, 2);
    d.kind = 7;
    CHECK_ST(NULL, carve_ipc_import(&d, fds, 0, &m, &p), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "unknown kind") != NULL);
    d = fds_desc(3 << 20, 4096, 2);
    int neg[2] = {fds[0], -1};
    CHECK_ST(NULL, carve_ipc_import(&d, neg, 0, &m, &p), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "descriptor 1 is -1") != NULL);
    /* Segments mode: the buffer must lie inside its segment; no descriptors. */
    carve_ipc_desc s;
    memset(&s, 0, sizeof(s));
    s.magic = CARVE_IPC_MAGIC;
    s.kind = CARVE_IPC_CUDA;
    s.size = 1 << 20;
    s.piece_bytes = 20u << 20;
    s.offset = 19u << 20;
    s.num_fds = 1;
    CHECK_ST(NULL, carve_ipc_import(&s, NULL, 0, &m, &p), CARVE_ERR_INVALID);
    s.num_fds = 0;
    s.offset = (19u << 20) + 1;
    CHECK_ST(NULL, carve_ipc_import(&s, NULL, 0, &m, &p), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "does not fit") != NULL);

    /* Well-formed descriptions reach the driver: without a device (or
     * without CUDA) that is NO_DEVICE; with one, /dev/null is no CUDA
     * handle and a zero handle was never exported, which the driver refuses. */
    s.offset = 19u << 20;
    int have = carve_device_count() > 0;
    CHECK_ST(NULL, carve_ipc_import(&d, fds, 0, &m, &p), have ? CARVE_ERR_BACKEND : CARVE_ERR_NO_DEVICE);
    CHECK(m == NULL && p == NULL && strstr(carve_last_error(NULL), "carve_ipc_import") != NULL);
    CHECK_ST(NULL, carve_ipc_import(&s, NULL, 0, &m, &p), have ? CARVE_ERR_BACKEND : CARVE_ERR_NO_DEVICE);
    CHECK(m == NULL && p == NULL);
    CHECK_ST(NULL, carve_ipc_import(&d, fds, -1, &m, &p), CARVE_ERR_NO_DEVICE);
    CHECK_ST(NULL, carve_ipc_import(&d, fds, 1 << 20, &m, &p), CARVE_ERR_NO_DEVICE);
    CHECK_OK(NULL, carve_ipc_close(NULL));
    for (int i = 0; i < 4; i++)
        close(fds[i]);
}

int main(void) {
    test_peer_list();
    test_export_refused();
    test_import_checks();
    return test_finish();
}
