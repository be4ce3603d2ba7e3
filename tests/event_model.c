/*
 * event_model.c — see event_model.h: a device whose work completes only
 * when the test says so, and the oracle that checks carve against it.
 *
 * The one idea: the model numbers the work on every stream, so "has the
 * device finished the last use of this memory" is a comparison of two
 * numbers the test controls; the oracle only has to remember, for every
 * freed range, the position of its last use on each stream, and ask that
 * question whenever carve hands the range out or unmaps it.
 */
#include "event_model.h"

#include <pthread.h>
#include <stdarg.h>

#include "engine/pool.h"
#include "test_util.h"

#define G CARVE_SEGMENT_GRANULE

typedef struct em_stream {
    carve_stream s;
    uint64_t queued, done;
    unsigned long records;
} em_stream;

typedef struct em_event {
    carve_stream s;
    uint64_t pos;      /* the stream's work queued when it was recorded */
    unsigned number;
    struct em_event *prev, *next;
} em_event;

/* A freed range's last use on one stream. */
typedef struct em_use {
    uintptr_t addr;
    size_t size;
    carve_stream s;
    uint64_t pos;
} em_use;

typedef struct em_live {
    uintptr_t addr;
    size_t size;       /* rounded, as carve counts it */
    size_t requested;
    carve_stream s;
    carve_stream extra[8]; /* streams named by carve_record_stream */
    unsigned nextra;
} em_live;

struct em_model {
    carve_arena *a;
    const carve_backend_ops *leaf;
    carve_backend_ops ops;
    pthread_mutex_t mu;
    em_stream *streams;
    size_t nstreams, scap;
    em_event *head, *tail;
    unsigned next_number;
    unsigned long records;
    em_use *uses;
    size_t nuses, ucap;
    em_live *live; /* by address */
    size_t nlive, lcap;
    size_t allocated, requested;
    unsigned long violations;
    int closing;
    unsigned progress;   /* per mille: a query completes the event (em_progress) */
    uint64_t progress_rng;
    em_wait_fn wait_fn;
    void *wait_arg;
};

/* ---- which model stands in front of a backend ---- */

#define EM_MAX_MODELS 64
static struct {
    carve_be *be;
    em_model *m;
} registry[EM_MAX_MODELS];
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;

static em_model *model_of(carve_be *be) {
    for (int i = 0; i < EM_MAX_MODELS; i++)
        if (__atomic_load_n(&registry[i].be, __ATOMIC_ACQUIRE) == be)
            return registry[i].m;
    abort(); /* an op of a backend the model never wrapped */
}

