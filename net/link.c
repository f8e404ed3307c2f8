/* link.c - the emulated network interface: one per process, two token buckets (transmit, receive) as virtual clocks, waits that sleep */
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
#include <time.h>

static LinkSpec link_spec;
static pthread_mutex_t link_mu = PTHREAD_MUTEX_INITIALIZER;
static double link_tx_free, link_rx_free; /* clock_now() when each direction is free */
static double link_tx_busy, link_rx_busy; /* seconds each direction has been booked */

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

void link_set(const LinkSpec *spec) {
    pthread_mutex_lock(&link_mu);
    link_spec = spec ? *spec : (LinkSpec){0};
    link_tx_free = link_rx_free = 0;
    link_tx_busy = link_rx_busy = 0;
    pthread_mutex_unlock(&link_mu);
}

const LinkSpec *link_get(void) { return &link_spec; }

/* Sleeps until clock_now() >= t. */
static void link_sleep_until(double t) {
    for (;;) {
        double d = t - clock_now();
        if (d <= 0) return;
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

double link_send(size_t bytes) {
    if (!(link_spec.bytes_per_s > 0)) return 0;
    pthread_mutex_lock(&link_mu);
    double now = clock_now(), start = link_tx_free > now ? link_tx_free : now;
    link_tx_free = start + (double)bytes / link_spec.bytes_per_s;
    link_tx_busy += (double)bytes / link_spec.bytes_per_s;
    pthread_mutex_unlock(&link_mu);
    return start;
}

double link_backlog(void) {
    if (!(link_spec.bytes_per_s > 0)) return 0;
    pthread_mutex_lock(&link_mu);
    double b = link_tx_free - clock_now();
    pthread_mutex_unlock(&link_mu);
    return b > 0 ? b : 0;
}

void link_busy(double *tx_s, double *rx_s) {
    pthread_mutex_lock(&link_mu);
    *tx_s = link_tx_busy;
    *rx_s = link_rx_busy;
    pthread_mutex_unlock(&link_mu);
}

double link_recv_book(size_t bytes, double stamp) {
    if (!(link_spec.bytes_per_s > 0)) return 0;
    pthread_mutex_lock(&link_mu);
    double now = clock_now(), start = stamp > 0 && stamp < now + 60 ? stamp : now; /* a stamp from
                                                                                 * another clock: now */
    if (link_rx_free > start) start = link_rx_free;
    double done = start + (double)bytes / link_spec.bytes_per_s;
    link_rx_free = done;
    link_rx_busy += (double)bytes / link_spec.bytes_per_s;
    pthread_mutex_unlock(&link_mu);
    return done + link_spec.latency_s;
}

void link_wait_until(double t) { link_sleep_until(t); }

void link_recv(size_t bytes, double stamp) {
    if (!(link_spec.bytes_per_s > 0)) return;
    link_sleep_until(link_recv_book(bytes, stamp));
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
