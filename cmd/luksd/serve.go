package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/luksd/luksd/nbd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:      "serve",
		Usage:     "unlock a LUKS volume and serve its plaintext as an NBD export (foreground)",
		ArgsUsage: "IMAGE",
		Description: "Listens on a unix socket (--socket, mode 0600) or on TCP (--listen, " +
			"127.0.0.1:10809 by default; other interfaces only when named). " +
			"Stops on SIGINT or SIGTERM after flushing.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "listen on the unix socket `PATH`"},
			&cli.StringFlag{Name: "listen", Usage: "listen on TCP `HOST:PORT` (empty host = 127.0.0.1)"},
			&cli.StringFlag{Name: "export-name", Usage: "export `NAME` (the export also answers to \"\")"},
			&cli.BoolFlag{Name: "readonly", Aliases: []string{"r"}, Usage: "refuse writes"},
			&cli.BoolFlag{Name: "allow-discards", Usage: "pass discards (TRIM) down to the image"},
		}, keyFlags...),
		Action: runServe,
	})
}

// serveMemoryLimit is the soft heap limit of `luksd serve`.
const serveMemoryLimit = 80 << 20

func runServe(c *cli.Context) error {
	if c.NArg() != 1 {
		return exitf(exitParams, "Command requires device as argument.")
	}
	path := c.Args().First()
	if c.IsSet("socket") && c.IsSet("listen") {
		return exitf(exitParams, "Options --socket and --listen cannot be combined.")
	}
	readOnly := c.Bool("readonly")
	v, err := unlockVolume(c, path, readOnly)
	if err != nil {
		return err
	}
	dev, _, err := openCryptDevice(v, readOnly, c.Bool("allow-discards"))
	v.Close()
	if err != nil {
		return err
	}
	defer dev.Close()

	// From here on a signal stops the server cleanly (socket removed).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var l net.Listener
	where := ""
	if sock := c.String("socket"); sock != "" {
		l, err = nbd.ListenUnix(sock, 0o600)
		where = "unix socket " + sock
	} else {
		addr := c.String("listen")
		if addr == "" {
			addr = "127.0.0.1:" + nbd.DefaultPort
		}
		l, err = nbd.ListenTCP(addr)
		if err == nil {
			where = "nbd://" + l.Addr().String() + "/"
		}
	}
	if err != nil {
		return exitf(exitBusy, "Cannot listen: %v.", err)
	}

	// The data path recycles its payload buffers; a soft heap limit keeps
	// the little garbage it makes from doubling the heap between
	// collections (GOMEMLIMIT overrides it).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
	logger := log.New(os.Stderr, "luksd: ", log.LstdFlags)
	srv := nbd.NewServer(dev, nbd.Config{Name: c.String("export-name"), ReadOnly: readOnly, Logf: logger.Printf})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	mode := "read-write"
	if readOnly {
		mode = "read-only"
	}
	logger.Printf("serving %s (%d bytes, %s, %d-byte sectors, %s) on %s", path, dev.Size(), v.Segment.Cipher, dev.BlockSize(), mode, where)

	select {
	case sig := <-sigs:
		logger.Printf("%v: stopping", sig)
		srv.Close()
		<-served
	case err := <-served:
		srv.Close()
		dev.Flush()
		return withCode(exitParams, fmt.Errorf("serving: %w", err))
	}
	if err := dev.Flush(); err != nil {
		return withCode(exitParams, fmt.Errorf("flushing %s: %w", path, err))
	}
	logger.Printf("flushed %s, exiting", path)
	return nil
}
