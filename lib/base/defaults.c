/*
 * defaults.c — carve_config's defaults and its size rule.
 *
 * The one idea: carve_config starts with its own size, as the program's
 * carve.h had it, and grows only at its end. So carve reads the bytes the
 * program has and takes the defaults for the rest (a program built against
 * an older header), and accepts a larger structure only when everything past
 * its own is zero (a program built against a newer header that set none of
 * the fields this library does not know). A size outside
 * [CARVE_CONFIG_SIZE_MIN, CARVE_CONFIG_SIZE_MAX] is no carve_config at all (a
 * structure filled by hand, or garbage) and is refused before any byte past
 * the size field is read. Every function that takes or fills a carve_config
 * goes through here.
 */
#include "base/defaults.h"

#include <stdio.h>
#include <string.h>

void carve_config_defaults(carve_config *c) {
    memset(c, 0, sizeof(*c));
    c->size = sizeof(*c);
    c->backend = CARVE_BACKEND_CUDA;
    c->growth = 1;
    c->vmm = CARVE_VMM_AUTO;
    c->fail_backend_status = CARVE_ERR_OOM;
    c->peers = CARVE_PEERS_AUTO;
    c->ipc = CARVE_IPC_AUTO;
}

void carve_config_write(const carve_config *full, carve_config *user, size_t size) {
    size_t n = size < sizeof(*full) ? size : sizeof(*full);
    memcpy(user, full, n);
    if (size > n)
        memset((char *)user + n, 0, size - n);
    user->size = size;
}

int carve_config_size_ok(size_t size) { return size >= CARVE_CONFIG_SIZE_MIN && size <= CARVE_CONFIG_SIZE_MAX; }

void carve_config_init_sized(carve_config *c, size_t size) {
    if (!c || !carve_config_size_ok(size))
        return;
    carve_config d;
    carve_config_defaults(&d);
    carve_config_write(&d, c, size);
}

int carve_config_read(const carve_config *user, carve_config *full, char *why, size_t len) {
    carve_config_defaults(full);
    size_t size = user->size;
    if (size < CARVE_CONFIG_SIZE_MIN) {
        snprintf(why, len,
                 "config->size is %zu, below the smallest carve_config (%zu bytes): fill the configuration "
                 "with carve_config_init",
                 size, (size_t)CARVE_CONFIG_SIZE_MIN);
        return -1;
    }
    if (size > CARVE_CONFIG_SIZE_MAX) { /* garbage, not a newer header: do not scan that far */
        snprintf(why, len,
                 "config->size is %zu, above the largest carve_config carve accepts (%zu bytes): fill the "
                 "configuration with carve_config_init",
                 size, (size_t)CARVE_CONFIG_SIZE_MAX);
        return -1;
    }
    if (size > sizeof(*full)) {
        const unsigned char *tail = (const unsigned char *)user + sizeof(*full);
        for (size_t i = 0; i < size - sizeof(*full); i++)
            if (tail[i]) {
                snprintf(why, len,
                         "config->size is %zu, larger than this library's carve_config (%zu bytes), and byte %zu "
                         "is set: the program was built against a newer carve.h and uses a field this "
                         "library (%s) does not know",
                         size, sizeof(*full), sizeof(*full) + i, carve_version());
                return -1;
            }
    }
    memcpy(full, user, size < sizeof(*full) ? size : sizeof(*full));
    full->size = sizeof(*full);
    return 0;
}
