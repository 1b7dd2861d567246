// Command clinic is the demo's system of record and its "automation": it
// creates a small SQLite clinic database and saves triage encounters into it,
// the way an RPA bot clicking "Save" would. It exists so that `make demo`
// and the end-to-end tests write through a real database.
//
//	clinic init DB
//	clinic save DB PATIENT TYPE NOTE [TIMES]
//	clinic delete DB ID
//	clinic reassign DB ID PATIENT
//	clinic serve DB [ADDR]
//
// serve is the clinic's web front end (serve.go): a form an automation
// fills and saves, the way a browser automation drives a real application.
package main

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"time"

	_ "modernc.org/sqlite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "clinic:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: clinic init DB | save DB PATIENT TYPE NOTE [TIMES] | delete DB ID | reassign DB ID PATIENT | serve DB [ADDR]")
	}
	db, err := sql.Open("sqlite", args[1])
	if err != nil {
		return err
	}
	defer db.Close()
	switch args[0] {
	case "init":
		_, err := db.Exec(`CREATE TABLE IF NOT EXISTS encounters (
			id INTEGER PRIMARY KEY AUTOINCREMENT,
			patient_id TEXT NOT NULL,
			type TEXT NOT NULL,
			note TEXT,
			created_at TEXT NOT NULL)`)
		return err
	case "save":
		if len(args) < 5 {
			return fmt.Errorf("usage: clinic save DB PATIENT TYPE NOTE [TIMES]")
		}
		times := 1
		if len(args) > 5 {
			if times, err = strconv.Atoi(args[5]); err != nil {
				return err
			}
		}
		for range times {
			_, err := db.Exec(`INSERT INTO encounters (patient_id, type, note, created_at) VALUES (?, ?, ?, ?)`,
				args[2], args[3], args[4], time.Now().UTC().Format(time.RFC3339))
			if err != nil {
				return err
			}
		}
		return nil
	case "delete":
		if len(args) < 3 {
			return fmt.Errorf("usage: clinic delete DB ID")
		}
		_, err := db.Exec(`DELETE FROM encounters WHERE id = ?`, args[2])
		return err
	case "reassign":
		// The faulty save that overwrites an existing encounter with
		// another patient's data instead of inserting a new one.
		if len(args) < 4 {
			return fmt.Errorf("usage: clinic reassign DB ID PATIENT")
		}
		_, err := db.Exec(`UPDATE encounters SET patient_id = ? WHERE id = ?`, args[3], args[2])
		return err
	case "serve":
		addr := "127.0.0.1:0"
		if len(args) > 2 {
			addr = args[2]
		}
		return serve(db, addr)
	}
	return fmt.Errorf("unknown command %q", args[0])
}
