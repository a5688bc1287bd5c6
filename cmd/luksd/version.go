package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func init() {
	register(&cli.Command{
		Name:  "version",
		Usage: "print luksd's version",
		Action: func(c *cli.Context) error {
			fmt.Printf("luksd %s\n", version)
			return nil
		},
	})
}
