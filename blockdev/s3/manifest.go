package s3

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The manifest is the small object that makes a prefix a volume: it
// records what the chunk objects mean.
const (
	manifestName   = "luksd-volume.json"
	manifestFormat = "luksd-s3-volume"
	// LayoutVersion is the chunk layout this package reads and writes.
	LayoutVersion = 1
)

// Chunk sizes: a power of two between these, so that a chunk holds whole
// LUKS sectors and the data offset falls on a chunk boundary.
const (
	DefaultChunkSize = 4 << 20
	MinChunkSize     = 64 << 10
	MaxChunkSize     = 64 << 20
)

// Manifest is a volume's layout, as the store records it.
type Manifest struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	Size      int64  `json:"size"`
	ChunkSize int64  `json:"chunk_size"`
}

// ErrLayout: the manifest is not one this package reads, or Create was
// asked for a layout it does not make.
var ErrLayout = errors.New("unsupported volume layout")

// Create makes a new volume of size bytes in chunks of chunkSize
// (DefaultChunkSize when 0) at st. It refuses a prefix that holds a
// volume or any chunk: an earlier volume's chunks would show through.
func Create(st *Store, size, chunkSize int64) error {
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	m := Manifest{Format: manifestFormat, Version: LayoutVersion, Size: size, ChunkSize: chunkSize}
	if err := m.check(); err != nil {
		return err
	}
	if found, err := st.any(chunkPrefix); err != nil {
		return err
	} else if found {
		return fmt.Errorf("%w: %s holds chunk objects", ErrExists, st)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	err = st.put(manifestName, append(b, '\n'), true)
	if errors.Is(err, errPrecondition) {
		return fmt.Errorf("%w: %s", ErrExists, st)
	}
	return err
}

// Remove deletes the volume at st: its chunks, its lease and its
// manifest, last, so that a Remove cut short leaves a volume to remove
// again, not chunks that would keep Create out. The caller makes sure
// nobody has it open.
func Remove(st *Store) error {
	chunks, err := st.list(chunkPrefix)
	if err != nil {
		return err
	}
	for _, name := range append(chunks, leaseName, manifestName) {
		if err := st.delete(name); err != nil {
			return err
		}
	}
	return nil
}

// ReadManifest reads st's manifest: ErrNoVolume when there is none,
// ErrLayout when it is not one this package knows.
func ReadManifest(st *Store) (Manifest, error) {
	b, err := st.get(manifestName)
	if errors.Is(err, errNotFound) {
		return Manifest{}, fmt.Errorf("%w: %s", ErrNoVolume, st)
	}
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %v", ErrLayout, st, err)
	}
	if err := m.check(); err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", st, err)
	}
	return m, nil
}

// check refuses a layout this package does not read or write.
func (m Manifest) check() error {
	switch {
	case m.Format != manifestFormat || m.Version != LayoutVersion:
		return fmt.Errorf("%w: %q version %d (this luksd reads %q version %d)", ErrLayout,
			m.Format, m.Version, manifestFormat, LayoutVersion)
	case m.ChunkSize < MinChunkSize || m.ChunkSize > MaxChunkSize || m.ChunkSize&(m.ChunkSize-1) != 0:
		return fmt.Errorf("%w: chunk size %d is not a power of two from %d to %d", ErrLayout,
			m.ChunkSize, MinChunkSize, MaxChunkSize)
	case m.Size <= 0 || m.Size%512 != 0:
		return fmt.Errorf("%w: size %d is not a positive multiple of 512 bytes", ErrLayout, m.Size)
	}
	return nil
}
