/*
 * tiles.h — how many tiles cover an extent, for the argument checks, the
 * launch plans and the kernels alike.
 *
 * The one idea: (extent + tile - 1) / tile overflows an int when the extent
 * is within a tile of INT_MAX (m, n and k are ints, and may be as large as
 * 2^31 - 1), and a negative tile count means a main loop that never runs or
 * a grid that is not what was checked. extent / tile plus one for a
 * remainder cannot overflow, and stays an int (the kernels' registers are
 * counted). Grids multiply two such counts, in 64 bits.
 *
 * Plain C and CUDA C++ both include this file: it is C (args.c), device
 * code (the kernels) and host C++ (the launch plans, the host emulation).
 */
#ifndef CARVE_KERNEL_TILES_H
#define CARVE_KERNEL_TILES_H

#include <stdint.h>

#if defined(__CUDACC__)
#define CARVE_TILES_FN __host__ __device__ __forceinline__
#else
#define CARVE_TILES_FN static inline
#endif

/* ceil(extent / tile) for extent >= 0 and tile > 0, without overflow. */
CARVE_TILES_FN int carve_tiles(int extent, int tile) {
    return extent / tile + (extent % tile != 0);
}

/* Thread blocks of tile_m x tile_n that cover an m x n output (64 bits:
 * up to 2^62, where a grid holds 2^31 - 1). */
CARVE_TILES_FN int64_t carve_grid(int m, int n, int tile_m, int tile_n) {
    return (int64_t)carve_tiles(m, tile_m) * (int64_t)carve_tiles(n, tile_n);
}

/* The most thread blocks one launch's grid holds (gridDim.x). */
#define CARVE_MAX_GRID ((int64_t)2147483647)

#endif
