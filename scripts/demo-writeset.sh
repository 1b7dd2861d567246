#!/usr/bin/env bash
# The README walk-through with `changes:` on PostgreSQL (README,
# "Walk-through"; make demo-writeset): the clinic's encounters in a PostgreSQL table, the
# candidate judged on the database's own change log. A confirmed save
# (newness write_set in the signed receipt, checked offline) and a double
# submit. It needs a PostgreSQL server with wal_level = logical:
#
#   DEMO_PG_HOST, DEMO_PG_PORT (127.0.0.1, 5432), DEMO_PG_DATABASE
#   DEMO_PG_USER, DEMO_PG_PASSWORD              the daemon's read-only login
#   DEMO_PG_ADMIN, DEMO_PG_ADMIN_PASSWORD       an owner of the database with
#                                               REPLICATION (or a superuser)
#
# It creates the table demo_encounters, sets the slot and publication up
# with verifyctl changes setup, starts its own daemon on a spare loopback
# port (stopped by PID), and drops the slot again on exit (a slot nobody
# reads keeps log). DEMO_BIN names the binaries' folder (.cache/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DEMO_BIN:-.cache/bin}
work=$(mktemp -d)
addr=127.0.0.1:${DEMO_PORT:-7545}
: "${DEMO_PG_HOST:=127.0.0.1}" "${DEMO_PG_PORT:=5432}" "${DEMO_PG_DATABASE:?}" "${DEMO_PG_USER:?}" "${DEMO_PG_ADMIN:?}"
export CLINIC_DB_PASSWORD=${DEMO_PG_PASSWORD:?} PG_ADMIN_PASSWORD=${DEMO_PG_ADMIN_PASSWORD:?}
sql() { PGPASSWORD=$PG_ADMIN_PASSWORD psql -X -q -v ON_ERROR_STOP=1 -h "$DEMO_PG_HOST" -p "$DEMO_PG_PORT" -U "$DEMO_PG_ADMIN" -d "$DEMO_PG_DATABASE" -c "$1"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

sql "CREATE TABLE IF NOT EXISTS demo_encounters (id bigserial PRIMARY KEY, patient_id text NOT NULL, type text, note text)"
sql "GRANT SELECT ON demo_encounters TO \"$DEMO_PG_USER\""
cat > "$work/deployment.yaml" <<EOF
# The clinic on PostgreSQL: one patient's encounters, judged on the write
# set (docs/adapters/sql.md, "The write set"): no census needed.
effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id, type, note FROM demo_encounters WHERE patient_id = %(patient_id)s ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  changes: {source: logical, tables: [demo_encounters]}
  sql_connect_args: {host: "$DEMO_PG_HOST", port: $DEMO_PG_PORT, user: "$DEMO_PG_USER", database: "$DEMO_PG_DATABASE", sslmode: disable}
  sql_password_env: CLINIC_DB_PASSWORD
EOF
cat > "$work/daemon.yaml" <<EOF
deployments:
  clinic-pg: deployment.yaml
workflows:
  triage: $PWD/examples/demo/workflow.yaml
secrets:
  allow: [CLINIC_DB_PASSWORD]
policy:
  require_change_claim: true
EOF
changes() { $bin/verifyctl changes "$1" --config "$work/daemon.yaml" --deployment-name clinic-pg "${@:2}"; }

echo "== the slot and publication (verifyctl changes setup, as the administrator)"
changes setup --user "$DEMO_PG_ADMIN" --password-env PG_ADMIN_PASSWORD > "$work/setup.json"
field "['statements']" < "$work/setup.json" || true
python3 -c "import json,sys; [print(g) for g in json.load(sys.stdin)['grants']]" < "$work/setup.json" > "$work/grants.sql"
while read -r grant; do sql "$grant"; done < "$work/grants.sql"

$bin/verifierd --listen "$addr" --http-listen "" --data-dir "$work/data" --config "$work/daemon.yaml" --log-level warn &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  changes drop --user "$DEMO_PG_ADMIN" --password-env PG_ADMIN_PASSWORD > /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ctl() { $bin/verifyctl "$@" --addr "$addr"; }
for _ in $(seq 50); do
  ctl preflight --deployment-name clinic-pg --param patient_id=p1 >/dev/null 2>&1 && break
  sleep 0.1
done

echo "== preflight (the log's configuration included)"
ctl preflight --deployment-name clinic-pg --param patient_id=p1
changes preflight

echo "== 1. a save that lands once, judged on the write set"
sid=$(ctl begin --deployment-name clinic-pg --workflow triage --step save_triage \
      --param patient_id=p1 --param note=Follow-up | field "['session_id']")
sql "INSERT INTO demo_encounters (patient_id, type, note) VALUES ('p1', 'Triage', 'Follow-up')"
ctl verify --session "$sid" --receipt-out "$work/receipt.json" > "$work/v1.json"
ctl key > "$work/key.json"
$bin/verifyctl receipt verify --receipt "$work/receipt.json" --public-key "$work/key.json" > "$work/r1.json"
echo "   outcome: $(field "['outcome']" < "$work/v1.json"), receipt valid: $(field "['valid']" < "$work/r1.json")"
echo "   signed receipt: newness: $(field "['payload']['effects'][0]['newness']" < "$work/r1.json"), write_set: $(field "['payload']['effects'][0]['write_set']" < "$work/r1.json")"

echo "== 2. a double submit"
sid=$(ctl begin --deployment-name clinic-pg --workflow triage --step save_triage \
      --param patient_id=p2 --param note=Follow-up | field "['session_id']")
sql "INSERT INTO demo_encounters (patient_id, type, note) VALUES ('p2', 'Triage', 'Follow-up'), ('p2', 'Triage', 'Follow-up')"
ctl verify --session "$sid" > "$work/v2.json"
echo "   outcome: $(field "['outcome']" < "$work/v2.json"), record_written: $(field "['effects'][0]['result']" < "$work/v2.json") $(field "['effects'][0]['reasons'][0]['code']" < "$work/v2.json"), newness: $(field "['effects'][0]['newness']" < "$work/v2.json")"
echo "== slot status"
changes status
