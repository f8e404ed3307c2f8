/* fits.h - refuses, before anything starts, a job whose memory would not fit on this machine */
#ifndef RS_FITS_H
#define RS_FITS_H

#include "../base/config.h"

/* Estimates the host memory `workers` training processes and `servers` dedicated servers of the
 * job c would hold on this machine (each worker: its model's parameters, gradients, optimizer
 * state and activations where the device is host memory, its data set, and about two copies of
 * the gradient for the back end's buffers; each server: parameters, optimizer state and a sum;
 * plus a fixed allowance a process) and compares it with mem_host_available(). 0 when it fits
 * (or RINGSIDE_MEMORY_CHECK=off), else RS_ERR_INPUT with rs_errmsg() saying "needs about X GB
 * ..., Y GB available" and the share of each part. */
int fits_check(const Config *c, int workers, int servers);

#endif
