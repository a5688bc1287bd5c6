// Package s3 is the backend for volumes kept in an S3 object store
// (SeaweedFS, Ceph RGW, MinIO, a cloud bucket): s3://BUCKET/PREFIX.
//
// A volume is cut into fixed-size chunks, one object each, under PREFIX:
//
//	PREFIX/luksd-volume.json    the manifest: layout version, size, chunk size
//	PREFIX/chunk-0000000000000000
//	PREFIX/chunk-0000000000000001
//	...
//
// The chunk size is chosen when the volume is created (Create) and never
// changes; it is a power of two, so it divides the LUKS sector size and the
// data offset and the header lives in the first chunk(s). Every chunk
// object holds the whole chunk (the last one may be shorter, when the size
// is not a multiple of the chunk size).
//
// The store sees only what the layer above writes, which for a LUKS
// volume is its header and ciphertext. A chunk that was never written (or
// was trimmed, or written all zeros) is not stored and reads back as
// zeros. Under the crypt layer those are zeros of *ciphertext*: they
// decrypt to pseudo-random plaintext, not to zeros, exactly as the
// never-written blocks of a fresh sparse image file do under dm-crypt. A
// file system on the volume does not care (it never reads blocks it did
// not write); a tool that expects a new volume to read as zeros must
// write the zeros itself (cryptsetup's --wipe does the same on a file).
package s3
