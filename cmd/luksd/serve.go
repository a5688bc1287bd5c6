package main

import (
	"github.com/luksd/luksd/daemon"
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
			"Stops on SIGINT or SIGTERM after flushing. --tls=on|require with " +
			"--tls-certificates DIR (nbdkit's file names) lets clients upgrade with " +
			"NBD_OPT_STARTTLS; --tls-verify-peer requires client certificates. " +
			"--tls-access FILE says which client certificates may use which export: " +
			"lines of EXPORT rw|ro CLIENT, where EXPORT is the --export-name or *, and " +
			"CLIENT is subject=DN (RFC 2253, as openssl -nameopt RFC2253 prints it), " +
			"cn=NAME, san=NAME or * (any verified certificate); # starts a comment. " +
			"The first matching line decides; other clients are refused " +
			"(NBD_REP_ERR_POLICY), ro clients see a read-only export. " +
			"With --name NAME the export is a volume of that name, as open's are: " +
			"status, close, resize (new clients see the new size), luksSuspend and luksResume find it.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "listen on the unix socket `PATH`"},
			&cli.StringFlag{Name: "listen", Usage: "listen on TCP `HOST:PORT` (empty host = 127.0.0.1)"},
			&cli.StringFlag{Name: "name", Usage: "run the export as volume `NAME`: status, close, resize, luksSuspend and luksResume find it"},
			&cli.StringFlag{Name: "export-name", Usage: "export `NAME` (the export also answers to \"\")"},
			&cli.BoolFlag{Name: "readonly", Aliases: []string{"r"}, Usage: "refuse writes"},
			&cli.BoolFlag{Name: "allow-discards", Usage: "pass discards (TRIM) down to the image"},
			&cli.StringFlag{Name: "tls", Value: "off", Usage: "NBD STARTTLS: `off`, on (clients choose) or require (as nbdkit)"},
			&cli.StringFlag{Name: "tls-certificates", Usage: "`DIR` with ca-cert.pem, server-cert.pem, server-key.pem"},
			&cli.BoolFlag{Name: "tls-verify-peer", Usage: "require a client certificate signed by ca-cert.pem"},
			&cli.StringFlag{Name: "tls-access", Usage: "per-export access by client certificate, from `FILE` (see above)"},
		}, keyFlags, tokenFlags),
		Action: runServe,
	})
}

func runServe(c *cli.Context) error {
	if c.NArg() != 1 {
		return exitf(exitParams, "Command requires device as argument.")
	}
	path := c.Args().First()
	if c.IsSet("socket") && c.IsSet("listen") {
		return exitf(exitParams, "Options --socket and --listen cannot be combined.")
	}
	name := c.String("name")
	if c.IsSet("name") {
		if err := daemon.ValidName(name); err != nil {
			return err
		}
		if err := daemon.CheckFree(name); err != nil {
			return err
		}
	}
	if n := len(c.String("export-name")); n > nbd.MaxStringBytes {
		return exitf(exitParams, "Option --export-name: %d bytes, longer than NBD's %d.", n, nbd.MaxStringBytes)
	}
	tlsMode, err := nbd.ParseTLSMode(c.String("tls"))
	if err != nil {
		return exitf(exitParams, "Option --tls: %v.", err)
	}
	opts := daemon.ServeOptions{
		Name:       name,
		Socket:     c.String("socket"),
		Listen:     c.String("listen"),
		ExportName: c.String("export-name"),
		TLS: daemon.TLSOptions{Mode: tlsMode, CertDir: c.String("tls-certificates"), VerifyPeer: c.Bool("tls-verify-peer"),
			AccessFile: c.String("tls-access")},
	}
	// A bad certificate directory is told before the passphrase prompt.
	if err := opts.Prepare(); err != nil {
		return err
	}
	// A volume a luksd daemon already has is refused before the
	// passphrase, as by open; for a remote one (nbd://) this is the only
	// claim on this host, and two daemons would lose each other's writes.
	if daemon.UserOf(path) != "" {
		return daemon.InUse(path, nil)
	}
	readOnly := c.Bool("readonly")
	v, err := unlockVolume(c, path, readOnly)
	if err != nil {
		return err
	}
	defer v.Close()
	spec := v.spec("", daemon.Options{ReadOnly: readOnly, AllowDiscards: c.Bool("allow-discards")})
	logInDaemon()
	return daemon.Serve(spec, v.Key, opts)
}