static void registry_set(carve_be *be, em_model *m) {
    pthread_mutex_lock(&registry_mu);
    for (int i = 0; i < EM_MAX_MODELS; i++) {
        if (!m && registry[i].be == be) {
            __atomic_store_n(&registry[i].be, (carve_be *)NULL, __ATOMIC_RELEASE);
            registry[i].m = NULL;
            break;
        }
        if (m && !registry[i].be) {
            registry[i].m = m;
            __atomic_store_n(&registry[i].be, be, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
}

/* ---- the device (model lock held) ---- */

static em_stream *stream_of(em_model *m, carve_stream s) {
    for (size_t i = 0; i < m->nstreams; i++)
        if (m->streams[i].s == s)
            return &m->streams[i];
    if (m->nstreams == m->scap) {
        m->scap = m->scap ? 2 * m->scap : 16;
        m->streams = realloc(m->streams, m->scap * sizeof(*m->streams));
        if (!m->streams)
            abort();
    }
    em_stream *st = &m->streams[m->nstreams++];
    *st = (em_stream){.s = s};
    return st;
}

static int use_done(em_model *m, carve_stream s, uint64_t pos) { return stream_of(m, s)->done >= pos; }

static void advance(em_model *m, carve_stream s, uint64_t pos) {
    em_stream *st = stream_of(m, s);
    if (pos > st->queued)
        pos = st->queued;
    if (pos > st->done)
        st->done = pos;
}

static void violation(em_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(em_model *m, const char *fmt, ...) {
    char d[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof(d), fmt, ap);
    va_end(ap);
    m->violations++;
    test_fail(__FILE__, __LINE__, "violation", d);
}

/* ---- the backend ops in front of the leaf ---- */

static carve_status m_reserve(carve_be *be, size_t size, uintptr_t *base) {
    return model_of(be)->leaf->reserve(be, size, base);
}

static carve_status m_commit(carve_be *be, uintptr_t addr, size_t size, size_t piece) {
    return model_of(be)->leaf->commit(be, addr, size, piece);
}

static void m_recycle(carve_be *be, int on) {
    em_model *m = model_of(be);
    if (m->leaf->recycle)
        m->leaf->recycle(be, on);
}

static int overlaps(uintptr_t a, size_t an, uintptr_t b, size_t bn) { return a < b + bn && b < a + an; }

/* Memory leaves the device (unmapped or released): nothing may use it. */
static void check_unback(em_model *m, uintptr_t addr, size_t size, const char *what) {
    pthread_mutex_lock(&m->mu);
    /* Destroying the arena gives live buffers back too (the program gave
     * them up); the work of freed ones must still be done first. */
    if (!m->closing)
        for (size_t i = 0; i < m->nlive; i++)
            if (overlaps(addr, size, m->live[i].addr, m->live[i].size))
                violation(m, "%s [%#lx, +%zu) holds live buffer %#lx (%zu bytes, stream %p)", what,
                          (unsigned long)addr, size, (unsigned long)m->live[i].addr, m->live[i].size,
                          (void *)m->live[i].s);
    for (size_t i = 0; i < m->nuses; i++) {
        em_use *u = &m->uses[i];
        if (overlaps(addr, size, u->addr, u->size) && !use_done(m, u->s, u->pos))
            violation(m, "%s [%#lx, +%zu) while freed buffer %#lx (%zu bytes) is still used by work %llu "
                      "of stream %p (done up to %llu)%s", what, (unsigned long)addr, size,
                      (unsigned long)u->addr, u->size, (unsigned long long)u->pos, (void *)u->s,
                      (unsigned long long)stream_of(m, u->s)->done, m->closing ? ", destroying the arena" : "");
    }
    pthread_mutex_unlock(&m->mu);
}

static carve_status m_decommit(carve_be *be, uintptr_t addr, size_t size, size_t piece, size_t *done) {
    em_model *m = model_of(be);
    check_unback(m, addr, size, "unmapped");
    return m->leaf->decommit(be, addr, size, piece, done);
}

static carve_status m_release(carve_be *be, uintptr_t base, size_t size) {
    em_model *m = model_of(be);
    check_unback(m, base, size, "released");
    return m->leaf->release(be, base, size);
}

/* A capture the test marked (carve_sim_set_capturing): on s itself, or on
 * any stream when s is the legacy stream, which a capture of a blocking
 * stream forbids. */
static int m_record_breaks_capture(em_model *m, carve_be *be, carve_stream s) {
    if (m->leaf->capturing && m->leaf->capturing(be, s) > 0)
        return 1;
    return (uintptr_t)s <= 1 && m->leaf->context_capturing && m->leaf->context_capturing(be);
}

static carve_status m_event_record(carve_be *be, carve_stream s, void **ev) {
    em_model *m = model_of(be);
    if (m_record_breaks_capture(m, be, s)) {
        pthread_mutex_lock(&m->mu);
        violation(m, "an event was recorded on stream %p while a capture forbids it", (void *)s);
        pthread_mutex_unlock(&m->mu);
    }
    em_event *e = calloc(1, sizeof(*e));
    if (!e)
        abort();
    pthread_mutex_lock(&m->mu);
    em_stream *st = stream_of(m, s);
    e->s = s;
    e->pos = st->queued;
    e->number = ++m->next_number;
    st->records++;
    m->records++;
    e->prev = m->tail;
    if (m->tail)
        m->tail->next = e;
    else
        m->head = e;
    m->tail = e;
    pthread_mutex_unlock(&m->mu);
    *ev = e;
    return CARVE_OK;
}

static int m_event_query(carve_be *be, void *ev) {
    em_model *m = model_of(be);
    em_event *e = ev;
    pthread_mutex_lock(&m->mu);
    int done = use_done(m, e->s, e->pos);
    if (!done && m->progress) {
        uint64_t x = m->progress_rng; /* xorshift64 */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m->progress_rng = x;
        if (x % 1000 < m->progress) {
            advance(m, e->s, e->pos);
            done = 1;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return done;
}

static void call_wait(em_model *m, int device_wide, carve_stream s) {
    pthread_mutex_lock(&m->mu);
    em_wait_fn fn = m->wait_fn;
    void *arg = m->wait_arg;
    pthread_mutex_unlock(&m->mu);
    if (fn)
        fn(arg, device_wide, s);
}

static carve_status m_event_sync(carve_be *be, void *ev) {
    em_model *m = model_of(be);
    em_event *e = ev;
    call_wait(m, 0, e->s);
    pthread_mutex_lock(&m->mu);
    advance(m, e->s, e->pos);
    pthread_mutex_unlock(&m->mu);
    return CARVE_OK;
}

/* Only what was queued when the wait began is done when it returns. */
static carve_status m_device_sync(carve_be *be) {
    em_model *m = model_of(be);
    if (m->leaf->context_capturing && m->leaf->context_capturing(be)) { /* refused, as the driver refuses it */
        pthread_mutex_lock(&m->mu);
        violation(m, "the device was synchronized while a stream is being captured");
        pthread_mutex_unlock(&m->mu);
        return CARVE_ERR_BACKEND;
    }
    pthread_mutex_lock(&m->mu);
    size_t n = m->nstreams;
    em_stream *snap = malloc((n ? n : 1) * sizeof(*snap));
    if (!snap)
        abort();
    if (n)
        memcpy(snap, m->streams, n * sizeof(*snap));
    pthread_mutex_unlock(&m->mu);
    call_wait(m, 1, NULL);
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++)
        advance(m, snap[i].s, snap[i].queued);
    pthread_mutex_unlock(&m->mu);
    free(snap);
    return CARVE_OK;
}

static void m_event_release(carve_be *be, void *ev) {
    em_model *m = model_of(be);
    em_event *e = ev;
    pthread_mutex_lock(&m->mu);
    if (e->prev)
        e->prev->next = e->next;
    else
        m->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        m->tail = e->prev;
    pthread_mutex_unlock(&m->mu);
    free(e);
}

static void m_destroy(carve_be *be) {
    em_model *m = model_of(be);
    be->ops = m->leaf;
    m->leaf->destroy(be);
}

em_model *em_attach(carve_arena *a) {
    em_model *m = calloc(1, sizeof(*m));
    if (!m)
        abort();
    pthread_mutex_init(&m->mu, NULL);
    m->a = a;
    m->leaf = a->be.ops;
    m->ops = (carve_backend_ops){
        .reserve = m_reserve,
        .release = m_release,
        .commit = m->leaf->commit ? m_commit : NULL,
        .decommit = m->leaf->decommit ? m_decommit : NULL,
        .recycle = m->leaf->recycle ? m_recycle : NULL,
        .event_record = m_event_record,
        .event_query = m_event_query,
        .event_sync = m_event_sync,
        .device_sync = m_device_sync,
        .event_release = m_event_release,
        .capturing = m->leaf->capturing, /* the test's marks (carve_sim_set_capturing) */
        .context_capturing = m->leaf->context_capturing,
        .destroy = m_destroy,
    };
    registry_set(&a->be, m);
    a->be.ops = &m->ops;
    return m;
}

void em_destroy(em_model *m) {
    pthread_mutex_lock(&m->mu);
    m->closing = 1; /* destruction gives live buffers back too; freed ones' work is still checked */
    pthread_mutex_unlock(&m->mu);
    carve_be *be = &m->a->be;
    carve_arena_destroy(m->a);
    registry_set(be, NULL); /* by address only: the arena is gone */
    for (em_event *e = m->head, *n; e; e = n) { /* carve released them all; none should be left */
        n = e->next;
        free(e);
    }
    free(m->streams);
    free(m->uses);
    free(m->live);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* ---- the device, as the test drives it ---- */

uint64_t em_enqueue(em_model *m, carve_stream s) {
    pthread_mutex_lock(&m->mu);
    uint64_t pos = ++stream_of(m, s)->queued;
    pthread_mutex_unlock(&m->mu);
    return pos;
}

void em_advance(em_model *m, carve_stream s, uint64_t pos) {
    pthread_mutex_lock(&m->mu);
    advance(m, s, pos);
    pthread_mutex_unlock(&m->mu);
}

void em_finish(em_model *m) {
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nstreams; i++)
        m->streams[i].done = m->streams[i].queued;
    pthread_mutex_unlock(&m->mu);
}

uint64_t em_queued(em_model *m, carve_stream s) {
    pthread_mutex_lock(&m->mu);
    uint64_t q = stream_of(m, s)->queued;
    pthread_mutex_unlock(&m->mu);
    return q;
}

uint64_t em_done(em_model *m, carve_stream s) {
    pthread_mutex_lock(&m->mu);
    uint64_t d = stream_of(m, s)->done;
    pthread_mutex_unlock(&m->mu);
    return d;
}

size_t em_open_events(em_model *m, unsigned *numbers, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&m->mu);
    for (em_event *e = m->head; e; e = e->next)
        if (!use_done(m, e->s, e->pos)) {
            if (n < max)
                numbers[n] = e->number;
            n++;
        }
    pthread_mutex_unlock(&m->mu);
    return n;
}

int em_complete(em_model *m, unsigned number) {
    int did = 0;
    pthread_mutex_lock(&m->mu);
    for (em_event *e = m->head; e; e = e->next)
        if (e->number == number) {
            did = !use_done(m, e->s, e->pos);
            advance(m, e->s, e->pos);
            break;
        }
    pthread_mutex_unlock(&m->mu);
    return did;
}

void em_progress(em_model *m, unsigned per_mille, uint64_t seed) {
    pthread_mutex_lock(&m->mu);
    m->progress = per_mille;
    m->progress_rng = seed | 1;
    pthread_mutex_unlock(&m->mu);
}

unsigned long em_records(em_model *m) {
    pthread_mutex_lock(&m->mu);
    unsigned long n = m->records;
    pthread_mutex_unlock(&m->mu);
    return n;
}

unsigned long em_records_on(em_model *m, carve_stream s) {
    pthread_mutex_lock(&m->mu);
    unsigned long n = stream_of(m, s)->records;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void em_on_wait(em_model *m, em_wait_fn fn, void *arg) {
    pthread_mutex_lock(&m->mu);
    m->wait_fn = fn;
    m->wait_arg = arg;
    pthread_mutex_unlock(&m->mu);
}

/* ---- the oracle ---- */

static size_t rounded(size_t n) { return (n + CARVE_ALIGNMENT - 1) & ~(size_t)(CARVE_ALIGNMENT - 1); }

/* First live buffer whose address is at or above addr. */
static size_t live_lower(const em_model *m, uintptr_t addr) {
    size_t lo = 0, hi = m->nlive;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->live[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void em_allocated(em_model *m, void *p, size_t size, carve_stream s) {
    uintptr_t addr = (uintptr_t)p;
    size_t rs = rounded(size);
    pthread_mutex_lock(&m->mu);
    size_t at = live_lower(m, addr);
    if (at > 0 && overlaps(addr, rs, m->live[at - 1].addr, m->live[at - 1].size))
        at--;
    if (at < m->nlive && overlaps(addr, rs, m->live[at].addr, m->live[at].size))
        violation(m, "carve_alloc(%zu) on stream %p returned %#lx, which overlaps live buffer %#lx (%zu bytes, "
                  "stream %p)", size, (void *)s, (unsigned long)addr, (unsigned long)m->live[at].addr,
                  m->live[at].size, (void *)m->live[at].s);
    /* Stream order; uses the device has done are forgotten on the way. */
    size_t k = 0;
    for (size_t i = 0; i < m->nuses; i++) {
        em_use u = m->uses[i];
        if (use_done(m, u.s, u.pos))
            continue;
        if (u.s != s && overlaps(addr, rs, u.addr, u.size))
            violation(m, "carve_alloc(%zu) on stream %p returned %#lx, which overlaps freed buffer %#lx (%zu "
                      "bytes) whose last use, work %llu of stream %p, the device has not done (done up to %llu)",
                      size, (void *)s, (unsigned long)addr, (unsigned long)u.addr, u.size,
                      (unsigned long long)u.pos, (void *)u.s, (unsigned long long)stream_of(m, u.s)->done);
        m->uses[k++] = u;
    }
    m->nuses = k;
    if (m->nlive == m->lcap) {
        m->lcap = m->lcap ? 2 * m->lcap : 256;
        m->live = realloc(m->live, m->lcap * sizeof(*m->live));
        if (!m->live)
            abort();
    }
    at = live_lower(m, addr);
    memmove(&m->live[at + 1], &m->live[at], (m->nlive - at) * sizeof(*m->live));
    m->live[at] = (em_live){.addr = addr, .size = rs, .requested = size, .s = s};
    m->nlive++;
    m->allocated += rs;
    m->requested += size;
    pthread_mutex_unlock(&m->mu);
}

/* Model lock held: the live buffer at addr, or NULL (a test bug). */
static em_live *live_find(em_model *m, uintptr_t addr) {
    size_t at = live_lower(m, addr);
    if (at < m->nlive && m->live[at].addr == addr)
        return &m->live[at];
    test_fail(__FILE__, __LINE__, "the test names a buffer the shadow does not hold", NULL);
    return NULL;
}

void em_record_stream(em_model *m, void *p, carve_stream s) {
    pthread_mutex_lock(&m->mu);
    em_live *l = live_find(m, (uintptr_t)p);
    if (l && s != l->s) {
        int known = 0;
        for (unsigned i = 0; i < l->nextra; i++)
            known |= l->extra[i] == s;
        if (!known && l->nextra < sizeof(l->extra) / sizeof(l->extra[0]))
            l->extra[l->nextra++] = s;
    }
    pthread_mutex_unlock(&m->mu);
}

static void use_add(em_model *m, const em_live *l, carve_stream s) {
    if (m->nuses == m->ucap) {
        m->ucap = m->ucap ? 2 * m->ucap : 256;
        m->uses = realloc(m->uses, m->ucap * sizeof(*m->uses));
        if (!m->uses)
            abort();
    }
    m->uses[m->nuses++] = (em_use){l->addr, l->size, s, ++stream_of(m, s)->queued};
}

void em_freeing(em_model *m, void *p) {
    pthread_mutex_lock(&m->mu);
    em_live *l = live_find(m, (uintptr_t)p);
    if (l) {
        use_add(m, l, l->s);
        for (unsigned i = 0; i < l->nextra; i++)
            use_add(m, l, l->extra[i]);
        m->allocated -= l->size;
        m->requested -= l->requested;
        size_t at = (size_t)(l - m->live);
        memmove(&m->live[at], &m->live[at + 1], (m->nlive - at - 1) * sizeof(*m->live));
        m->nlive--;
    }
    pthread_mutex_unlock(&m->mu);
}

unsigned long em_violations(em_model *m) {
    pthread_mutex_lock(&m->mu);
    unsigned long n = m->violations;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void em_check_stats(em_model *m) {
    carve_stats s;
    carve_status st = carve_get_stats(m->a, &s);
    size_t allocated = carve_memory_allocated(m->a), reserved = carve_memory_reserved(m->a);
    pthread_mutex_lock(&m->mu);
    if (st != CARVE_OK)
        violation(m, "carve_get_stats: %s", carve_status_str(st));
    else if (s.num_live != m->nlive || s.allocated_bytes != m->allocated || s.requested_bytes != m->requested ||
             allocated != m->allocated || s.num_allocs - s.num_frees != s.num_live)
        violation(m, "statistics: %llu live, %zu allocated (%zu by carve_memory_allocated), %zu requested, %llu "
                  "allocs - %llu frees; the shadow holds %zu live, %zu allocated, %zu requested",
                  (unsigned long long)s.num_live, s.allocated_bytes, allocated, s.requested_bytes,
                  (unsigned long long)s.num_allocs, (unsigned long long)s.num_frees, m->nlive, m->allocated,
                  m->requested);
    else if (s.allocated_bytes_peak < s.allocated_bytes || s.requested_bytes_peak < s.requested_bytes ||
             s.reserved_bytes_peak < s.reserved_bytes)
        violation(m, "statistics: a peak below its current value (allocated %zu/%zu, requested %zu/%zu, reserved "
                  "%zu/%zu)", s.allocated_bytes, s.allocated_bytes_peak, s.requested_bytes,
                  s.requested_bytes_peak, s.reserved_bytes, s.reserved_bytes_peak);
    else if (s.reserved_bytes != reserved || s.reserved_bytes > s.limit_bytes || s.reserved_bytes < s.allocated_bytes)
        violation(m, "statistics: reserved %zu (carve_memory_reserved %zu), allocated %zu, limit %zu",
                  s.reserved_bytes, reserved, s.allocated_bytes, s.limit_bytes);
    else if (s.largest_free_block > s.reserved_bytes - s.allocated_bytes ||
             s.cached_bytes != s.reserved_bytes - s.allocated_bytes)
        violation(m, "statistics: largest free block %zu, cached %zu, reserved %zu, allocated %zu",
                  s.largest_free_block, s.cached_bytes, s.reserved_bytes, s.allocated_bytes);
    pthread_mutex_unlock(&m->mu);
}

/* ---- out of memory: did the request fit? ---- */

/* Model lock held: whether stream s may take heap range r now. */
static int range_open_to(em_model *m, const carve_block *r, carve_stream s) {
    const em_event *e = r->u.r.event;
    return !e || r->stream == s || use_done(m, e->s, e->pos);
}

static int index_fits(const carve_index *ix, size_t size) {
    for (unsigned fl = 0; fl < CARVE_FL_COUNT; fl++)
        for (unsigned sl = 0; sl < CARVE_SL_COUNT; sl++)
            for (const carve_block *b = ix->heads[fl][sl]; b; b = b->fnext)
                if (b->size >= size)
                    return 1;
    return 0;
}

unsigned em_check_oom(em_model *m, size_t size, carve_stream s, const char *why) {
    carve_arena *a = m->a;
    size_t rs = rounded(size);
    unsigned cls = 0;
    carve_pool *p = NULL;
    for (carve_pool *q = carve_pools_first(a); q; q = q->next_all)
        if (q->stream == s)
            p = q;
    unsigned pc = rs <= a->small_max ? CARVE_CLASS_SMALL : CARVE_CLASS_LARGE;
    if (p) {
        carve_spin_lock(&p->lock);
        if (index_fits(&p->index[pc], rs) || (pc == CARVE_CLASS_SMALL && index_fits(&p->index[CARVE_CLASS_LARGE], rs)))
            cls |= EM_OOM_INDEX;
        carve_spin_unlock(&p->lock);
    }
    if (a->vmm) {
        pthread_mutex_lock(&m->mu);
        size_t touched = 0;
        uintptr_t last = UINTPTR_MAX; /* the last granule counted */
        for (size_t i = 0; i < m->nlive; i++) {
            uintptr_t g = m->live[i].addr / G, e = (m->live[i].addr + m->live[i].size - 1) / G, lo, hi;
            /* with the whole of every mapping larger than a granule it touches
             * (engine/maps.h: the driver unmaps whole mappings only) */
            if (carve_maps_find(&a->maps, g * G, &lo, &hi, NULL))
                g = lo / G;
            if (carve_maps_find(&a->maps, e * G, &lo, &hi, NULL))
                e = hi / G - 1;
            if (last != UINTPTR_MAX && g <= last)
                g = last + 1;
            if (g <= e) {
                touched += e - g + 1;
                last = e;
            }
        }
        pthread_mutex_unlock(&m->mu);
        size_t need = (rs + G - 1) / G;
        if (need <= a->limit / G && touched <= a->limit / G - need && !cls)
            cls |= strstr(why, "address space") ? EM_OOM_SPACE : EM_OOM_OTHER;
        return cls;
    }
    size_t need = pc == CARVE_CLASS_SMALL ? (size_t)CARVE_SMALL_SPAN : (rs + G - 1) / G * G;
    if (p)
        carve_spin_lock(&p->lock);
    carve_mutex_lock(&a->heap.lock);
    pthread_mutex_lock(&m->mu);
    for (unsigned fl = 0; fl < CARVE_FL_COUNT; fl++)
        for (unsigned sl = 0; sl < CARVE_SL_COUNT; sl++)
            for (const carve_block *r = a->heap.index.heads[fl][sl]; r; r = r->fnext)
                if (r->size >= need && range_open_to(m, r, s))
                    cls |= EM_OOM_HEAP;
    for (const carve_block *span = p ? p->spans : NULL; span; span = span->fnext) {
        const carve_block *last = span->u.r.last, *n = span->next;
        size_t tail = last && last->state == CARVE_B_FREE ? last->size : 0;
        if (span->cls == pc && tail < rs && n && n->state == CARVE_B_FREE && range_open_to(m, n, s) &&
            n->size >= (rs - tail + G - 1) / G * G)
            cls |= EM_OOM_EXTEND;
    }
    size_t reserved = CARVE_LOAD(&a->heap.reserved) + CARVE_LOAD(&a->heap.inflight);
    if (a->growth ? reserved <= a->limit && a->limit - reserved >= need
                  : a->heap.nsegs == 0 && a->initial >= need)
        cls |= EM_OOM_GROW;
    pthread_mutex_unlock(&m->mu);
    carve_mutex_unlock(&a->heap.lock);
    if (p)
        carve_spin_unlock(&p->lock);
    return cls;
}

const char *em_oom_name(unsigned cls) {
    static const char *const names[] = {"a free block of the stream's pool fits (the search gave up)",
                                        "room under the limit but no address space in one piece",
                                        "a free heap range the stream may use fits",
                                        "a span of the stream could have grown",
                                        "room under the limit to reserve a segment",
                                        "the granules fit under the limit"};
    for (unsigned i = 0; i < 6; i++)
        if (cls & (1u << i))
            return names[i];
    return "legitimate";
}
