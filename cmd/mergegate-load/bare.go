package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mergegate/mergegate/internal/loadgen"
	"github.com/mergegate/mergegate/webhook"
)

// loadBare serves the bare handler on loopback and loads it.
func loadBare(ctx context.Context, f config, gen *loadgen.Generator, all *latHist) (targetReport, error) {
	secrets, err := webhook.ParseSecrets(f.secret)
	if err != nil {
		return targetReport{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return targetReport{}, err
	}
	srv := &http.Server{Handler: bareHandler(secrets), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // closed below
	defer srv.Close()
	return runLoad(ctx, f, gen, []string{"http://" + ln.Addr().String() + "/webhook"}, nil, all)
}

// bareHandler checks the HMAC and answers 202: the floor of any webhook
// receiver that reads the body and verifies it.
func bareHandler(secrets webhook.Secrets) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		if r.ContentLength > 0 {
			buf.Grow(int(r.ContentLength))
		}
		if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, webhook.MaxBody)); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if webhook.Verify(secrets, buf.Bytes(), r.Header.Get(webhook.SignatureHeader)) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"result":"stored"}`+"\n") //nolint:errcheck
	})
}
