package keyring

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
)

// ReadKeyFile reads the first n bytes of the key file at path (a volume
// key file: luksFormat and luksAddKey --volume-key-file) into a Secret;
// failures are cryptsetup's messages. The caller wipes the result.
func ReadKeyFile(path string, n int) (*Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Message(fmt.Sprintf("Cannot read keyfile %s.", path))
	}
	defer f.Close()
	k, err := NewSecret(n)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, k.Bytes()); err != nil {
		k.Wipe()
		return nil, Message(fmt.Sprintf("Cannot read %d bytes from keyfile %s.", n, path))
	}
	return k, nil
}

// WriteKeyFile creates path, which must not exist, holding key and
// readable by its owner only (luksDump --volume-key-file); failures are
// cryptsetup's messages, and leave no file behind.
func WriteKeyFile(path string, key []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return Message(fmt.Sprintf("Cannot open keyfile %s for write.", path))
	}
	_, err = f.Write(key)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return Message(fmt.Sprintf("Cannot write to keyfile %s.", path))
	}
	return nil
}

// Random returns a new Secret of n random bytes (a new unbound key).
func Random(n int) (*Secret, error) {
	k, err := NewSecret(n)
	if err != nil {
		return nil, err
	}
	if _, err := rand.Read(k.Bytes()); err != nil {
		k.Wipe()
		return nil, err
	}
	return k, nil
}
