package luks2

import (
	"encoding/hex"
	"strings"
	"testing"
)

// ISO/IEC 10118-3 test vectors for Whirlpool.
func TestWhirlpoolVectors(t *testing.T) {
	vectors := []struct{ in, out string }{
		{"", "19FA61D75522A4669B44E39C1D2E1726C530232130D407F89AFEE0964997F7A73E83BE698B288FEBCF88E3E03C4F0757EA8964E59B63D93708B138CC42A66EB3"},
		{"a", "8ACA2602792AEC6F11A67206531FB7D7F0DFF59413145E6973C45001D0087B42D11BC645413AEFF63A42391A39145A591A92200D560195E53B478584FDAE231A"},
		{"abc", "4E2448A4C6F486BB16B6562C73B4020BF3043E3A731BCE721AE1B303D97E6D4C7181EEBDB6C57E277D0E34957114CBD6C797FC9D95D8B582D225292076D4EEF5"},
		{"message digest", "378C84A4126E2DC6E56DCC7458377AAC838D00032230F53CE1F5700C0FFB4D3B8421557659EF55C106B4B52AC5A4AAA692ED920052838F3362E86DBD37A8903E"},
		{strings.Repeat("1234567890", 8), "466EF18BABB0154D25B9D38A6414F5C08784372BCCB204D6549C4AFADB6014294D5BD8DF2A6C44E538CD047B2681A51A2C60481E88C5A20B2C2A80CF3A9A083B"},
	}
	for _, v := range vectors {
		h := newWhirlpool()
		h.Write([]byte(v.in))
		if got := strings.ToUpper(hex.EncodeToString(h.Sum(nil))); got != v.out {
			t.Errorf("Whirlpool(%q) = %s, want %s", v.in, got, v.out)
		}
	}
	// Writing in pieces gives the same digest as one write.
	a, b := newWhirlpool(), newWhirlpool()
	msg := []byte(strings.Repeat("luksd", 100))
	a.Write(msg)
	for i := 0; i < len(msg); i += 7 {
		b.Write(msg[i:min(i+7, len(msg))])
	}
	if hex.EncodeToString(a.Sum(nil)) != hex.EncodeToString(b.Sum(nil)) {
		t.Fatal("piecewise writes differ")
	}
}
