/* link.c - the emulated network interfaces: a NIC (a process's own, or one shared by a node's processes in shared memory) and a node's fabric, each two token buckets (transmit, receive) as virtual clocks, waits that sleep */
/*
 * Each direction is a virtual clock: the moment the interface is free again. A send books its
 * transmission (bytes / bandwidth, starting when the previous message has left) and returns at
 * once with that start, which travels with the message as a stamp: the thread goes on (a NIC
 * sends while its host computes; full duplex: it may receive meanwhile). The receiver waits
 * until its own interface has taken the bytes in at its bandwidth, starting no earlier than the
 * sender's start and the end of the previous message it received, and the latency has passed.
 * So a sender is paced by its link as its receivers see it (a server answering N-1 workers
 * serialises their replies on its one interface), and a receiver by its own. A process's every back end,
 * server thread and driver share the one interface: a colocated server shares rank 0's links,
 * as DataParallel's GPU 0 does.
 *
 * What it does not capture: a real network's switch and congestion (each interface is paced
 * alone, so N senders to one receiver are limited by the receiver's interface, as on a
 * non-blocking switch), and hosts without a common clock: stamps are CLOCK_MONOTONIC, shared by
 * every process of one host (network namespaces included); a stamp from another clock is
 * ignored, and the receiver's own interface alone paces the message.
 *
 * Nodes (--nodes, link_set_nodes): the NIC is the node's, one per machine, shared by every process
 * of the node: its two clocks live in a shared-memory segment every process of the node maps
 * (link_share), advanced by compare-and-swap, so the node's ranks queue behind each other on it
 * as a real machine's GPUs do behind its NIC. Messages between processes of one node do not touch
 * it: they take the node's fabric (--intra-link, each process's own port, as each GPU has its own
 * NVLink), or go unpaced without one. Without nodes, every message takes the process's own NIC.
 */
#include "link.h"
#include "../base/clock.h"
#include "../base/err.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

/* An interface's two clocks: clock_now() when each direction is free again. */
typedef struct {
    double tx_free, rx_free;
} LinkClocks;

/* What a node's processes share: the NIC's transmit clock, read and advanced by compare-and-swap
 * (a node's sends are booked in the order they are made, which is the order they leave in), and
 * its receive calendar: the spans it is busy receiving, kept sorted and merged where they touch,
 * under a spin lock. Several processes take their messages in in whatever order their threads get
 * to them, not in the order the messages reached the NIC; a FIFO clock would book a message sent
 * early after one sent later and taken in first, leaving the NIC idle in between, so a message
 * takes the earliest gap of its length from its sender's start on, as a NIC takes packets in as
 * they arrive. */
#define LINK_SPANS 64
typedef struct {
    uint64_t magic;
    uint64_t tx_free;          /* a double's bits */
    unsigned char lock;        /* the calendar's */
    int nspans;
    double span[LINK_SPANS][2]; /* [start, end), sorted, disjoint */
} LinkShared;
#define LINK_SHARED_MAGIC 0x32434e4e49444953ull

static LinkSpec link_spec, link_intra;      /* the NIC; the node's fabric (bytes_per_s 0: unpaced) */
static int link_nodes;                      /* 1: node traffic takes the fabric, not the NIC */
static pthread_mutex_t link_mu = PTHREAD_MUTEX_INITIALIZER;
static LinkClocks link_own, link_fabric;    /* the NIC's when not shared; the fabric port's */
static LinkShared *link_shared;             /* the node's NIC (link_share), or NULL */
static char link_shared_name[96];
static double link_tx_busy, link_rx_busy;   /* seconds this process booked on the NIC each way */

