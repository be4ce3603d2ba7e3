/*
 * live.h — the set of arenas that exist right now (live.c), so that a layer
 * above can ask whether an address it was handed is a live arena without
 * reading the memory behind it (which may have been freed).
 */
#ifndef CARVE_ENGINE_LIVE_H
#define CARVE_ENGINE_LIVE_H

#include "engine/types.h"

/* carve_arena_create adds an arena once it is made; carve_arena_destroy
 * removes it first. add returns nonzero when host memory ran out. */
int carve_live_add(const carve_arena *a) CARVE_INTERNAL;
void carve_live_remove(const carve_arena *a) CARVE_INTERNAL;

/* 1 when a is an arena that was created and not yet destroyed. Never reads
 * *a. A destroyed arena's address may belong to a newer arena: the answer is
 * about the address, now. Thread-safe. */
int carve_arena_live(const carve_arena *a) CARVE_INTERNAL;

#endif
