/*
 * test_default_arenas.c — the routing layer (include/carve_frameworks.h) with
 * the devices' default arenas in play, on two devices of host memory
 * (fake_cudart.c, loaded in place of the CUDA runtime through
 * LD_LIBRARY_PATH): a default arena is carve's and is never retired,
 * forgotten or registered; routing stacks and device routes may still name
 * one; what carve_device_arenas_release leaves behind is never read; and a
 * routed free finds its owner without taking another arena's locks.
 *
 * The one idea: the fake runtime makes carve_device_arena work without a
 * GPU, so each sequence that once broke the routing layer runs here exactly
 * as it did (a default arena retired and destroyed behind the device layer,
 * a registry entry read after carve_device_arenas_release). Run against a
 * real runtime (no LD_LIBRARY_PATH), it reports SKIP: the fake's mark
 * (fake_cudart_devices) is missing.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "carve_frameworks.h"
#include "engine/types.h"
#include "test_util.h"

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static carve_arena *cuda_arena(int device) {
    carve_config c;
    carve_config_init(&c);
    c.backend = CARVE_BACKEND_CUDA;
    c.device = device;
    c.vmm = 0; /* the fake runtime has no driver API */
    carve_arena *a = NULL;
    CHECK_OK(NULL, carve_arena_create(&c, &a));
    return a;
}

/* The sequence of the report: retiring device 0's default arena was
 * accepted, the free of its last buffer destroyed it behind the device
 * layer, and the next routed allocation used freed memory. */
static void test_default_arena_cannot_be_retired(void) {
    void *p = NULL, *q = NULL;
    CHECK_OK(NULL, carve_route_alloc(NULL, 1000, 0, NULL, &p)); /* makes device 0's default arena */
    carve_arena *d = NULL;
    CHECK_OK(NULL, carve_device_arena(0, &d));
    CHECK(carve_route_default_arena(0) == d);
    int destroyed = -1;
    CHECK_ST(NULL, carve_route_retire(d, &destroyed), CARVE_ERR_INVALID);
    CHECK(destroyed == 0);
    CHECK(contains(carve_last_error(NULL), "device 0's default arena"));
    CHECK_ST(NULL, carve_route_forget(d), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "device 0's default arena"));
    CHECK_OK(NULL, carve_route_free(p, 0)); /* its last buffer: nothing is destroyed */
    CHECK(!carve_route_known(d));
    carve_arena *again = NULL;
    CHECK_OK(NULL, carve_device_arena(0, &again));
    CHECK(again == d);
    CHECK_ARENA(d);
    CHECK_OK(NULL, carve_route_alloc(NULL, 1000, 0, NULL, &q));
    CHECK(q != NULL && carve_buffer_info(d, q, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_free(q, 0));
    CHECK(carve_memory_allocated(d) == 0);
}

/* A default arena pushed, given explicitly or made a device's route serves
 * as any arena does, and is never registered (nothing can destroy it). */
static void test_default_arena_routed(void) {
    carve_arena *d0 = NULL, *d1 = NULL;
    CHECK_OK(NULL, carve_device_arena(0, &d0));
    CHECK_OK(NULL, carve_device_arena(1, &d1));
    void *p = NULL, *q = NULL, *r = NULL;

    CHECK_OK(NULL, carve_route_push(d0));
    CHECK(carve_route_current() == d0 && !carve_route_known(d0));
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 0, NULL, &p)); /* device 0: d0 */
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 1, NULL, &q)); /* device 1: a CUDA arena of 0 passes it on */
    CHECK(carve_buffer_info(d0, p, NULL, NULL) == CARVE_OK && carve_buffer_info(d1, q, NULL, NULL) == CARVE_OK);
    CHECK_ST(NULL, carve_route_retire(d0, NULL), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_pop());
    CHECK(carve_route_default_arena(1) == d1);

    CHECK_OK(NULL, carve_route_alloc(d0, 4096, 1, NULL, &r)); /* explicit: d0 whatever the device */
    CHECK(carve_buffer_info(d0, r, NULL, NULL) == CARVE_OK && !carve_route_known(d0));
    carve_arena *own = NULL;
    CHECK_OK(NULL, carve_route_owner(r, 1, &own));
    CHECK(own == d0);
    CHECK_OK(NULL, carve_route_free(r, 1)); /* device 1 misses: every default arena is searched */
    CHECK_OK(NULL, carve_route_free(q, 1));
    CHECK_OK(NULL, carve_route_free(p, 0));

    CHECK_ST(NULL, carve_route_device(1, NULL, d0), CARVE_ERR_INVALID); /* d0 is device 0's */
    CHECK(contains(carve_last_error(NULL), "not device 1's"));
    CHECK_OK(NULL, carve_route_device(0, NULL, d0));
    CHECK(carve_route_device_current(0) == d0 && !carve_route_known(d0));
    CHECK_ST(NULL, carve_route_retire(d0, NULL), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 0, NULL, &p));
    CHECK(carve_buffer_info(d0, p, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_free(p, 0));
    carve_arena *h = cuda_arena(0);
    CHECK_OK(NULL, carve_route_device(0, d0, h)); /* replaced by a registered arena, and back */
    CHECK(carve_route_device_current(0) == h);
    CHECK_ST(NULL, carve_route_device(0, d0, NULL), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_route_device(0, h, d0));
    CHECK_OK(NULL, carve_route_device(0, d0, NULL));
    CHECK(carve_route_device_current(0) == NULL);
    int destroyed = 0;
    CHECK_OK(NULL, carve_route_retire(h, &destroyed));
    CHECK(destroyed == 1);
    CHECK(carve_memory_allocated(d0) == 0 && carve_memory_allocated(d1) == 0);
}