/* The multiplier of a bandwidth unit to bytes per second; 0 for an unknown unit. */
static double link_rate_unit(const char *u) {
    static const struct {
        const char *name;
        double mult;
    } units[] = {{"bit", 1.0 / 8}, {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8}, {"gbit", 1e9 / 8}, {"tbit", 1e12 / 8},
                 {"bps", 1.0 / 8}, {"b/s", 1.0},      {"kb/s", 1e3},     {"mb/s", 1e6},     {"gb/s", 1e9}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(u, units[i].name)) {
            /* "B/s" units are bytes, "b/s" is ambiguous: bits is kbit's family, so B must be upper case */
            if (strchr(units[i].name, '/') && !strchr(u, 'B')) return 0;
            return units[i].mult;
        }
    return 0;
}

static double link_time_unit(const char *u) {
    if (!strcmp(u, "s")) return 1;
    if (!strcmp(u, "ms")) return 1e-3;
    if (!strcmp(u, "us")) return 1e-6;
    if (!strcmp(u, "ns")) return 1e-9;
    return 0;
}

int link_parse(const char *text, LinkSpec *out) {
    memset(out, 0, sizeof *out);
    if (!text || !*text || !strcmp(text, "none")) return RS_OK;
    if (strlen(text) >= sizeof out->text) return rs_error(RS_ERR_INPUT, "--link '%s': too long", text);
    char buf[64], *lat = NULL;
    snprintf(buf, sizeof buf, "%s", text);
    if ((lat = strchr(buf, ','))) *lat++ = 0;
    char *end;
    errno = 0;
    double bw = strtod(buf, &end);
    if (end == buf || errno || !isfinite(bw))
        return rs_error(RS_ERR_INPUT, "--link '%s': the bandwidth must be a number with a unit (1gbit, 100mbit, 125MB/s)", text);
    while (*end == ' ') end++;
    double mult = link_rate_unit(end);
    if (!mult)
        return rs_error(RS_ERR_INPUT, "--link '%s': unknown bandwidth unit '%s' (bit, kbit, mbit, gbit, B/s, KB/s, MB/s, GB/s)",
                        text, end);
    if (!(bw > 0)) return rs_error(RS_ERR_INPUT, "--link '%s': the bandwidth must be above 0", text);
    out->bytes_per_s = bw * mult;
    if (lat) {
        double l = strtod(lat, &end);
        if (end == lat || !isfinite(l))
            return rs_error(RS_ERR_INPUT, "--link '%s': the latency must be a number with a unit (50us, 1ms)", text);
        double tu = link_time_unit(end);
        if (!tu) return rs_error(RS_ERR_INPUT, "--link '%s': unknown latency unit '%s' (s, ms, us, ns)", text, end);
        if (l < 0) return rs_error(RS_ERR_INPUT, "--link '%s': the latency must be >= 0", text);
        out->latency_s = l * tu;
        if (out->latency_s > 10) return rs_error(RS_ERR_INPUT, "--link '%s': a latency over 10 s", text);
    }
    snprintf(out->text, sizeof out->text, "%s", text);
    return RS_OK;
}

void link_set(const LinkSpec *spec) { link_set_nodes(spec, NULL, 0); }

void link_set_nodes(const LinkSpec *nic, const LinkSpec *intra, int nodes) {
    pthread_mutex_lock(&link_mu);
    link_spec = nic ? *nic : (LinkSpec){0};
    link_intra = intra ? *intra : (LinkSpec){0};
    link_nodes = nodes != 0;
    link_own = link_fabric = (LinkClocks){0};
    link_tx_busy = link_rx_busy = 0;
    pthread_mutex_unlock(&link_mu);
}

const LinkSpec *link_get(void) { return &link_spec; }

const LinkSpec *link_get_intra(void) { return &link_intra; }

int link_on(void) { return link_spec.bytes_per_s > 0 || (link_nodes && link_intra.bytes_per_s > 0); }

