/*
 * net_limit: the least work that net.stream and net.pingpong can do on
 * this machine. Nothing but the syscalls benchlab's measured loops make,
 * with the same sizes, flags and socket options; no histogram, no
 * per-iteration clock (but in a timed ping-pong, which needs one: see
 * "ping-pong" below), no error reporting beyond exiting. Built by the
 * bench scripts with the system compiler; a benchlab figure divided by
 * this program's figure is benchlab's own overhead.
 *
 * What it mirrors in crates/wl-net (keep in step when those loops change):
 *   stream sender    send(fd, buf, message_size, MSG_NOSIGNAL) back to back
 *                    from one page-aligned, pre-written buffer; at the end
 *                    shutdown(SHUT_WR) and recv() until EOF (netperf's drain).
 *   stream receiver  recv(fd, buf, receive_size, 0), receive_size = SO_RCVBUF
 *                    as read back after accept, at least message_size;
 *                    throughput = bytes from the first recv() to EOF over
 *                    that interval (benchlab without warm-up: the same).
 *   ping-pong        TCP: send(MSG_NOSIGNAL) the whole message, then
 *                    recv(MSG_WAITALL) until the whole reply is in; UDP on
 *                    connected sockets: send(), recv(MSG_TRUNC). The server
 *                    does the mirror image. TCP_NODELAY as asked.
 *                    RTT/2 = loop time / iterations / 2: the whole loop is
 *                    timed once. That is the limit of a round-trip *rate*
 *                    (net.rr). A ping-pong's product is the distribution
 *                    of single round trips (percentiles, as sfnt-pingpong
 *                    gives), which no program gets without reading the
 *                    clock around each one: `timed` adds that least work,
 *                    two clock_gettime(CLOCK_MONOTONIC) calls and one
 *                    store of (t1 - t0) / 2 into a preallocated array
 *                    (sfnt's results[i]), and is net.pingpong's limit.
 *   timeouts         SO_RCVTIMEO / SO_SNDTIMEO are left unset here; the loop
 *                    stops on a flag a sleeping thread sets (benchlab: its
 *                    timer thread, a Relaxed load per iteration).
 *                    NET_LIMIT_TIMEOUT_MS=N sets both to N ms on every data
 *                    socket after connect/accept (benchlab: 200 ms, 100 ms
 *                    receive on a UDP ping-pong client), to measure what a
 *                    socket timeout costs each blocking wait (a kernel
 *                    timer armed and cancelled) against the same program
 *                    without: an experiment, not the limit (a wait longer
 *                    than N ms then ends the program with an error).
 *
 * Usage (IPv4 loopback; the server prints nothing until its peer ends):
 *   net_limit stream-recv PORT MESSAGE_SIZE        -> "mbps bytes seconds"
 *   net_limit stream-send PORT MESSAGE_SIZE SECONDS
 *   net_limit pp-server tcp|udp PORT SIZE NODELAY
 *   net_limit pp-client tcp|udp PORT SIZE NODELAY SECONDS|Nx [timed] -> "rtt_half_us iterations"
 *     (Nx, e.g. 20000x: exactly N round trips instead of a duration;
 *     timed: each round trip timed and kept, as above)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop_flag;

/* Each measured loop is a function of its own, never inlined, so that
 * bench/cost can count the loop's instructions apart from the rest of the
 * run (set-up, the stopper thread, the end), as it does benchlab's loop
 * functions: loop against loop, and the whole run against the whole run.
 * One call per run, so it costs the timing benches nothing. */
#define LOOP __attribute__((noinline))

