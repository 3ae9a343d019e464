package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/slotd/slotd/auth"
	"github.com/slotd/slotd/internal/devca"
)

// BenchmarkAuthorize measures the per-RPC cost of the check, which every
// call pays: by certificate, and by token against a 100-line token file.
func BenchmarkAuthorize(b *testing.B) {
	set, err := devca.Generate(devca.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(set.TokenFile)
	if err != nil {
		b.Fatal(err)
	}
	for range 97 {
		tok, _ := devca.NewToken()
		raw = append(raw, []byte(tok+" read\n")...)
	}
	if err := os.WriteFile(set.TokenFile, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	az, err := auth.New(auth.Config{Policy: testPolicy(), ClientCerts: true, TokenFile: set.TokenFile})
	if err != nil {
		b.Fatal(err)
	}
	kp, err := tls.LoadX509KeyPair(set.AdminCert, set.AdminKey)
	if err != nil {
		b.Fatal(err)
	}
	certCtx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{kp.Leaf}}}}})
	tok, err := os.ReadFile(set.AdminToken)
	if err != nil {
		b.Fatal(err)
	}
	tokCtx := metadata.NewIncomingContext(context.Background(),
		metadata.Pairs("authorization", "Bearer "+strings.TrimSpace(string(tok))))

	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"cert", certCtx}, {"token100", tokCtx}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := az.Authorize(bc.ctx, adminMethod); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
