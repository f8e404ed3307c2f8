/* matrix.h - `ringside matrix`: runs a JSON experiment matrix of training runs and summarises it */
#ifndef RS_MATRIX_H
#define RS_MATRIX_H

/* The exit status of a driver refused because another one holds its --out (DIR/.lock). */
#define MATRIX_ERR_BUSY 5

/* Runs `ringside matrix FILE.json --out DIR [--resume] [--dry-run] [--only k=v,...] [--bin PATH]`
 * with the arguments after "matrix". Returns the exit status: 0 when every run succeeded,
 * RS_ERR_INPUT (2) for a bad matrix or option (nothing run, nothing written), RS_ERR_RUNTIME (1)
 * when a run failed, timed out or diverged (the others still ran and are summarised; a diverged
 * run's report is kept, its row's status "diverged"), MATRIX_ERR_BUSY (5)
 * when another driver holds DIR (nothing run, nothing in DIR changed), 130 when interrupted by
 * SIGINT, SIGTERM or SIGHUP (the running cell stopped, finished runs kept, their summary
 * written). A cell's processes die with the driver (proc_run), so a killed driver leaves none. */
int matrix_main(int argc, char **argv);

#endif
