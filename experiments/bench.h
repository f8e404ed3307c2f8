/* bench.h - `ringside bench`: an nccl-tests-style all-reduce sweep over any back end */
#ifndef RS_BENCH_H
#define RS_BENCH_H

/* Runs `ringside bench` with the options after "bench"; returns the exit status (non-zero when
 * any element was wrong: RS_ERR_WRONG). */
int bench_main(int argc, char **argv);

#endif
