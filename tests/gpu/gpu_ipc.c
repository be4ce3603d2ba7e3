/*
 * gpu_ipc.c — two processes share carved buffers: the test forks before
 * either touches CUDA; the parent carves and exports, the child imports, and
 * each checks the other's writes.
 *
 * For each mode (virtual-memory, the default on GPUs that support it, where
 * a buffer goes across as one file descriptor per 2 MiB granule; and
 * segments, where it goes as a cudaIpcMemHandle_t of its cudaMalloc segment)
 * the parent fills a buffer that starts inside a granule and spans three,
 * and sends its description (and descriptors, with SCM_RIGHTS over a Unix
 * socket) to the child. The child maps it, verifies the parent's pattern,
 * writes its own and says so; the parent verifies the child's pattern,
 * writes a third and the child verifies that. In segments mode a second
 * buffer of the same segment goes across too, so the child maps the segment
 * once for both. Every exchange happens after the writer synchronized its
 * stream. Then the refusals: ipc=0 in virtual-memory mode, an interior
 * pointer. The leak check covers the exporter's device memory per case
 * (the child's own context is made before the first case).
 *
 * Also printed (information): cuMemCreate + cuMemRelease of a granule with
 * and without a file-descriptor handle type, what ipc=auto costs on every
 * mapping.
 */
#include <cuda.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

enum { OP_READY = 1, OP_IMPORT, OP_CHECK, OP_CLOSE, OP_BYE, MAX_FDS = 32, SLOTS = 4 };

typedef struct msg {
    int op;
    int slot;                /* which of the child's mappings */
    carve_ipc_desc desc;     /* OP_IMPORT */
    uint64_t expect, write;  /* pattern ids to verify, then to write (0: none) */
    uint64_t bytes;
    unsigned long long mismatches; /* in the reply */
    int status;              /* in the reply: a carve_status */
} msg;

static int send_msg(int sock, const msg *m, const int *fds, int nfds) {
    struct iovec io = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr h = {.msg_iov = &io, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        h.msg_control = u.buf;
        h.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    return sendmsg(sock, &h, 0) == (ssize_t)sizeof(*m) ? 0 : -1;
}

/* 0 with the message (and up to MAX_FDS descriptors, *nfds of them), -1 at
 * the end of the stream or on an error. */
static int recv_msg(int sock, msg *m, int *fds, int *nfds) {
    struct iovec io = {.iov_base = m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr h = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = recvmsg(sock, &h, MSG_WAITALL);
    if (n != (ssize_t)sizeof(*m))
        return -1;
    if (nfds)
        *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && fds && nfds) {
            *nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)*nfds);
        }
    return 0;
}

/* ---- the child: imports, verifies, writes ---- */

static int importer(int sock) {
    gpu_start("gpu_ipc (importing process)", 1);
    cudaStream_t s = gpu_stream_new();
    gpu_counter c = gpu_counter_of(0, 0);
    carve_ipc_mapping *maps[SLOTS] = {0};
    void *ptrs[SLOTS] = {0};
    msg m = {.op = OP_READY};
    send_msg(sock, &m, NULL, 0);
    int fds[MAX_FDS], nfds = 0;
    while (recv_msg(sock, &m, fds, &nfds) == 0 && m.op != OP_BYE) {
        int k = m.slot >= 0 && m.slot < SLOTS ? m.slot : 0;
        m.status = CARVE_OK;
        m.mismatches = 0;
        if (m.op == OP_IMPORT) {
            CHECK(nfds == (int)m.desc.num_fds);
            m.status = carve_ipc_import(&m.desc, fds, 0, &maps[k], &ptrs[k]);
            CHECK_OK(NULL, m.status);
            for (int i = 0; i < nfds; i++) /* the mapping keeps what it needs */
                close(fds[i]);
        } else if (m.op == OP_CLOSE) {
            m.status = carve_ipc_close(maps[k]);
            maps[k] = NULL;
            ptrs[k] = NULL;
        }
        if ((m.op == OP_IMPORT || m.op == OP_CHECK) && m.status == CARVE_OK && ptrs[k]) {
            if (m.expect)
                m.mismatches = gpu_mismatches(c, ptrs[k], m.bytes, m.expect, s);
            if (m.write) {
                gpu_fill(ptrs[k], m.bytes, m.write, s);
                CUDA_CHECK(cudaStreamSynchronize(s));
            }
        }
        send_msg(sock, &m, NULL, 0);
    }
    for (int k = 0; k < SLOTS; k++)
        CHECK_OK(NULL, carve_ipc_close(maps[k]));
    gpu_stream_free(s);
    return gpu_finish();
}

/* ---- the parent: carves, exports, checks ---- */

static int sock;
static cudaStream_t stream;

static msg ask(msg m, const int *fds, int nfds) {
    if (send_msg(sock, &m, fds, nfds) != 0 || recv_msg(sock, &m, NULL, NULL) != 0) {
        fprintf(stderr, "FATAL: the importing process is gone\n");
        exit(1);
    }
    return m;
}

