package clevis

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
)

// tangSeal makes the header and content key of a JWE bound to a tang
// server, as clevis-encrypt-tang does: it takes the server's
// advertisement (from the configuration, a file it names, or GET
// URL/adv/THP), checks that every signing key in it signed it and that
// one of them is trusted, and agrees a key (ECDH-ES) with the
// advertisement's exchange key and a fresh ephemeral key. Recovery
// (tangKey) later redoes that agreement through the server.
func (e *Encrypter) tangSeal(ctx context.Context, cfg map[string]json.RawMessage) (*sealHeader, []byte, error) {
	var url, thp string
	if json.Unmarshal(cfg["url"], &url) != nil || url == "" {
		return nil, nil, fmt.Errorf("%w: missing the required 'url' property", ErrBadConfig)
	}
	if raw, ok := cfg["thp"]; ok && json.Unmarshal(raw, &thp) != nil {
		return nil, nil, fmt.Errorf("%w: 'thp' is not a string", ErrBadConfig)
	}
	jws, fromConfig, err := e.advertisement(ctx, url, thp, cfg["adv"])
	if err != nil {
		return nil, nil, err
	}
	keys, raw, err := verifyAdvertisement(jws)
	if err != nil {
		return nil, nil, err
	}
	if err := e.trust(url, thp, fromConfig, keys); err != nil {
		return nil, nil, err
	}
	srv, err := keys.exchange()
	if err != nil {
		return nil, nil, err
	}
	tp, err := srv.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, nil, err
	}
	clevis, err := json.Marshal(map[string]any{"pin": "tang", "tang": map[string]any{"adv": raw, "url": url}})
	if err != nil {
		return nil, nil, err
	}
	h := &sealHeader{Alg: "ECDH-ES", Enc: "A256GCM", Kid: b64.EncodeToString(tp), Clevis: clevis}
	cek, err := agree(h, srv.Key.(*ecdsa.PublicKey))
	return h, cek, err
}

// advertisement returns the signed advertisement (a JWS) the
// configuration's adv gives (an object, or the name of a file holding
// one), or else the one the server serves; fromConfig reports the first.
func (e *Encrypter) advertisement(ctx context.Context, url, thp string, adv json.RawMessage) (jws []byte, fromConfig bool, err error) {
	if len(adv) > 0 {
		var name string
		if json.Unmarshal(adv, &name) != nil {
			return adv, true, nil
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, false, fmt.Errorf("%w: advertisement file '%s' not found", ErrBadConfig, name)
		}
		return b, true, nil
	}
	endpoint := strings.TrimSuffix(url, "/") + "/adv/" + thp
	fail := func(err error) ([]byte, bool, error) {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, false, fmt.Errorf("clevis: unable to fetch advertisement: '%s': %w", endpoint, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	resp, err := e.client().Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(errors.New(resp.Status))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fail(err)
	}
	return b, false, nil
}

// advKey is one key of an advertisement with the operations it is for.
type advKey struct {
	jose.JSONWebKey
	ops []string
}

type advKeys []advKey

// verifyAdvertisement reads the advertisement's keys and checks that
// every one of them meant for verifying signed it (`jose jws ver -a`).
// raw is the advertised key set as served.
func verifyAdvertisement(jws []byte) (advKeys, json.RawMessage, error) {
	malformed := fmt.Errorf("%w: advertisement is malformed", ErrBadConfig)
	sig, err := jose.ParseSignedJSON(string(jws), []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.ES512})
	if err != nil {
		return nil, nil, malformed
	}
	payload := sig.UnsafePayloadWithoutVerification()
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if json.Unmarshal(payload, &set) != nil || len(set.Keys) == 0 {
		return nil, nil, malformed
	}
	var keys advKeys
	for _, raw := range set.Keys {
		var k advKey
		var ops struct {
			KeyOps []string `json:"key_ops"`
		}
		if k.UnmarshalJSON(raw) != nil || json.Unmarshal(raw, &ops) != nil {
			return nil, nil, malformed
		}
		k.ops = ops.KeyOps
		keys = append(keys, k)
	}
	verifiers := keys.with("verify")
	if len(verifiers) == 0 {
		return nil, nil, fmt.Errorf("%w: advertisement is missing signatures", ErrBadConfig)
	}
	for _, k := range verifiers {
		if _, _, _, err := sig.VerifyMulti(k.Key); err != nil {
			return nil, nil, fmt.Errorf("%w: advertisement is missing signatures", ErrBadConfig)
		}
	}
	return keys, json.RawMessage(payload), nil
}

// with returns the keys meant for op.
func (ks advKeys) with(op string) advKeys {
	var out advKeys
	for _, k := range ks {
		if slices.Contains(k.ops, op) {
			out = append(out, k)
		}
	}
	return out
}

// exchange returns the advertisement's first key-derivation key.
func (ks advKeys) exchange() (*jose.JSONWebKey, error) {
	for _, k := range ks.with("deriveKey") {
		if _, ok := k.Key.(*ecdsa.PublicKey); ok {
			return &k.JSONWebKey, nil
		}
	}
	return nil, fmt.Errorf("%w: key derivation key not available", ErrBadConfig)
}

// trust checks the advertisement's signing keys against the
// configuration, as clevis does: an advertisement from the configuration
// is trusted; a thumbprint (SHA-256, or SHA-1 as older clevis wrote)
// must name one of the signing keys; with neither, Trust decides.
func (e *Encrypter) trust(url, thp string, fromConfig bool, keys advKeys) error {
	verifiers := keys.with("verify")
	if thp != "" {
		for _, k := range verifiers {
			for _, hash := range []crypto.Hash{crypto.SHA256, crypto.SHA1} {
				if tp, err := k.Thumbprint(hash); err == nil && b64.EncodeToString(tp) == thp {
					return nil
				}
			}
		}
		return fmt.Errorf("%w: trusted JWK '%s' did not sign the advertisement", ErrBadConfig, thp)
	}
	if fromConfig || e.Trust == nil {
		return nil
	}
	var tps []string
	for _, k := range verifiers {
		tp, err := k.Thumbprint(crypto.SHA256)
		if err != nil {
			return err
		}
		tps = append(tps, b64.EncodeToString(tp))
	}
	if !e.Trust(url, tps) {
		return ErrNotTrusted
	}
	return nil
}

// ErrNotTrusted: the user did not trust a tang server's signing keys.
var ErrNotTrusted = errors.New("clevis: the advertisement's signing keys are not trusted")

// agree makes a fresh ephemeral key on srv's curve, records its public
// half as h's epk, and derives the content key from the agreed point
// (ECDH-ES, direct key agreement, no apu/apv: what jose writes).
func agree(h *sealHeader, srv *ecdsa.PublicKey) ([]byte, error) {
	cv, err := curveOf(srv.Curve)
	if err != nil {
		return nil, err
	}
	pub, err := srv.ECDH()
	if err != nil {
		return nil, fmt.Errorf("%w: exchange key: %v", ErrBadConfig, err)
	}
	eph, err := cv.ecdh.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	z, err := eph.ECDH(pub)
	if err != nil {
		return nil, err
	}
	defer clear(z)
	epk, err := ecdsa.ParseUncompressedPublicKey(srv.Curve, eph.PublicKey().Bytes())
	if err != nil {
		return nil, err
	}
	if h.EPK, err = json.Marshal(jose.JSONWebKey{Key: epk}); err != nil {
		return nil, err
	}
	return ecdhesKey(&header{Enc: h.Enc}, z)
}
