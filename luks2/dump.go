package luks2

import (
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// dump writes luksDump's text in cryptsetup 2.6's layout.
func (h *header) dump(w io.Writer, opts DumpOptions) error {
	var b strings.Builder
	if opts.VolumeKey != nil {
		h.dumpVolumeKey(&b, opts)
	} else {
		h.dumpHeader(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (h *header) dumpVolumeKey(b *strings.Builder, opts DumpOptions) {
	var offset uint64
	cipher, mode := "", ""
	if s, err := h.meta.dataSegment(); err == nil {
		offset = s.offset / 512
		cipher, mode, _ = strings.Cut(s.cipher, "-")
	}
	fmt.Fprintf(b, "LUKS header information for %s\n", opts.Device)
	fmt.Fprintf(b, "Cipher name:   \t%s\n", cipher)
	fmt.Fprintf(b, "Cipher mode:   \t%s\n", mode)
	fmt.Fprintf(b, "Payload offset:\t%d\n", offset)
	fmt.Fprintf(b, "UUID:          \t%s\n", h.bin.uuid)
	writeVolumeKey(b, opts.VolumeKey, opts.KeyFile)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// dumpHeader prints luksDump's text as cryptsetup 2.6.1's LUKS2_hdr_dump
// does: from the JSON tree, each field read by json-c's accessors, so that
// odd values print as cryptsetup prints them.
func (h *header) dumpHeader(b *strings.Builder) {
	root := h.meta.root
	b.WriteString("LUKS header information\n")
	fmt.Fprintf(b, "Version:       \t%d\n", 2)
	fmt.Fprintf(b, "Epoch:         \t%d\n", h.bin.seqID)
	fmt.Fprintf(b, "Metadata area: \t%d [bytes]\n", h.meta.jsonSize+binHeaderSize)
	fmt.Fprintf(b, "Keyslots area: \t%d [bytes]\n", h.meta.keyslotsSize)
	fmt.Fprintf(b, "UUID:          \t%s\n", orDefault(h.bin.uuid, "(no UUID)"))
	fmt.Fprintf(b, "Label:         \t%s\n", orDefault(h.bin.label, "(no label)"))
	fmt.Fprintf(b, "Subsystem:     \t%s\n", orDefault(h.bin.subsystem, "(no subsystem)"))
	dumpConfig(b, root.get("config"))
	dumpSegments(b, root.get("segments"))
	h.dumpKeyslots(b)
	dumpTokens(b, root.get("tokens"))
	dumpDigests(b, root.get("digests"))
}

// dumpConfig is hdr_dump_config.
func dumpConfig(b *strings.Builder, config *node) {
	flags := config.get("flags")
	mand := config.get("requirements").get("mandatory")
	b.WriteString("Flags:       \t")
	for _, f := range arrayVals(flags) {
		b.WriteString(jsonText(f) + " ")
	}
	if len(arrayVals(flags)) == 0 {
		b.WriteString("(no flags)")
	}
	b.WriteString("\n")
	if len(arrayVals(mand)) == 0 {
		b.WriteString("\n")
		return
	}
	b.WriteString("Requirements:\t")
	for _, r := range arrayVals(mand) {
		b.WriteString(jsonText(r) + " ")
	}
	b.WriteString("\n\n")
}

// arrayVals returns an array's elements (none for anything else).
func arrayVals(n *node) []*node {
	if n == nil || n.kind != kindArray {
		return nil
	}
	return n.vals
}

// dumpSegments is hdr_dump_segments.
func dumpSegments(b *strings.Builder, segments *node) {
	b.WriteString("Data segments:\n")
	for i := 0; i < maxSegments; i++ {
		s := segments.get(strconv.Itoa(i))
		if s == nil {
			continue
		}
		fmt.Fprintf(b, "  %d: %s\n", i, jsonText(s.get("type")))
		fmt.Fprintf(b, "\toffset: %d [bytes]\n", uint64Of(s.get("offset")))
		if jsonText(s.get("size")) == "dynamic" {
			b.WriteString("\tlength: (whole device)\n")
		} else {
			fmt.Fprintf(b, "\tlength: %d [bytes]\n", uint64Of(s.get("size")))
		}
		if e := s.get("encryption"); e != nil {
			fmt.Fprintf(b, "\tcipher: %s\n", jsonText(e))
		}
		if ss := s.get("sector_size"); ss != nil {
			fmt.Fprintf(b, "\tsector: %d [bytes]\n", uint32(int64Value(ss)))
		}
		if in := s.get("integrity"); in != nil && in.get("type") != nil {
			fmt.Fprintf(b, "\tintegrity: %s\n", jsonText(in.get("type")))
		}
		if flags := arrayVals(s.get("flags")); len(flags) > 0 {
			b.WriteString("\tflags : " + jsonText(flags[0]))
			for _, f := range flags[1:] {
				b.WriteString(", " + jsonText(f))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

// dumpKeyslots is hdr_dump_keyslots: keyslots 0..31, those cryptsetup has
// a handler for dumped by it.
func (h *header) dumpKeyslots(b *strings.Builder) {
	root := h.meta.root
	b.WriteString("Keyslots:\n")
	for j := 0; j < maxKeyslots; j++ {
		slot := strconv.Itoa(j)
		k := root.get("keyslots").get(slot)
		if k == nil {
			continue
		}
		unbound := ""
		if !h.boundToSegment(j) {
			unbound = " (unbound)"
		}
		fmt.Fprintf(b, "  %s: %s%s\n", slot, jsonText(k.get("type")), unbound)
		if ks := k.get("key_size"); ks != nil {
			fmt.Fprintf(b, "\tKey:        %d bits\n", uint32(int64Value(ks))*8)
		}
		fmt.Fprintf(b, "\tPriority:   %s\n", priorityName(k))
		switch jsonText(k.get("type")) {
		case "luks2":
			dumpLUKS2Keyslot(b, k)
		case "reencrypt":
			dumpReencryptKeyslot(b, k)
		}
		digests := root.get("digests")
		for i, key := range digests.keys {
			for _, v := range arrayVals(digests.vals[i].get("keyslots")) {
				if jsonText(v) == slot {
					fmt.Fprintf(b, "\tDigest ID:  %s\n", key)
				}
			}
		}
	}
}

// boundToSegment is LUKS2_keyslot_for_segment(CRYPT_ONE_SEGMENT): the
// keyslot's digest is some regular segment's.
func (h *header) boundToSegment(slot int) bool {
	kd := h.meta.keyslotDigest(slot)
	if kd == nil {
		return false
	}
	regular := 0
	for _, s := range h.meta.root.get("segments").vals {
		if !isBackupSegment(s) {
			regular++
		}
	}
	for s := 0; s < regular; s++ {
		if h.meta.segmentDigest(s) == kd {
			return true
		}
	}
	return false
}

// priorityName is get_priority_desc.
func priorityName(k *node) string {
	p := int32(PriorityNormal)
	if v := k.get("priority"); v != nil {
		p = intOf(v)
	}
	switch Priority(p) {
	case PriorityIgnore:
		return "ignored"
	case PriorityPrefer:
		return "preferred"
	case PriorityNormal:
		return "normal"
	}
	return "invalid"
}

// dumpLUKS2Keyslot is luks2_keyslot_dump.
func dumpLUKS2Keyslot(b *strings.Builder, k *node) {
	kdf, af, area := k.get("kdf"), k.get("af"), k.get("area")
	if kdf == nil || af == nil || area == nil {
		return
	}
	fmt.Fprintf(b, "\tCipher:     %s\n", jsonText(area.get("encryption")))
	fmt.Fprintf(b, "\tCipher key: %d bits\n", uint32(int64Value(area.get("key_size")))*8)
	fmt.Fprintf(b, "\tPBKDF:      %s\n", jsonText(kdf.get("type")))
	if jsonText(kdf.get("type")) == "pbkdf2" {
		fmt.Fprintf(b, "\tHash:       %s\n", jsonText(kdf.get("hash")))
		fmt.Fprintf(b, "\tIterations: %d\n", uint64Of(kdf.get("iterations")))
	} else {
		fmt.Fprintf(b, "\tTime cost:  %d\n", uint64(int64Value(kdf.get("time"))))
		fmt.Fprintf(b, "\tMemory:     %d\n", uint64(int64Value(kdf.get("memory"))))
		fmt.Fprintf(b, "\tThreads:    %d\n", uint64(int64Value(kdf.get("cpus"))))
	}
	b.WriteString("\tSalt:       ")
	hexBase64(b, kdf.get("salt"))
	fmt.Fprintf(b, "\tAF stripes: %d\n", uint32(intOf(af.get("stripes"))))
	fmt.Fprintf(b, "\tAF hash:    %s\n", jsonText(af.get("hash")))
	fmt.Fprintf(b, "\tArea offset:%d [bytes]\n", uint64Of(area.get("offset")))
	fmt.Fprintf(b, "\tArea length:%d [bytes]\n", uint64Of(area.get("size")))
}

// dumpReencryptKeyslot is reenc_keyslot_dump.
func dumpReencryptKeyslot(b *strings.Builder, k *node) {
	area := k.get("area")
	if k.get("direction") == nil || k.get("mode") == nil || area == nil || area.get("type") == nil {
		return
	}
	resilience := jsonText(area.get("type"))
	fmt.Fprintf(b, "\t%-12s%s\n", "Mode:", jsonText(k.get("mode")))
	fmt.Fprintf(b, "\t%-12s%s\n", "Direction:", jsonText(k.get("direction")))
	fmt.Fprintf(b, "\t%-12s%s\n", "Resilience:", resilience)
	switch resilience {
	case "checksum":
		fmt.Fprintf(b, "\t%-12s%s\n", "Hash:", jsonText(area.get("hash")))
		fmt.Fprintf(b, "\t%-12s%d [bytes]\n", "Hash data:", intOf(area.get("sector_size")))
	case "datashift":
		fmt.Fprintf(b, "\t%-12s%d[bytes]\n", "Shift size:", uint64Of(area.get("shift_size")))
	}
	fmt.Fprintf(b, "\tArea offset:%d [bytes]\n", uint64Of(area.get("offset")))
	fmt.Fprintf(b, "\tArea length:%d [bytes]\n", uint64Of(area.get("size")))
}

// dumpTokens is hdr_dump_tokens (luks2-keyring is the one handler).
func dumpTokens(b *strings.Builder, tokens *node) {
	b.WriteString("Tokens:\n")
	for j := 0; j < maxTokens; j++ {
		t := tokens.get(strconv.Itoa(j))
		if t == nil {
			continue
		}
		typ := jsonText(t.get("type"))
		fmt.Fprintf(b, "  %d: %s\n", j, typ)
		if typ == keyringTokenType {
			if kd := t.get("key_description"); kd != nil && kd.kind == kindString {
				fmt.Fprintf(b, "\tKey description: %s\n", jsonText(kd))
			}
		}
		dumpSystemdToken(b, typ, t)
		for _, v := range arrayVals(t.get("keyslots")) {
			fmt.Fprintf(b, "\tKeyslot:    %s\n", jsonText(v))
		}
	}
}

// dumpDigests is hdr_dump_digests (digests 0..7; pbkdf2 the one handler).
func dumpDigests(b *strings.Builder, digests *node) {
	b.WriteString("Digests:\n")
	for i := 0; i < maxDigests; i++ {
		d := digests.get(strconv.Itoa(i))
		if d == nil {
			continue
		}
		typ := jsonText(d.get("type"))
		fmt.Fprintf(b, "  %d: %s\n", i, typ)
		if typ != "pbkdf2" {
			continue
		}
		fmt.Fprintf(b, "\tHash:       %s\n", jsonText(d.get("hash")))
		fmt.Fprintf(b, "\tIterations: %d\n", uint64(int64Value(d.get("iterations"))))
		b.WriteString("\tSalt:       ")
		hexBase64(b, d.get("salt"))
		b.WriteString("\tDigest:     ")
		hexBase64(b, d.get("digest"))
	}
}

// hexBase64 is hexprint_base64: a base64 value's bytes in hex, 16 to a
// line, or nothing at all (not even the newline) when it does not decode.
func hexBase64(b *strings.Builder, n *node) {
	data, err := base64.StdEncoding.DecodeString(jsonText(n))
	if err != nil {
		return
	}
	hexBlock(b, data)
}

// hexBlock prints bytes 16 to a line, continuation lines indented under
// the first, as cryptsetup's hexprint_base64 does.
func hexBlock(b *strings.Builder, data []byte) {
	for i, c := range data {
		if i > 0 && i%16 == 0 {
			b.WriteString("\n\t            ")
		}
		fmt.Fprintf(b, "%02x ", c)
	}
	b.WriteString("\n")
}