/* Export p (bytes long, holding pattern id) into the child's slot, and
 * check the three writes: ours seen there, theirs here, ours again there. */
static void share(carve_arena *a, void *p, size_t bytes, uint64_t id, int slot, uint32_t kind) {
    carve_ipc_desc d;
    int *fds = NULL;
    CHECK_OK(a, carve_ipc_export(a, p, &d, &fds));
    CHECK(d.magic == CARVE_IPC_MAGIC && d.kind == kind && d.size == bytes && d.device == 0);
    if (kind == CARVE_IPC_FDS && d.piece_bytes) { /* descriptors of one size: granules, or one larger mapping */
        size_t want = (d.offset + bytes + d.piece_bytes - 1) / d.piece_bytes;
        CHECK(d.num_fds == want && fds != NULL && d.offset < d.piece_bytes && d.piece_bytes % CARVE_SEGMENT_GRANULE == 0);
    } else if (kind == CARVE_IPC_FDS) { /* mappings of different sizes (sizes in runs in cuda_handle) */
        CHECK(d.num_fds >= 2 && fds != NULL);
    } else {
        CHECK(d.num_fds == 0 && fds == NULL && d.offset + bytes <= d.piece_bytes);
    }
    printf("  slot %d: %zu bytes as %s, offset %llu, %u descriptors\n", slot, bytes,
           kind == CARVE_IPC_FDS ? "file descriptors" : "a cudaIpcMemHandle_t", (unsigned long long)d.offset,
           d.num_fds);
    if (d.num_fds > MAX_FDS)
        exit(1);
    gpu_fill(p, bytes, id, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    msg m = {.op = OP_IMPORT, .slot = slot, .desc = d, .expect = id, .write = id + 1, .bytes = bytes};
    m = ask(m, fds, (int)d.num_fds);
    carve_ipc_fds_close(fds, d.num_fds);
    CHECK(m.status == CARVE_OK && m.mismatches == 0);
    gpu_counter c = gpu_counter_of(0, 0);
    unsigned long long theirs = gpu_mismatches(c, p, bytes, id + 1, stream);
    gpu_fill(p, bytes, id + 2, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    msg m2 = {.op = OP_CHECK, .slot = slot, .expect = id + 2, .bytes = bytes};
    m2 = ask(m2, NULL, 0);
    printf("  slot %d: the importer saw our pattern with %llu mismatches; we saw its with %llu; it saw our "
           "second with %llu\n", slot, m.mismatches, theirs, m2.mismatches);
    CHECK(theirs == 0 && m2.status == CARVE_OK && m2.mismatches == 0);
}

static void unshare(int slot) {
    msg m = {.op = OP_CLOSE, .slot = slot};
    m = ask(m, NULL, 0);
    CHECK(m.status == CARVE_OK);
}

static void case_default_mode(void) {
    carve_arena *a = gpu_arena_conf("growth=1", "ipc-default");
    carve_config c;
    CHECK_OK(a, carve_arena_get_config(a, &c));
    printf("  default arena: %s mode, ipc %d\n", c.vmm ? "virtual-memory" : "segments", c.ipc);
    CHECK(c.ipc == 1);
    void *lead = NULL, *p = NULL;
    const size_t bytes = 5 * MiB + 100;
    CHECK_OK(a, carve_alloc(a, 300 * 1024, stream, &lead));
    CHECK_OK(a, carve_alloc(a, bytes, stream, &p));
    share(a, p, bytes, 1000, 0, c.vmm ? CARVE_IPC_FDS : CARVE_IPC_CUDA);
    unshare(0);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, lead));
    carve_arena_destroy(a);
}

static void case_vmm(void) {
    carve_arena *a = gpu_arena_conf("vmm=1,ipc=1", "ipc-vmm");
    void *lead = NULL, *p = NULL, *q = NULL;
    const size_t bytes = 5 * MiB + 100;
    CHECK_OK(a, carve_alloc(a, 300 * 1024, stream, &lead));
    CHECK_OK(a, carve_alloc(a, bytes, stream, &p));
    CHECK_OK(a, carve_alloc(a, 64 * 1024, stream, &q)); /* shares p's last granule */
    share(a, p, bytes, 2000, 0, CARVE_IPC_FDS);
    share(a, q, 64 * 1024, 2100, 1, CARVE_IPC_FDS);
    unshare(0);
    unshare(1);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, q));
    CHECK_OK(a, carve_free(a, lead));
    carve_arena_destroy(a);
}

/* One stream: untouched room comes in as mappings larger than a granule
 * for what a request covers whole (engine/maps.h). A buffer inside a larger mapping goes as
 * one descriptor of that mapping's size, at its offset in it; one across a
 * larger mapping and a granule as two descriptors of different sizes; the
 * importer maps each allocation whole. */
