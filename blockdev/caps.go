package blockdev

// Caps are what a device can do beyond reading, writing, flushing and
// closing. A frontend advertises exactly these to its client or the
// kernel, and a layer (the crypt layer, Tracked) declares its own from the
// device below it: every reader asks CapsOf, the one place that knows how
// a device declares them.
//
// Durability is not a capability: every Device's Flush makes the writes
// completed before it durable, and a successful WriteAtFUA is durable
// when it returns.
type Caps struct {
	ReadOnly bool // writes are refused
	// Trim: discards reach the device (Trim does more than refuse).
	Trim bool
	// WriteZeroes: the device zeroes a range itself, faster than writing
	// a buffer of zeroes.
	WriteZeroes bool
	// FUA: WriteAtFUA makes one write durable by itself, without flushing
	// everything else.
	FUA bool
	// BlockSize is the natural block size (the crypt layer's sector
	// size), or 0 when the device has none.
	BlockSize int
}

// Capable is implemented by devices that declare their capabilities. A
// device whose methods exist whatever it can do (a layer always has Trim,
// and says whether the device below takes it) must implement it.
type Capable interface {
	Caps() Caps
}

// CapsOf returns what dev can do: what it declares (Capable), or else what
// its methods offer (a Trimmer can trim, a ZeroWriter write zeroes, a
// FUAWriter write FUA).
func CapsOf(dev Device) Caps {
	if c, ok := dev.(Capable); ok {
		return c.Caps()
	}
	var c Caps
	_, c.Trim = dev.(Trimmer)
	_, c.WriteZeroes = dev.(ZeroWriter)
	_, c.FUA = dev.(FUAWriter)
	return c
}

// Ops are a device's optional operations, bound once where its Caps
// declare them, nil where they do not.
type Ops struct {
	Trim Trimmer
	Zero ZeroWriter
	FUA  FUAWriter
}

// OpsOf returns dev's Caps and the operations they declare.
func OpsOf(dev Device) (Caps, Ops) {
	c := CapsOf(dev)
	var o Ops
	if c.Trim {
		o.Trim, _ = dev.(Trimmer)
	}
	if c.WriteZeroes {
		o.Zero, _ = dev.(ZeroWriter)
	}
	if c.FUA {
		o.FUA, _ = dev.(FUAWriter)
	}
	return c, o
}
