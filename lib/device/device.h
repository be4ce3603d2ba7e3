/*
 * device.h — what the default arenas of device.c tell the layers above
 * besides carve.h: whether an arena is one of them, and a device's default
 * arena without making it.
 *
 * The one idea: a default arena belongs to carve (carve_device_arena makes
 * it, carve_device_arenas_release destroys it), so a layer that destroys
 * arenas it was handed (the routing layer's retire) must be able to tell one
 * apart, and a layer that only asks must never create one by asking.
 */
#ifndef CARVE_DEVICE_DEVICE_H
#define CARVE_DEVICE_DEVICE_H

#include "base/util.h"
#include "carve.h"

/* The device whose default arena a is, or -1 (also for NULL). Never reads
 * *a. Thread-safe: one acquire load per device with an arena. */
int carve_device_of_default(const carve_arena *a) CARVE_INTERNAL;

/* device's default arena when it exists, else NULL (also for a device out of
 * range): never creates it. Thread-safe: one acquire load. */
carve_arena *carve_device_arena_made(int device) CARVE_INTERNAL;

#endif
