package clevis

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
)

// sssFieldBits is the size of the prime field clevis's sss pin splits
// in: the content key (A256GCM) is the secret polynomial's constant term.
const sssFieldBits = 256

// sssSeal makes the header and content key of an sss JWE, as
// clevis-encrypt-sss does: a random polynomial of degree t-1 over a
// fresh 256-bit prime field, whose value at zero is the content key; one
// point of it per nested pin, each sealed to that pin.
func (e *Encrypter) sssSeal(ctx context.Context, cfg map[string]json.RawMessage, depth int) (*sealHeader, []byte, error) {
	var t int
	if json.Unmarshal(cfg["t"], &t) != nil {
		return nil, nil, fmt.Errorf("%w: config missing 't' attribute", ErrBadConfig)
	}
	pins, err := nestedPins(cfg["pins"])
	if err != nil {
		return nil, nil, err
	}
	if t < 1 || t > len(pins) {
		return nil, nil, fmt.Errorf("%w: invalid threshold (required: 1 <= %d <= %d)", ErrBadConfig, t, len(pins))
	}
	p, err := rand.Prime(rand.Reader, sssFieldBits)
	if err != nil {
		return nil, nil, err
	}
	coef := make([]*big.Int, t)
	for i := range coef {
		if coef[i], err = rand.Int(rand.Reader, p); err != nil {
			return nil, nil, err
		}
	}
	size := sssFieldBits / 8
	var jwes []string
	seen := map[string]bool{}
	for _, pin := range pins {
		x, err := randNonZero(p)
		if err != nil {
			return nil, nil, err
		}
		if seen[x.String()] {
			return nil, nil, fmt.Errorf("clevis: sss drew the same point twice")
		}
		seen[x.String()] = true
		share := append(x.FillBytes(make([]byte, size)), evalPoly(coef, x, p).FillBytes(make([]byte, size))...)
		jwe, err := e.encrypt(ctx, pin.name, pin.config, share, depth+1)
		clear(share)
		if err != nil {
			return nil, nil, err
		}
		jwes = append(jwes, jwe)
	}
	clevis, err := json.Marshal(map[string]any{"pin": "sss", "sss": map[string]any{"jwe": jwes, "p": b64.EncodeToString(p.Bytes()), "t": t}})
	if err != nil {
		return nil, nil, err
	}
	return &sealHeader{Alg: "dir", Enc: "A256GCM", Clevis: clevis}, coef[0].FillBytes(make([]byte, size)), nil
}

// A nestedPin is one pin of an sss configuration.
type nestedPin struct {
	name   string
	config json.RawMessage
}

// nestedPins lists an sss configuration's pins: {"tang":[cfg, ...],
// "sss":cfg, ...}, each value one configuration or an array of them.
func nestedPins(raw json.RawMessage) ([]nestedPin, error) {
	var byName map[string]json.RawMessage
	if json.Unmarshal(raw, &byName) != nil || len(byName) == 0 {
		return nil, fmt.Errorf("%w: config missing 'pins' attribute", ErrBadConfig)
	}
	var pins []nestedPin
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		var list []json.RawMessage
		if json.Unmarshal(byName[name], &list) != nil {
			list = []json.RawMessage{byName[name]}
		}
		for _, c := range list {
			pins = append(pins, nestedPin{name, c})
		}
	}
	return pins, nil
}

// randNonZero is a uniform random element of the field of p other than 0.
func randNonZero(p *big.Int) (*big.Int, error) {
	for {
		x, err := rand.Int(rand.Reader, p)
		if err != nil || x.Sign() != 0 {
			return x, err
		}
	}
}

// evalPoly is the polynomial with coefficients coef (constant first) at
// x, modulo p (Horner's rule).
func evalPoly(coef []*big.Int, x, p *big.Int) *big.Int {
	y := new(big.Int)
	for i := len(coef) - 1; i >= 0; i-- {
		y.Mul(y, x)
		y.Add(y, coef[i])
		y.Mod(y, p)
	}
	return y
}
