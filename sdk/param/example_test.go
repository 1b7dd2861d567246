package param_test

import (
	"encoding/json"
	"fmt"

	"github.com/verifierd/verifierd/sdk/param"
)

// An adapter binds a value expression from its section and fills a URL
// template with it; the value stays one path segment or one query value.
func ExampleExpand() {
	params := map[string]string{"patient_id": "PAT 1&limit=999"}
	v, err := param.BindJSON(json.RawMessage(`{"param": "patient_id"}`), "path_params.patient", params)
	if err != nil {
		fmt.Println(err)
		return
	}
	lookup := func(string) (string, bool) { return v, true }
	u, _ := param.Expand("/api/encounters?patient={patient}", param.URL, param.Lookup(lookup))
	fmt.Println(u)
	_, err = param.Expand("/api/patients/{patient}", param.URL, param.Lookup(func(string) (string, bool) { return "../admin", true }))
	fmt.Println(err)
	// Output:
	// /api/encounters?patient=PAT+1%26limit%3D999
	// placeholder {patient} in the path holds a path separator ("../admin"); a value fills exactly one path segment
}
