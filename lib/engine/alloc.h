/*
 * alloc.h — what alloc.c offers the layers above besides carve.h's
 * allocation calls: a silent ownership question for callers that ask many
 * arenas about one pointer (the routing layer's frees).
 */
#ifndef CARVE_ENGINE_ALLOC_H
#define CARVE_ENGINE_ALLOC_H

#include "engine/types.h"

/* 1 when ptr is the start of a live buffer of a, else 0 (also for NULL):
 * carve_buffer_info's answer without its failure message, so that a pointer
 * outside a's address ranges costs one lock-free pagemap lookup (a pool's or
 * the heap's lock is taken only when a holds the range around ptr).
 * Thread-safe. O(1). */
int carve_buffer_live(const carve_arena *a, const void *ptr) CARVE_INTERNAL;

#if CARVE_CHECKS >= 2
/* Tests only (builds with internal checks): called by the free and lookup
 * paths between reading the span that holds an address and reading that
 * span's pool, where another thread may cut or give back the span
 * (test_owner_race makes that happen there). NULL: nothing is called. */
extern void (*carve__owner_read_hook)(void) CARVE_INTERNAL;
#endif

#endif