static void die(const char *what) {
    perror(what);
    exit(1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *stopper(void *arg) {
    double secs = *(double *)arg;
    struct timespec t = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    while (nanosleep(&t, &t) != 0) {
    }
    atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
    return NULL;
}

static void start_stopper(double *secs) {
    pthread_t t;
    if (pthread_create(&t, NULL, stopper, secs) != 0) die("pthread_create");
    pthread_detach(t);
}

static inline int stopped(void) {
    return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

/* Page-aligned and written, as benchlab's PageBuf. */
static char *page_buf(size_t n) {
    char *p = mmap(NULL, n + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    memset(p, 0xA5, n + 4096);
    return p;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int tcp_server(int port) {
    struct sockaddr_in a = loopback(port);
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (l < 0) die("socket");
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(l, 1) < 0) die("listen");
    /* accept() honours SO_RCVTIMEO: give up if no client comes (a bench
     * whose client failed to start must not hang). */
    struct timeval tv = {30, 0};
    setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int s = accept(l, NULL, NULL);
    if (s < 0) die("accept");
    close(l);
    return s;
}

static int tcp_client(int port) {
    struct sockaddr_in a = loopback(port);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    /* The server may not be listening yet. */
    for (int i = 0; connect(s, (struct sockaddr *)&a, sizeof a) < 0; i++) {
        if (i > 500) die("connect");
        close(s);
        usleep(10000);
        s = socket(AF_INET, SOCK_STREAM, 0);
    }
    return s;
}

/* send() and recv() as raw system calls: glibc's wrappers are pthread
 * cancellation points and, in a process with a second thread (the stopper),
 * bracket each call with two atomic read-modify-writes. benchlab avoids
 * them the same way (crates/wl-net/src/common.rs), so the limit does too. */
static inline ssize_t sys_send(int fd, const void *buf, size_t len, int flags) {
    return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t sys_recv(int fd, void *buf, size_t len, int flags) {
    return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static void send_all(int fd, const char *buf, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = sys_send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0) die("send");
        off += n;
    }
}

static int recv_exact(int fd, char *buf, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = sys_recv(fd, buf + off, len - off, MSG_WAITALL);
        if (n < 0) die("recv");
        if (n == 0) return 0;
        off += n;
    }
    return 1;
}

/* NET_LIMIT_TIMEOUT_MS (see the top): benchlab's socket timeouts, for an
 * experiment only. */
static void env_timeouts(int s) {
    const char *ms = getenv("NET_LIMIT_TIMEOUT_MS");
    if (!ms || !*ms) return;
    long v = strtol(ms, NULL, 10);
    struct timeval tv = {v / 1000, (v % 1000) * 1000};
    if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
        die("setsockopt(NET_LIMIT_TIMEOUT_MS)");
}

static LOOP unsigned long long stream_recv_loop(int s, char *buf, size_t rsize) {
    unsigned long long bytes = 0;
    for (;;) {
        ssize_t n = sys_recv(s, buf, rsize, 0);
        if (n < 0) die("recv");
        if (n == 0) break;
        bytes += n;
    }
    return bytes;
}

static LOOP void stream_send_loop(int s, const char *buf, size_t msg) {
    while (!stopped()) send_all(s, buf, msg);
}

static int stream_recv(int port, size_t msg) {
    int s = tcp_server(port);
    env_timeouts(s);
    int rb = 0;
    socklen_t l = sizeof rb;
    if (getsockopt(s, SOL_SOCKET, SO_RCVBUF, &rb, &l) < 0) die("getsockopt");
    size_t rsize = (size_t)rb > msg ? (size_t)rb : msg;
    char *buf = page_buf(rsize);
    double t0 = now_s();
    unsigned long long bytes = stream_recv_loop(s, buf, rsize);
    double el = now_s() - t0;
    close(s);
    printf("%.3f %llu %.6f\n", bytes * 8.0 / 1e6 / el, bytes, el);
    return 0;
}

static int stream_send(int port, size_t msg, double secs) {
    int s = tcp_client(port);
    env_timeouts(s);
    char *buf = page_buf(msg);
    start_stopper(&secs);
    stream_send_loop(s, buf, msg);
    shutdown(s, SHUT_WR);
    char scratch[4096];
    while (recv(s, scratch, sizeof scratch, 0) > 0) {
    }
    close(s);
    return 0;
}

static int udp_socket(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) die("socket");
    return s;
}

static LOOP void pp_server_tcp_loop(int s, char *req, const char *rsp, size_t size) {
    while (recv_exact(s, req, size)) send_all(s, rsp, size);
}

static LOOP void pp_server_udp_loop(int s, char *req, const char *rsp, size_t size) {
    for (;;) {
        ssize_t n = sys_recv(s, req, size, MSG_TRUNC);
        if (n < 0) die("recv");
        if ((size_t)n != size) break; /* the end marker: a different length */
        if (sys_send(s, rsp, size, 0) < 0) die("send");
    }
}

static int pp_server(int tcp, int port, size_t size, int nodelay) {
    char *req = page_buf(size ? size : 1), *rsp = page_buf(size ? size : 1);
    if (tcp) {
        int s = tcp_server(port);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
        env_timeouts(s);
        pp_server_tcp_loop(s, req, rsp, size);
        close(s);
        return 0;
    }
    int s = udp_socket(), one = 1;
    struct sockaddr_in a = loopback(port), peer;
    socklen_t pl = sizeof peer;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    struct timeval tv = {30, 0}, off = {0, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* As benchlab: learn the client from its first datagram, connect. */
    if (recvfrom(s, req, size, MSG_PEEK, (struct sockaddr *)&peer, &pl) < 0) die("recvfrom");
    if (connect(s, (struct sockaddr *)&peer, pl) < 0) die("connect");
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &off, sizeof off);
    env_timeouts(s);
    pp_server_udp_loop(s, req, rsp, size);
    close(s);
    return 0;
}

/* max_iters > 0: stop after it (see pp_client); else on the stopper's flag. */
static LOOP unsigned long long pp_client_tcp_loop(int s, const char *req, char *rsp, size_t size,
                                                  unsigned long long max_iters) {
    unsigned long long iters = 0;
    while (!stopped()) {
        if (max_iters && iters > max_iters) break;
        send_all(s, req, size);
        if (!recv_exact(s, rsp, size)) die("server closed");
        iters++;
    }
    return iters;
}

static LOOP unsigned long long pp_client_udp_loop(int s, const char *req, char *rsp, size_t size,
                                                  unsigned long long max_iters) {
    unsigned long long iters = 0;
    while (!stopped()) {
        if (max_iters && iters > max_iters) break;
        if (sys_send(s, req, size, 0) < 0) die("send");
        ssize_t n = sys_recv(s, rsp, size, MSG_TRUNC);
        if (n < 0) die("recv (a lost datagram?)");
        iters++;
    }
    return iters;
}

/* The timed loops keep RTT/2 of each round trip in `kept`, a power of
 * two long (a time-bounded run wraps, overwriting the oldest). */
static inline unsigned long long mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static LOOP unsigned long long pp_client_tcp_timed_loop(int s, const char *req, char *rsp,
                                                        size_t size, unsigned long long max_iters,
                                                        unsigned long long *kept, size_t mask) {
    unsigned long long iters = 0;
    while (!stopped()) {
        if (max_iters && iters > max_iters) break;
        unsigned long long t0 = mono_ns();
        send_all(s, req, size);
        if (!recv_exact(s, rsp, size)) die("server closed");
        kept[iters & mask] = (mono_ns() - t0) / 2;
        iters++;
    }
    return iters;
}

static LOOP unsigned long long pp_client_udp_timed_loop(int s, const char *req, char *rsp,
                                                        size_t size, unsigned long long max_iters,
                                                        unsigned long long *kept, size_t mask) {
    unsigned long long iters = 0;
    while (!stopped()) {
        if (max_iters && iters > max_iters) break;
        unsigned long long t0 = mono_ns();
        if (sys_send(s, req, size, 0) < 0) die("send");
        ssize_t n = sys_recv(s, rsp, size, MSG_TRUNC);
        if (n < 0) die("recv (a lost datagram?)");
        kept[iters & mask] = (mono_ns() - t0) / 2;
        iters++;
    }
    return iters;
}

/* secs > 0: run that long; iters > 0 instead: exactly that many round trips. */
static int pp_client(int tcp, int port, size_t size, int nodelay, double secs,
                     unsigned long long max_iters, int timed) {
    char *req = page_buf(size ? size : 1), *rsp = page_buf(size ? size : 1);
    int s;
    if (tcp) {
        s = tcp_client(port);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
        env_timeouts(s);
    } else {
        struct sockaddr_in a = loopback(port);
        s = udp_socket();
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
        /* A lost datagram must not hang the bench. */
        struct timeval tv = {1, 0};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        env_timeouts(s);
    }
    unsigned long long iters = 0;
    /* Touched before the loop, so no page fault lands in it. */
    size_t kept_len = 1u << 20;
    unsigned long long *kept = NULL;
    if (timed) {
        kept = (unsigned long long *)page_buf(kept_len * sizeof *kept);
        memset(kept, 0, kept_len * sizeof *kept);
    }
    if (max_iters == 0) start_stopper(&secs);
    else max_iters--; /* the loop tests before counting */
    double t0 = now_s();
    if (tcp && timed)
        iters = pp_client_tcp_timed_loop(s, req, rsp, size, max_iters, kept, kept_len - 1);
    else if (timed)
        iters = pp_client_udp_timed_loop(s, req, rsp, size, max_iters, kept, kept_len - 1);
    else if (tcp)
        iters = pp_client_tcp_loop(s, req, rsp, size, max_iters);
    else
        iters = pp_client_udp_loop(s, req, rsp, size, max_iters);
    double el = now_s() - t0;
    if (tcp) {
        shutdown(s, SHUT_WR);
        char scratch[64];
        while (recv(s, scratch, sizeof scratch, 0) > 0) {
        }
    } else {
        /* End marker: a length data never has (as benchlab). */
        char m[1] = {0};
        for (int i = 0; i < 3; i++) send(s, m, size ? 0 : 1, 0);
    }
    close(s);
    /* The first round trip kept, so that the stores are the program's
     * output and no compiler drops them. */
    if (timed)
        printf("%.4f %llu %llu\n", el / iters / 2 * 1e6, iters, kept[0]);
    else
        printf("%.4f %llu\n", el / iters / 2 * 1e6, iters);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "stream-recv"))
        return stream_recv(atoi(argv[2]), strtoul(argv[3], NULL, 10));
    if (argc >= 5 && !strcmp(argv[1], "stream-send"))
        return stream_send(atoi(argv[2]), strtoul(argv[3], NULL, 10), atof(argv[4]));
    if (argc >= 6 && !strcmp(argv[1], "pp-server"))
        return pp_server(!strcmp(argv[2], "tcp"), atoi(argv[3]), strtoul(argv[4], NULL, 10),
                         atoi(argv[5]));
    if (argc >= 7 && !strcmp(argv[1], "pp-client"))
        return pp_client(!strcmp(argv[2], "tcp"), atoi(argv[3]), strtoul(argv[4], NULL, 10),
                         atoi(argv[5]), atof(argv[6]),
                         strchr(argv[6], 'x') ? strtoull(argv[6], NULL, 10) : 0,
                         argc >= 8 && !strcmp(argv[7], "timed"));
    fprintf(stderr,
            "usage: net_limit stream-recv PORT MESSAGE_SIZE | stream-send PORT MESSAGE_SIZE SECONDS\n"
            "       | pp-server tcp|udp PORT SIZE NODELAY | pp-client tcp|udp PORT SIZE NODELAY SECONDS|Nx [timed]\n");
    return 2;
}
