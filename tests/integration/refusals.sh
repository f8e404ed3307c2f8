#!/usr/bin/env bash
# refusals.sh - jobs refused at start-up that would otherwise fail late or hang: a model too large for memory, a FIFO as data, outputs on one file, a report name whose temporary is too long
. "$(dirname "$0")/lib.sh"
SMALL="--layers 784,32,10 --train-samples 512 --eval-samples 64 --steps 2 --quiet"

# a model that cannot fit is refused with its size and what is available, not OOM-killed
expect_status "gpt --vocab 16777216 is refused" 2 timeout 30 $BIN train --model gpt --vocab 16777216 --steps 1 --quiet --report $T/r.json
grep -q "needs about .* GB of memory.*GB available" $T/last.log && ok "the refusal says needed and available" || bad "memory message" "$(cat $T/last.log)"
[ ! -e $T/r.json ] && ok "no report after the memory refusal" || bad "no report after the memory refusal" "written"
expect_status "-n 3 of a too-large model is refused by the launcher" 2 timeout 30 $BIN train -n 3 --sync ring --model gpt --vocab 4194304 --steps 1 --quiet --report $T/r.json
grep -q "3 ranks x" $T/last.log && ok "the launcher counts every rank" || bad "launcher counts ranks" "$(cat $T/last.log)"
check "a model that fits runs" $BIN train $SMALL --report $T/ok.json

# text data on a FIFO (or a terminal) would block forever: refused at once
mkfifo $T/fifo
expect_status "--data text:FIFO is refused" 2 timeout 20 $BIN train --model gpt --data text:$T/fifo $SMALL --report $T/r.json
grep -q "not a regular file (a FIFO)" $T/last.log && ok "the FIFO is named" || bad "FIFO named" "$(cat $T/last.log)"
expect_status "--data text:/dev/zero (a character device) is refused" 2 timeout 20 $BIN train --model gpt --data text:/dev/zero $SMALL --report $T/r.json
mkdir -p $T/mnist && mkfifo $T/mnist/train-images-idx3-ubyte
expect_status "an MNIST file that is a FIFO is refused" 2 timeout 20 $BIN train --data $T/mnist $SMALL --report $T/r.json

# two outputs on one file: the last writer would win
expect_status "--report and --trace on one file" 2 $BIN train $SMALL --report $T/same.json --trace $T/same.json
grep -q "the same file" $T/last.log && ok "the clash is named" || bad "clash named" "$(cat $T/last.log)"
expect_status "--trace and --save-params on one file (another spelling)" 2 $BIN train $SMALL --report $T/r.json --trace $T/p.bin --save-params $T/./p.bin
expect_status "-n 2: --report and --save-params on one file" 2 $BIN train -n 2 --sync ring $SMALL --report $T/x.bin --save-params $T/x.bin
[ ! -e $T/same.json ] && [ ! -e $T/x.bin ] && ok "nothing written after the clash" || bad "nothing written after clash" "$(ls $T)"

# a report name that fits NAME_MAX but whose temporary (NAME.tmp.PID) does not fails up front
long=$(printf 'r%.0s' $(seq 1 250)).json
expect_status "a 255-character report name is refused at start-up" 2 $BIN train $SMALL --report $T/$long
grep -q "temporary name" $T/last.log && ok "the refusal explains the temporary name" || bad "temporary name" "$(cat $T/last.log)"
finish
