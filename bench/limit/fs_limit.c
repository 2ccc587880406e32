/*
 * fs_limit: the least work fs.matrix can do for IOzone's nine
 * read()/write() patterns on this machine. The same opens, flags, untimed
 * fsyncs, buffer alignment and offset sequences as crates/wl-fs/src/io.rs
 * (keep in step when those loops change), and nothing else: no stamping
 * of written records, no check of records read, no error reporting beyond
 * exiting. Built by the bench script with the system compiler; benchlab's
 * KiB/s over this program's is benchlab's own overhead.
 *
 * Per pattern (IOzone without -e/-c: the window is the loop alone; fsync
 * and close follow it untimed):
 *   write           sanity create/ftruncate/close/unlink, creat, close,
 *                   open(O_RDWR[|O_DIRECT]), fsync; timed: write() x n
 *   rewrite         open(O_RDWR), fsync; timed: write() x n
 *   read, reread    open(O_RDONLY), fsync, untimed read()+lseek(0);
 *                   timed: read() x n
 *   random read     open(O_RDWR|O_CREAT), fsync; timed: n x [lseek(perm[i]); read()]
 *   random write    the same with write(); perm = IOzone's srand48(0) swaps
 *   bkwd read       open(O_RDONLY), fsync; timed: lseek(-rec, SEEK_END),
 *                   n x [read(); lseek(-2 rec, SEEK_CUR)] (not after the last);
 *                   run twice, the first reported (as IOzone)
 *   record rewrite  open(O_RDWR|O_CREAT), fsync; timed: n x [write(); lseek(0)]
 *   stride read     open(O_RDONLY), fsync; timed: n x [read(); lseek(next)]
 *                   with IOzone's stride 17 and +1 wrap
 * Rate as IOzone: floor(floor(bytes / seconds) / 1024) KiB/s.
 *
 * Usage: fs_limit PATH FILE_BYTES RECORD_BYTES DIRECT(0|1)
 *   PATH must not exist; it is removed at the end. Prints one line per
 *   pattern: "name kib_s".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* bench/cost builds a copy with -DNOINLINE_PASSES, so that callgrind can
 * give each pattern's pass its own instructions; the timing benches use
 * the plain build. */
#ifdef NOINLINE_PASSES
#define PASS __attribute__((noinline))
#else
#define PASS
#endif

static const char *path;
static size_t rec;
static unsigned long long n;
static int dflag;
static char *buf;