int link_share(const char *name) {
    link_unshare();
    if (!(link_spec.bytes_per_s > 0)) return RS_OK;
    if (!name || name[0] != '/' || strchr(name + 1, '/') || strlen(name) >= sizeof link_shared_name)
        return rs_error(RS_ERR_INPUT, "link: '%s' is not a shared-memory name", name ? name : "(null)");
    int fd = shm_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return rs_error(RS_ERR_RUNTIME, "link: the node's interface %s: %s", name, strerror(errno));
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(LinkShared)) == 0)
        p = mmap(NULL, sizeof(LinkShared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return rs_error(RS_ERR_RUNTIME, "link: the node's interface %s: %s", name, strerror(e));
    }
    LinkShared *sh = p;
    uint64_t zero = 0;
    /* the first process of the node stamps it; a segment with another magic (not ours) is refused */
    __atomic_compare_exchange_n(&sh->magic, &zero, LINK_SHARED_MAGIC, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&sh->magic, __ATOMIC_ACQUIRE) != LINK_SHARED_MAGIC) {
        munmap(p, sizeof(LinkShared));
        return rs_error(RS_ERR_RUNTIME, "link: %s holds something else than a node's interface", name);
    }
    pthread_mutex_lock(&link_mu);
    link_shared = sh;
    snprintf(link_shared_name, sizeof link_shared_name, "%s", name);
    pthread_mutex_unlock(&link_mu);
    return RS_OK;
}

void link_share_release(void) {
    if (link_shared_name[0]) shm_unlink(link_shared_name); /* the mapping stays */
}

void link_unshare(void) {
    pthread_mutex_lock(&link_mu);
    if (link_shared) munmap(link_shared, sizeof(LinkShared));
    link_shared = NULL;
    link_shared_name[0] = 0;
    pthread_mutex_unlock(&link_mu);
}

