package ublk

import (
	"strings"
	"testing"
)

func TestBuildParamsBasic(t *testing.T) {
	p, err := buildParams(geometry{size: 64 << 20, blockSize: 512, maxIOBytes: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if p.types != paramTypeBasic {
		t.Errorf("types = %#x, want basic only", p.types)
	}
	b := p.basic
	if b.logicalBSShift != 9 || b.physicalBSShift != 12 || b.ioMinShift != 9 || b.ioOptShift != 12 {
		t.Errorf("shifts logical %d physical %d io_min %d io_opt %d", b.logicalBSShift, b.physicalBSShift, b.ioMinShift, b.ioOptShift)
	}
	if b.devSectors != 64<<20>>9 {
		t.Errorf("dev_sectors = %d", b.devSectors)
	}
	if b.maxSectors != 1024 {
		t.Errorf("max_sectors = %d, want 1024", b.maxSectors)
	}
	if b.attrs != attrVolatileCache {
		t.Errorf("attrs = %#x, want volatile cache only", b.attrs)
	}
	if p.len != 80 {
		t.Errorf("len = %d, want 80", p.len)
	}
}

func TestBuildParams4KReadOnlyDiscard(t *testing.T) {
	p, err := buildParams(geometry{size: 1 << 30, blockSize: 4096, maxIOBytes: 1 << 20, readOnly: true, discard: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.basic.logicalBSShift != 12 || p.basic.physicalBSShift != 12 {
		t.Errorf("4K volume: logical %d physical %d", p.basic.logicalBSShift, p.basic.physicalBSShift)
	}
	if p.basic.attrs != attrVolatileCache|attrReadOnly {
		t.Errorf("attrs = %#x", p.basic.attrs)
	}
	if p.types&paramTypeDiscard != 0 {
		t.Error("a read-only device advertises discard")
	}
}

func TestBuildParamsDiscard(t *testing.T) {
	p, err := buildParams(geometry{size: 1 << 30, blockSize: 512, maxIOBytes: 1 << 20, discard: true, writeZeroes: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.types != paramTypeBasic|paramTypeDiscard {
		t.Fatalf("types = %#x", p.types)
	}
	d := p.discard
	// the kernel accepts only single-segment discards with a granularity
	if d.maxDiscardSegments != 1 || d.discardGranularity == 0 {
		t.Errorf("discard segments %d granularity %d", d.maxDiscardSegments, d.discardGranularity)
	}
	if d.maxDiscardSectors == 0 || d.maxDiscardSectors%8 != 0 {
		t.Errorf("max_discard_sectors = %d", d.maxDiscardSectors)
	}
	if d.maxWriteZeroesSectors == 0 {
		t.Error("write zeroes not advertised")
	}
	p, _ = buildParams(geometry{size: 1 << 30, blockSize: 512, maxIOBytes: 1 << 20, discard: true})
	if p.discard.maxWriteZeroesSectors != 0 {
		t.Error("write zeroes advertised without being asked for")
	}
}

func TestBuildParamsRejects(t *testing.T) {
	cases := []struct {
		g    geometry
		want string
	}{
		{geometry{size: 1 << 20, blockSize: 1000, maxIOBytes: 1 << 20}, "block size"},
		{geometry{size: 1 << 20, blockSize: 8192, maxIOBytes: 1 << 20}, "block size"},
		{geometry{size: 1<<20 + 512, blockSize: 4096, maxIOBytes: 1 << 20}, "multiple"},
		{geometry{size: 0, blockSize: 512, maxIOBytes: 1 << 20}, "multiple"},
		{geometry{size: 1 << 20, blockSize: 512, maxIOBytes: 1000}, "largest request"},
		{geometry{size: 1 << 20, blockSize: 512, maxIOBytes: 64 << 20}, "largest request"},
	}
	for _, c := range cases {
		_, err := buildParams(c.g)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one mentioning %q", c.g, err, c.want)
		}
	}
}
