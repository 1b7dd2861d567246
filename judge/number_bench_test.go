package judge

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/compact"
)

// numberTexts is a mix of the number texts a read holds: surrogate ids,
// money with trailing zeros, negative fractions and exponents.
var numberTexts = []string{"12345", "42.50", "-0.001", "1.5e3", "0", "-7", "9007199254740993", "6.02E+23", "100.0", "3.14159"}

// BenchmarkDecodeNumbers: the fast decoder reading 100,000 records of
// number fields only, so that its time is the number grammar's and the
// canonical text's.
func BenchmarkDecodeNumbers(b *testing.B) {
	var sb strings.Builder
	sb.WriteByte('[')
	const n = 100_000
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"id":` + strconv.Itoa(i+1))
		for j, t := range numberTexts {
			sb.WriteString(`,"n` + strconv.Itoa(j) + `":` + t)
		}
		sb.WriteByte('}')
	}
	sb.WriteByte(']')
	data := sb.String()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compact.DecodeRecords(data, "records"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}

// BenchmarkCanonNumber: the canonical text of a json.Number, as the map
// path (Judge) and the keyed index compute it.
func BenchmarkCanonNumber(b *testing.B) {
	nums := make([]json.Number, len(numberTexts))
	for i, t := range numberTexts {
		nums[i] = json.Number(t)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, x := range nums {
			if _, ok := Canon(x); !ok {
				b.Fatal(x)
			}
		}
	}
}
