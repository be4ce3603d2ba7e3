/*
 * device.c — process-wide default arenas, one per CUDA device, and the
 * device queries of the public API.
 *
 * Each device's arena is created on first use from three layers: the
 * defaults, the environment variable CARVE_CONF (a section for all devices,
 * then the "deviceN:" section), then values set with the carve_device_set_*
 * functions, which are refused once the arena exists (the same rule as
 * tf.config's). A setter judges its value by the rule carve_arena_create
 * applies (engine/arena.h), before it looks for the device, so a value the
 * arena would refuse is refused at once. Lookups of an existing arena are
 * one acquire load.
 */
#include "device/device.h"

#include <string.h>

#include "backend/leaves.h"
#include "base/lock.h"
#include "config/conf.h"
#include "engine/arena.h"
#include "engine/error.h"

enum { SET_LIMIT = 1, SET_GROWTH = 2, SET_INITIAL = 4 };

typedef struct device_slot {
    carve_arena *arena; /* atomic */
    unsigned set;       /* SET_* fields given by setters */
    size_t limit_bytes;
    double limit_fraction;
    int growth;
    size_t initial_bytes;
} device_slot;

static carve_mutex g_lock = PTHREAD_MUTEX_INITIALIZER;
static device_slot g_dev[CARVE_MAX_DEVICES];

static carve_status check_device(int device, const char *fn) {
    int n = carve_device_count();
    if (device < 0 || device >= n || device >= CARVE_MAX_DEVICES)
        return carve_fail(NULL, CARVE_ERR_NO_DEVICE, "%s: device %d does not exist (%d visible)", fn, device, n);
    return CARVE_OK;
}

carve_status carve_device_arena(int device, carve_arena **out) {
    if (!out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_device_arena: out is NULL");
    *out = NULL;
    if (device >= 0 && device < CARVE_MAX_DEVICES) {
        carve_arena *a = CARVE_LOAD_ACQ(&g_dev[device].arena);
        if (a) {
            *out = a;
            return CARVE_OK;
        }
    }
    carve_status st = check_device(device, "carve_device_arena");
    if (st != CARVE_OK)
        return st;
    carve_mutex_lock(&g_lock);
    device_slot *d = &g_dev[device];
    if (!d->arena) {
        carve_config c;
        carve_config_init(&c);
        c.backend = CARVE_BACKEND_CUDA;
        c.device = device;
        char name[32];
        snprintf(name, sizeof(name), "device%d", device);
        c.name = name;
        const char *conf = getenv("CARVE_CONF");
        st = conf ? carve_conf_apply(&c, device, conf) : CARVE_OK;
        if (st == CARVE_OK) {
            if (d->set & SET_LIMIT) {
                c.limit_bytes = d->limit_bytes;
                c.limit_fraction = d->limit_fraction;
            }
            if (d->set & SET_GROWTH)
                c.growth = d->growth;
            if (d->set & SET_INITIAL) {
                c.initial_bytes = d->initial_bytes;
                c.initial_fraction = 0;
            }
            carve_arena *a = NULL;
            st = carve_arena_create(&c, &a);
            if (st == CARVE_OK)
                CARVE_STORE_REL(&d->arena, a);
        }
    }
    *out = d->arena;
    carve_mutex_unlock(&g_lock);
    return st;
}

int carve_device_of_default(const carve_arena *a) {
    if (!a)
        return -1;
    for (int d = 0; d < CARVE_MAX_DEVICES; d++)
        if (CARVE_LOAD_ACQ(&g_dev[d].arena) == a)
            return d;
    return -1;
}

carve_arena *carve_device_arena_made(int device) {
    return device >= 0 && device < CARVE_MAX_DEVICES ? CARVE_LOAD_ACQ(&g_dev[device].arena) : NULL;
}

/* Lock held on success: the slot of device, which has no arena yet. */
static carve_status setter_begin(int device, const char *fn, device_slot **slot) {
    carve_status st = check_device(device, fn);
    if (st != CARVE_OK)
        return st;
    carve_mutex_lock(&g_lock);
    if (g_dev[device].arena) {
        carve_mutex_unlock(&g_lock);
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "%s: device %d's default arena already exists; configure it before first use", fn,
                          device);
    }
    *slot = &g_dev[device];
    return CARVE_OK;
}

