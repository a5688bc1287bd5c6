package luks2

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// dump writes luksDump's text in cryptsetup 2.6's layout.
func (h *header) dump(w io.Writer, opts DumpOptions) error {
	if h.v1 != nil {
		if opts.VolumeKey != nil {
			return h.v1.dumpVolumeKey(w, opts)
		}
		return h.v1.dump(w, opts)
	}
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
	writeVolumeKey(b, opts.VolumeKey)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (h *header) dumpHeader(b *strings.Builder) {
	m := h.meta
	b.WriteString("LUKS header information\n")
	fmt.Fprintf(b, "Version:       \t%d\n", 2)
	fmt.Fprintf(b, "Epoch:         \t%d\n", h.bin.seqID)
	fmt.Fprintf(b, "Metadata area: \t%d [bytes]\n", h.bin.hdrSize)
	fmt.Fprintf(b, "Keyslots area: \t%d [bytes]\n", m.keyslotsSize)
	fmt.Fprintf(b, "UUID:          \t%s\n", orDefault(h.bin.uuid, "(no UUID)"))
	fmt.Fprintf(b, "Label:         \t%s\n", orDefault(h.bin.label, "(no label)"))
	fmt.Fprintf(b, "Subsystem:     \t%s\n", orDefault(h.bin.subsystem, "(no subsystem)"))
	b.WriteString("Flags:       \t")
	if len(m.flags) == 0 {
		b.WriteString("(no flags)")
	}
	for _, f := range m.flags {
		b.WriteString(f + " ")
	}
	b.WriteString("\n")
	if len(m.mandatory) > 0 {
		b.WriteString("Requirements:\t")
		for _, r := range m.mandatory {
			b.WriteString(r + " ")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")

	b.WriteString("Data segments:\n")
	for _, id := range sortedIDs(m.segments) {
		s := m.segments[id]
		o := m.root.get("segments").get(fmt.Sprint(id))
		fmt.Fprintf(b, "  %d: %s\n", id, s.typ)
		fmt.Fprintf(b, "\toffset: %d [bytes]\n", s.offset)
		if s.size == 0 {
			b.WriteString("\tlength: (whole device)\n")
		} else {
			fmt.Fprintf(b, "\tlength: %d [bytes]\n", s.size)
		}
		if v := o.get("encryption"); v != nil && v.kind == kindString {
			fmt.Fprintf(b, "\tcipher: %s\n", v.str)
		}
		if o.get("sector_size") != nil {
			fmt.Fprintf(b, "\tsector: %d [bytes]\n", s.sectorSize)
		}
		if in := o.get("integrity"); in != nil {
			if t := in.get("type"); t != nil && t.kind == kindString {
				fmt.Fprintf(b, "\tintegrity: %s\n", t.str)
			}
		}
		if len(s.flags) > 0 {
			b.WriteString("\tflags : ")
			for _, f := range s.flags {
				b.WriteString(f + " ")
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	b.WriteString("Keyslots:\n")
	for _, id := range sortedIDs(m.keyslots) {
		k := m.keyslots[id]
		d := m.keyslotDigest(id)
		unbound := ""
		if d == nil || len(d.segments) == 0 {
			unbound = " (unbound)"
		}
		fmt.Fprintf(b, "  %d: %s%s\n", id, k.typ, unbound)
		fmt.Fprintf(b, "\tKey:        %d bits\n", k.keySize*8)
		fmt.Fprintf(b, "\tPriority:   %s\n", [...]string{"ignored", "normal", "preferred"}[k.priority])
		if k.typ == "luks2" {
			fmt.Fprintf(b, "\tCipher:     %s\n", k.areaCipher)
			fmt.Fprintf(b, "\tCipher key: %d bits\n", k.areaKeySize*8)
			fmt.Fprintf(b, "\tPBKDF:      %s\n", k.kdf.typ)
			if k.kdf.typ == "pbkdf2" {
				fmt.Fprintf(b, "\tHash:       %s\n", k.kdf.hash)
				fmt.Fprintf(b, "\tIterations: %d\n", k.kdf.iterations)
			} else {
				fmt.Fprintf(b, "\tTime cost:  %d\n", k.kdf.time)
				fmt.Fprintf(b, "\tMemory:     %d\n", k.kdf.memory)
				fmt.Fprintf(b, "\tThreads:    %d\n", k.kdf.cpus)
			}
			b.WriteString("\tSalt:       ")
			hexBlock(b, k.kdf.salt)
			fmt.Fprintf(b, "\tAF stripes: %d\n", k.stripes)
			fmt.Fprintf(b, "\tAF hash:    %s\n", k.afHash)
			fmt.Fprintf(b, "\tArea offset:%d [bytes]\n", k.areaOffset)
			fmt.Fprintf(b, "\tArea length:%d [bytes]\n", k.areaSize)
		}
		if d != nil {
			fmt.Fprintf(b, "\tDigest ID:  %d\n", d.id)
		}
	}

	b.WriteString("Tokens:\n")
	toks := m.root.get("tokens")
	for _, id := range sortedIDs(m.tokens) {
		t := toks.get(fmt.Sprint(id))
		fmt.Fprintf(b, "  %d: %s\n", id, t.get("type").str)
		if t.get("type").str == "luks2-keyring" {
			if kd := t.get("key_description"); kd != nil && kd.kind == kindString {
				fmt.Fprintf(b, "\tKey description: %s\n", kd.str)
			}
		}
		for _, v := range t.get("keyslots").vals {
			fmt.Fprintf(b, "\tKeyslot:    %s\n", v.str)
		}
	}

	b.WriteString("Digests:\n")
	for _, id := range sortedIDs(m.digests) {
		d := m.digests[id]
		fmt.Fprintf(b, "  %d: %s\n", id, d.typ)
		fmt.Fprintf(b, "\tHash:       %s\n", d.hash)
		fmt.Fprintf(b, "\tIterations: %d\n", d.iterations)
		b.WriteString("\tSalt:       ")
		hexBlock(b, d.salt)
		b.WriteString("\tDigest:     ")
		hexBlock(b, d.digest)
	}
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

// b64 encodes bytes as LUKS2 stores them.
func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
