/*
 * tool_preload.c — stands in, in the CPU drop-in test, for a tool preloaded
 * beside carve's interposer that wraps dlopen, as compute-sanitizer's
 * injection libraries do.
 *
 * The one idea: such a tool finds the real dlopen through dlsym while its
 * own dlopen is running, and that dlsym is the interposer's. If the
 * interposer's dlsym opened the driver on that lookup (its own first-use
 * set-up), the tool's dlopen would be entered from inside itself; the real
 * tool then spins forever. Here the wrapper sees it and aborts with a
 * message, so the test fails instead of hanging. Its constructor opens a
 * library, so the first lookup can come before the interposer has set
 * itself up.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread int inside;
static void *(*real_open)(const char *, int);

__attribute__((visibility("default"))) void *dlopen(const char *file, int flags) {
    if (inside) {
        fprintf(stderr, "FAIL tool: dlopen(%s) entered from inside the tool's own dlopen\n", file ? file : "NULL");
        abort();
    }
    inside = 1;
    if (!real_open) {
        void *p = dlsym(RTLD_NEXT, "dlopen");
        memcpy(&real_open, &p, sizeof(p));
    }
    void *h = real_open ? real_open(file, flags) : NULL;
    inside = 0;
    return h;
}

__attribute__((constructor)) static void tool_start(void) { (void)dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD); }
