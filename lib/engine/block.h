/*
 * block.h — the one record the engine keeps per contiguous range.
 *
 * The engine has two levels and both use this record:
 *  - heap ranges tile a segment; a range is FREE (in the heap's index) or a
 *    SPAN, handed to one stream's pool;
 *  - pool blocks tile a span; a block is FREE (in the pool's index), USED (a
 *    live buffer), PENDING (freed, waiting for events on other streams),
 *    HOT (just freed, parked unmerged for an allocation of the same size) or,
 *    in virtual-memory mode, UNMAPPED (free address space with no memory
 *    behind it: whole granules, in the pool's unmapped list). A FREE block
 *    there always has every granule it touches mapped, so the fast path
 *    never maps; FREE and UNMAPPED neighbours do not merge. In that mode a
 *    FREE block also heads a ring of RUNs: its whole granules, in runs let
 *    go one after another (vmm.c), the first run in the block's own record,
 *    the others in RUN records, which are no one's physical neighbours.
 * prev/next link physical neighbours inside the container (segment or span),
 * so coalescing is O(1); fprev/fnext link a free block into its index list,
 * a pending block into the pool's pending list, and a span into its pool's
 * span list. All of it lives in host memory: device memory is never touched.
 *
 * Records come from a slab of fixed chunks (slab.h) that are freed only with
 * the arena, so a stale pointer (a racing bad free) still points at a record.
 */
#ifndef CARVE_ENGINE_BLOCK_H
#define CARVE_ENGINE_BLOCK_H

#include "base/util.h"
#include "carve.h"

enum carve_block_state {
    CARVE_B_DEAD = 0,  /* in the slab's free list */
    CARVE_B_FREE,      /* free: in an index */
    CARVE_B_USED,      /* pool block: a live buffer */
    CARVE_B_PENDING,   /* pool block: freed, events on other streams outstanding */
    CARVE_B_SPAN,      /* heap range: owned by a pool */
    CARVE_B_HOT,       /* pool block: freed, parked unmerged in its pool's hot slot */
    CARVE_B_UNMAPPED,  /* pool block, virtual-memory mode: free whole granules, none mapped */
    CARVE_B_RUN        /* virtual-memory mode: a run of a FREE block's ring (u.v), not a block */
};

enum { CARVE_CLASS_SMALL = 0, CARVE_CLASS_LARGE = 1 };

struct carve_pool;
struct carve_segment;

/* Streams besides its own that a buffer was used on (carve_record_stream),
 * and once it is freed, one event per stream. An event a stream capture
 * kept the free from recording is CARVE_EVENT_LATER (alloc.c): on the
 * legacy stream it is recorded once no capture is underway, on another
 * stream (which may be destroyed by then) none is, and the block waits for
 * a device synchronization instead (pool.c, carve_pool_poll_pending). */
extern const char carve_event_later CARVE_INTERNAL;
#define CARVE_EVENT_LATER ((void *)&carve_event_later)
typedef struct carve_uses {
    unsigned n, cap;
    carve_stream *streams;
    void **events;
} carve_uses;

/* Flags of a pool block. */
enum {
    CARVE_BF_USES = 1, /* u.b.uses is set (carve_record_stream) */
    CARVE_BF_TAG = 2,  /* u.b.tag is set (carve_set_tag); cleared when the buffer is freed */
    CARVE_BF_GONE = 4  /* live when its arena was abandoned: freed, it is never parked hot */
};

/* The first 64 bytes hold everything the alloc and free fast paths touch,
 * so a block costs one cache line there; records are 64-byte aligned. */
typedef struct carve_block {
    uintptr_t addr;
    size_t size;
    struct carve_block *prev, *next;   /* physical neighbours in the container */
    struct carve_block *fprev, *fnext; /* index list / pending list / span list / unmapped list */
    uint8_t state;
    uint8_t cls;                       /* span: CARVE_CLASS_*; pool block: its span's */
    uint8_t slack;                     /* pool block in use: size - requested bytes (< 256) */
    uint8_t flags;                     /* pool block: CARVE_BF_* */
    uint8_t fl, sl;                    /* free block: its index size class */
    uint16_t unused;
    struct carve_block *span;          /* pool block: its span */
    /* ---- second cache line: slow paths only ---- */
    carve_stream stream;               /* span: its pool's stream; free heap range:
                                          the stream that gave it back (pending) */
    union {
        struct {                       /* pool block */
            carve_uses *uses;          /* valid when flags & CARVE_BF_USES */
            uint64_t tag;              /* valid when flags & CARVE_BF_TAG */
        } b;
        struct {                       /* virtual-memory mode: a FREE pool block (its own run, which
                                          may be empty, heads the ring) or a RUN record */
            uintptr_t at;              /* the run's first granule */
            size_t n;                  /* its granules (0: none: a FREE block with no run of its own) */
            uint64_t stamp;            /* when its first granule was let go (its pool's clock); the
                                          i-th granule's stamp is stamp + i */
            struct carve_block *rnext, *rprev; /* the ring of the FREE block's runs, by address */
        } v;
        struct {                       /* heap range */
            struct carve_segment *seg;
            struct carve_pool *pool;   /* span: owner (read racily by carve_free) */
            struct carve_block *first; /* span: first pool block */
            struct carve_block *last;  /* span: last pool block */
            size_t nlive;              /* span: USED + PENDING + HOT blocks */
            void *event;               /* free range: pending event, NULL when clean;
                                          span: its empty-event (recorded on its stream) */
            uint64_t seq;              /* with event: its number, in the order events were recorded
                                          (set when it is recorded, not when the span goes back:
                                          of two pending ranges of one stream, the one numbered
                                          higher waits for the later work) */
            size_t unmapped;           /* span, virtual-memory mode: granules not mapped */
        } r;
    } u;
} __attribute__((aligned(64))) carve_block;

/* Make b the pool block [addr, addr+size) of span, linked after prev (NULL:
 * first); its state is the caller's to set. */
static inline void carve_block_link(carve_block *b, carve_block *span, carve_block *prev, uintptr_t addr,
                                    size_t size) {
    b->addr = addr;
    b->size = size;
    b->cls = span->cls;
    b->span = span;
    b->slack = 0;
    b->flags = 0;
    b->prev = prev;
    b->next = prev ? prev->next : span->u.r.first;
    if (b->next)
        b->next->prev = b;
    else
        span->u.r.last = b;
    if (prev)
        prev->next = b;
    else
        span->u.r.first = b;
}

/* Bytes asked for by a live pool block. */
static inline size_t carve_block_requested(const carve_block *b) { return b->size - b->slack; }

#endif
