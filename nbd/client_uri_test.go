package nbd

import "testing"

func TestParseURI(t *testing.T) {
	good := map[string]Target{
		"nbd://example.com/disk":                      {Network: "tcp", Addr: "example.com:10809", Export: "disk"},
		"nbd://127.0.0.1:1234/":                       {Network: "tcp", Addr: "127.0.0.1:1234"},
		"nbd://[::1]:99/a/b":                          {Network: "tcp", Addr: "[::1]:99", Export: "a/b"},
		"nbds://h/x?tls-certificates=/etc/c":          {Network: "tcp", Addr: "h:10809", Export: "x", TLS: true, CertDir: "/etc/c"},
		"nbd+unix:///e?socket=/run/s.sock":            {Network: "unix", Addr: "/run/s.sock", Export: "e"},
		"nbds+unix:///?socket=/s&tls-certificates=/d": {Network: "unix", Addr: "/s", TLS: true, CertDir: "/d"},
	}
	for uri, want := range good {
		got, err := ParseURI(uri)
		got.host = ""
		if err != nil || got != want {
			t.Errorf("ParseURI(%q) = %+v, %v; want %+v", uri, got, err, want)
		}
	}
	for _, uri := range []string{
		"http://h/x", "nbd:///x", "nbd+unix:///x", "nbd+unix://h/x?socket=/s",
		"nbd://h/x?socket=/s", "nbd://h/x?tls-certificates=/d", "nbd://h/x?foo=1", "nbd://u@h/x",
	} {
		if _, err := ParseURI(uri); err == nil {
			t.Errorf("ParseURI(%q) accepted it", uri)
		}
	}
}
