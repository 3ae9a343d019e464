package tlsconf

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultReloadInterval is how often, at most, the files are re-read when
// Config.ReloadInterval is zero.
const DefaultReloadInterval = 5 * time.Second

var (
	// ErrInvalid is returned for a Config that cannot work.
	ErrInvalid = errors.New("tlsconf: invalid config")
	// ErrLoad is returned when a certificate, key or CA file cannot be used.
	ErrLoad = errors.New("tlsconf: cannot load")
)

// ClientAuth says whether a server asks its clients for certificates.
type ClientAuth string

const (
	// ClientAuthNone asks for no client certificate (TLS only).
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequest asks for one and verifies it against CAFile when
	// given, but lets clients without one in (they may use a token).
	ClientAuthRequest ClientAuth = "request"
	// ClientAuthRequire refuses the handshake without a client certificate
	// that verifies against CAFile (mutual TLS).
	ClientAuthRequire ClientAuth = "require"
)

// Config names the PEM files of one TLS endpoint (a listener or a client).
// The zero value means TLS is off (see Enabled).
type Config struct {
	// CertFile and KeyFile hold the endpoint's certificate chain and private
	// key. Required for a server; optional for a client (its certificate
	// for mutual TLS).
	CertFile, KeyFile string
	// CAFile holds the CA certificates that verify the peer. A server uses
	// it for client certificates; a client for the server's certificate
	// (empty: the system roots).
	CAFile string
	// ClientAuth is for servers only. Empty means ClientAuthRequest when
	// CAFile is set (certificates verified when presented, so tokens still
	// work) and ClientAuthNone otherwise.
	ClientAuth ClientAuth
	// ServerName is for clients only: the name the server's certificate must
	// carry when it differs from the dialed host.
	ServerName string
	// ReloadInterval bounds how often the files are re-read on use (on a
	// handshake); default DefaultReloadInterval. Replace files by rename so
	// a reader never sees half a file; a set that fails to load is logged
	// and the previous one stays in use.
	ReloadInterval time.Duration
	// Logger receives reloads and reload failures; default: discard.
	Logger *slog.Logger
}

// Enabled reports whether any file is configured, i.e. whether TLS is on.
func (c Config) Enabled() bool {
	return c.CertFile != "" || c.KeyFile != "" || c.CAFile != ""
}

// Validate reports a Config that cannot work, in one line naming the field.
func (c Config) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%w: cert file %q and key file %q must be given together", ErrInvalid, c.CertFile, c.KeyFile)
	}
	switch c.ClientAuth {
	case "", ClientAuthNone:
	case ClientAuthRequest, ClientAuthRequire:
		if c.CAFile == "" {
			return fmt.Errorf("%w: client auth %q needs a CA file to verify client certificates", ErrInvalid, c.ClientAuth)
		}
	default:
		return fmt.Errorf("%w: client auth %q is not one of none, request, require", ErrInvalid, c.ClientAuth)
	}
	if c.ReloadInterval < 0 {
		return fmt.Errorf("%w: reload interval %v is negative", ErrInvalid, c.ReloadInterval)
	}
	return nil
}

// VerifiesClientCerts reports whether a server with this Config asks for
// and verifies client certificates (ClientAuth request or require, including
// the default with a CAFile): then roles may come from them
// (auth.Config.ClientCerts).
func (c Config) VerifiesClientCerts() bool { return c.clientAuth() != ClientAuthNone }

// clientAuth resolves the empty default.
func (c Config) clientAuth() ClientAuth {
	if c.ClientAuth != "" {
		return c.ClientAuth
	}
	if c.CAFile != "" {
		return ClientAuthRequest
	}
	return ClientAuthNone
}

func (c *Config) setDefaults() {
	if c.ReloadInterval == 0 {
		c.ReloadInterval = DefaultReloadInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
