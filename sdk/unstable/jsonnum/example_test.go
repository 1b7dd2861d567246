package jsonnum_test

import (
	"fmt"

	"github.com/verifierd/verifierd/sdk/unstable/jsonnum"
)

// An adapter that reads decimals as text checks them before returning them
// as json.Number, and keeps anything else as a string.
func ExampleValid() {
	for _, s := range []string{"1250.00", "-0.5", "1,250.00", "NaN", ".5"} {
		fmt.Println(s, jsonnum.Valid(s))
	}
	// Output:
	// 1250.00 true
	// -0.5 true
	// 1,250.00 false
	// NaN false
	// .5 false
}

// Scan reads one number inside a larger text and says where its parts are.
func ExampleScan() {
	s := `{"amount": -12.50e2, "currency": "EUR"}`
	n, err := jsonnum.Scan(s, 11)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("number %q: integer %q, fraction %q, exponent %q; then %q\n",
		s[n.Start:n.End], s[n.Start:n.Frac], s[n.Frac:n.Exp], s[n.Exp:n.End], s[n.End:n.End+1])
	_, err = jsonnum.Scan("7.e3", 0)
	fmt.Println(err)
	// Output:
	// number "-12.50e2": integer "-12", fraction ".50", exponent "e2"; then ","
	// invalid number: a '.' needs digits after it
}
