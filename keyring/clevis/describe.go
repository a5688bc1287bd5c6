package clevis

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Describe returns the policy a clevis JWE (flattened or compact) was
// bound with, as `clevis luks list` prints it after "SLOT: ": the pin and
// its configuration, e.g. tang '{"url":"http://tang"}'. Only what
// identifies the binding is shown: a tang pin's URL (not its
// advertisement), a tpm2 pin's policy, an sss pin's threshold and pins.
func Describe(raw json.RawMessage) (string, error) {
	pin, cfg, err := describe(raw, 0)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s '%s'", pin, cfg), nil
}

func describe(raw json.RawMessage, depth int) (pin, cfg string, err error) {
	if depth > maxDepth {
		return "", "", fmt.Errorf("%w: sss pins nested deeper than %d", ErrBadJWE, maxDepth)
	}
	_, h, err := parseJWE(raw)
	if err != nil {
		return "", "", err
	}
	switch pin = h.Clevis.Pin; pin {
	case "tang":
		var t struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(h.Clevis.Tang, &t) != nil {
			return "", "", fmt.Errorf("%w: tang pin without url", ErrBadJWE)
		}
		return pin, jsonObject("url", quote(t.URL)), nil
	case "tpm2":
		var t map[string]any
		_ = json.Unmarshal(h.Clevis.TPM2, &t)
		var kv []string
		for _, k := range []string{"hash", "key", "pcr_bank", "pcr_ids", "pcr_digest"} {
			if v, ok := t[k]; ok {
				kv = append(kv, k, quote(fmt.Sprint(v)))
			}
		}
		return pin, jsonObject(kv...), nil
	case "sss":
		cfg, err := describeSSS(h.Clevis.SSS, depth)
		return pin, cfg, err
	}
	return "unknown pin", pin, nil
}

// describeSSS is an sss pin's configuration: its threshold, and its
// nested pins grouped as clevis groups them (tang, then tpm2, then one
// nested sss).
func describeSSS(raw json.RawMessage, depth int) (string, error) {
	var cfg sssConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("%w: sss pin: %v", ErrBadJWE, err)
	}
	groups := map[string][]string{}
	for _, j := range cfg.JWE {
		pin, c, err := describe(j, depth+1)
		if err != nil {
			continue
		}
		groups[pin] = append(groups[pin], c)
	}
	var pins []string
	for _, name := range []string{"tang", "tpm2"} {
		if g := groups[name]; len(g) > 0 {
			pins = append(pins, quote(name)+":["+strings.Join(g, ",")+"]")
		}
	}
	if g := groups["sss"]; len(g) > 0 {
		pins = append(pins, quote("sss")+":"+g[len(g)-1])
	}
	return fmt.Sprintf(`{"t":%d,"pins":{%s}}`, cfg.T, strings.Join(pins, ",")), nil
}

// jsonObject writes {"k1":v1,...} from names and already-encoded values.
func jsonObject(kv ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(kv[i]) + ":" + kv[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

// quote is s as a JSON string, '&', '<' and '>' left as they are (as
// clevis's printf leaves them).
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
