package testtool

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A VaultServer is a minimal HTTPS endpoint that answers the two Vault
// (and OpenBao) API calls luksd makes, exactly as documented: cert auth
// login (POST /v1/auth/cert/login, which needs a client certificate
// signed by its CA) and a KV version 1 read (GET /v1/secret/...,
// X-Vault-Token). No Vault or OpenBao server can be installed here; the
// client under test is the real hashicorp/vault/api.
type VaultServer struct {
	URL     string
	Logins  int // successful logins so far
	mu      sync.Mutex
	token   string
	secrets map[string]map[string]string
}

// Vault starts a server holding secrets (path under /v1/ → fields) and
// points Vault's standard environment (VAULT_ADDR, VAULT_CACERT,
// VAULT_CLIENT_CERT, VAULT_CLIENT_KEY) at it with a client certificate
// of common name cn, for this process and the luksd it runs.
func Vault(t *testing.T, cn string, secrets map[string]map[string]string) *VaultServer {
	t.Helper()
	ca := NewCA(t, "vault test CA")
	srvDir, cliDir := ca.ServerDir(t), ca.ClientDir(t, cn, ca)
	tok := make([]byte, 12)
	rand.Read(tok)
	v := &VaultServer{token: "s." + hex.EncodeToString(tok), secrets: secrets}
	s := httptest.NewUnstartedServer(http.HandlerFunc(v.serve))
	cert, err := tls.LoadX509KeyPair(filepath.Join(srvDir, "server-cert.pem"), filepath.Join(srvDir, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	s.StartTLS()
	t.Cleanup(s.Close)
	v.URL = s.URL
	t.Setenv("VAULT_ADDR", s.URL)
	t.Setenv("VAULT_CACERT", filepath.Join(cliDir, "ca-cert.pem"))
	t.Setenv("VAULT_CLIENT_CERT", filepath.Join(cliDir, "client-cert.pem"))
	t.Setenv("VAULT_CLIENT_KEY", filepath.Join(cliDir, "client-key.pem"))
	return v
}

func (v *VaultServer) serve(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"errors": []string{msg}})
	}
	reply := func(body map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(body)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	// Vault takes PUT and POST alike; the api client writes with PUT.
	case (r.Method == http.MethodPost || r.Method == http.MethodPut) && r.URL.Path == "/v1/auth/cert/login":
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			fail(http.StatusBadRequest, "client certificate must be supplied")
			return
		}
		v.Logins++
		reply(map[string]any{"request_id": "login", "lease_id": "", "renewable": false, "lease_duration": 0, "data": nil,
			"auth": map[string]any{"client_token": v.token, "accessor": "acc", "policies": []string{"default"}, "lease_duration": 3600, "renewable": true}})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/"):
		if r.Header.Get("X-Vault-Token") != v.token {
			fail(http.StatusForbidden, "permission denied")
			return
		}
		data, ok := v.secrets[strings.TrimPrefix(r.URL.Path, "/v1/")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			reply(map[string]any{"errors": []string{}})
			return
		}
		reply(map[string]any{"request_id": "read", "lease_id": "", "renewable": false, "lease_duration": 2764800, "data": data, "auth": nil})
	default:
		fail(http.StatusMethodNotAllowed, "unsupported path")
	}
}
