// Command s3raw measures what aws-sdk-go-v2 alone gets from an S3 store:
// it PUTs, then GETs, -total bytes as objects of -object bytes, -parallel
// requests at once, and prints "PUT_MiB/s GET_MiB/s" (-put=false only
// GETs what an earlier run put, to measure reads alone; -get=false only
// PUTs; a step not run prints 0). contrib/bench/s3.sh
// sets it beside `luksd serve` of an S3 volume on the same store, with the
// volume's chunk size and upload parallelism, as the ceiling the store
// allows. The store comes from the SDK's standard sources (AWS_ENDPOINT_URL,
// AWS_ACCESS_KEY_ID, ...), path-style; -create makes the bucket first.
// Over plain http its PUTs are signed without hashing their bodies, with
// their CRC32, as luksd's are (blockdev/s3.UnsignedPayloadOverHTTP);
// -signed-payload hashes them, the SDK's default.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	luksds3 "github.com/luksd/luksd/blockdev/s3"
)

func main() {
	bucket := flag.String("bucket", "", "bucket `NAME`")
	create := flag.Bool("create", false, "create the bucket, then exit")
	prefix := flag.String("prefix", "s3raw/", "object name `PREFIX`")
	total := flag.Int64("total", 256<<20, "`BYTES` to write, then read")
	object := flag.Int64("object", 4<<20, "object size in `BYTES`")
	parallel := flag.Int("parallel", 8, "requests at once")
	doPut := flag.Bool("put", true, "PUT the objects first; with -put=false, GET those an earlier run put (PUT_MiB/s is then 0)")
	doGet := flag.Bool("get", true, "GET the objects; with -get=false, only PUT them (GET_MiB/s is then 0)")
	signed := flag.Bool("signed-payload", false, "over http, sign each PUT's body SHA-256 (the SDK's default) where luksd does not")
	flag.Parse()
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	opts := []func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = true }}
	if !*signed {
		opts = append(opts, luksds3.UnsignedPayloadOverHTTP)
	}
	api := s3.NewFromConfig(cfg, opts...)
	if *create {
		if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
			log.Fatal(err)
		}
		return
	}
	data := make([]byte, *object)
	rand.Read(data)
	n := int(*total / *object)
	name := func(i int) *string { return aws.String(fmt.Sprintf("%s%08d", *prefix, i)) }
	var put time.Duration
	if *doPut {
		put = run(n, *parallel, func(i int) error {
			_, err := api.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: name(i), Body: bytes.NewReader(data),
				ContentLength: object})
			return err
		})
	}
	var get time.Duration
	if *doGet {
		get = run(n, *parallel, func(i int) error {
			out, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: name(i)})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			_, err = io.Copy(io.Discard, out.Body)
			return err
		})
	}
	mib := float64(int64(n)**object) / (1 << 20)
	rate := func(d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return mib / d.Seconds()
	}
	fmt.Printf("%.1f %.1f\n", rate(put), rate(get))
}

// run calls do for 0..n-1, parallel at once, and returns how long it took.
func run(n, parallel int, do func(i int) error) time.Duration {
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start)
}
