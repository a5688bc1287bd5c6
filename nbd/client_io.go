package nbd

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/luksd/luksd/blockdev"
)

// errClientReadOnly refuses writes to a read-only export with EPERM, as
// the server itself would (and matches blockdev.ErrReadOnly).
var errClientReadOnly error = readOnlyError{}

type readOnlyError struct{}

func (readOnlyError) Error() string        { return "NBD export is read-only" }
func (readOnlyError) Unwrap() error        { return syscall.EPERM }
func (readOnlyError) Is(target error) bool { return target == blockdev.ErrReadOnly }

// ReadAt reads len(p) bytes at off.
func (c *Client) ReadAt(p []byte, off int64) (int, error) {
	if err := c.check(off, int64(len(p)), false); err != nil {
		return 0, err
	}
	if !c.aligned(off, int64(len(p))) {
		start, end := c.alignOut(off, int64(len(p)))
		buf := blockdev.GetBuffer(int(end - start))
		defer blockdev.PutBuffer(buf)
		if err := c.readAligned(buf, start); err != nil {
			return 0, err
		}
		return copy(p, buf[off-start:]), nil
	}
	if err := c.readAligned(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *Client) readAligned(p []byte, off int64) error {
	return c.split(off, int64(len(p)), func(o, n int64) error {
		return c.do(cmdRead, 0, o, int(n), nil, p[o-off:][:n])
	})
}

// WriteAt writes p at off.
func (c *Client) WriteAt(p []byte, off int64) (int, error) { return c.write(p, off, 0) }

// WriteAtFUA writes p at off, durable when it returns (NBD_CMD_FLAG_FUA).
func (c *Client) WriteAtFUA(p []byte, off int64) (int, error) {
	if c.info.flags&FlagSendFUA == 0 {
		return 0, blockdev.ErrNotSupported
	}
	return c.write(p, off, cmdFlagFUA)
}

func (c *Client) write(p []byte, off int64, flags uint16) (int, error) {
	if err := c.check(off, int64(len(p)), true); err != nil {
		return 0, err
	}
	if !c.aligned(off, int64(len(p))) {
		return c.writeUnaligned(p, off, flags)
	}
	err := c.split(off, int64(len(p)), func(o, n int64) error {
		return c.do(cmdWrite, flags, o, int(n), p[o-off:][:n], nil)
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeUnaligned reads the minimum blocks around p, changes them and
// writes them back. The server cannot take less than its minimum block;
// the crypt layer above writes whole sectors, so this is rare.
func (c *Client) writeUnaligned(p []byte, off int64, flags uint16) (int, error) {
	c.rmwMu.Lock()
	defer c.rmwMu.Unlock()
	start, end := c.alignOut(off, int64(len(p)))
	buf := blockdev.GetBuffer(int(end - start))
	defer blockdev.PutBuffer(buf)
	if err := c.readAligned(buf, start); err != nil {
		return 0, err
	}
	copy(buf[off-start:], p)
	if _, err := c.write(buf, start, flags); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Trim discards a range (NBD_CMD_TRIM).
func (c *Client) Trim(off, length int64) error {
	return c.zeroing(cmdTrim, FlagSendTrim, off, length)
}

// WriteZeroes zeroes a range (NBD_CMD_WRITE_ZEROES).
func (c *Client) WriteZeroes(off, length int64) error {
	return c.zeroing(cmdWriteZeroes, FlagSendWriteZeroes, off, length)
}

func (c *Client) zeroing(typ uint16, flag uint16, off, length int64) error {
	if err := c.check(off, length, true); err != nil {
		return err
	}
	if c.info.flags&flag == 0 {
		return blockdev.ErrNotSupported
	}
	if !c.aligned(off, length) {
		return fmt.Errorf("NBD %s of %d bytes at %d: not aligned to the server's %d-byte blocks: %w",
			commandName(typ), length, off, c.info.minBlock, syscall.EINVAL)
	}
	return c.split(off, length, func(o, n int64) error {
		return c.do(typ, 0, o, int(n), nil, nil)
	})
}

// Flush makes acknowledged writes durable (NBD_CMD_FLUSH). It fails with
// EIO when a connection dropped with acknowledged writes that no flush
// had covered: the server may have lost them. When the server does not
// offer flush (see FlushesCache) it does nothing.
func (c *Client) Flush() error {
	if c.info.flags&FlagSendFlush == 0 || c.readOnly() {
		return nil
	}
	// What each connection had acknowledged before the flush was sent:
	// a flush covers those (on every connection, under multi-conn).
	acked := make([]int64, len(c.slots))
	conns := make([]*clientConn, len(c.slots))
	for i, s := range c.slots {
		s.mu.Lock()
		if c.reap(s) {
			conns[i], acked[i] = s.conn, s.conn.acked.Load()
		}
		s.mu.Unlock()
	}
	resent, err := c.doCounted(cmdFlush, 0, 0, 0, nil, nil)
	if err != nil {
		return err
	}
	for i, cc := range conns {
		if cc == nil {
			continue
		}
		if resent && acked[i] > cc.flushed.Load() {
			// The flush's connection was lost and the flush sent again,
			// perhaps to a server restarted without the writes this
			// connection had acknowledged (its own reader may not have
			// seen the crash yet): they may be lost. Reported once.
			c.lost.Store(true)
			raiseTo(&cc.flushed, acked[i])
			continue
		}
		select {
		case <-cc.dead:
			// Lost while the flush ran, perhaps with the server that
			// held its writes (a crash drops every connection): the
			// flush may have reached a server that never had them. Its
			// slot may not be redialled (and reaped) before this
			// returns, so report the loss here, and mark the writes as
			// dealt with so that it is reported once.
			if n := cc.acked.Load(); n > cc.flushed.Load() {
				c.lost.Store(true)
				raiseTo(&cc.flushed, n)
			}
		default:
			raiseTo(&cc.flushed, acked[i])
		}
	}
	if c.lost.Swap(false) {
		return fmt.Errorf("NBD connection to %s dropped with acknowledged writes not yet flushed: %w",
			c.target.Addr, syscall.EIO)
	}
	return nil
}

// check refuses requests outside the export, writes to a read-only one,
// and anything after Close.
func (c *Client) check(off, length int64, write bool) error {
	switch {
	case c.closed.Load():
		return errors.New("NBD client is closed")
	case write && c.readOnly():
		return errClientReadOnly
	case off < 0 || length < 0 || off > c.Size()-length:
		return blockdev.ErrOutOfRange
	}
	return nil
}

func (c *Client) aligned(off, length int64) bool {
	m := int64(c.info.minBlock)
	return off%m == 0 && length%m == 0
}

// alignOut widens [off, off+length) to whole minimum blocks.
func (c *Client) alignOut(off, length int64) (start, end int64) {
	m := int64(c.info.minBlock)
	return off / m * m, (off + length + m - 1) / m * m
}

// split runs fn on the pieces of [off, off+length) the server's maximum
// block size allows, concurrently (on connections round robin), and
// returns the first error.
func (c *Client) split(off, length int64, fn func(o, n int64) error) error {
	// Servers may state no practical maximum (2^32-1): 32 MiB is what
	// every server takes, a multiple of any minimum block.
	limit := min(int64(c.info.maxBlock), defaultMaxBlock)
	if length <= limit {
		if length == 0 {
			return nil
		}
		return fn(off, length)
	}
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for o := off; o < off+length; o += limit {
		n := min(limit, off+length-o)
		wg.Go(func() {
			if err := fn(o, n); err != nil {
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	return first
}

// raiseTo makes v at least x.
func raiseTo(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