/* Sleeps until clock_now() >= t. */
static void link_sleep_until(double t) {
    for (;;) {
        double d = t - clock_now();
        if (d <= 0) return;
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static uint64_t link_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

static double link_double(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* Books seconds on a clock from no earlier than earliest: returns the booking's start, and moves
 * the clock to its end. A shared clock by compare-and-swap, a process's own under link_mu. */
static double link_book_shared(uint64_t *clock, double earliest, double seconds) {
    uint64_t old = __atomic_load_n(clock, __ATOMIC_ACQUIRE);
    for (;;) {
        double free_at = link_double(old), start = free_at > earliest ? free_at : earliest;
        if (__atomic_compare_exchange_n(clock, &old, link_bits(start + seconds), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return start;
    }
}

/* Books seconds in the shared receive calendar from no earlier than earliest: the earliest gap
 * that long; returns its start. */
static double link_book_calendar(LinkShared *sh, double earliest, double seconds) {
    while (__atomic_test_and_set(&sh->lock, __ATOMIC_ACQUIRE))
        ;
    int n = sh->nspans, i = 0;
    double (*sp)[2] = sh->span, s = earliest;
    while (i < n && sp[i][1] <= s) i++; /* spans over before earliest */
    for (; i < n && sp[i][0] < s + seconds; i++) s = sp[i][1] > s ? sp[i][1] : s;
    double e = s + seconds;
    /* insert [s, e) before span i, merging with the spans it touches */
    int at = i;
    if (at > 0 && sp[at - 1][1] >= s) {
        at--;
        if (sp[at][1] < e) sp[at][1] = e;
    } else {
        if (n == LINK_SPANS) { /* full: the two oldest spans become one (their gap is given up) */
            sp[0][1] = sp[1][1];
            memmove(sp[1], sp[2], (size_t)(n - 2) * sizeof sp[0]);
            sh->nspans = --n;
            if (at == 1) { /* [s, e) was that gap: inside the merged span already */
                __atomic_clear(&sh->lock, __ATOMIC_RELEASE);
                return s;
            }
            if (at > 1) at--;
        }
        memmove(sp[at + 1], sp[at], (size_t)(n - at) * sizeof sp[0]);
        sp[at][0] = s;
        sp[at][1] = e;
        n++;
    }
    if (at + 1 < n && sp[at + 1][0] <= sp[at][1]) { /* it reaches the next span */
        if (sp[at][1] < sp[at + 1][1]) sp[at][1] = sp[at + 1][1];
        memmove(sp[at + 1], sp[at + 2], (size_t)(n - at - 2) * sizeof sp[0]);
        n--;
    }
    sh->nspans = n;
    __atomic_clear(&sh->lock, __ATOMIC_RELEASE);
    return s;
}

/* The interface a message takes: the fabric for node traffic under nodes (NULL: unpaced), else
 * the NIC. */
static const LinkSpec *link_which(int node) {
    if (link_nodes && node) return link_intra.bytes_per_s > 0 ? &link_intra : NULL;
    return link_spec.bytes_per_s > 0 ? &link_spec : NULL;
}

/* Books bytes on one direction (tx 1, rx 0) of the interface node picks, from earliest: its start. */
static double link_book(int node, int tx, double earliest, size_t bytes) {
    const LinkSpec *l = link_which(node);
    double sec = (double)bytes / l->bytes_per_s, start;
    pthread_mutex_lock(&link_mu);
    if (l == &link_spec && link_shared) {
        start = tx ? link_book_shared(&link_shared->tx_free, earliest, sec) : link_book_calendar(link_shared, earliest, sec);
    } else {
        double *clock = l == &link_spec ? (tx ? &link_own.tx_free : &link_own.rx_free)
                                        : (tx ? &link_fabric.tx_free : &link_fabric.rx_free);
        start = *clock > earliest ? *clock : earliest;
        *clock = start + sec;
    }
    if (l == &link_spec) *(tx ? &link_tx_busy : &link_rx_busy) += sec;
    pthread_mutex_unlock(&link_mu);
    return start;
}

double link_send(size_t bytes, int node) {
    if (!link_which(node)) return 0;
    return link_book(node, 1, clock_now(), bytes);
}

double link_backlog(void) {
    if (!(link_spec.bytes_per_s > 0)) return 0;
    pthread_mutex_lock(&link_mu);
    double free_at = link_shared ? link_double(__atomic_load_n(&link_shared->tx_free, __ATOMIC_ACQUIRE)) : link_own.tx_free;
    pthread_mutex_unlock(&link_mu);
    double b = free_at - clock_now();
    return b > 0 ? b : 0;
}

void link_busy(double *tx_s, double *rx_s) {
    pthread_mutex_lock(&link_mu);
    *tx_s = link_tx_busy;
    *rx_s = link_rx_busy;
    pthread_mutex_unlock(&link_mu);
}

double link_recv_book(size_t bytes, double stamp, int node) {
    const LinkSpec *l = link_which(node);
    if (!l) return 0;
    double now = clock_now(), earliest = stamp > 0 && stamp < now + 60 ? stamp : now; /* a stamp from
                                                                                    * another clock: now */
    return link_book(node, 0, earliest, bytes) + (double)bytes / l->bytes_per_s + l->latency_s;
}

void link_wait_until(double t) { link_sleep_until(t); }

void link_recv(size_t bytes, double stamp, int node) {
    if (!link_which(node)) return;
    link_sleep_until(link_recv_book(bytes, stamp, node));
}

#define LINK_STAMP_MAGIC 0x4b4c534b4e494c52ull /* "RLINKSLK" */

void link_stamp_encode(double stamp, unsigned char out[LINK_STAMP_BYTES]) {
    uint64_t m = LINK_STAMP_MAGIC;
    memcpy(out, &m, 8);
    memcpy(out + 8, &stamp, 8);
}

int link_stamp_decode(const void *p, size_t n, double *stamp) {
    uint64_t m;
    if (n != LINK_STAMP_BYTES || !p) return 0;
    memcpy(&m, p, 8);
    if (m != LINK_STAMP_MAGIC) return 0;
    memcpy(stamp, (const unsigned char *)p + 8, 8);
    return isfinite(*stamp) ? 1 : 0;
}
