package clevis

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"filippo.io/nistec"
	"github.com/go-jose/go-jose/v4"
)

// tangConfig is the tang pin's part of the protected header: the
// server's URL and the advertisement (its public keys) bound to.
type tangConfig struct {
	URL string `json:"url"`
	Adv struct {
		Keys []jose.JSONWebKey `json:"keys"`
	} `json:"adv"`
}

// tangKey recovers the content key of an ECDH-ES JWE bound to a tang
// server, with the McCallum-Relyea exchange: the JWE's ephemeral key C
// was agreed with the server's exchange key S (private s), so the
// shared point is sC. The client sends C + eG for a fresh e, the server
// answers s(C + eG), and sC = s(C + eG) - eS. The server never sees C,
// and nothing it answers reveals sC without e.
func tangKey(ctx context.Context, client *http.Client, h *header) ([]byte, error) {
	var cfg tangConfig
	if err := json.Unmarshal(h.Clevis.Tang, &cfg); err != nil || cfg.URL == "" {
		return nil, fmt.Errorf("%w: tang pin without url or adv", ErrBadJWE)
	}
	if h.Alg != "ECDH-ES" || h.EPK == nil || h.Kid == "" {
		return nil, fmt.Errorf("%w: tang pin needs alg ECDH-ES, epk and kid", ErrBadJWE)
	}
	srv, err := exchangeKey(cfg.Adv.Keys, h.Kid)
	if err != nil {
		return nil, err
	}
	c, ok := h.EPK.Key.(*ecdsa.PublicKey)
	if !ok || c.Curve != srv.Curve {
		return nil, fmt.Errorf("%w: epk is not a public key on the exchange key's curve", ErrBadJWE)
	}
	cv, err := curveOf(c.Curve)
	if err != nil {
		return nil, err
	}
	e, err := cv.ecdh.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	cBytes, _ := c.Bytes()
	sBytes, _ := srv.Bytes()
	// X = C + eG, the blinded request.
	x, err := cv.add(cBytes, e.PublicKey().Bytes())
	if err != nil {
		return nil, err
	}
	y, err := tangRecover(ctx, client, cfg.URL, h.Kid, c.Curve, x)
	if err != nil {
		return nil, err
	}
	// sC = Y - eS.
	z, err := cv.unblind(y, sBytes, e.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	return ecdhesKey(h, z)
}

// exchangeKey finds in the advertisement the exchange (ECMR) key whose
// RFC 7638 thumbprint is kid (SHA-256, as clevis 19 computes it, or
// SHA-1, as older clevis did).
func exchangeKey(keys []jose.JSONWebKey, kid string) (*ecdsa.PublicKey, error) {
	for _, k := range keys {
		pub, ok := k.Key.(*ecdsa.PublicKey)
		if !ok || k.Algorithm != "ECMR" {
			continue
		}
		for _, hash := range []crypto.Hash{crypto.SHA256, crypto.SHA1} {
			if tp, err := k.Thumbprint(hash); err == nil && b64.EncodeToString(tp) == kid {
				return pub, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: the advertisement holds no exchange key %s", ErrBadJWE, kid)
}

// tangRecover posts the blinded key x to the tang server's /rec/KID and
// returns the point it answers, uncompressed.
func tangRecover(ctx context.Context, client *http.Client, url, kid string, curve elliptic.Curve, x []byte) ([]byte, error) {
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, x)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(jose.JSONWebKey{Key: pub, Algorithm: "ECMR"})
	if err != nil {
		return nil, err
	}
	endpoint := strings.TrimSuffix(url, "/") + "/rec/" + kid
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJWE, err)
	}
	req.Header.Set("Content-Type", "application/jwk+json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, &ServerError{URL: url, Err: err}
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, &ServerError{URL: url, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &ServerError{URL: url, Err: fmt.Errorf("POST /rec/%s: %s", kid, resp.Status)}
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(reply); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReply, err)
	}
	y, ok := k.Key.(*ecdsa.PublicKey)
	if !ok || y.Curve != curve {
		return nil, fmt.Errorf("%w: not a point on %s", ErrBadReply, curve.Params().Name)
	}
	return y.Bytes()
}

// A curve is one of the NIST curves tang uses, with the point
// arithmetic the exchange needs.
type curve struct {
	ecdh    ecdh.Curve
	add     func(p, q []byte) ([]byte, error)
	unblind func(y, s, e []byte) ([]byte, error) // x coordinate of y - e·s
}

func curveOf(c elliptic.Curve) (*curve, error) {
	switch c {
	case elliptic.P256():
		return newCurve(ecdh.P256(), c, nistec.NewP256Point), nil
	case elliptic.P384():
		return newCurve(ecdh.P384(), c, nistec.NewP384Point), nil
	case elliptic.P521():
		return newCurve(ecdh.P521(), c, nistec.NewP521Point), nil
	}
	return nil, fmt.Errorf("%w: curve %s is not supported", ErrBadJWE, c.Params().Name)
}

// point is the part of filippo.io/nistec's point types the exchange uses.
type point[P any] interface {
	*P
	Bytes() []byte
	BytesX() ([]byte, error)
	SetBytes([]byte) (*P, error)
	Add(*P, *P) *P
	Negate(*P) *P
	ScalarMult(*P, []byte) (*P, error)
}

func newCurve[P any, PP point[P]](e ecdh.Curve, c elliptic.Curve, newPoint func() PP) *curve {
	parse := func(b []byte) (PP, error) {
		p := newPoint()
		if _, err := p.SetBytes(b); err != nil {
			return nil, err
		}
		return p, nil
	}
	return &curve{
		ecdh: e,
		add: func(a, b []byte) ([]byte, error) {
			p, err1 := parse(a)
			q, err2 := parse(b)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%w: a point not on the curve", ErrBadJWE)
			}
			sum := newPoint()
			sum.Add(p, q)
			return sum.Bytes(), nil
		},
		unblind: func(yb, sb, e []byte) ([]byte, error) {
			y, err1 := parse(yb)
			s, err2 := parse(sb)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("a point not on the curve")
			}
			es := newPoint()
			if _, err := es.ScalarMult(s, e); err != nil {
				return nil, err
			}
			es.Negate(PP(es))
			z := newPoint()
			z.Add(y, PP(es))
			return z.BytesX()
		},
	}
}
