/*
 * net_limit: the least work that net.stream and net.pingpong can do on
 * this machine. Nothing but the syscalls benchlab's measured loops make,
 * with the same sizes, flags and socket options; no histogram, no
 * per-iteration clock, no error reporting beyond exiting. Built by the
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
 *                    timed once, so the per-iteration clock reads benchlab
 *                    makes for its histogram are overhead against this.
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
 *   net_limit pp-client tcp|udp PORT SIZE NODELAY SECONDS|Nx -> "rtt_half_us iterations"
 *     (Nx, e.g. 20000x: exactly N round trips instead of a duration)
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

static int stream_recv(int port, size_t msg) {
    int s = tcp_server(port);
    env_timeouts(s);
    int rb = 0;
    socklen_t l = sizeof rb;
    if (getsockopt(s, SOL_SOCKET, SO_RCVBUF, &rb, &l) < 0) die("getsockopt");
    size_t rsize = (size_t)rb > msg ? (size_t)rb : msg;
    char *buf = page_buf(rsize);
    unsigned long long bytes = 0;
    double t0 = now_s();
    for (;;) {
        ssize_t n = sys_recv(s, buf, rsize, 0);
        if (n < 0) die("recv");
        if (n == 0) break;
        bytes += n;
    }
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
    while (!stopped()) send_all(s, buf, msg);
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

static int pp_server(int tcp, int port, size_t size, int nodelay) {
    char *req = page_buf(size ? size : 1), *rsp = page_buf(size ? size : 1);
    if (tcp) {
        int s = tcp_server(port);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
        env_timeouts(s);
        while (recv_exact(s, req, size)) send_all(s, rsp, size);
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
    for (;;) {
        ssize_t n = sys_recv(s, req, size, MSG_TRUNC);
        if (n < 0) die("recv");
        if ((size_t)n != size) break; /* the end marker: a different length */
        if (sys_send(s, rsp, size, 0) < 0) die("send");
    }
    close(s);
    return 0;
}

/* secs > 0: run that long; iters > 0 instead: exactly that many round trips. */
static int pp_client(int tcp, int port, size_t size, int nodelay, double secs,
                     unsigned long long max_iters) {
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
    if (max_iters == 0) start_stopper(&secs);
    else max_iters--; /* the loop tests before counting */
    double t0 = now_s();
    if (tcp) {
        while (!stopped()) {
            if (max_iters && iters > max_iters) break;
            send_all(s, req, size);
            if (!recv_exact(s, rsp, size)) die("server closed");
            iters++;
        }
    } else {
        while (!stopped()) {
            if (max_iters && iters > max_iters) break;
            if (sys_send(s, req, size, 0) < 0) die("send");
            ssize_t n = sys_recv(s, rsp, size, MSG_TRUNC);
            if (n < 0) die("recv (a lost datagram?)");
            iters++;
        }
    }
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
                         strchr(argv[6], 'x') ? strtoull(argv[6], NULL, 10) : 0);
    fprintf(stderr,
            "usage: net_limit stream-recv PORT MESSAGE_SIZE | stream-send PORT MESSAGE_SIZE SECONDS\n"
            "       | pp-server tcp|udp PORT SIZE NODELAY | pp-client tcp|udp PORT SIZE NODELAY SECONDS|Nx\n");
    return 2;
}
