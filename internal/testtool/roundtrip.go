package testtool

import (
	"reflect"
	"testing"
)

// RoundTrip encodes want, decodes the bytes and fails t unless the result
// is deeply equal to want; it returns the encoding for further checks.
func RoundTrip[T any](t testing.TB, want T, encode func(T) ([]byte, error), decode func([]byte) (T, error)) []byte {
	t.Helper()
	b, err := encode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	return b
}
