package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// DefaultValidity is how long issued certificates last when Leaf.ValidFor is zero.
const DefaultValidity = 365 * 24 * time.Hour

// backdate tolerates clocks that are a little behind the one that issued.
const backdate = time.Hour

// ErrInvalid is returned for a Leaf or Options that cannot produce a certificate.
var ErrInvalid = errors.New("devca: invalid request")

// CA is a certificate authority held in memory. Safe for concurrent use.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// KeyPair is an issued certificate with its private key, PEM encoded.
type KeyPair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Leaf describes a certificate to issue.
type Leaf struct {
	CommonName string
	// DNSNames and IPAddresses are the names a server certificate is valid for.
	DNSNames    []string
	IPAddresses []net.IP
	// URIs are URI SANs; package auth reads roles from spiffe://<td>/role/<role>.
	URIs []*url.URL
	// OrganizationalUnits go into the subject; auth also reads "<td>/role/<role>" there.
	OrganizationalUnits []string
	// Server and Client select the extended key usages; at least one is required.
	Server, Client bool
	// ValidFor is the lifetime from now; default DefaultValidity. A negative
	// value issues a certificate that has already expired (for tests).
	ValidFor time.Duration
}

// NewCA creates a self-signed CA with a fresh P-256 key, valid for ten years.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devca: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"slotd development"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(10 * DefaultValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("devca: self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devca: parse CA: %w", err)
	}
	return &CA{Cert: cert, CertPEM: pemEncode("CERTIFICATE", der), key: key}, nil
}

// KeyPEM returns the CA's private key (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) {
	return keyPEM(ca.key)
}

// Issue signs a new certificate for l with a fresh P-256 key.
func (ca *CA) Issue(l Leaf) (*KeyPair, error) {
	if !l.Server && !l.Client {
		return nil, fmt.Errorf("%w: leaf %q needs Server or Client usage", ErrInvalid, l.CommonName)
	}
	if l.CommonName == "" {
		return nil, fmt.Errorf("%w: leaf needs a common name", ErrInvalid)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devca: generate key for %q: %w", l.CommonName, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	validFor := l.ValidFor
	if validFor == 0 {
		validFor = DefaultValidity
	}
	now := time.Now()
	notBefore, notAfter := now.Add(-backdate), now.Add(validFor)
	if validFor < 0 {
		// An expired certificate must still have NotBefore < NotAfter.
		notBefore = notAfter.Add(-24 * time.Hour)
	}
	var eku []x509.ExtKeyUsage
	if l.Server {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         l.CommonName,
			Organization:       []string{"slotd development"},
			OrganizationalUnit: l.OrganizationalUnits,
		},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: eku,
		DNSNames:    l.DNSNames,
		IPAddresses: l.IPAddresses,
		URIs:        l.URIs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("devca: sign %q: %w", l.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devca: parse %q: %w", l.CommonName, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, CertPEM: pemEncode("CERTIFICATE", der), KeyPEM: kp}, nil
}

// WriteFiles writes the certificate (0644) and the key (0600). Each file is
// replaced by a rename, so a reader never sees half a file.
func (kp *KeyPair) WriteFiles(certPath, keyPath string) error {
	if err := WriteFileAtomic(certPath, kp.CertPEM, 0o644); err != nil {
		return err
	}
	return WriteFileAtomic(keyPath, kp.KeyPEM, 0o600)
}

// WriteFileAtomic writes data to a temporary file in path's directory and
// renames it over path.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("devca: write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, perm)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("devca: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("devca: write %s: %w", path, err)
	}
	return nil
}

// LoadCA reads a CA written by Generate (its certificate and PKCS #8 key),
// to issue more certificates from it.
func LoadCA(certPath, keyPath string) (*CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("devca: %w", err)
	}
	keyData, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("devca: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyData)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: %s and %s are not a PEM certificate and a PEM PKCS #8 key", ErrInvalid, certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devca: %s: %w", certPath, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devca: %s: %w", keyPath, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: %s is not the CA of %s", ErrInvalid, keyPath, certPath)
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: key}, nil
}

// NodeURI is the URI SAN that binds a certificate to store node id in
// trustDomain; it must match package auth's rule.
func NodeURI(trustDomain, id string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/node/" + id}
}

// RoleURI is the URI SAN that grants role in trustDomain; it must match
// package auth's rule (auth's tests check that it does).
func RoleURI(trustDomain, role string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/role/" + role}
}

func newSerial() (*big.Int, error) {
	// 128 random bits: serials must be unique per CA and unpredictable.
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("devca: serial: %w", err)
	}
	return s, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("devca: encode key: %w", err)
	}
	return pemEncode("PRIVATE KEY", der), nil
}

func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
