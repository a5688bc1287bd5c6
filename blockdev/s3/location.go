package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/luksd/luksd/blockdev"
)

// A location is s3://BUCKET/PREFIX. Where the store is and who we are
// come from the AWS SDK's standard sources, never from the location or
// the command line: AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3),
// AWS_REGION, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
// ~/.aws/config and ~/.aws/credentials (endpoint_url, region, ca_bundle,
// credential processes, SSO), AWS_CA_BUNDLE for a private CA.
// LUKSD_S3_TIMEOUT (seconds, DefaultTimeout when unset) bounds how long
// one operation tries a store that does not answer before it fails.
//
// With an endpoint of its own (a SeaweedFS, MinIO or Ceph RGW) requests
// are path-style (http://host/BUCKET/KEY), which needs no DNS name per
// bucket; on AWS itself virtual-hosted. LUKSD_S3_ADDRESSING_STYLE=path
// or virtual says otherwise.

func init() {
	blockdev.Register("s3", open)
	blockdev.RegisterCreator("s3", create)
}

// ParseLocation splits s3://BUCKET/PREFIX. The prefix may be empty (the
// volume's objects are then at the top of the bucket).
func ParseLocation(location string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(location, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || strings.ContainsAny(location, "?#") {
		return "", "", fmt.Errorf("%w: %s", ErrLocation, location)
	}
	return bucket, strings.Trim(prefix, "/"), nil
}

// Connect returns the store of location, with a client configured from
// the standard sources. It fails with ErrAccessDenied when no
// credentials can be found.
func Connect(location string) (*Store, error) {
	bucket, prefix, err := ParseLocation(location)
	if err != nil {
		return nil, err
	}
	api, err := newClient(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", location, err)
	}
	st := NewStore(api, bucket, prefix)
	if v := os.Getenv("LUKSD_S3_TIMEOUT"); v != "" {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || sec <= 0 {
			return nil, fmt.Errorf("%w: LUKSD_S3_TIMEOUT=%q is not a positive number of seconds", ErrLocation, v)
		}
		st.Timeout = time.Duration(sec * float64(time.Second))
	}
	return st, nil
}

// idleConnsPerHost is how many idle connections to the store are kept.
const idleConnsPerHost = 64

// newClient configures an S3 client from the standard sources.
func newClient(ctx context.Context) (*s3.Client, error) {
	// Errors are luksd's one line: the SDK logs nothing of its own (an
	// IMDS fallback warning would come first).
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{}))
	if err != nil {
		// Not wrapped: a CA bundle that cannot be read is not a volume
		// that does not exist (os.ErrNotExist).
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == os.Getenv("AWS_CA_BUNDLE") {
			return nil, fmt.Errorf("AWS configuration: AWS_CA_BUNDLE: %s", oneLine(pe.Error()))
		}
		return nil, fmt.Errorf("AWS configuration: %s", oneLine(err.Error()))
	}
	if cfg.Region == "" {
		// Self-hosted stores take any region; SigV4 needs one.
		cfg.Region = "us-east-1"
	}
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		// The uploads, the read-ahead and the readers' own loads run at
		// once: keep their connections for the next request, where the
		// SDK's default keeps 10 and closes the rest.
		cfg.HTTPClient = bc.WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = idleConnsPerHost
		})
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		var proc *processcreds.ProviderError
		if errors.As(err, &proc) {
			return nil, fmt.Errorf("%w: credential_process failed: %s", ErrAccessDenied, oneLine(proc.Err.Error()))
		}
		return nil, fmt.Errorf("%w: no credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws/credentials)",
			ErrAccessDenied)
	}
	style := os.Getenv("LUKSD_S3_ADDRESSING_STYLE")
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		// The endpoint as the SDK resolved it, from AWS_ENDPOINT_URL(_S3)
		// or a profile's endpoint_url or [services] section.
		o.UsePathStyle = o.BaseEndpoint != nil && style != "virtual" || style == "path"
		// Store.retry retries for LUKSD_S3_TIMEOUT: the SDK's own quick
		// retries inside each try must not run out of a retry budget
		// (its token bucket), which would fail a try at once.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.RateLimiter = ratelimit.None })
		// A ranged GET has no whole-object checksum to check; the SDK
		// would log that for every chunk read.
		o.DisableLogOutputChecksumValidationSkipped = true
	}, UnsignedPayloadOverHTTP), nil
}

