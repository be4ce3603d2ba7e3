/*
 * peers.h — which devices get access to an arena's memory (peers.c): the
 * list the virtual-memory backend turns into access descriptors, and the
 * devices the cudaMalloc backend enables peer access from. Pure logic over a
 * "can this device access that one" question, so it is tested on any
 * machine.
 */
#ifndef CARVE_BACKEND_PEERS_H
#define CARVE_BACKEND_PEERS_H

#include "backend/backend.h"

#define CARVE_PEERS_MAX 64 /* devices a list can name (bits of peer_devices) */

/* can_access(peer, owner, arg): nonzero when device peer can read and write
 * device owner's memory (cudaDeviceCanAccessPeer(peer, owner)). */
typedef int (*carve_can_access_fn)(int peer, int owner, void *arg);

/* The devices to grant owner's memory to, owner first, then the others in
 * ascending order, into out (room for CARVE_PEERS_MAX + 1); *n their count.
 * mode and mask are carve_config.peers and .peer_devices; ndev the devices
 * visible. CARVE_PEERS_AUTO and CARVE_PEERS_ALL give every device that can
 * access owner; CARVE_PEERS_NONE owner alone; CARVE_PEERS_LIST the devices in
 * mask (owner's own bit changes nothing). CARVE_OK, or CARVE_ERR_INVALID
 * with carve_backend_msg() naming a listed device that does not exist or
 * cannot access owner. */
carve_status carve_peer_list(int mode, uint64_t mask, int owner, int ndev, carve_can_access_fn can_access,
                             void *arg, int *out, int *n) CARVE_INTERNAL;

#endif
