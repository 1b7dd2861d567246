#!/usr/bin/env bash
# The README walk-through, runnable: a confirmed save, a double submit
# (conflicting), a refused session, and an existing record overwritten for
# this patient (not new: the census knew it). It starts its own daemon on a spare
# loopback port and stops it by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.cache/bin
work=$(mktemp -d)
addr=127.0.0.1:${DEMO_PORT:-7543}
db=.cache/demo/clinic.db
mkdir -p .cache/demo
rm -f "$db"
$bin/clinic init "$db"

$bin/verifierd --listen "$addr" --http-listen "" --data-dir "$work/data" --config examples/demo/daemon.yaml --log-level warn &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  $bin/verifyctl preflight --addr "$addr" --deployment-name clinic --param patient_id=p1 >/dev/null 2>&1 && break
  sleep 0.1
done
ctl() { $bin/verifyctl "$@" --addr "$addr"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

echo "== preflight"
ctl preflight --deployment-name clinic --param patient_id=p1

echo "== 1. a save that lands once, with the right note (the registered workflow step's contracts)"
sid=$(ctl begin --deployment-name clinic --workflow triage --step save_triage \
      --param patient_id=p1 --param note=Follow-up | field "['session_id']")
$bin/clinic save "$db" p1 Triage Follow-up
ctl verify --session "$sid" | tee "$work/v1.json" | head -20
echo "   outcome: $(field "['outcome']" < "$work/v1.json"), step: $(field "['registered_step']['step']" < "$work/v1.json") $(field "['registered_step']['workflow_digest']" < "$work/v1.json")"

echo "== 2. a double submit"
sid=$(ctl begin --deployment-name clinic --workflow triage --step save_triage \
      --param patient_id=p2 --param note=Follow-up | field "['session_id']")
$bin/clinic save "$db" p2 Triage Follow-up 2
ctl verify --session "$sid" > "$work/v2.json"
echo "   outcome: $(field "['outcome']" < "$work/v2.json"), record_written: $(field "['effects'][0]['result']" < "$work/v2.json") $(field "['effects'][0]['reasons'][0]['code']" < "$work/v2.json"), task: $(field "['effects'][0]['reconciliation_task']['suggested_action']" < "$work/v2.json")"

echo "== 3. a session refused before the action (the baseline cannot be read)"
set +e
ctl begin --deployment-name clinic-broken --workflow triage --step save_triage \
    --param patient_id=p3 --param note=x
code=$?
set -e
echo "   begin exited $code (3 = refused: do not actuate)"

echo "== 4. an existing encounter of another patient overwritten for this one (no new row)"
$bin/clinic save "$db" p9 Triage Follow-up   # encounter 4, before the session
sid=$(ctl begin --deployment-name clinic --workflow triage --step save_triage \
      --param patient_id=p4 --param note=Follow-up | field "['session_id']")
$bin/clinic reassign "$db" 4 p4              # the faulty save: an update, not an insert
ctl verify --session "$sid" > "$work/v4.json"
echo "   outcome: $(field "['outcome']" < "$work/v4.json"), record_written: $(field "['effects'][0]['result']" < "$work/v4.json") $(field "['effects'][0]['reasons'][-1]['code']" < "$work/v4.json"), newness: $(field "['effects'][0]['newness']" < "$work/v4.json")"
