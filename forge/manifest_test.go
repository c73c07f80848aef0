package forge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
)

// A failed exchange says why without the code: the set-up page logs the
// error, and the code, unused, is worth the App's private key and
// webhook secret for an hour.
func TestConvertManifestErrorHidesTheCode(t *testing.T) {
	const code = "c0de5ecre7"
	hung := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hung }))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hung) }) // before Close, which waits for the handler
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name   string
		url    string
		client *http.Client
	}{
		{"refused", closed.URL, nil},
		{"timed out", slow.URL, &http.Client{Timeout: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := forge.ConvertManifest(context.Background(), tc.client, tc.url, code)
			if err == nil {
				t.Fatal("ConvertManifest: no error")
			}
			if strings.Contains(err.Error(), code) {
				t.Errorf("error %q names the code", err)
			}
			if !strings.Contains(err.Error(), "GitHub cannot be reached") {
				t.Errorf("error %q does not say GitHub cannot be reached", err)
			}
		})
	}
}
