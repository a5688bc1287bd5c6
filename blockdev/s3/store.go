package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Store is where one volume's objects live: a bucket and a key prefix,
// reached through an SDK client.
type Store struct {
	api    *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	// Timeout bounds one operation: a store that does not answer, or
	// fails, is tried again with backoff and jitter until then (the SDK's
	// own few quick retries inside each try); then the operation fails.
	Timeout time.Duration
	ctx     context.Context // of every request (Background when nil)
}

// DefaultTimeout bounds one store operation, its retries included.
const DefaultTimeout = 60 * time.Second

// NewStore returns the store of the volume under prefix in bucket.
func NewStore(api *s3.Client, bucket, prefix string) *Store {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Store{api: api, bucket: bucket, prefix: prefix, Timeout: DefaultTimeout}
}

// until returns s with its operations' retries ending by deadline at
// the latest.
func (s *Store) until(deadline time.Time) *Store {
	own := *s
	own.Timeout = min(s.Timeout, time.Until(deadline))
	return &own
}

// within returns s with its operations ending when ctx ends.
func (s *Store) within(ctx context.Context) *Store {
	own := *s
	own.ctx = ctx
	return &own
}

// String names the store as a location: s3://bucket/prefix.
func (s *Store) String() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// errNotFound: the object does not exist.
var errNotFound = errors.New("no such object")

// errPrecondition: a conditional write found the object not as required.
var errPrecondition = errors.New("precondition failed")

func (s *Store) key(name string) *string { return aws.String(s.prefix + name) }

// retry runs one operation on object name until it succeeds, fails for
// good (the store answered no: a 4xx but a timeout or throttling), or
// s.Timeout has passed.
func (s *Store) retry(op, name string, try func(ctx context.Context) error) error {
	parent := s.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, s.Timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		err := s.error(op, name, try(ctx))
		if err == nil || final(err) {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait || ctx.Err() != nil {
			return err
		}
		time.Sleep(wait)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// final reports whether err is the store's answer, or a certificate we
// do not trust: not worth a retry.
func final(err error) bool {
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return true
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) {
		code := resp.HTTPStatusCode()
		return code >= 400 && code < 500 && code != 408 && code != 429
	}
	return false
}

// get reads all of object name. A missing object is errNotFound.
func (s *Store) get(name string) ([]byte, error) {
	b, _, err := s.getVersion(name)
	return b, err
}

// getVersion reads all of object name and its ETag.
func (s *Store) getVersion(name string) (data []byte, etag string, err error) {
	err = s.retry("get", name, func(ctx context.Context) error {
		out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: s.key(name)})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		buf := bytes.NewBuffer(make([]byte, 0, max(aws.ToInt64(out.ContentLength), 0)))
		if _, err := buf.ReadFrom(out.Body); err != nil {
			return err
		}
		data, etag = buf.Bytes(), aws.ToString(out.ETag)
		return nil
	})
	return data, etag, err
}

// readInto reads object name into p; an object shorter than p leaves the
// rest zero, one longer fills p. A missing object is errNotFound. The
// body is read to its end whatever its length: the SDK checks it
// against the checksum its PUT stored only there, and a mismatch fails
// the try.
func (s *Store) readInto(name string, p []byte) error {
	return s.retry("get", name, func(ctx context.Context) error {
		out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: s.key(name)})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		n, err := io.ReadFull(out.Body, p)
		clear(p[n:]) // a try that failed may have left bytes there
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
			return nil // the body ended, checked
		case err != nil:
			return err
		}
		// p is full. io.ReadFull drops an error that comes with the
		// bytes that fill it, the checksum's among them: read on to
		// the end (an io.EOF there, checked, is what a body as long as
		// p gives; a longer one is read through).
		_, err = io.Copy(io.Discard, out.Body)
		return err
	})
}

