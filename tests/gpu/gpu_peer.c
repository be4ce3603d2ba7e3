/*
 * gpu_peer.c — two GPUs: a buffer carved on one device is read and written
 * by kernels on the other, in both modes, and the access each device has is
 * the one the `peers` key asks for.
 *
 * Memory mapped with cuMemMap (virtual-memory mode, the default on GPUs that
 * support it) is reachable only from the devices in its access descriptors;
 * cudaDeviceEnablePeerAccess does not reach it. So each case checks the
 * access the driver reports for both devices (cuMemGetAccess, which cannot
 * fault), and runs the cross-device kernels only where access is granted: a
 * fault would be a sticky error that ends the process. A buffer is filled
 * on its own device, verified and rewritten by a kernel on the other device,
 * and verified again on its own.
 *
 * Order matters: peer access, once enabled, stays for the process. First
 * the virtual-memory cases with no peer access enabled by anyone (carve's
 * descriptors alone must do), then a segments-mode creation that is refused
 * (it must enable nothing), then segments mode with a list (carve enables
 * peer access from device 1 to 0), then the program enables peer access both
 * ways and the default arenas of both devices are used across -- the
 * engine's case. Last, the cost of a descriptor per peer (printed, not
 * asserted): 32 granules mapped as carve maps a run (cuMemCreate and cuMemMap
 * each, one cuMemSetAccess) and unmapped, with one and with two descriptors,
 * and the same through carve with peers=none and peers=auto.
 *
 * Skips (77) with fewer than two devices, and the cross-device parts when
 * the two cannot access each other (cudaDeviceCanAccessPeer).
 */
#include <cuda.h>

#include "gpu_util.h"

static cudaStream_t streams[2];
static CUresult (*get_access)(unsigned long long *, const CUmemLocation *, CUdeviceptr);
static int p2p; /* device 1 can access device 0's memory and the other way round */

static void *driver_fn(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn) {
        fprintf(stderr, "FATAL: the driver has no %s\n", name);
        exit(1);
    }
    return fn;
}

/* A driver function into a function pointer (ISO C has no cast between them). */
#define LOAD(fn, name)                     \
    do {                                   \
        void *f_ = driver_fn(name);        \
        memcpy(&(fn), &f_, sizeof(f_));    \
    } while (0)

/* The access device has to ptr as the driver reports it (virtual-memory
 * mappings only). */
static unsigned long long access_of(int device, const void *ptr) {
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
    unsigned long long flags = 99;
    CUresult r = get_access(&flags, &loc, (CUdeviceptr)(uintptr_t)ptr);
    CHECK(r == CUDA_SUCCESS);
    return flags;
}

/* Fill on owner, verify and rewrite on other, verify on owner. */
static void cross_rw(carve_arena *a, int owner, int other, uint64_t id) {
    const size_t bytes = 5 * MiB + 4096; /* three granules, not from the start of one */
    void *lead = NULL, *p = NULL;
    CHECK_OK(a, carve_alloc(a, 1 * MiB, streams[owner], &lead));
    CHECK_OK(a, carve_alloc(a, bytes, streams[owner], &p));
    if (!p)
        return;
    gpu_set_device(owner);
    gpu_fill(p, bytes, id, streams[owner]);
    CUDA_CHECK(cudaStreamSynchronize(streams[owner]));
    gpu_set_device(other);
    gpu_counter c = gpu_counter_of(other, 0);
    unsigned long long bad_read = gpu_mismatches(c, p, bytes, id, streams[other]);
    gpu_fill(p, bytes, id + 1, streams[other]);
    CUDA_CHECK(cudaStreamSynchronize(streams[other]));
    gpu_set_device(owner);
    unsigned long long bad_write = gpu_mismatches(gpu_counter_of(owner, 0), p, bytes, id + 1, streams[owner]);
    printf("  device %d read a buffer of device %d (%llu mismatches) and wrote it (%llu mismatches seen by "
           "device %d)\n", other, owner, bad_read, bad_write, owner);
    CHECK(bad_read == 0 && bad_write == 0);
    gpu_set_device(0);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, lead));
}

static carve_arena *arena_on(int device, const char *conf, const char *name) {
    char text[160];
    snprintf(text, sizeof(text), "device=%d%s%s", device, conf[0] ? "," : "", conf);
    return gpu_arena_conf(text, name);
}

static int vmm_of(const carve_arena *a) {
    carve_config c;
    CHECK_OK(a, carve_arena_get_config(a, &c));
    return c.vmm;
}

/* Virtual-memory mode, no peer access enabled: the default (peers=auto)
 * grants device 1 on every mapping, peers=none does not, a list does. */