static void case_vmm_larger_mappings(void) {
    carve_arena *a = gpu_arena_conf("vmm=1,ipc=1", "ipc-vmm-larger");
    void *p = NULL, *x = NULL, *y = NULL;
    const size_t bytes = 5 * MiB;
    CHECK_OK(a, carve_alloc(a, bytes, stream, &p)); /* 4 MiB whole: one mapping; a granule in part */
    share(a, p, bytes, 4000, 0, CARVE_IPC_FDS);
    unshare(0);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_alloc(a, 1 * MiB, stream, &x));
    CHECK_OK(a, carve_alloc(a, 3 * MiB, stream, &y)); /* inside the 4 MiB mapping, 1 MiB into it */
    CHECK(x == p && (char *)y == (char *)p + MiB);
    carve_ipc_desc d;
    int *fds = NULL;
    CHECK_OK(a, carve_ipc_export(a, y, &d, &fds));
    CHECK(d.num_fds == 1 && d.piece_bytes == 4 * MiB && d.offset == MiB);
    carve_ipc_fds_close(fds, d.num_fds);
    share(a, y, 3 * MiB, 4100, 1, CARVE_IPC_FDS);
    unshare(1);
    CHECK_OK(a, carve_free(a, x));
    CHECK_OK(a, carve_free(a, y));
    carve_arena_destroy(a);
}

static void case_segments(void) {
    carve_arena *a = gpu_arena_conf("vmm=0", "ipc-segments");
    void *p = NULL, *q = NULL;
    CHECK_OK(a, carve_alloc(a, 3 * MiB, stream, &p));
    CHECK_OK(a, carve_alloc(a, 3 * MiB, stream, &q)); /* the same segment: mapped once there */
    share(a, p, 3 * MiB, 3000, 0, CARVE_IPC_CUDA);
    share(a, q, 3 * MiB, 3100, 1, CARVE_IPC_CUDA);
    unshare(0);
    unshare(1);
    CHECK_OK(a, carve_free(a, p));
    CHECK_OK(a, carve_free(a, q));
    carve_arena_destroy(a);
}

static void case_refusals(void) {
    carve_arena *a = gpu_arena_conf("vmm=1,ipc=0", "ipc-off");
    void *p = NULL;
    CHECK_OK(a, carve_alloc(a, 1 * MiB, stream, &p));
    carve_ipc_desc d;
    int *fds = (int *)1;
    CHECK_ST(a, carve_ipc_export(a, p, &d, &fds), CARVE_ERR_INVALID);
    CHECK(fds == NULL && strstr(carve_last_error(a), "ipc=0") != NULL);
    CHECK_ST(a, carve_ipc_export(a, (char *)p + 256, &d, &fds), CARVE_ERR_BAD_POINTER);
    CHECK_OK(a, carve_free(a, p));
    carve_arena_destroy(a);
    /* What a file-descriptor handle costs per granule. */
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    enum cudaDriverEntryPointQueryResult q;
    void *f1 = NULL, *f2 = NULL;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", &f1, 12000, cudaEnableDefault, &q));
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemRelease", &f2, 12000, cudaEnableDefault, &q));
    memcpy(&create, &f1, sizeof(f1));
    memcpy(&release, &f2, sizeof(f2));
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    int reps = (int)gpu_scale(200, 20);
    for (int fd = 0; fd < 2; fd++) {
        prop.requestedHandleTypes = fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
        double t0 = gpu_now();
        for (int r = 0; r < reps; r++) {
            CUmemGenericAllocationHandle h;
            CHECK(create(&h, CARVE_SEGMENT_GRANULE, &prop, 0) == CUDA_SUCCESS);
            CHECK(release(h) == CUDA_SUCCESS);
        }
        printf("  cuMemCreate + cuMemRelease of 2 MiB, %s: %.1f us\n",
               fd ? "with a file-descriptor handle" : "plain", (gpu_now() - t0) / reps * 1e6);
    }
}

int main(void) {
    unsetenv("CARVE_CONF");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        return 1;
    }
    pid_t pid = fork(); /* before anything touches CUDA */
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        close(sv[0]);
        int rc = importer(sv[1]);
        close(sv[1]);
        _exit(rc);
    }
    close(sv[1]);
    sock = sv[0];
    gpu_start("gpu_ipc", 1); /* exits 77 without a device; the child sees the socket close */
    msg m;
    if (recv_msg(sock, &m, NULL, NULL) != 0 || m.op != OP_READY) {
        fprintf(stderr, "FATAL: the importing process did not start\n");
        return 1;
    }
    stream = gpu_stream_new();
    GPU_CASE(case_default_mode);
    GPU_CASE(case_vmm);
    GPU_CASE(case_vmm_larger_mappings);
    GPU_CASE(case_segments);
    GPU_CASE(case_refusals);
    m = (msg){.op = OP_BYE};
    send_msg(sock, &m, NULL, 0);
    int wst = 0;
    CHECK(waitpid(pid, &wst, 0) == pid);
    printf("  importing process: %s %d\n", WIFEXITED(wst) ? "exit" : "signal",
           WIFEXITED(wst) ? WEXITSTATUS(wst) : WTERMSIG(wst));
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    gpu_stream_free(stream);
    close(sock);
    return gpu_finish();
}
