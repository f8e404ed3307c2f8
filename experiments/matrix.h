/* matrix.h - `ringside matrix`: runs a JSON experiment matrix of training runs and summarises it */
#ifndef RS_MATRIX_H
#define RS_MATRIX_H

/* Runs `ringside matrix FILE.json --out DIR [--resume] [--dry-run] [--only k=v,...] [--bin PATH]`
 * with the arguments after "matrix". Returns the exit status: 0 when every run succeeded,
 * RS_ERR_INPUT (2) for a bad matrix or option (nothing run, nothing written), RS_ERR_RUNTIME (1)
 * when a run failed or timed out (the others still ran and are summarised), 130 when interrupted
 * (finished runs kept, their summary written). */
int matrix_main(int argc, char **argv);

#endif
