#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the
# multimodal example on an embedded controller with 4 local workers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/bin/hmpmd run examples/multimodal.json --workers 4 --trace multimodal-trace.json
echo "trace written to multimodal-trace.json (open it in https://ui.perfetto.dev or chrome://tracing)"
