/* link.h - emulated network interfaces: a NIC per process or per node (shared by the node's processes), a node's fabric, token-bucket pacing of data-plane sends and receives, per-message latency, waits that sleep */
#ifndef RS_LINK_H
#define RS_LINK_H

#include <stddef.h>

/* ---- Types ---- */

/* A link: bandwidth in bytes per second (each direction: full duplex, as a NIC) and a latency
 * added to every message. */
typedef struct {
    double bytes_per_s;
    double latency_s;
    char text[64];    /* as given: "1gbit", "100mbit,50us" */
} LinkSpec;

/* ---- Prototypes ---- */

/* Parses --link's BW[,LAT]: BW a positive number with a unit, "bit" units in bits per second
 * (kbit, mbit, gbit, also Kbit...: decimal), "B/s" units in bytes (B/s, KB/s, MB/s, GB/s:
 * decimal); LAT a number with s, ms, us or ns (default 0, at most 10 s). "" or "none" is no
 * link (*out zeroed, returns 0). 0, or RS_ERR_INPUT naming the value. */
int link_parse(const char *text, LinkSpec *out);

/* Sets this process's interface (every data-plane message of every back end and server in it
 * goes through it); a zero bandwidth turns it off. Call before any traffic. link_set_nodes
 * with no fabric and nodes 0. */
void link_set(const LinkSpec *spec);

/* Sets this process's interfaces: nic for every message without nodes (nodes 0, each process a
 * machine of its own); with nodes, nic for messages that leave or enter the node and intra (the
 * node's fabric, --intra-link; NULL or a zero bandwidth: unpaced) for messages between processes
 * of the node. Call before any traffic; link_share then makes the NIC the node's. */
void link_set_nodes(const LinkSpec *nic, const LinkSpec *intra, int nodes);

/* This process's NIC (bytes_per_s 0 when none), and its node's fabric (0: unpaced or no nodes). */
const LinkSpec *link_get(void);
const LinkSpec *link_get_intra(void);

/* Whether any message of this process is paced (a NIC, or a node's fabric): messages then carry
 * stamps. */
int link_on(void);

/* Makes the NIC the one every process of a node shares: its transmit and receive clocks move to
 * the POSIX shared-memory object name ("/ringside-nic-..."), created by the first process of the
 * node to come, mapped by the others, and booked by all of them, so that two processes sending
 * at once each get half its rate. Every process of the node calls it with the same name before
 * the job's first message; link_share_release then removes the name (the mapping stays) once
 * every process of the node has it (after the job's first barrier), and link_unshare unmaps it
 * at the end. A no-op without a NIC. 0, or RS_ERR_* naming the object. */
int link_share(const char *name);
void link_share_release(void);
void link_unshare(void);

/* Books the transmission of bytes (header and payload) on the data plane: the message starts
 * on the wire when the previous one has left, and takes bytes / bandwidth. Returns that start
 * (clock_now seconds), which the sender puts in the message as its stamp (link_stamp_*); the
 * caller does not wait (a NIC sends while its host computes). node: the peer is a process of
 * this node (under nodes the fabric carries it, not the NIC). 0 without a link. Thread-safe. */
double link_send(size_t bytes, int node);

/* After receiving bytes on the data plane with the sender's stamp (0: none): waits (sleeping)
 * until this interface has taken them in at its bandwidth, starting no earlier than the
 * sender's start and the end of the previous message received, plus the latency. A no-op
 * without a link. Thread-safe. */
void link_recv(size_t bytes, double stamp, int node);

/* link_recv's booking without its wait: takes bytes in on this interface as link_recv does and
 * returns when they are in (clock_now seconds, the latency included; 0 without a link), for a
 * receiver that must not sleep meanwhile: a NIC takes a message in while its host sends the next
 * one, so a worker whose one communication thread both pushes and pulls waits for the pull's
 * arrival where it needs the data, not inside the receive. Thread-safe. */
double link_recv_book(size_t bytes, double stamp, int node);

/* Seconds until the NIC's transmit side is free again (what is booked and not yet on the
 * wire): 0 without a link or when idle. A sender that holds messages back while it is above a
 * credit lets later, more urgent messages of the process go first (ps/client.c). Thread-safe. */
double link_backlog(void);

/* Seconds this process has kept the NIC busy transmitting and receiving since link_set (each
 * message's bytes / bandwidth, as booked; the fabric's not included): how much of a run the link, not the cores, set the pace of.
 * Both 0 without a link. Thread-safe. */
void link_busy(double *tx_s, double *rx_s);

/* Sleeps until clock_now() >= t (t from link_recv_book; returns at once for t <= now). */
void link_wait_until(double t);

/* The stamp as it travels: a frame of its own after the message's (ZeroMQ), or inside the
 * padding of a shared-memory lane message. Emulation metadata, not protocol: the traffic
 * counts leave it out. */
#define LINK_STAMP_BYTES 16
void link_stamp_encode(double stamp, unsigned char out[LINK_STAMP_BYTES]);
/* 1 with *stamp set when p[0..n) is a stamp, else 0. */
int link_stamp_decode(const void *p, size_t n, double *stamp);

#endif
