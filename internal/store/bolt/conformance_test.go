package bolt

import (
	"encoding/binary"
	"fmt"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/storetest"
)

// conformance is the embedded store as storetest drives it.
var conformance = storetest.Backend{
	Open: func(t *testing.T) store.Backend {
		s, err := OpenWith(t.TempDir(), Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
	Damage: func(t *testing.T, b store.Backend, v storetest.Value) {
		t.Helper()
		err := b.(*Store).update(t.Context(), func(tx *bbolt.Tx) error {
			var bk *bbolt.Bucket
			var key []byte
			switch v.Kind {
			case storetest.KindSession:
				bk, key = tx.Bucket(bucketSessions), []byte(v.Session)
			case storetest.KindResult:
				bk, key = tx.Bucket(bucketResults), []byte(v.Session)
			case storetest.KindReverification:
				bk, key = tx.Bucket(bucketReverified), fmt.Appendf(nil, "%s/%08d", v.Session, v.Attempt)
			case storetest.KindBaseline:
				bk = tx.Bucket(bucketBaselines).Bucket([]byte(v.Session)).Bucket(baselineKey(v.Session, v.Capture))
				key = binary.BigEndian.AppendUint64(nil, 0)
			case storetest.KindReward:
				bk, key = tx.Bucket([]byte(v.Bucket.String())), []byte(v.Key)
			case storetest.KindRun:
				bk, key = tx.Bucket(bucketRuns), []byte(v.Key)
			}
			val := append([]byte(nil), bk.Get(key)...)
			if len(val) == 0 {
				return fmt.Errorf("no value to damage at %+v", v)
			}
			val[0] ^= 0x01
			return bk.Put(key, val)
		})
		if err != nil {
			t.Fatal(err)
		}
	},
}

func TestConformance(t *testing.T) { storetest.Exercise(t, conformance) }
