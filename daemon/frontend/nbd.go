package frontend

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/nbd"
)

func init() { Register(nbdFrontend{}) }

// nbdFrontend attaches volumes as /dev/nbdN through the kernel's NBD driver,
// serving its sockets with luksd's NBD server.
type nbdFrontend struct{}

// The kernel's timeouts and connections, set deliberately: with nbd.ko's
// defaults a request that takes 30 s made it drop the connection, and the
// daemon lost the device.
//   - Without --io-timeout, a slow disk is slow, as under dm-crypt. nbd.ko
//     can wait for ever only on a device of one connection: with more, a
//     request that times out (and 0 means 30 s) always costs its
//     connection, and a request in flight on a connection that dies (the
//     daemon was killed) is sent again only when it times out. With one
//     connection and no timeout, the kernel waits, and every 30 s sends
//     again what was in flight on a connection since replaced (`open
//     --recover`, or the daemon replacing a connection it lost).
//   - With --io-timeout, the server answers EIO at --io-timeout itself, and
//     the kernel's timeout, nbdTimeoutGrace later, fires only when the
//     daemon does not answer at all (stopped): the kernel then drops that
//     connection and sends its requests again, and the daemon replaces
//     the connection (nbd.Attachment). Requests lost with a connection are
//     sent again at that timeout too, so one connection per CPU is safe.
//   - The dead-connection timeout is how long the kernel queues requests
//     once every connection is dead, so that a restarted daemon (`open
//     --recover`) can take the device over before they fail.
const (
	nbdTimeoutGrace    = 10 * time.Second
	nbdDeadConnTimeout = 30 * time.Second
)

func (nbdFrontend) Name() string     { return "nbd" }
func (nbdFrontend) Caps() Caps       { return Caps{} }
func (nbdFrontend) Available() error { return nbd.Available() }

// Attach serves dev on /dev/nbdN. The kernel is offered trim when dev
// declares it (the crypt layer does when discards are allowed).
func (nbdFrontend) Attach(dev blockdev.Device, opts Options) (Attachment, error) {
	index := -1
	if opts.Device != "" {
		i, err := nbd.ParseDevicePath(opts.Device)
		if err != nil {
			return nil, err
		}
		index = i
	}
	if opts.Recover && index < 0 {
		return nil, fmt.Errorf("--recover with the nbd frontend needs --nbd-device /dev/nbdN")
	}
	srv := nbd.NewServer(dev, nbd.Config{Name: opts.Name, ReadOnly: opts.ReadOnly, RequestTimeout: opts.IOTimeout, Logf: opts.Logf})
	flags := srv.Flags()
	if switchableDiscards(dev, opts) { // discards.go: refresh may allow them
		flags |= nbd.FlagSendTrim
	}
	conns, kernelTimeout := 1, time.Duration(0) // wait for ever
	if opts.IOTimeout > 0 {
		conns, kernelTimeout = runtime.NumCPU(), opts.IOTimeout+nbdTimeoutGrace
	}
	a, err := nbd.Attach(nbd.AttachConfig{
		Index:           index,
		Size:            dev.Size(),
		BlockSize:       opts.BlockSize,
		ReadOnly:        opts.ReadOnly,
		Trim:            flags&nbd.FlagSendTrim != 0,
		ServerFlags:     flags,
		Connections:     conns,
		Timeout:         kernelTimeout,
		DeadConnTimeout: nbdDeadConnTimeout,
		Logf:            opts.Logf,
		Backend:         nbdBackendID(opts.Name),
		Reconfigure:     opts.Recover,
		Serve:           func(c net.Conn) error { return srv.ServeTransmission(c, flags) },
	})
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &nbdAttachment{a: a, srv: srv, dev: dev, conns: conns, trimOffered: flags&nbd.FlagSendTrim != 0}, nil
}

type nbdAttachment struct {
	a           *nbd.Attachment
	srv         *nbd.Server
	dev         blockdev.Device
	conns       int
	trimOffered bool // the kernel was told it may send discards
}

func (n *nbdAttachment) DevicePath() string { return n.a.DevicePath() }
func (n *nbdAttachment) Wait() error        { return n.a.Wait() }
func (n *nbdAttachment) Failed() bool       { return n.srv.Failed() }

// Detach writes the kernel's dirty pages through, disconnects /dev/nbdN,
// ends the server's sessions and flushes the volume.
func (n *nbdAttachment) Detach() error {
	err := n.a.Detach()
	n.srv.Close()
	if ferr := n.dev.Flush(); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

func (n *nbdAttachment) State() map[string]string {
	return map[string]string{
		"nbd-index":       strconv.Itoa(n.a.Index()),
		"nbd-connections": strconv.Itoa(n.conns),
	}
}

// nbdBackendID is what /sys/block/nbdN/backend shows for volume name.
func nbdBackendID(name string) string { return "luksd:" + name }

// Release disconnects the /dev/nbdN a dead daemon left configured with
// dead connections, only when /sys/block/nbdN/backend shows it is volume
// name's (the number may have been reused since).
func (nbdFrontend) Release(name, device string, _ map[string]string) error {
	idx, err := nbd.ParseDevicePath(device)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/backend", idx))
	if err != nil || strings.TrimSpace(string(b)) != nbdBackendID(name) {
		return nil
	}
	return nbd.Disconnect(idx)
}
