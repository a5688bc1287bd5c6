package clevis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
)

// sssConfig is the sss pin's part of the protected header: the prime
// field, the threshold and one nested JWE per share, each encrypting the
// share's point (x || y, each as long as the prime).
type sssConfig struct {
	T   int               `json:"t"`
	P   string            `json:"p"`
	JWE []json.RawMessage `json:"jwe"`
}

// sssKey recovers the content key of an sss JWE (alg "dir"): it decrypts
// nested JWEs, each with its own pin, until t shares are in hand, and
// interpolates the secret polynomial at zero (Shamir's scheme over the
// prime field p). A share whose pin fails is passed over; when fewer
// than t open, the error names the last failure.
func (d *Decrypter) sssKey(ctx context.Context, h *header, depth int) ([]byte, error) {
	var cfg sssConfig
	if err := json.Unmarshal(h.Clevis.SSS, &cfg); err != nil {
		return nil, fmt.Errorf("%w: sss pin: %v", ErrBadJWE, err)
	}
	if h.Alg != "dir" {
		return nil, fmt.Errorf("%w: sss pin needs alg dir, not %q", ErrBadJWE, h.Alg)
	}
	pb, err := b64.DecodeString(cfg.P)
	if err != nil || len(pb) == 0 || cfg.T < 1 || cfg.T > len(cfg.JWE) {
		return nil, fmt.Errorf("%w: sss pin with t=%d of %d shares", ErrBadJWE, cfg.T, len(cfg.JWE))
	}
	p := new(big.Int).SetBytes(pb)
	var xs, ys []*big.Int
	var failures []error
	for _, raw := range cfg.JWE {
		share, err := d.decrypt(ctx, raw, depth+1)
		if err != nil {
			failures = append(failures, err)
			continue
		}
		if len(share) != 2*len(pb) {
			clear(share)
			failures = append(failures, fmt.Errorf("%w: an sss share of %d bytes", ErrBadJWE, len(share)))
			continue
		}
		xs = append(xs, new(big.Int).SetBytes(share[:len(pb)]))
		ys = append(ys, new(big.Int).SetBytes(share[len(pb):]))
		clear(share)
		if len(xs) == cfg.T {
			return lagrangeAtZero(xs, ys, p, len(pb))
		}
	}
	return nil, fmt.Errorf("sss: %d of %d shares needed, %d opened: %w", cfg.T, len(cfg.JWE), len(xs), errors.Join(failures...))
}

// lagrangeAtZero returns f(0) for the polynomial through the points
// (xs[i], ys[i]) over the field of prime p, as size big-endian bytes:
// the sum of y_i · Π_{j≠i} x_j / (x_j - x_i).
func lagrangeAtZero(xs, ys []*big.Int, p *big.Int, size int) ([]byte, error) {
	sum := new(big.Int)
	for i := range xs {
		num, den := big.NewInt(1), big.NewInt(1)
		for j := range xs {
			if i == j {
				continue
			}
			num.Mod(num.Mul(num, xs[j]), p)
			diff := new(big.Int).Sub(xs[j], xs[i])
			den.Mod(den.Mul(den, diff.Mod(diff, p)), p)
		}
		inv := new(big.Int).ModInverse(den, p)
		if inv == nil {
			return nil, fmt.Errorf("%w: two sss shares at the same x", ErrBadJWE)
		}
		term := new(big.Int).Mul(ys[i], num)
		term.Mod(term.Mul(term, inv), p)
		sum.Add(sum, term)
	}
	sum.Mod(sum, p)
	if (sum.BitLen()+7)/8 > size {
		return nil, fmt.Errorf("%w: sss secret larger than its field", ErrBadJWE)
	}
	return sum.FillBytes(make([]byte, size)), nil
}
