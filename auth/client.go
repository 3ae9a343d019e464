package auth

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// TokenCredentials sends a bearer token read from a file with every RPC.
// The file holds the token as the first field of its first line that is
// neither blank nor a comment, so both devca's admin.token and a line of a
// server token file work. It is re-read at most once per
// DefaultReloadInterval, so a rotated token is picked up without a restart.
// Safe for concurrent use.
//
//	creds, err := auth.NewTokenCredentials("certs/admin.token", false)
//	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tlsClient.Credentials()),
//		grpc.WithPerRPCCredentials(creds))
type TokenCredentials struct {
	path           string
	allowPlaintext bool

	mu      sync.Mutex // guards token, raw, checked
	token   string
	raw     []byte
	checked time.Time
}

var _ credentials.PerRPCCredentials = (*TokenCredentials)(nil)

// NewTokenCredentials reads the token in path. With allowPlaintext false
// (the norm) gRPC refuses to send it over a connection without TLS, where
// anyone on the path could copy it.
func NewTokenCredentials(path string, allowPlaintext bool) (*TokenCredentials, error) {
	c := &TokenCredentials{path: path, allowPlaintext: allowPlaintext}
	if err := c.reloadLocked(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *TokenCredentials) reloadLocked() error {
	c.checked = time.Now()
	raw, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if c.raw != nil && bytes.Equal(raw, c.raw) {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c.token, c.raw = strings.Fields(line)[0], raw
		return nil
	}
	return fmt.Errorf("%w: %s: no token found (want the token on the first line)", ErrTokenFile, c.path)
}

// GetRequestMetadata implements credentials.PerRPCCredentials. A file that
// became unreadable keeps the last good token in use.
func (c *TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) >= DefaultReloadInterval {
		_ = c.reloadLocked()
	}
	return map[string]string{"authorization": "Bearer " + c.token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (c *TokenCredentials) RequireTransportSecurity() bool { return !c.allowPlaintext }
