/*
 * live.c — the set of live arenas: an array of addresses under one mutex,
 * written when an arena is created or destroyed and read by
 * carve_arena_live.
 *
 * The one idea: the question "is this still an arena?" must be answerable
 * after the arena is gone, so it is answered from memory the engine keeps,
 * never from the arena's own. Creation and destruction are rare and slow
 * already (they reach the backend), and a process holds few arenas at once,
 * so a linear scan is enough.
 */
#include "engine/live.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const carve_arena **g_set;
static size_t g_n, g_cap;

int carve_live_add(const carve_arena *a) {
    pthread_mutex_lock(&g_lock);
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 16;
        const carve_arena **n = realloc(g_set, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&g_lock);
            return -1;
        }
        g_set = n;
        g_cap = cap;
    }
    g_set[g_n++] = a;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

void carve_live_remove(const carve_arena *a) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++)
        if (g_set[i] == a) {
            g_set[i] = g_set[--g_n];
            break;
        }
    pthread_mutex_unlock(&g_lock);
}

int carve_arena_live(const carve_arena *a) {
    int live = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n && !live; i++)
        live = g_set[i] == a;
    pthread_mutex_unlock(&g_lock);
    return live;
}
