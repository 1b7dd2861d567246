package uireadback

import (
	"strconv"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// harness qualifies the adapter against the record application: the
// selector names one patient, whose page the read-back opens.
func harness(t *testing.T) adaptertest.Harness {
	a := startApp(t)
	const patient = "q1"
	a.AddPatient(patient)
	ac := signInActor(t, a)
	triage := func(p, note, date string) int {
		return ac.save(recordapp.Encounter{PatientID: p, Type: "Triage", Note: note, Date: date})
	}
	config := func(password string) sdk.ConfigureRequest {
		sec := a.section()
		// A page of adaptertest.ManyRecords rows takes seconds to load and
		// render, and minutes on a loaded machine: no fixed step bound
		// holds there. The read's deadline bounds it instead, which the
		// kit gives a bulk read generously and doubles when it passes.
		inner(sec)["navigation_timeout_s"] = maxNavigationTimeoutS
		return request(t, sec, patient, password).ConfigureRequest
	}
	return adaptertest.Harness{
		Params:         map[string]string{"patient_id": patient},
		Config:         func(*testing.T) sdk.ConfigureRequest { return config(recordapp.ReaderPassword) },
		BadCredentials: func(*testing.T) sdk.ConfigureRequest { return config("wrong-password") },
		Selector:       map[string]string{"patient_id": patient},
		IdentityField:  "id",
		Reset:          func(*testing.T) { a.Reset(patient) },
		WriteCorrect:   func(*testing.T) string { return strconv.Itoa(triage(patient, savedNote, savedDate)) },
		WriteWrongEntity: func(*testing.T) string {
			return strconv.Itoa(triage("q2", savedNote, savedDate))
		},
		WriteDuplicate: func(*testing.T) string { return strconv.Itoa(triage(patient, savedNote, savedDate)) },
		WriteStale: func(*testing.T) (string, string) {
			triage(patient, savedNote, "2001-02-03")
			return "date", "2001-02-03"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			go func() {
				time.Sleep(delay)
				a.Add(recordapp.Encounter{PatientID: patient, Type: "Triage", Note: savedNote, Date: savedDate})
			}()
		},
		SetReachable: func(_ *testing.T, up bool) { a.SetFaults(recordapp.Faults{Down: !up}) },
		SeedMany:     func(_ *testing.T, n int) { a.Seed(patient, n) },
		// A row that shows the note twice (td.note, the original and an
		// amendment): the note has two values in one record.
		WriteUnshapeable: func(*testing.T) string {
			ac.save(recordapp.Encounter{PatientID: patient, Type: "Triage", Note: savedNote, Amended: "amended note", Date: savedDate})
			return "note"
		},
	}
}

// TestQualification runs the SDK's qualification kit in process, on the
// package's shared browser.
func TestQualification(t *testing.T) {
	h := harness(t)
	h.Factory = NewWithBrowser(shared)
	adaptertest.Run(t, h)
}

// TestQualificationSubprocess runs the kit against the real plugin binary,
// as the daemon starts it: its own process, an empty environment, its own
// browser.
func TestQualificationSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser per subtest")
	}
	h := harness(t)
	h.Binary = pluginBinary
	h.Env = []string{}
	adaptertest.Run(t, h)
}
