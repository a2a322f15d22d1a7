#!/usr/bin/env bash
# Regenerate the golden files of this folder from the serial renderings (refsgd golden). The
# files and their options are the Golden entries of each method in refsgd/registry.py; to add
# one, add it there. Run from anywhere: tests/golden/regenerate.sh [NAME,...]   (uses the
# repository's .venv; NAME,...: only those methods' files)
# tests/mpiexec/test_golden.py checks that these commands still reproduce the checked-in files.
set -euo pipefail
cd "$(dirname "$0")"
R=${REFSGD:-../../.venv/bin/refsgd}
$R golden regenerate . ${1:+--algo "$1"}
