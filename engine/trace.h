/* trace.h - Chrome trace events (the JSON Perfetto opens): one track per rank, one span per phase */
#ifndef RS_TRACE_H
#define RS_TRACE_H

struct cJSON;

/* ---- Types ---- */
typedef struct Trace Trace;

/* ---- Prototypes ---- */

/* A recorder for process `pid` (the rank) labelled `label` ("rank 0"). NULL on OOM. */
Trace *trace_new(int pid, const char *label);

/* Makes room for spans spans (at most the cap) up front, so that recording them allocates nothing
 * (the run's step loop); a failure leaves recording to grow as it goes. NULL-safe. */
void trace_reserve(Trace *t, long spans);

/* Records a complete span [t0, t1] in seconds on the wall clock (clock_wall) on thread tid
 * (0: compute, 1: communication, 2: a server's work, 3: a ps worker's pushes and replies on its link). Thread-safe; silently stops recording after a cap. NULL-safe. */
void trace_span(Trace *t, const char *name, int tid, double t0, double t1);

/* The events as a JSON array (caller owns it). */
struct cJSON *trace_json(Trace *t);

void trace_free(Trace *t);

#endif
