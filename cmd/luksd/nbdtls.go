package main

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/luksd/luksd/blockdev"
	"github.com/luksd/luksd/nbd"
)

// certDirError says that an nbds:// location's tls-certificates=
// directory cannot be read, when that is why opening it failed (a file
// of it that is missing would otherwise read as a device that does not
// exist); nil for any other failure.
func certDirError(location string, err error) error {
	if s := blockdev.Scheme(location); s != "nbds" && s != "nbds+unix" {
		return nil
	}
	t, perr := nbd.ParseURI(location)
	var pe *fs.PathError
	if perr != nil || t.CertDir == "" || !errors.As(err, &pe) ||
		filepath.Dir(filepath.Clean(pe.Path)) != filepath.Clean(t.CertDir) {
		return nil
	}
	return exitf(exitParams, "Cannot read the TLS certificate directory %s: %v.", t.CertDir, pe)
}
