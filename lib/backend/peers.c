/*
 * peers.c — the devices an arena's memory is granted to (peers.h).
 *
 * Memory mapped with cuMemMap is reachable only from the devices named in
 * its access descriptors, whatever cudaDeviceEnablePeerAccess says; cudaMalloc
 * memory is reachable from the devices that enabled peer access to its
 * device. The list made here serves both: the virtual-memory backend sets one
 * descriptor per device in it on every mapping, the cudaMalloc backend
 * enables peer access from each device in it other than the owner.
 */
#include "backend/peers.h"

carve_status carve_peer_list(int mode, uint64_t mask, int owner, int ndev, carve_can_access_fn can_access,
                             void *arg, int *out, int *n) {
    *n = 0;
    out[(*n)++] = owner;
    if (mode == CARVE_PEERS_NONE)
        return CARVE_OK;
    if (mode == CARVE_PEERS_LIST) {
        for (int d = 0; d < CARVE_PEERS_MAX; d++) {
            if (!(mask >> d & 1) || d == owner)
                continue;
            if (d >= ndev) {
                carve_backend_fail("peer device %d does not exist (%d device%s visible)", d, ndev,
                                   ndev == 1 ? "" : "s");
                return CARVE_ERR_INVALID;
            }
            if (!can_access(d, owner, arg)) {
                carve_backend_fail("device %d cannot access device %d's memory (no peer access between them)", d,
                                   owner);
                return CARVE_ERR_INVALID;
            }
            out[(*n)++] = d;
        }
        return CARVE_OK;
    }
    for (int d = 0; d < ndev && d < CARVE_PEERS_MAX; d++) /* AUTO and ALL */
        if (d != owner && can_access(d, owner, arg))
            out[(*n)++] = d;
    return CARVE_OK;
}
