// Command devca writes the development CA, certificates and tokens that
// `make certs` puts into ./certs (see package devca for the file names).
//
//	go run ./cmd/devca -dir certs [-force] [-trust-domain slotd] [-nodes n1,n2]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/slotd/slotd/internal/devca"
)

func main() {
	var o devca.Options
	flag.StringVar(&o.Dir, "dir", "certs", "output directory")
	flag.StringVar(&o.TrustDomain, "trust-domain", devca.DefaultTrustDomain, "trust domain in role URIs (spiffe://<domain>/role/<role>)")
	flag.BoolVar(&o.Force, "force", false, "regenerate even if a complete set exists")
	nodes := flag.String("nodes", "", "comma-separated store node ids to issue node-bound store certificates for (store-<id>.pem)")
	flag.Parse()
	if *nodes != "" {
		o.Nodes = strings.Split(*nodes, ",")
	}

	set, err := devca.Generate(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if set.Reused {
		fmt.Printf("%s: complete development set present; kept it (-force regenerates)\n", o.Dir)
		return
	}
	fmt.Printf("%s: wrote development CA, certificates and tokens (not for production)\n", o.Dir)
	for _, f := range set.Files() {
		fmt.Println("  " + f)
	}
	for _, id := range o.Nodes {
		cert, _ := set.NodeCert(id)
		fmt.Println("  " + cert + " (store node " + id + ")")
	}
}
