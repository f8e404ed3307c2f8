/* train.h - the `ringside train` command: one rank's training run, or the launcher of N ranks */
#ifndef RS_TRAIN_H
#define RS_TRAIN_H

/* The exit status of a run whose global training loss stopped being finite (NaN or infinity):
 * it trained to the end and wrote its report, which says "diverged": true (docs/report-schema.md).
 * Distinct from base/err.h's statuses and from `matrix`'s 5 (its --out in use). */
#define TRAIN_ERR_DIVERGED 6

/* The exit status of a run whose ranks ended with different parameters where the back end
 * promises them equal (summary.params_agree false, summary.params_differ_ranks naming them): the
 * report is written. A diverged run exits TRAIN_ERR_DIVERGED first. */
#define TRAIN_ERR_REPLICAS 7

/* Runs `ringside train` with the options after "train". Returns the process exit status:
 * 0, RS_ERR_INPUT for bad options or data, RS_ERR_PEER when a peer failed, RS_ERR_RUNTIME,
 * TRAIN_ERR_DIVERGED when the loss stopped being finite, TRAIN_ERR_REPLICAS when the ranks' final
 * parameters differ (the report is written in both). */
int train_main(int argc, char **argv);

#endif