static void case_vmm_descriptors(void) {
    carve_arena *a = arena_on(0, "vmm=1", "peer-auto");
    carve_arena *none = arena_on(0, "vmm=1,peers=none", "peer-none");
    if (!p2p) { /* a list naming a device that cannot reach device 0 is refused */
        carve_config c;
        carve_config_init(&c);
        CHECK_OK(NULL, carve_config_parse(&c, "vmm=1,peers=1"));
        carve_arena *refused = (carve_arena *)1;
        CHECK_ST(NULL, carve_arena_create(&c, &refused), CARVE_ERR_INVALID);
        CHECK(refused == NULL && strstr(carve_last_error(NULL), "cannot access") != NULL);
    }
    carve_arena *list = arena_on(0, p2p ? "vmm=1,peers=1" : "vmm=1,peers=none", "peer-list");
    void *pa = NULL, *pn = NULL, *pl = NULL;
    CHECK_OK(a, carve_alloc(a, 3 * MiB, streams[0], &pa));
    CHECK_OK(none, carve_alloc(none, 3 * MiB, streams[0], &pn));
    CHECK_OK(list, carve_alloc(list, 3 * MiB, streams[0], &pl));
    const unsigned long long rw = CU_MEM_ACCESS_FLAGS_PROT_READWRITE, no = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CHECK(access_of(0, pa) == rw && access_of(0, pn) == rw && access_of(0, pl) == rw);
    CHECK(access_of(1, pa) == (p2p ? rw : no));
    CHECK(access_of(1, pn) == no);
    CHECK(access_of(1, pl) == (p2p ? rw : no));
    printf("  device 1's access: peers=auto %llu, peers=none %llu, peers=1 %llu (3 = read-write)\n",
           access_of(1, pa), access_of(1, pn), access_of(1, pl));
    CHECK_OK(a, carve_free(a, pa));
    CHECK_OK(none, carve_free(none, pn));
    CHECK_OK(list, carve_free(list, pl));
    if (p2p) {
        cross_rw(a, 0, 1, 100);
        cross_rw(list, 0, 1, 110);
        /* Granules mapped later (a second run, after trimming) get it too. */
        CHECK_OK(a, carve_empty_cache(a));
        cross_rw(a, 0, 1, 120);
    }
    carve_arena_destroy(a);
    carve_arena_destroy(none);
    carve_arena_destroy(list);
    /* A device that does not exist cannot be listed. */
    carve_config c;
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, "vmm=1,peers=1:9"));
    carve_arena *bad = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &bad), CARVE_ERR_INVALID);
    CHECK(bad == NULL && strstr(carve_last_error(NULL), "peer device 9 does not exist") != NULL);
}

/* Peer access from device 1 to device 0 is enabled now (1), or not (0), as
 * cudaDeviceDisablePeerAccess tells (which disables it: enable it again). */
static int peer_enabled_1_to_0(void) {
    gpu_set_device(1);
    cudaError_t e = cudaDeviceDisablePeerAccess(0);
    (void)cudaGetLastError();
    int on = e == cudaSuccess;
    CHECK(on || e == cudaErrorPeerAccessNotEnabled);
    if (on)
        CHECK(cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess);
    gpu_set_device(0);
    return on;
}

/* A creation that is refused leaves the process as it was: segments mode
 * with peers=1 and sizes refused only once the device's memory is known
 * (initial 0.6 of it, limit 0.5) used to enable peer access from device 1
 * before the sizes were judged, and keep it. Runs before anything else
 * enables peer access. */
static void case_refused_grants_nothing(void) {
    CHECK(!peer_enabled_1_to_0());
    carve_config c;
    carve_config_init(&c);
    CHECK_OK(NULL, carve_config_parse(&c, "vmm=0,peers=1,initial=0.6,limit=0.5"));
    carve_arena *a = (carve_arena *)1;
    CHECK_ST(NULL, carve_arena_create(&c, &a), CARVE_ERR_INVALID);
    CHECK(a == NULL && strstr(carve_last_error(NULL), "larger than the limit") != NULL);
    CHECK(!peer_enabled_1_to_0());
}

/* Segments mode with a list: carve enables peer access from device 1. */
static void case_segments_list(void) {
    carve_arena *a = arena_on(0, "vmm=0,peers=1", "peer-seg-list");
    CHECK(vmm_of(a) == 0);
    gpu_set_device(1);
    cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
    printf("  device 1 enabling peer access to device 0 after the arena: %s\n", cudaGetErrorName(e));
    CHECK(e == cudaErrorPeerAccessAlreadyEnabled);
    (void)cudaGetLastError();
    gpu_set_device(0);
    cross_rw(a, 0, 1, 200);
    carve_arena_destroy(a);
}

/* The engine's case: peer access enabled both ways by the program, the
 * default arenas of both devices (default configuration) used across. */
static void case_default_arenas(void) {
    carve_arena *a[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
        CHECK_OK(NULL, carve_device_arena(d, &a[d]));
        if (!a[d])
            return;
        printf("  device %d's default arena: %s mode\n", d, vmm_of(a[d]) ? "virtual-memory" : "segments");
    }
    cross_rw(a[0], 0, 1, 300);
    cross_rw(a[1], 1, 0, 310);
    /* Segments mode follows cudaDeviceEnablePeerAccess without being told. */
    carve_arena *seg = arena_on(0, "vmm=0", "peer-seg-auto");
    cross_rw(seg, 0, 1, 320);
    carve_arena_destroy(seg);
    for (int d = 0; d < 2; d++)
        CHECK_OK(a[d], carve_empty_cache(a[d]));
}

