package luks2

import "fmt"

// recover repairs the hotzone a crash left half rewritten, as cryptsetup's
// reencrypt_recover_segment does, and commits the segments after it.
// checksum: a block whose ciphertext still hashes to its stored checksum
// is old and is rewritten; the others are new already. journal: the area
// holds the hotzone's old ciphertext; all of it is rewritten from there.
func (j *reencryptJob) recover() error {
	st := j.st
	n := st.length
	if n < 512 || st.done+n > j.total {
		return fmt.Errorf("hotzone %d+%d is out of range", st.done, n)
	}
	hz := j.at(st.done, n)
	at := int64(st.dataOffset + hz)
	buf := make([]byte, n)
	defer clear(buf)
	switch st.resilience {
	case "checksum":
		hs := hashSize(st.hash)
		count := int(n) / st.blockSize
		sums := make([]byte, count*hs)
		if uint64(len(sums)) > st.areaSize {
			return fmt.Errorf("checksums of %d bytes exceed the area", len(sums))
		}
		if _, err := j.dev.ReadAt(sums, int64(st.areaOffset)); err != nil {
			return fmt.Errorf("failed to read checksums for current hotzone: %w", err)
		}
		if _, err := j.run.Data.ReadAt(buf, at); err != nil {
			return fmt.Errorf("failed to read hotzone area: %w", err)
		}
		now := checksums(buf[:count*st.blockSize], st.blockSize, st.hash)
		for i := range count {
			if string(now[i*hs:(i+1)*hs]) != string(sums[i*hs:(i+1)*hs]) {
				continue
			}
			blk := buf[i*st.blockSize : (i+1)*st.blockSize]
			off := hz + uint64(i*st.blockSize)
			j.old.Decrypt(blk, off/512, st.oldSeg.sectorSize)
			j.new.Encrypt(blk, off/512, st.newSeg.sectorSize)
			if _, err := j.run.Data.WriteAt(blk, int64(st.dataOffset+off)); err != nil {
				return fmt.Errorf("failed to recover sector %d: %w", i, err)
			}
		}
	case "journal":
		if n > st.areaSize {
			return fmt.Errorf("invalid journal size %d", n)
		}
		if _, err := j.dev.ReadAt(buf, int64(st.areaOffset)); err != nil {
			return fmt.Errorf("failed to read journaled data: %w", err)
		}
		j.rewrite(buf, hz)
		if _, err := j.run.Data.WriteAt(buf, at); err != nil {
			return fmt.Errorf("recovery write failed: %w", err)
		}
	default:
		return fmt.Errorf("no recovery for resilience %s", st.resilience)
	}
	if err := j.syncData(); err != nil {
		return err
	}
	st.done += n
	st.hot = nil
	if st.done == j.total {
		return nil
	}
	return j.commit(j.h.stepSegments(st, st.done, 0, j.total, false))
}

// syncData makes the data written durable: through the data device when
// it flushes on its own (a detached header's data device), else through
// the device that holds both.
func (j *reencryptJob) syncData() error {
	if f, ok := j.run.Data.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return j.dev.Flush()
}
