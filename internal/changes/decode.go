package changes

import (
	"fmt"

	"github.com/jackc/pglogrepl"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/judge"
)

// relation is one table as pgoutput described it.
type relation struct {
	// table is the declared name the changes carry; "" for a table that
	// was not declared (its changes are skipped).
	table string
	cols  []*pglogrepl.RelationMessageColumn
}

// decoder folds pgoutput messages (protocol 1) into the changes of the
// transactions that committed at or after from, in commit order. A change
// it cannot turn into full row images sets problem: the write set is then
// not complete.
type decoder struct {
	from     pglogrepl.LSN
	declared map[string]string // "schema.table" -> declared name
	rels     map[uint32]*relation
	keep     bool
	txn, out []judge.Change
	problem  string
}

func newDecoder(from pglogrepl.LSN, declared map[string]string) *decoder {
	return &decoder{from: from, declared: declared, rels: map[uint32]*relation{}}
}

// add decodes one message.
func (d *decoder) add(data []byte) error {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("a pgoutput message does not parse: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		d.keep, d.txn = m.FinalLSN >= d.from, d.txn[:0]
	case *pglogrepl.CommitMessage:
		if d.keep {
			d.out = append(d.out, d.txn...)
		}
		d.keep = false
	case *pglogrepl.RelationMessage:
		d.rels[m.RelationID] = &relation{table: d.declared[m.Namespace+"."+m.RelationName], cols: m.Columns}
	case *pglogrepl.InsertMessage:
		d.change(m.RelationID, judge.OpInsert, 0, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		d.change(m.RelationID, judge.OpUpdate, m.OldTupleType, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		d.change(m.RelationID, judge.OpDelete, m.OldTupleType, m.OldTuple, nil)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if r := d.rels[id]; d.keep && r != nil && r.table != "" {
				d.fail(fmt.Sprintf("%s was truncated inside the window; a TRUNCATE carries no row images", r.table))
			}
		}
	}
	return nil
}

// change records one row change of a kept transaction to a declared table.
func (d *decoder) change(relID uint32, op string, oldType uint8, old, cur *pglogrepl.TupleData) {
	r := d.rels[relID]
	if !d.keep || r == nil || r.table == "" {
		return
	}
	ch := judge.Change{Op: op, Table: r.table}
	if op != judge.OpInsert {
		if oldType != 'O' || old == nil {
			d.fail(fmt.Sprintf("an %s of %s carries no before image; set REPLICA IDENTITY FULL on it (verifyctl changes setup does)", op, r.table))
			return
		}
		ch.Before = d.image(r, old, nil)
	}
	if op != judge.OpDelete {
		ch.After = d.image(r, cur, ch.Before)
	}
	if ch.Before != nil || ch.After != nil {
		d.txn = append(d.txn, ch)
	}
}

// image is a tuple as a record; an unchanged TOASTed value is taken from
// prev (the before image).
func (d *decoder) image(r *relation, t *pglogrepl.TupleData, prev judge.Record) judge.Record {
	if t == nil || len(t.Columns) != len(r.cols) {
		d.fail(fmt.Sprintf("a row image of %s does not have the table's %d columns", r.table, len(r.cols)))
		return nil
	}
	rec := make(judge.Record, len(r.cols))
	for i, col := range t.Columns {
		name := r.cols[i].Name
		switch col.DataType {
		case pglogrepl.TupleDataTypeNull:
			rec[name] = nil
		case pglogrepl.TupleDataTypeToast:
			v, ok := prev[name]
			if !ok {
				d.fail(fmt.Sprintf("column %s of %s was not sent (unchanged TOAST) and no before image holds it", name, r.table))
				return nil
			}
			rec[name] = v
		case pglogrepl.TupleDataTypeText:
			v, err := sqladapter.PGTextValue(r.cols[i].DataType, col.Data)
			if err != nil {
				d.fail(fmt.Sprintf("column %s of %s: %v", name, r.table, err))
				return nil
			}
			rec[name] = v
		default:
			d.fail(fmt.Sprintf("column %s of %s came in format %q, not text", name, r.table, col.DataType))
			return nil
		}
	}
	return rec
}

func (d *decoder) fail(msg string) {
	if d.problem == "" {
		d.problem = msg
	}
}