static void die(const char *what) {
    perror(what);
    unlink(path);
    exit(1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int open_fsync(int flags) {
    int fd = open(path, flags | O_CLOEXEC, 0640);
    if (fd < 0) die("open");
    if (fsync(fd) != 0) die("fsync");
    return fd;
}

static void finish(int fd) {
    if (fsync(fd) != 0) die("fsync");
    if (close(fd) != 0) die("close");
}

static inline void rd(int fd) {
    if (read(fd, buf, rec) != (ssize_t)rec) die("read");
}

static inline void wr(int fd) {
    if (write(fd, buf, rec) != (ssize_t)rec) die("write");
}

static inline void sk(int fd, off_t off, int whence) {
    if (lseek(fd, off, whence) < 0) die("lseek");
}

static void report(const char *name, double t0) {
    double el = now_s() - t0;
    double bytes = (double)n * rec;
    printf("%s %.0f\n", name, __builtin_floor(__builtin_floor(bytes / el) / 1024));
}

PASS static double write_pass(void) {
    int f = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0640);
    if (f < 0) die("create");
    if (ftruncate(f, 0) != 0) die("ftruncate");
    close(f);
    unlink(path);
    f = open(path, O_CREAT | O_EXCL | O_WRONLY | O_TRUNC | O_CLOEXEC, 0640);
    if (f < 0) die("creat");
    close(f);
    int fd = open_fsync(O_RDWR | dflag);
    double t0 = now_s();
    for (unsigned long long i = 0; i < n; i++) wr(fd);
    report("write", t0);
    finish(fd);
    return t0;
}

PASS static void rewrite_pass(void) {
    int fd = open_fsync(O_RDWR | dflag);
    double t0 = now_s();
    for (unsigned long long i = 0; i < n; i++) wr(fd);
    report("rewrite", t0);
    finish(fd);
}

PASS static void read_pass(const char *name) {
    int fd = open_fsync(O_RDONLY | dflag);
    rd(fd);
    sk(fd, 0, SEEK_SET);
    double t0 = now_s();
    for (unsigned long long i = 0; i < n; i++) rd(fd);
    report(name, t0);
    finish(fd);
}

static inline void random_pass(const unsigned long long *perm, int write) {
    int fd = open_fsync(O_RDWR | O_CREAT | dflag);
    double t0 = now_s();
    if (write) {
        for (unsigned long long i = 0; i < n; i++) {
            sk(fd, (off_t)(perm[i] * rec), SEEK_SET);
            wr(fd);
        }
    } else {
        for (unsigned long long i = 0; i < n; i++) {
            sk(fd, (off_t)(perm[i] * rec), SEEK_SET);
            rd(fd);
        }
    }
    report(write ? "random-write" : "random-read", t0);
    finish(fd);
}

PASS static void random_read_pass(const unsigned long long *perm) { random_pass(perm, 0); }

PASS static void random_write_pass(const unsigned long long *perm) { random_pass(perm, 1); }

PASS static void bkwd_pass(int print) {
    int fd = open_fsync(O_RDONLY | dflag);
    off_t back = -2 * (off_t)rec;
    double t0 = now_s();
    sk(fd, -(off_t)rec, SEEK_END);
    for (unsigned long long i = 0; i < n; i++) {
        rd(fd);
        if (i + 1 < n) sk(fd, back, SEEK_CUR);
    }
    if (print) report("bkwd-read", t0);
    finish(fd);
}

PASS static void record_rewrite_pass(void) {
    int fd = open_fsync(O_RDWR | O_CREAT | dflag);
    double t0 = now_s();
    for (unsigned long long i = 0; i < n; i++) {
        wr(fd);
        sk(fd, 0, SEEK_SET);
    }
    report("record-rewrite", t0);
    finish(fd);
}

PASS static void stride_pass(unsigned long long stride) {
    int fd = open_fsync(O_RDONLY | dflag);
    unsigned long long pos = 0, wrap = 0;
    double t0 = now_s();
    for (unsigned long long i = 0; i < n; i++) {
        rd(fd);
        /* IOzone's test in records: pos + 1 + stride >= n - 1 wraps to +1. */
        if ((long long)(pos + 1 + stride) >= (long long)n - 1) {
            wrap++;
            pos = n <= stride ? 0 : wrap % n;
        } else {
            pos += stride;
        }
        sk(fd, (off_t)(pos * rec), SEEK_SET);
    }
    report("stride-read", t0);
    finish(fd);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fs_limit PATH FILE_BYTES RECORD_BYTES DIRECT(0|1)\n");
        return 2;
    }
    path = argv[1];
    unsigned long long file = strtoull(argv[2], NULL, 10);
    rec = strtoull(argv[3], NULL, 10);
    dflag = atoi(argv[4]) ? O_DIRECT : 0;
    n = rec ? file / rec : 0;
    if (n == 0) {
        fprintf(stderr, "fs_limit: the record is larger than the file\n");
        return 2;
    }
    /* Page-aligned, as benchlab's AlignedBuf (O_DIRECT needs it), and
     * written, so no page maps the zero page. */
    if (posix_memalign((void **)&buf, 4096, rec) != 0) die("posix_memalign");
    memset(buf, 0xA5, rec);
    /* IOzone's permutation: srand48(0), swap(i, lrand48() % n). */
    unsigned long long *perm = malloc(n * sizeof *perm);
    if (!perm) die("malloc");
    for (unsigned long long i = 0; i < n; i++) perm[i] = i;
    srand48(0);
    for (unsigned long long i = 0; i < n; i++) {
        unsigned long long j = (unsigned long long)lrand48() % n, t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    write_pass();
    rewrite_pass();
    read_pass("read");
    read_pass("reread");
    random_read_pass(perm);
    random_write_pass(perm);
    bkwd_pass(1);
    bkwd_pass(0);
    record_rewrite_pass();
    stride_pass(17);
    unlink(path);
    return 0;
}
