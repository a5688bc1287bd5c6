package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Store is where one volume's objects live: a bucket and a key prefix,
// reached through an SDK client.
type Store struct {
	api    *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	// Timeout bounds one request, retries included.
	Timeout time.Duration
}

// DefaultTimeout bounds one store request, its retries included.
const DefaultTimeout = 60 * time.Second

// NewStore returns the store of the volume under prefix in bucket.
func NewStore(api *s3.Client, bucket, prefix string) *Store {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Store{api: api, bucket: bucket, prefix: prefix, Timeout: DefaultTimeout}
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

// get reads length bytes at off of object name (all of it when length is
// 0). A missing object is errNotFound.
func (s *Store) get(name string, off, length int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: s.key(name)}
	if length > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
	}
	out, err := s.api.GetObject(ctx, in)
	if err != nil {
		return nil, s.error("get", name, err)
	}
	defer out.Body.Close()
	buf := bytes.NewBuffer(make([]byte, 0, max(length, aws.ToInt64(out.ContentLength))))
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, s.error("get", name, err)
	}
	return buf.Bytes(), nil
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
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: s.key(name), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data)))}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	out, err := s.api.PutObject(ctx, in)
	if err != nil {
		return "", s.error("put", name, err)
	}
	return aws.ToString(out.ETag), nil
}

// getVersion reads all of object name and its ETag.
func (s *Store) getVersion(name string) (data []byte, etag string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: s.key(name)})
	if err != nil {
		return nil, "", s.error("get", name, err)
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, "", s.error("get", name, err)
	}
	return buf.Bytes(), aws.ToString(out.ETag), nil
}

// delete removes object name; a missing one is no error.
func (s *Store) delete(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.key(name)})
	return s.error("delete", name, err)
}

// any reports whether an object whose name starts with namePrefix exists.
func (s *Store) any(namePrefix string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: s.key(namePrefix),
		MaxKeys: aws.Int32(1)})
	if err != nil {
		return false, s.error("list", namePrefix, err)
	}
	return len(out.Contents) > 0, nil
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
	return e.Op + " " + e.Location + ": " + msg
}

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
