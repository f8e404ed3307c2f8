/* trace.c - records spans as Chrome trace events ("ph": "X") with per-rank process names */
#include "trace.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_CAP 1000000

typedef struct {
    const char *name; /* static strings only */
    int tid;
    double t0, t1;
} Span;

struct Trace {
    int pid;
    char label[64];
    pthread_mutex_t lock;
    Span *spans;
    int n, cap;
};

Trace *trace_new(int pid, const char *label) {
    Trace *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->pid = pid;
    snprintf(t->label, sizeof t->label, "%s", label);
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void trace_reserve(Trace *t, long spans) {
    if (!t || spans <= 0) return;
    if (spans > TRACE_CAP) spans = TRACE_CAP;
    pthread_mutex_lock(&t->lock);
    if (spans > t->cap) {
        Span *s = realloc(t->spans, (size_t)spans * sizeof *s);
        if (s) {
            t->spans = s;
            t->cap = (int)spans;
        }
    }
    pthread_mutex_unlock(&t->lock);
}

void trace_span(Trace *t, const char *name, int tid, double t0, double t1) {
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    if (t->n == t->cap && t->cap < TRACE_CAP) {
        int cap = t->cap ? t->cap * 2 : 1024;
        Span *s = realloc(t->spans, (size_t)cap * sizeof *s);
        if (s) {
            t->spans = s;
            t->cap = cap;
        }
    }
    if (t->n < t->cap) t->spans[t->n++] = (Span){name, tid, t0, t1};
    pthread_mutex_unlock(&t->lock);
}

static cJSON *trace_meta(int pid, int tid, const char *what, const char *name) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", what);
    cJSON_AddStringToObject(e, "ph", "M");
    cJSON_AddNumberToObject(e, "pid", pid);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON *a = cJSON_AddObjectToObject(e, "args");
    cJSON_AddStringToObject(a, "name", name);
    return e;
}

cJSON *trace_json(Trace *t) {
    cJSON *arr = cJSON_CreateArray();
    if (!t) return arr;
    pthread_mutex_lock(&t->lock);
    cJSON_AddItemToArray(arr, trace_meta(t->pid, 0, "process_name", t->label));
    cJSON_AddItemToArray(arr, trace_meta(t->pid, 0, "thread_name", "compute"));
    cJSON_AddItemToArray(arr, trace_meta(t->pid, 1, "thread_name", "communication"));
    cJSON_AddItemToArray(arr, trace_meta(t->pid, 2, "thread_name", "server"));
    cJSON_AddItemToArray(arr, trace_meta(t->pid, 3, "thread_name", "partitions on the link"));
    for (int i = 0; i < t->n; i++) {
        const Span *s = &t->spans[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", s->name);
        cJSON_AddStringToObject(e, "cat", s->tid == 2 ? "server" : s->tid == 3 ? "link" : s->tid ? "comm" : "compute");
        cJSON_AddStringToObject(e, "ph", "X");
        cJSON_AddNumberToObject(e, "ts", s->t0 * 1e6);
        cJSON_AddNumberToObject(e, "dur", (s->t1 - s->t0) * 1e6);
        cJSON_AddNumberToObject(e, "pid", t->pid);
        cJSON_AddNumberToObject(e, "tid", s->tid);
        cJSON_AddItemToArray(arr, e);
    }
    pthread_mutex_unlock(&t->lock);
    return arr;
}

void trace_free(Trace *t) {
    if (!t) return;
    pthread_mutex_destroy(&t->lock);
    free(t->spans);
    free(t);
}
