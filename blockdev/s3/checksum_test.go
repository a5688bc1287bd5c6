package s3

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/luksd/luksd/blockdev/s3/s3test"
)

// TestChunkChecksum: a chunk is stored with the CRC32C of its bytes
// (putChecksum), which the store keeps and returns with every GET, so
// that the SDK checks the body read back, and readInto reads it intact.
func TestChunkChecksum(t *testing.T) {
	srv := s3test.Start(t)
	st := NewStore(srv.Client(), srv.Bucket(), "vols/sum")
	data := make([]byte, testChunk)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := st.put(chunkName(3), data, false); err != nil {
		t.Fatal(err)
	}
	out, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(st.bucket),
		Key: st.key(chunkName(3)), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	var want [4]byte
	binary.BigEndian.PutUint32(want[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	if got := aws.ToString(out.ChecksumCRC32C); got != base64.StdEncoding.EncodeToString(want[:]) {
		t.Fatalf("the store returned CRC32C %q (CRC32 %q), want %q", got, aws.ToString(out.ChecksumCRC32),
			base64.StdEncoding.EncodeToString(want[:]))
	}
	back := make([]byte, len(data))
	if err := st.readInto(chunkName(3), back); err != nil {
		t.Fatal(err)
	}
	if string(back) != string(data) {
		t.Fatal("the chunk read back differs from the one written")
	}
}