/* What a descriptor per peer costs. */
static void case_cost(void) {
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*vfree)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    LOAD(reserve, "cuMemAddressReserve");
    LOAD(vfree, "cuMemAddressFree");
    LOAD(create, "cuMemCreate");
    LOAD(release, "cuMemRelease");
    LOAD(map, "cuMemMap");
    LOAD(unmap, "cuMemUnmap");
    LOAD(set_access, "cuMemSetAccess");
    enum { G = 32 };
    const size_t bytes = G * CARVE_SEGMENT_GRANULE;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc desc[2] = {
        {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
        {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1}, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
    };
    CUdeviceptr base = 0;
    CUmemGenericAllocationHandle h[G];
    CHECK(reserve(&base, bytes, CARVE_SEGMENT_GRANULE, 0, 0) == CUDA_SUCCESS);
    int reps = (int)gpu_scale(20, 3);
    for (int n = 1; n <= 2; n++) { /* as carve maps a run: granule by granule, one cuMemSetAccess */
        double t_map = 0, t_unmap = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = gpu_now();
            for (int i = 0; i < G; i++) {
                CHECK(create(&h[i], CARVE_SEGMENT_GRANULE, &prop, 0) == CUDA_SUCCESS);
                CHECK(map(base + i * CARVE_SEGMENT_GRANULE, CARVE_SEGMENT_GRANULE, 0, h[i], 0) == CUDA_SUCCESS);
            }
            CHECK(set_access(base, bytes, desc, (size_t)n) == CUDA_SUCCESS);
            double t1 = gpu_now();
            for (int i = 0; i < G; i++) {
                CHECK(unmap(base + i * CARVE_SEGMENT_GRANULE, CARVE_SEGMENT_GRANULE) == CUDA_SUCCESS);
                CHECK(release(h[i]) == CUDA_SUCCESS);
            }
            t_map += t1 - t0;
            t_unmap += gpu_now() - t1;
        }
        printf("  driver, 32 granules with %d descriptor%s: map %.1f us, unmap %.1f us per granule\n", n,
               n == 1 ? "" : "s", t_map / reps / G * 1e6, t_unmap / reps / G * 1e6);
    }
    CHECK(vfree(base, bytes) == CUDA_SUCCESS);
    /* Through carve: 32 granules mapped by carve_alloc (one cuMemSetAccess),
     * unmapped by carve_empty_cache. */
    const char *confs[2] = {"vmm=1,peers=none", "vmm=1,peers=auto"};
    for (int k = 0; k < 2; k++) {
        carve_arena *a = arena_on(0, confs[k], "peer-cost");
        double t_alloc = 0, t_empty = 0;
        for (int r = 0; r < reps; r++) {
            void *p = NULL;
            double t0 = gpu_now();
            CHECK_OK(a, carve_alloc(a, bytes, streams[0], &p));
            double t1 = gpu_now();
            CHECK_OK(a, carve_free(a, p));
            CHECK_OK(a, carve_empty_cache(a));
            t_alloc += t1 - t0;
            t_empty += gpu_now() - t1;
        }
        printf("  carve, 64 MiB, %s: carve_alloc %.1f us, carve_free + carve_empty_cache %.1f us per granule\n",
               confs[k], t_alloc / reps / G * 1e6, t_empty / reps / G * 1e6);
        carve_arena_destroy(a);
    }
}

int main(void) {
    unsetenv("CARVE_CONF");
    gpu_start("gpu_peer", 2);
    LOAD(get_access, "cuMemGetAccess");
    int can01 = 0, can10 = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    p2p = can01 && can10;
    printf("  peer access possible: 1 -> 0 %s, 0 -> 1 %s\n", can10 ? "yes" : "no", can01 ? "yes" : "no");
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        streams[d] = gpu_stream_new();
    }
    gpu_set_device(0);
    GPU_CASE(case_vmm_descriptors);
    if (p2p) {
        GPU_CASE(case_refused_grants_nothing);
        GPU_CASE(case_segments_list);
        for (int d = 0; d < 2; d++) { /* the program's own peer access, both ways */
            gpu_set_device(d);
            cudaError_t e = cudaDeviceEnablePeerAccess(1 - d, 0);
            CHECK(e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled);
            (void)cudaGetLastError();
        }
        gpu_set_device(0);
        GPU_CASE(case_default_arenas);
        GPU_CASE(case_cost);
    } else {
        printf("  the two devices cannot access each other: cross-device cases skipped\n");
    }
    for (int d = 0; d < 2; d++) {
        gpu_set_device(d);
        gpu_stream_free(streams[d]);
    }
    gpu_set_device(0);
    carve_device_arenas_release();
    return gpu_finish();
}
