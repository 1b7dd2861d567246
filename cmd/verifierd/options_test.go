package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fieldName is the options field a flag is parsed into: each word
// capitalised, http and json in capitals (--retain-unfinished is
// RetainUnfinished, --http-listen HTTPListen).
func fieldName(flagName string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(flagName, "-") {
		switch w {
		case "http", "json":
			b.WriteString(strings.ToUpper(w))
		default:
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// TestOptionsFieldsNameTheirFlags parses one non-default value into every
// flag of options and finds it in the field named for the flag: a field
// that reads another flag's value (a swapped name) fails.
func TestOptionsFieldsNameTheirFlags(t *testing.T) {
	o := &options{}
	fs := flag.NewFlagSet("verifierd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.register(fs)
	// The connection bounds are connLimits' own (unexported) fields.
	connection := map[string]bool{"max-connections": true, "handshake-timeout": true, "idle-timeout": true, "http-read-timeout": true,
		"min-body-rate": true, "max-unauthenticated-per-ip": true, "max-unauthenticated": true, "max-streams-per-connection": true}
	var args []string
	want := map[string]string{}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		var v string
		switch f.Value.(flag.Getter).Get().(type) {
		case bool:
			// The opposite of the default.
			if f.DefValue == "true" {
				v = "false"
			} else {
				v = "true"
			}
		case time.Duration:
			v = (time.Duration(n) * time.Minute).String()
		case int, int64, uint64:
			v = strings.Repeat("7", n%9+1)
		default:
			v = "value-of-" + f.Name
		}
		args = append(args, "--"+f.Name+"="+v)
		want[f.Name] = v
	})
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	rv := reflect.ValueOf(o).Elem()
	conn := reflect.ValueOf(o.Connections).Elem()
	for name, v := range want {
		if connection[name] {
			lower := fieldName(name)
			lower = strings.ToLower(lower[:1]) + lower[1:]
			if first, rest, ok := strings.Cut(name, "-"); ok && first == "http" {
				lower = "http" + fieldName(rest)
			}
			field := conn.FieldByName(lower)
			var got string
			switch {
			case !field.IsValid():
				t.Errorf("--%s: connLimits has no field %s", name, lower)
				continue
			case field.Type() == reflect.TypeFor[time.Duration]():
				got = time.Duration(field.Int()).String()
			default:
				got = fmt.Sprint(field.Int())
			}
			if got != v {
				t.Errorf("--%s=%s: field %s holds %q", name, v, lower, got)
			}
			continue
		}
		field := rv.FieldByName(fieldName(name))
		if !field.IsValid() {
			t.Errorf("--%s: options has no field %s", name, fieldName(name))
			continue
		}
		got := fmt.Sprint(field.Interface()) // a Duration prints as its flag reads
		if got != v {
			t.Errorf("--%s=%s: field %s holds %q", name, v, fieldName(name), got)
		}
	}
	if len(want) != 37 {
		t.Errorf("%d flags, want 37", len(want))
	}
	if o.Connections == nil {
		t.Error("the connection bounds were not registered")
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"--retain-unfinished", "5m", "--retain", "1h", "--http-allowed-hosts", "verifierd.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if o.RetainUnfinished != 5*time.Minute || o.Retain != time.Hour {
		t.Errorf("retain-unfinished %s, retain %s; want 5m0s and 1h0m0s", o.RetainUnfinished, o.Retain)
	}
	if o.Listen != "127.0.0.1:7443" || o.HTTPListen != "127.0.0.1:7444" || !o.StoreSync || o.Drain != 30*time.Second {
		t.Errorf("defaults changed: %+v", o)
	}
	if !o.allowedHosts.Allowed("verifierd.example.com") {
		t.Error("--http-allowed-hosts was not kept")
	}
	for _, args := range [][]string{
		{"--max-connections", "0"},
		{"--idle-timeout", "0s"},
		{"--http-allowed-hosts", "a b"},
	} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// TestNewDaemonReleasesOnError: a daemon that fails to build (here: a
// --config that does not exist, read after the store and keys are open)
// releases what it opened, so the same data dir opens again at once and
// fails for the same reason, not on the store's lock.
func TestNewDaemonReleasesOnError(t *testing.T) {
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--builtin-dir", t.TempDir(), "--config", filepath.Join(t.TempDir(), "missing.yaml"), "--http-listen", ""}
	for attempt := range 2 {
		o, err := parseOptions(args)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			d, err := newDaemon(o)
			if d != nil {
				d.close()
			}
			done <- err
		}()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("attempt %d: newDaemon did not return (the store of the first attempt is still held?)", attempt)
		}
		if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
			t.Fatalf("attempt %d: newDaemon = %v, want the config file's error", attempt, err)
		}
	}
}
