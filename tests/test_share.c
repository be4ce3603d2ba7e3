/*
 * test_share.c — what an arena's memory is shared with, on any machine: the
 * list of devices granted access (the access descriptors the virtual-memory
 * backend sets on every mapping), over made-up peer topologies; and the
 * export and import of buffers between processes, up to where a GPU is
 * needed: argument checks, the clear refusals of the backends that cannot
 * share, descriptions that cannot be one, and what a buffer inside a
 * larger mapping or across mappings of different sizes is described as.
 */
#include <fcntl.h>
#include <unistd.h>

#include "backend/peers.h"
#include "device/ipc.h"
#include "engine/types.h"
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

#define MiB ((size_t)1 << 20)

/* What carve_ipc_export would describe for the live buffer p of a (size
 * bytes), virtual-memory mode: one descriptor per mapping it lies in. The
 * importer's checks must accept it (without a device: CARVE_ERR_NO_DEVICE,
 * past every check), and read the sizes back. Returns the descriptors. */
static uint32_t describe(carve_arena *a, void *p, size_t size, carve_ipc_desc *d, size_t *sizes, size_t max) {
    carve_be_piece pieces[16];
    size_t n = carve_maps_cover(&a->maps, (uintptr_t)p, (uintptr_t)p + size, pieces, 16);
    CHECK(n >= 1 && n <= 16);
    memset(d, 0, sizeof(*d));
    d->magic = CARVE_IPC_MAGIC;
    d->kind = CARVE_IPC_FDS;
    d->size = size;
    d->offset = (uintptr_t)p - pieces[0].addr;
    d->num_fds = (uint32_t)n;
    CHECK(carve_ipc_layout_put(d, pieces, n) == 0);
    int fds[16];
    for (size_t i = 0; i < n; i++)
        fds[i] = open("/dev/null", O_RDONLY);
    carve_ipc_mapping *m = NULL;
    void *q = NULL;
    carve_status st = carve_ipc_import(d, fds, 0, &m, &q);
    int have = carve_device_count() > 0;
    CHECK(st == (have ? CARVE_ERR_BACKEND : CARVE_ERR_NO_DEVICE)); /* past the description's checks */
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    CHECK(n <= max);
    carve_ipc_layout_get(d, sizes);
    for (size_t i = 0; i < n && i < max; i++)
        CHECK(sizes[i] == pieces[i].size);
    return (uint32_t)n;
}

/* Virtual-memory mode, one stream: untouched room comes in as one mapping
 * for what a request covers whole (engine/maps.h), so an exported buffer
 * may lie inside a larger mapping, or across mappings of different sizes;
 * the description says each descriptor's size, and the importer maps each
 * allocation whole. */
static void test_describe_mappings(void) {
    carve_arena *a = test_arena_conf(CARVE_BACKEND_VIRTUAL, 1, 0, 0, "vmm=1");
    carve_ipc_desc d;
    size_t sizes[16];
    void *p, *x, *y;
    /* Across two mappings: 5 MiB is 4 MiB whole (one mapping) and a granule in part. */
    CHECK_OK(a, carve_alloc(a, 5 * MiB, NULL, &p));
    CHECK(describe(a, p, 5 * MiB, &d, sizes, 16) == 2);
    CHECK(d.piece_bytes == 0 && d.offset == 0 && sizes[0] == 4 * MiB && sizes[1] == 2 * MiB);
    CHECK_OK(a, carve_free(a, p));
    /* Inside one larger mapping: two 1 MiB buffers where p was, the second
     * at an offset into it; one descriptor of its size each. */
    CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &x));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, NULL, &y));
    CHECK(x == p && (char *)y == (char *)p + MiB);
    CHECK(describe(a, y, 1 * MiB, &d, sizes, 16) == 1);
    CHECK(d.piece_bytes == 4 * MiB && d.offset == MiB && sizes[0] == 4 * MiB);
    /* Granules alone describe as before: 2 MiB a descriptor. */
    void *g;
    CHECK_OK(a, carve_alloc(a, 3 * MiB, (carve_stream)(uintptr_t)0x100, &g)); /* a second stream: granules */
    CHECK(describe(a, g, 3 * MiB, &d, sizes, 16) == 2);
    CHECK(d.piece_bytes == 2 * MiB);
    /* The arena itself cannot export (the virtual backend has no memory). */
    int *fds = NULL;
    CHECK_ST(a, carve_ipc_export(a, y, &d, &fds), CARVE_ERR_INVALID);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, y));
    CHECK_OK(a, carve_free(a, g));
    carve_arena_destroy(a);
    /* Descriptions of mixed sizes that cannot be one are refused. */
    carve_be_piece two[2] = {{0, 6 * MiB}, {6 * MiB, 2 * MiB}};
    int nul[3];
    for (int i = 0; i < 3; i++)
        nul[i] = open("/dev/null", O_RDONLY);
    for (int k = 0; k < 5; k++) {
        memset(&d, 0, sizeof(d));
        d.magic = CARVE_IPC_MAGIC;
        d.kind = CARVE_IPC_FDS;
        d.size = 7 * MiB;
        d.num_fds = 2;
        CHECK(carve_ipc_layout_put(&d, two, 2) == 0 && d.piece_bytes == 0);
        if (k == 0)
            d.num_fds = 3; /* more descriptors than the runs list */
        else if (k == 1)
            d.offset = 6 * MiB; /* past the first */
        else if (k == 2)
            d.size = 5 * MiB; /* the last one not needed */
        else if (k == 3)
            d.size = 9 * MiB; /* more than they hold */
        else
            memset(d.cuda_handle + 4, 0, 4); /* a run of 0 granules */
        carve_ipc_mapping *m = (carve_ipc_mapping *)1;
        void *q = (void *)1;
        CHECK_ST(NULL, carve_ipc_import(&d, nul, 0, &m, &q), CARVE_ERR_INVALID);
        CHECK(strstr(carve_last_error(NULL), "sizes in runs") != NULL && m == NULL && q == NULL);
    }
    for (int i = 0; i < 3; i++)
        close(nul[i]);
    /* More runs than a description holds: the export would refuse. */
    carve_be_piece many[9];
    for (int i = 0; i < 9; i++)
        many[i] = (carve_be_piece){(uintptr_t)i * 8 * MiB, (size_t)(1 + i % 2) * 2 * MiB};
    CHECK(carve_ipc_layout_put(&d, many, 8) == 0); /* 8 runs */
    CHECK(carve_ipc_layout_put(&d, many, 9) == -1);
}

int main(void) {
    test_peer_list();
    test_export_refused();
    test_import_checks();
    test_describe_mappings();
    return test_finish();
}
