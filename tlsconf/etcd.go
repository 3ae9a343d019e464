package tlsconf

import (
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// ConfigureEtcd makes an etcd client use these files. Endpoints must be
// https:// URLs. The credentials go in as the last dial option, which the
// etcd client applies after its own, so every new connection (including
// reconnects after an etcd member restarts) uses the current certificate
// and CA pool.
//
//	cc := clientv3.Config{Endpoints: []string{"https://127.0.0.1:2379"}}
//	tlsClient.ConfigureEtcd(&cc)
//	cli, err := clientv3.New(cc)
func (c *Client) ConfigureEtcd(cc *clientv3.Config) {
	cc.TLS = c.TLSConfig()
	cc.DialOptions = append(cc.DialOptions, grpc.WithTransportCredentials(c.Credentials()))
}

// EtcdServerTLSInfo maps a listener Config onto an embedded etcd member's
// client (or peer) TLS settings. etcd re-reads these files on every
// handshake itself. etcd has no "request" mode: with ClientAuthRequest or
// ClientAuthNone it does not ask for client certificates at all, and anyone
// who reaches its port controls the directory; run it with ClientAuthRequire
// whenever it listens beyond loopback.
//
//	ecfg := embed.NewConfig()
//	ecfg.ClientTLSInfo = tlsCfg.EtcdServerTLSInfo()
func (c Config) EtcdServerTLSInfo() transport.TLSInfo {
	return transport.TLSInfo{
		CertFile:       c.CertFile,
		KeyFile:        c.KeyFile,
		TrustedCAFile:  c.CAFile,
		ClientCertAuth: c.clientAuth() == ClientAuthRequire,
	}
}
