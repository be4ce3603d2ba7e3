/*
 * text.c — the library's words for its own values: status and backend names,
 * the version string, byte counts. Pure functions with static strings, so
 * every room may call them, the lowest included.
 */
#include "base/text.h"

#include <stdint.h>
#include <stdio.h>

#include "carve.h"

#ifndef CARVE_VERSION_STRING
#define CARVE_VERSION_STRING "unknown"
#endif

const char *carve_version(void) { return CARVE_VERSION_STRING; }

const char *carve_status_str(carve_status st) {
    switch (st) {
    case CARVE_OK: return "CARVE_OK";
    case CARVE_ERR_INVALID: return "CARVE_ERR_INVALID";
    case CARVE_ERR_OOM: return "CARVE_ERR_OOM";
    case CARVE_ERR_BAD_POINTER: return "CARVE_ERR_BAD_POINTER";
    case CARVE_ERR_BACKEND: return "CARVE_ERR_BACKEND";
    case CARVE_ERR_NO_DEVICE: return "CARVE_ERR_NO_DEVICE";
    }
    return "unknown status";
}

const char *carve_backend_str(carve_backend b) {
    switch (b) {
    case CARVE_BACKEND_CUDA: return "cuda";
    case CARVE_BACKEND_HOST: return "host";
    case CARVE_BACKEND_VIRTUAL: return "virtual";
    case CARVE_BACKEND_CUDA_DRIVER: return "cuda_driver";
    }
    return "unknown";
}

char *carve_format_bytes(char *buf, size_t len, size_t bytes) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes == SIZE_MAX) {
        snprintf(buf, len, "unlimited");
        return buf;
    }
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}
