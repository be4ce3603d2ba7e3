/*
 * conf.c — CARVE_CONF: ';'-separated sections of key=value pairs, a section
 * without a prefix for every device and "deviceN:" sections for one.
 *
 * The one idea: all-device sections apply first and device sections after,
 * whatever their order in the string, and every section is parsed (for
 * every device) so a typo in another device's section is reported too.
 */
#include "config/conf.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/defaults.h"
#include "config/options.h"
#include "engine/error.h"

static const char *const conf_denied[] = {"backend", "device", NULL};

carve_status carve_conf_apply(carve_config *c, int device, const char *conf) {
    /* Sections for all devices first, then the device's own, whatever their
     * order. A key may appear once among the sections for all devices and
     * once more among each device's sections. */
    unsigned seen_all = 0, seen_dev[CARVE_MAX_DEVICES] = {0};
    for (int pass = 0; pass < 2; pass++) {
        const char *p = conf;
        while (*p) {
            const char *end = strchr(p, ';');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            char sec[512];
            if (len >= sizeof(sec))
                return carve_fail(NULL, CARVE_ERR_INVALID, "CARVE_CONF: a section is longer than %zu characters",
                                  sizeof(sec) - 1);
            memcpy(sec, p, len);
            sec[len] = '\0';
            p = end ? end + 1 : p + len;
            char *body = sec;
            while (isspace((unsigned char)*body))
                body++;
            int target = -1; /* -1: every device */
            if (strncmp(body, "device", 6) == 0 && isdigit((unsigned char)body[6])) {
                char *colon;
                long d = strtol(body + 6, &colon, 10);
                if (*colon != ':' || d < 0 || d >= CARVE_MAX_DEVICES)
                    return carve_fail(NULL, CARVE_ERR_INVALID, "CARVE_CONF: bad section prefix in '%s'", sec);
                target = (int)d;
                body = colon + 1;
            }
            if ((pass == 0) != (target == -1))
                continue;
            carve_config probe = *c;
            carve_status st = carve_config_parse_keys(&probe, body, conf_denied, "CARVE_CONF",
                                                      target == -1 ? &seen_all : &seen_dev[target]);
            if (st != CARVE_OK)
                return st;
            if (target == -1 || target == device)
                *c = probe;
        }
    }
    return CARVE_OK;
}

carve_status carve_conf_parse_sized(const char *conf, int device, carve_config *out, size_t size) {
    if (!out || !carve_config_size_ok(size))
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "carve_conf_parse: NULL out or a size of %zu (between %zu and %zu)", size,
                          (size_t)CARVE_CONFIG_SIZE_MIN, (size_t)CARVE_CONFIG_SIZE_MAX);
    carve_config c;
    carve_config_defaults(&c);
    carve_config_write(&c, out, size);
    if (device < 0 || device >= CARVE_MAX_DEVICES)
        return carve_fail(NULL, CARVE_ERR_INVALID, "carve_conf_parse: bad device %d", device);
    c.device = device;
    carve_status st = carve_conf_apply(&c, device, conf ? conf : "");
    if (st == CARVE_OK)
        carve_config_write(&c, out, size);
    return st;
}