/* carve_device_arenas_release after routing: a routing stack that still
 * names a default arena is told so, the registry holds no entry for the
 * destroyed arenas (a routed free would read them), and asking for a
 * device's default arena does not make a new one. */
static void test_release_after_routing(void) {
    carve_arena *d0 = NULL, *user = cuda_arena(0);
    CHECK_OK(NULL, carve_device_arena(0, &d0));
    void *p = NULL, *u = NULL;
    CHECK_OK(NULL, carve_route_push(d0));
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 0, NULL, &p));
    CHECK_OK(NULL, carve_route_free(p, 0));
    CHECK_OK(NULL, carve_route_alloc(user, 4096, 0, NULL, &u)); /* the registry is searched on every free */

    carve_device_arenas_release();
    CHECK(carve_route_default_arena(0) == NULL); /* asking makes nothing */
    CHECK(carve_route_default_arena(0) == NULL);
    CHECK(carve_route_default_arena(1) == NULL);
    CHECK_ST(NULL, carve_route_alloc(NULL, 4096, 0, NULL, &p), CARVE_ERR_INVALID);
    CHECK(contains(carve_last_error(NULL), "carve_device_arenas_release"));
    CHECK_OK(NULL, carve_route_pop());
    char local[64];
    CHECK_ST(NULL, carve_route_free(local, 0), CARVE_ERR_BAD_POINTER);
    CHECK_OK(NULL, carve_route_free(u, 0));
    CHECK_OK(NULL, carve_route_empty_caches());

    /* Routing goes on with new default arenas. */
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 0, NULL, &p));
    carve_arena *n0 = carve_route_default_arena(0);
    CHECK(n0 != NULL && carve_buffer_info(n0, p, NULL, NULL) == CARVE_OK);
    CHECK_OK(NULL, carve_route_free(p, 0));
    CHECK_OK(NULL, carve_route_retire(user, NULL));
}

/* A routed free must not take another default arena's heap lock (held
 * while that arena grows, is checked or is snapshotted): with device -1
 * every default arena is searched in device order, device 0's first, whose
 * heap lock is held here until the free of device 1's buffer comes back
 * (or 5 s pass: then the free waited for it). */
typedef struct free_job {
    void *ptr;
    int done; /* atomic */
    carve_status st;
} free_job;

static void *run_free_job(void *v) {
    free_job *j = v;
    j->st = carve_route_free(j->ptr, -1);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_free_takes_no_other_heap_lock(void) {
    void *p0 = NULL, *p1 = NULL;
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 0, NULL, &p0));
    CHECK_OK(NULL, carve_route_alloc(NULL, 4096, 1, NULL, &p1));
    carve_arena *d0 = carve_route_default_arena(0), *d1 = carve_route_default_arena(1);
    CHECK(d0 && d1 && carve_buffer_info(d1, p1, NULL, NULL) == CARVE_OK);
    free_job j = {p1, 0, CARVE_ERR_INVALID};
    carve_mutex_lock(&d0->heap.lock);
    pthread_t t;
    pthread_create(&t, NULL, run_free_job, &j);
    for (int ms = 0; ms < 5000 && !__atomic_load_n(&j.done, __ATOMIC_ACQUIRE); ms++)
        usleep(1000);
    int came_back = __atomic_load_n(&j.done, __ATOMIC_ACQUIRE);
    carve_mutex_unlock(&d0->heap.lock);
    pthread_join(t, NULL);
    CHECK(came_back);
    CHECK_OK(NULL, j.st);
    CHECK(carve_memory_allocated(d1) == 0);
    CHECK_OK(NULL, carve_route_free(p0, 0));
}

int main(void) {
    if (!dlsym(RTLD_DEFAULT, "fake_cudart_devices") || carve_device_count() != 2) {
        printf("SKIP: needs the fake CUDA runtime (LD_LIBRARY_PATH=<build>/tests/frameworks, CARVE_CONF=vmm=0)\n");
        return 77;
    }
    test_default_arena_cannot_be_retired();
    test_default_arena_routed();
    test_release_after_routing();
    test_free_takes_no_other_heap_lock();
    carve_device_arenas_release();
    return test_finish();
}
