/* claims.h - `ringside claims`: decides the design's claims on a folder of measured reports */
#ifndef RS_CLAIMS_H
#define RS_CLAIMS_H

/* Runs `ringside claims DIR` with the arguments after "claims": reads every report in DIR, prints
 * the verdict table (PASS / FAIL / NOT-RUN with the numbers behind each) and writes
 * DIR/claims.json. Returns 0 when no claim FAILs, RS_ERR_WRONG (4) when one does, RS_ERR_INPUT
 * (2) for an unreadable report or one of another schema version (nothing written). */
int claims_main(int argc, char **argv);

#endif
