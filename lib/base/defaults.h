/*
 * defaults.h — carve_config's defaults and its size rule (defaults.c): what
 * carve_config_init writes, and how a configuration from a program built
 * against an older or newer carve.h is read and written back.
 */
#ifndef CARVE_BASE_DEFAULTS_H
#define CARVE_BASE_DEFAULTS_H

#include "base/util.h"
#include "carve.h"

/* Every field of *c at its default, c->size = sizeof(carve_config). */
void carve_config_defaults(carve_config *c) CARVE_INTERNAL;

/* 1 when size is one a caller's carve_config may have: between
 * CARVE_CONFIG_SIZE_MIN and CARVE_CONFIG_SIZE_MAX. */
int carve_config_size_ok(size_t size) CARVE_INTERNAL;

/* A full configuration from the caller's: defaults, then the first
 * user->size bytes of *user. 0, or -1 with why (len bytes) saying what is
 * wrong: a size outside [CARVE_CONFIG_SIZE_MIN, CARVE_CONFIG_SIZE_MAX], or a
 * larger carve_config than the library's with a byte past it set. */
int carve_config_read(const carve_config *user, carve_config *full, char *why, size_t len) CARVE_INTERNAL;

/* Write *full into the first size bytes of *user (bytes past the library's
 * carve_config zeroed) and set user->size = size. carve_config_size_ok(size) must hold. */
void carve_config_write(const carve_config *full, carve_config *user, size_t size) CARVE_INTERNAL;

#endif
