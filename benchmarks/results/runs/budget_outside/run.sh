#!/bin/bash
# budget sweep over outside models: 0.95 of roam's unbudgeted peak, then the midpoint between floor and peak
. /work/venv/bin/activate
cd /work/main
for spec in "$@"; do
    name=$(echo $spec | sed 's/.*://')
    timeout 900 python -m roam_tvm compare --model benchmarks/outside/$spec --optimizer adam --planners roam --no-cut --quiet --budget 0.95 --json /work/runs/budget13/${name}_a.json > /work/runs/budget13/${name}_a.log 2>&1
    rc=$?
    mid=$(python - <<PY
import json
try:
    d = json.load(open("/work/runs/budget13/${name}_a.json"))
    peak = d["budget_bytes"] / 0.95
    print(int((d["floor_bytes"] + peak) / 2))
except Exception as e:
    print("")
PY
)
    rc2=skip
    if [ -n "$mid" ]; then
      timeout 900 python -m roam_tvm compare --model benchmarks/outside/$spec --optimizer adam --planners roam --no-cut --quiet --budget $mid --json /work/runs/budget13/${name}_b.json > /work/runs/budget13/${name}_b.log 2>&1
      rc2=$?
    fi
    echo "$name rc=$rc mid=$mid rc2=$rc2" >> /work/runs/budget13/summary.txt
done
