/* train.h - the `ringside train` command: one rank's training run, or the launcher of N ranks */
#ifndef RS_TRAIN_H
#define RS_TRAIN_H

/* Runs `ringside train` with the options after "train". Returns the process exit status:
 * 0, RS_ERR_INPUT for bad options or data, RS_ERR_PEER when a peer failed, RS_ERR_RUNTIME. */
int train_main(int argc, char **argv);

#endif
