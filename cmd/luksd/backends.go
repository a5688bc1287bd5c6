package main

// The remote backends built in: each registers its location scheme with
// blockdev when imported.
import _ "github.com/luksd/luksd/blockdev/s3"