carve_status carve_device_set_limit(int device, size_t limit_bytes) {
    device_slot *d = NULL;
    carve_status st = CARVE_OK;
    if (limit_bytes != 0) /* 0: none given, the device's memory */
        st = carve_limit_check("carve_device_set_limit", limit_bytes, 0, 0);
    if (st == CARVE_OK)
        st = setter_begin(device, "carve_device_set_limit", &d);
    if (st != CARVE_OK)
        return st;
    d->set |= SET_LIMIT;
    d->limit_bytes = limit_bytes;
    d->limit_fraction = 0;
    carve_mutex_unlock(&g_lock);
    return CARVE_OK;
}

carve_status carve_device_set_limit_fraction(int device, double fraction) {
    static const char fn[] = "carve_device_set_limit_fraction";
    device_slot *d = NULL;
    size_t free_bytes, total = 0;
    carve_status st = carve_fraction_check(fn, "fraction", fraction);
    if (st == CARVE_OK)
        st = check_device(device, fn);
    /* The share of this device's memory, as the arena will resolve it. */
    if (st == CARVE_OK && carve_cuda_mem_info(device, &free_bytes, &total) == CARVE_OK)
        st = carve_limit_check(fn, (size_t)((double)total * fraction), fraction, total);
    if (st == CARVE_OK)
        st = setter_begin(device, fn, &d);
    if (st != CARVE_OK)
        return st;
    d->set |= SET_LIMIT;
    d->limit_bytes = 0;
    d->limit_fraction = fraction;
    carve_mutex_unlock(&g_lock);
    return CARVE_OK;
}

carve_status carve_device_set_growth(int device, int growth) {
    device_slot *d = NULL;
    carve_status st = setter_begin(device, "carve_device_set_growth", &d);
    if (st != CARVE_OK)
        return st;
    d->set |= SET_GROWTH;
    d->growth = growth != 0;
    carve_mutex_unlock(&g_lock);
    return CARVE_OK;
}

carve_status carve_device_set_initial(int device, size_t initial_bytes) {
    device_slot *d = NULL;
    carve_status st = setter_begin(device, "carve_device_set_initial", &d);
    if (st != CARVE_OK)
        return st;
    d->set |= SET_INITIAL;
    d->initial_bytes = initial_bytes;
    carve_mutex_unlock(&g_lock);
    return CARVE_OK;
}

carve_status carve_device_mem_info(int device, size_t *free_bytes, size_t *total_bytes) {
    size_t f, t;
    carve_status st = carve_cuda_mem_info(device, &f, &t);
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    if (st != CARVE_OK)
        return carve_fail_host(NULL, st, carve_backend_host(), "carve_device_mem_info: %s", carve_backend_msg());
    return CARVE_OK;
}

void carve_device_arenas_release(void) {
    carve_mutex_lock(&g_lock);
    for (int i = 0; i < CARVE_MAX_DEVICES; i++) {
        carve_arena *a = g_dev[i].arena;
        CARVE_STORE_REL(&g_dev[i].arena, NULL); /* no longer a default arena while it goes */
        carve_arena_destroy(a);
        memset(&g_dev[i], 0, sizeof(g_dev[i]));
    }
    carve_mutex_unlock(&g_lock);
}

carve_status carve_cuda_driver_lookup(void *(*lookup)(const char *name, void *arg), void *arg) {
    if (!lookup)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_cuda_driver_lookup: lookup is NULL");
    if (carve_driver_api_lookup(lookup, arg) != 0) {
        const char *why = carve_backend_msg();
        return carve_fail(NULL, strstr(why, "in use") ? CARVE_ERR_INVALID : CARVE_ERR_NO_DEVICE,
                          "carve_cuda_driver_lookup: %s", why);
    }
    return CARVE_OK;
}