// put writes object name. With ifAbsent it fails with errPrecondition
// when the object exists (If-None-Match: *).
func (s *Store) put(name string, data []byte, ifAbsent bool) error {
	cond := ""
	if ifAbsent {
		cond = "*"
	}
	_, err := s.putIf(name, data, cond, "")
	return err
}

// putIf writes object name when it is absent (ifNoneMatch "*") or holds
// the version ifMatch names (an ETag), failing with errPrecondition
// otherwise; with neither, whatever it holds. It returns the new ETag.
func (s *Store) putIf(name string, data []byte, ifNoneMatch, ifMatch string) (etag string, err error) {
	err = s.retry("put", name, func(ctx context.Context) error {
		in := &s3.PutObjectInput{Bucket: &s.bucket, Key: s.key(name), Body: bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data)))}
		if ifNoneMatch != "" {
			in.IfNoneMatch = aws.String(ifNoneMatch)
		}
		if ifMatch != "" {
			in.IfMatch = aws.String(ifMatch)
		}
		out, err := s.api.PutObject(ctx, in)
		if err == nil {
			etag = aws.ToString(out.ETag)
		}
		return err
	})
	return etag, err
}

// delete removes object name; a missing one is no error.
func (s *Store) delete(name string) error {
	return s.retry("delete", name, func(ctx context.Context) error {
		_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.key(name)})
		return err
	})
}

// any reports whether an object whose name starts with namePrefix exists.
func (s *Store) any(namePrefix string) (found bool, err error) {
	err = s.retry("list", namePrefix, func(ctx context.Context) error {
		out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: s.key(namePrefix),
			MaxKeys: aws.Int32(1)})
		if err == nil {
			found = len(out.Contents) > 0
		}
		return err
	})
	return found, err
}

// list returns the names of the objects whose name starts with
// namePrefix.
func (s *Store) list(namePrefix string) ([]string, error) {
	var names []string
	var token *string
	for {
		err := s.retry("list", namePrefix, func(ctx context.Context) error {
			out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: s.key(namePrefix),
				ContinuationToken: token})
			if err != nil {
				return err
			}
			for _, o := range out.Contents {
				names = append(names, strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
			}
			token = out.NextContinuationToken
			if !aws.ToBool(out.IsTruncated) {
				token = nil
			}
			return nil
		})
		if err != nil || token == nil {
			return names, err
		}
	}
}

// StoreError is a failed store request.
type StoreError struct {
	Op, Location string
	Err          error
}

// Error is one line: the store's own error code and message where it
// answered, else the SDK's error.
func (e *StoreError) Error() string {
	msg := e.Err.Error()
	var api smithy.APIError
	if errors.As(e.Err, &api) {
		msg = api.ErrorCode()
		if m := api.ErrorMessage(); m != "" {
			msg += ": " + m
		}
	}
	if errors.Is(e.Err, ErrAccessDenied) {
		msg = "access denied (" + msg + ")"
	}
	return e.Op + " " + e.Location + ": " + oneLine(msg)
}

// oneLine joins a message's lines (the SDK's errors may hold several) and
// spaces: luksd reports one line, as cryptsetup.
func oneLine(msg string) string { return strings.Join(strings.Fields(msg), " ") }

func (e *StoreError) Unwrap() error { return e.Err }

// error wraps a request's error, mapping the answers the callers act on
// (missing object, failed precondition) to errNotFound and errPrecondition.
func (s *Store) error(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			err = fmt.Errorf("%w: %w", errNotFound, err)
		case "PreconditionFailed", "ConditionalRequestConflict":
			err = fmt.Errorf("%w: %w", errPrecondition, err)
		case "AccessDenied", "Forbidden", "SignatureDoesNotMatch", "InvalidAccessKeyId",
			"InvalidToken", "ExpiredToken", "AllAccessDisabled":
			err = fmt.Errorf("%w: %w", ErrAccessDenied, err)
		}
	}
	return &StoreError{Op: op, Location: "s3://" + s.bucket + "/" + s.prefix + name, Err: err}
}
