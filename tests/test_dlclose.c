/*
 * test_dlclose.c — a program that loads libcarve with dlopen (as Python's
 * ctypes does), uses it on a thread, closes it, and lets the thread exit.
 *
 * carve keeps per-thread state behind thread-specific-data keys whose
 * destructors run at thread exit (the message buffers, thread_text.c; the
 * routing stack, route.c). Had dlclose unmapped the library, those
 * destructors would be called in unmapped code when the thread exits, a
 * crash in the C library's thread teardown. The library is linked
 * -z nodelete: dlclose leaves it loaded, and the thread exits cleanly.
 *
 * Usage: test_dlclose PATH-TO-LIBCARVE.so (meson passes the built one).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve.h"

typedef carve_status (*free_fn)(carve_arena *, void *);
typedef void (*init_fn)(carve_config *, size_t);
typedef carve_status (*parse_fn)(carve_config *, const char *);
typedef carve_status (*create_fn)(const carve_config *, carve_arena **);
typedef void (*destroy_fn)(carve_arena *);
typedef carve_status (*route_fn)(carve_arena *);
typedef carve_status (*pop_fn)(void);

static struct {
    free_fn free_;
    init_fn init;
    parse_fn parse;
    create_fn create;
    destroy_fn destroy;
    route_fn push, forget;
    pop_fn pop;
} f;

/* A function of the library: POSIX makes dlsym's answer a function pointer
 * of the same size, ISO C has no cast for it, so its bytes are copied. */
static void sym(void *h, const char *name, void *out, size_t size) {
    void *p = dlsym(h, name);
    memcpy(out, &p, size);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase, failed;

static void expect(int ok, const char *what) {
    if (!ok) {
        printf("FAIL: %s\n", what);
        failed = 1;
    }
}

static void *run(void *arg) {
    (void)arg;
    /* A failing call writes this thread's message buffer (its key). */
    expect(f.free_(NULL, (void *)(uintptr_t)0x1000) == CARVE_ERR_INVALID, "carve_free(NULL arena) is INVALID");
    /* Routing makes this thread's routing stack (the other key). */
    carve_config c;
    f.init(&c, sizeof(c));
    expect(f.parse(&c, "backend=virtual") == CARVE_OK, "carve_config_parse");
    carve_arena *a = NULL;
    expect(f.create(&c, &a) == CARVE_OK, "carve_arena_create");
    if (a) {
        expect(f.push(a) == CARVE_OK, "carve_route_push");
        expect(f.pop() == CARVE_OK, "carve_route_pop");
        expect(f.forget(a) == CARVE_OK, "carve_route_forget");
        f.destroy(a);
    }
    pthread_mutex_lock(&mu);
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (phase != 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL; /* the keys' destructors run now, after dlclose */
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-LIBCARVE.so\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    sym(h, "carve_free", &f.free_, sizeof(f.free_));
    sym(h, "carve_config_init_sized", &f.init, sizeof(f.init));
    sym(h, "carve_config_parse", &f.parse, sizeof(f.parse));
    sym(h, "carve_arena_create", &f.create, sizeof(f.create));
    sym(h, "carve_arena_destroy", &f.destroy, sizeof(f.destroy));
    sym(h, "carve_route_push", &f.push, sizeof(f.push));
    sym(h, "carve_route_forget", &f.forget, sizeof(f.forget));
    sym(h, "carve_route_pop", &f.pop, sizeof(f.pop));
    if (!f.free_ || !f.init || !f.parse || !f.create || !f.destroy || !f.push || !f.forget || !f.pop) {
        printf("FAIL: a function is missing from %s\n", argv[1]);
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, run, NULL) != 0)
        return 1;
    pthread_mutex_lock(&mu);
    while (phase != 1)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    expect(dlclose(h) == 0, "dlclose");
    pthread_mutex_lock(&mu);
    phase = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    printf("the thread exited after dlclose%s\n", failed ? ", but a call failed" : "");
    return failed;
}