// UnsignedPayloadOverHTTP is an option of s3.NewFromConfig: a PUT over
// plain http is signed without its body's SHA-256 (UNSIGNED-PAYLOAD),
// its CRC32 checksum header kept, as the SDK does over https (where the
// checksum is a trailer). Hashing a 4 MiB chunk took a quarter of a
// serve's CPU under sequential writes, and the store hashes it again to
// check it. The signature covers the checksum header, so a body the
// network corrupts is still refused by the store; what the hash added is
// that no one on the path could rewrite a stored chunk, and on plain
// http anyone there can rewrite what a GET returns anyway (responses are
// never signed): a network that is not trusted needs https either way.
// contrib/bench/s3raw uses it too, so that the SDK alone and luksd do
// the same work.
func UnsignedPayloadOverHTTP(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		// The operations with a body to check: the checksum middleware
		// hashes the body too unless a payload hash is set before it.
		const checksum = "AWSChecksum:ComputeInputPayloadChecksum"
		if _, ok := stack.Finalize.Get(checksum); !ok {
			return nil
		}
		return stack.Finalize.Insert(unsignedPayload{}, checksum, middleware.Before)
	})
}

// unsignedPayload sets the payload hash of a request over http to
// UNSIGNED-PAYLOAD.
type unsignedPayload struct{}

func (unsignedPayload) ID() string { return "luksd:UnsignedPayloadOverHTTP" }

func (unsignedPayload) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok && !req.IsHTTPS() {
		ctx = v4.SetPayloadHash(ctx, "UNSIGNED-PAYLOAD")
	}
	return next.HandleFinalize(ctx, in)
}

// open is blockdev.Open's backend for s3:// locations.
func open(location string, opts blockdev.OpenOptions) (blockdev.Device, error) {
	st, err := Connect(location)
	if err != nil {
		return nil, err
	}
	o, err := optionsFromEnv()
	if err != nil {
		return nil, err
	}
	o.ReadOnly, o.Exclusive = opts.ReadOnly, opts.Exclusive
	return OpenVolume(st, o)
}

// optionsFromEnv reads a volume's cache bounds and lease from the
// environment: LUKSD_S3_CACHE_MIB, LUKSD_S3_DIRTY_MIB, LUKSD_S3_UPLOADS
// and LUKSD_S3_LEASE_SECONDS (the defaults of Options where unset). A
// longer lease rides out a longer store outage without refusing writes,
// and keeps another host out longer after this one dies.
func optionsFromEnv() (Options, error) {
	var o Options
	for name, set := range map[string]func(int64){
		"LUKSD_S3_CACHE_MIB":     func(n int64) { o.CacheBytes = n << 20 },
		"LUKSD_S3_DIRTY_MIB":     func(n int64) { o.DirtyBytes = n << 20 },
		"LUKSD_S3_UPLOADS":       func(n int64) { o.Uploads = int(n) },
		"LUKSD_S3_LEASE_SECONDS": func(n int64) { o.LeaseTTL = time.Duration(n) * time.Second },
	} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("%w: %s=%q is not a positive number", ErrLocation, name, s)
			}
			set(n)
		}
	}
	return o, nil
}

// create is blockdev.Create's: a new volume in chunks of opts.ChunkSize
// (DefaultChunkSize when 0).
func create(location string, opts blockdev.CreateOptions) error {
	st, err := Connect(location)
	if err != nil {
		return err
	}
	return Create(st, opts.Size, opts.ChunkSize)
}
