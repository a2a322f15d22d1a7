#!/usr/bin/env bash
# Regenerate the golden files of this folder from the serial renderings (refsgd golden).
# Run from anywhere: tests/golden/regenerate.sh   (uses the repository's .venv)
# tests/mpiexec/test_golden.py checks that these commands still reproduce the checked-in files.
set -euo pipefail
cd "$(dirname "$0")"
R=${REFSGD:-../../.venv/bin/refsgd}
$R golden --algo ssgd     --workers 2 --steps 10 --tau 2 --momentum 0.9 --lr 0.1 --batch 16 --model digits_tiny --seed 1 --out ssgd-n2.h5 --force
$R golden --algo ssgd     --workers 4 --steps 10 --tau 1 --lr 0.2 --batch 8 --model digits_tiny --seed 2 --out ssgd-n4.h5 --force
$R golden --algo ssgd-nag --workers 2 --steps 10 --tau 1 --momentum 0.9 --lr 0.002 --batch 16 --model digits_tiny --seed 3 --out ssgd-nag-n2.h5 --force
$R golden --algo dcs3gd   --workers 4 --steps 10 --momentum 0.9 --lr 0.1 --lambda0 0.2 --weight-decay 0.001 --schedule warmup-linear:warmup_iters=3,total_iters=10 --batch 8 --model digits_tiny --seed 4 --out dcs3gd-n4.h5 --force
$R golden --algo dcs3gd   --workers 4 --steps 10 --momentum 0.9 --lr 0.1 --lambda0 0.2 --lambda-norm tensor --weight-decay 0.001 --schedule warmup-linear:warmup_iters=3,total_iters=10 --batch 8 --model digits_tiny --seed 4 --out dcs3gd-tensor-n4.h5 --force
$R golden --algo dcasgd   --workers 3 --steps 10 --ps-order round-robin --dc-lambda 0.04 --lr 0.1 --batch 16 --model digits_tiny --seed 5 --out dcasgd-n3.h5 --force
$R golden --algo laga-sgdm --workers 2 --steps 10 --tau 2 --momentum 0.9 --lr 0.1 --batch 16 --model digits_tiny --seed 6 --out laga-sgdm-n2.h5 --force
$R golden --algo laga-sgdn --workers 4 --steps 10 --tau 2 --momentum 0.9 --lr 0.1 --weight-decay 0.001 --batch 8 --model digits_tiny --seed 7 --out laga-sgdn-n4.h5 --force
$R golden --algo pipe-sgd --workers 4 --steps 10 --dependency 2 --lr 0.05 --batch 8 --model digits_tiny --seed 8 --out pipe-sgd-k2-n4.h5 --force
$R golden --algo pipe-sgd --workers 4 --steps 10 --dependency 2 --compress t16 --lr 0.05 --batch 8 --model digits_tiny --seed 9 --out pipe-sgd-k2-t16-n4.h5 --force
$R golden --algo pipe-sgd --workers 4 --steps 10 --dependency 2 --compress q8v --lr 0.05 --batch 8 --model digits_tiny --seed 9 --out pipe-sgd-k2-q8v-n4.h5 --force
$R golden --algo d-sync   --workers 2 --steps 10 --lr 0.05 --batch 16 --model digits_tiny --seed 10 --out d-sync-n2.h5 --force
$R golden --algo ssgd     --workers 4 --steps 10 --compress fp16 --lr 0.2 --batch 8 --model digits_tiny --seed 11 --out ssgd-fp16-n4.h5 --force
$R golden --algo daso     --workers 4 --ranks-per-node 2 --steps 35 --momentum 0.9 --lr 0.1 --batch 64 --sync-every 2 --plateau-patience 1 --plateau-threshold 0.9 --model digits_tiny --seed 12 --out daso-2x2-n4.h5 --force
$R golden --algo pp-asgd  --workers 2 --threads 2 --staleness 3 --steps 12 --momentum 0.9 --lr 0.002 --batch 8 --model digits_tiny --seed 13 --out pp-asgd-s3-n2.h5 --force
$R golden --algo asgd     --workers 2 --threads 2 --staleness 3 --steps 12 --momentum 0.9 --lr 0.002 --batch 8 --model digits_tiny --seed 14 --out asgd-s3-n2.h5 --force
