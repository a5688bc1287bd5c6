package daemon

import (
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/luksd/luksd/dmcrypt"
)

// A volume `luksd serve` exports gets a name too, serve-PID, with a state
// file and a control socket as a daemon's: luksd finds it by its image
// (status, the in-use checks) and hands it online jobs (`luksd reencrypt
// IMAGE`); "close" stops the server as SIGTERM does. Without a run
// directory it can write, serve runs on without them.

// serveControl is a served volume's name, state and control socket.
type serveControl struct {
	name   string
	lock   *os.File
	ctl    net.Listener
	st     State
	online *onlineJob
	closes chan net.Conn
	done   chan struct{}
	once   sync.Once
}

// startServeControl names the volume spec that dev serves, writes its
// state and answers its control socket.
func startServeControl(spec Spec, dev *dmcrypt.Device) (*serveControl, error) {
	name := fmt.Sprintf("serve-%d", os.Getpid())
	lock, err := claimName(name)
	if err != nil {
		return nil, err
	}
	ctl, err := net.Listen("unix", controlPath(name))
	if err != nil {
		releaseName(name, lock)
		return nil, fmt.Errorf("cannot create the control socket: %v", err)
	}
	spec.Name = name
	s := &serveControl{name: name, lock: lock, ctl: ctl, online: newOnlineJob(dev, spec),
		closes: make(chan net.Conn), done: make(chan struct{})}
	seg, o := spec.Segment, spec.Options
	s.st = State{Name: name, PID: os.Getpid(), Frontend: exportFrontendName, Image: spec.Location, Header: spec.Header,
		Type: spec.Type, UUID: spec.UUID, Cipher: seg.Cipher, KeySize: seg.KeySize, KeySlot: spec.KeySlot,
		SectorSize: seg.SectorSize, Offset: seg.Offset, Size: dev.Size(), ReadOnly: o.ReadOnly,
		AllowDiscards: o.AllowDiscards, Reencryption: spec.reencryptionStatus(),
		ReencryptDone: spec.reencryptedBytes(), Started: time.Now()}
	if err := writeState(&s.st); err != nil {
		ctl.Close()
		releaseName(name, lock)
		return nil, fmt.Errorf("cannot write the state file: %v", err)
	}
	s.online.attach(&s.st, nil)
	reqs := make(chan closeRequest)
	go acceptControl(ctl, reqs, s.done, nil, nil, s.online)
	go s.forwardCloses(reqs)
	return s, nil
}

// forwardCloses hands close requests to Serve. An export has nothing in
// use to wait for, so a deferred close is a close, and there is never a
// deferred close to cancel.
func (s *serveControl) forwardCloses(reqs <-chan closeRequest) {
	for {
		select {
		case req := <-reqs:
			if req.cmd == ctlCancelDeferred {
				fmt.Fprintln(req.conn, ctlOK)
				req.conn.Close()
				continue
			}
			select {
			case s.closes <- req.conn:
			case <-s.done:
				req.conn.Close()
				return
			}
		case <-s.done:
			return
		}
	}
}

// setExport records where the export listens, as a named serve's
// status shows it.
func (s *serveControl) setExport(where string) {
	if s == nil {
		return
	}
	s.online.saveState(func(st *State) { st.Device = where })
}

// closeRequests are the control connections that ask to close (nil
// without a control socket: never ready).
func (s *serveControl) closeRequests() <-chan net.Conn {
	if s == nil {
		return nil
	}
	return s.closes
}

// stop pauses an online job after its step and removes the name.
func (s *serveControl) stop() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		s.online.pause()
		close(s.done)
		s.ctl.Close()
		releaseName(s.name, s.lock)
	})
}
