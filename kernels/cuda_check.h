/* cuda_check.h - one check macro per CUDA library, printing file:line, the rank and the library's error string (.cu files only) */
#ifndef RS_CUDA_CHECK_H
#define RS_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <cublas_v2.h>

extern "C" {
#include "../base/err.h"
#include "../base/log.h"
}

/* ---- Prototypes (static inline: one copy per .cu file) ---- */

/* Reports a failed CUDA runtime call: logs "file:line: call: error string (rank r)" through
 * log_error and leaves the same text in rs_errmsg(). Returns 0 on success, else RS_ERR_RUNTIME. */
static inline int cuda_check_at(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError(); /* reported here: keep it from resurfacing at the next launch check */
    int rank = log_rank() < 0 ? 0 : log_rank();
    rs_error(RS_ERR_RUNTIME, "%s:%d: %s: %s (%s, rank %d)", file, line, call,
             cudaGetErrorString(e), cudaGetErrorName(e), rank);
    log_error("%s", rs_errmsg());
    return RS_ERR_RUNTIME;
}

/* The same for a cuBLAS call, with cublasGetStatusString. */
static inline int cublas_check_at(cublasStatus_t s, const char *call, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    int rank = log_rank() < 0 ? 0 : log_rank();
    rs_error(RS_ERR_RUNTIME, "%s:%d: %s: %s (rank %d)", file, line, call,
             cublasGetStatusString(s), rank);
    log_error("%s", rs_errmsg());
    return RS_ERR_RUNTIME;
}

/* Polls an event: 1 when it is complete, 0 when not yet (cudaErrorNotReady), or -1 with the
 * failure reported as cudaCheck does. A NotReady answer may be left in the runtime's last-error
 * slot, where the next launch check (cudaGetLastError) would read it as a failed launch: it is
 * cleared here, as PyTorch's CUDAEvent::query does. Use this, never a bare cudaEventQuery. */
static inline int cuda_event_poll_at(cudaEvent_t ev, const char *file, int line) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    return cuda_check_at(e, "cudaEventQuery", file, line) ? -1 : 1;
}

/* The error a launch left, for the check after every kernel launch: cudaErrorNotReady is not a
 * launch failure (a poll may leave it behind), so it reads as success. */
static inline cudaError_t cuda_launch_error(void) {
    cudaError_t e = cudaGetLastError();
    return e == cudaErrorNotReady ? cudaSuccess : e;
}

/* ---- Macros: each evaluates to 0 or RS_ERR_RUNTIME, so `RS_TRY(cudaCheck(...))` propagates ---- */

#define cudaCheck(call) cuda_check_at((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) cublas_check_at((call), #call, __FILE__, __LINE__)
#define cudaEventPoll(ev) cuda_event_poll_at((ev), __FILE__, __LINE__)

#endif
