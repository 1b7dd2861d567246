// Command verifier-adapter-csv-ledger is an example of a customer adapter:
// it teaches verifierd to read a CSV ledger, a system of record verifierd
// does not ship. It is written the way a customer would write one, against
// the public github.com/verifierd/verifierd/sdk package and the standard
// library only, and built as its own binary:
//
//	go build -o /etc/verifierd/plugins/verifier-adapter-csv-ledger ./examples/csv-ledger
//
// It reads kind csv-ledger:
//
//	effects:
//	  kind: csv-ledger
//	  options:
//	    path: /srv/ledger/payments.csv   # a CSV file with a header row
//	    id_column: id                    # optional; the column that identifies a row
//
// Each row is one record whose fields are the header's column names and
// whose values are the cells, as strings. It also shows the optional
// verdict hook: a ledger whose modification time is later than the read
// was written by a machine whose clock is ahead, so a CONFIRMED verdict is
// demoted to INDETERMINATE with reason LEDGER_CLOCK_SKEW. See README.md.
package main

import (
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(newLedger) }
