package testtool

import (
	"net"
	"testing"
)

func TestListeningOn(t *testing.T) {
	addr := FreeLoopbackPort(t)
	if listeningOn(addr) {
		t.Fatalf("%s listens before anything bound it", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !listeningOn(addr) {
		t.Errorf("%s: a listener not seen", addr)
	}
	l.Close()
	if listeningOn(addr) {
		t.Errorf("%s: still seen listening after it closed", addr)
	}
}
