package fakegithub

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	jwt "github.com/golang-jwt/jwt/v4"
)

// token is an installation access token.
type token struct {
	tenant    string
	expiresAt time.Time
}

// TokenTTL is the lifetime of an installation token, as on GitHub.
const TokenTTL = time.Hour

// authenticate checks the Authorization header: an App JWT for the token
// route, an unexpired installation token ("token X" or "Bearer X")
// everywhere else. It returns the tenant, or an error status and message.
// Called with s.mu held.
func (s *Server) authenticate(r *http.Request, route string) (tenant string, status int, msg string) {
	auth := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(auth, " ")
	cred = strings.TrimSpace(cred)
	if manifestNoAuth(route) {
		return "", 0, "" // the manifest flow: a browser form, and an unauthenticated exchange
	}
	if route == RouteListInstallations || route == RouteGetApp || isAppHookRoute(route) {
		// The App's own endpoint: a JWT, and no installation's points.
		if !strings.EqualFold(scheme, "Bearer") || cred == "" {
			return "", http.StatusUnauthorized, "A JSON web token could not be decoded"
		}
		if msg := s.verifyJWT(cred); msg != "" {
			return "", http.StatusUnauthorized, msg
		}
		return "", 0, ""
	}
	if route == RouteCreateToken {
		id := installationFromPath(r.URL.Path)
		if !strings.EqualFold(scheme, "Bearer") || cred == "" {
			return id, http.StatusUnauthorized, "A JSON web token could not be decoded"
		}
		if msg := s.verifyJWT(cred); msg != "" {
			return id, http.StatusUnauthorized, msg
		}
		return id, 0, ""
	}
	if cred == "" || !(strings.EqualFold(scheme, "token") || strings.EqualFold(scheme, "Bearer")) {
		return "", http.StatusUnauthorized, "Requires authentication"
	}
	tok := s.tokens[cred]
	if tok == nil || !s.now().Before(tok.expiresAt) {
		return "", http.StatusUnauthorized, "Bad credentials"
	}
	return tok.tenant, 0, ""
}

// verifyJWT checks an App JWT: RS256 signed by the App key, issuer = App id,
// issued-at and expiry present and at most 10 minutes apart (GitHub's rule).
// Its times are not compared with the server's clock: ghinstallation signs
// with the wall clock while tests move the server's clock.
func (s *Server) verifyJWT(raw string) string {
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		return &s.key.PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if err != nil {
		return "A JSON web token could not be decoded"
	}
	if claims.Issuer != strconv.FormatInt(s.appID, 10) {
		return "'Issuer' claim ('iss') must be the App id"
	}
	if claims.IssuedAt == nil || claims.ExpiresAt == nil {
		return "'Expiration time' claim ('exp') and 'Issued at' claim ('iat') are required"
	}
	if d := claims.ExpiresAt.Sub(claims.IssuedAt.Time); d <= 0 || d > 10*time.Minute {
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	return ""
}

// createToken mints an installation token valid for TokenTTL of the
// server's clock.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("installation_id")
	if !s.hasInstallation(id) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if _, ok := s.suspended[id]; ok {
		writeError(w, http.StatusForbidden, "This installation has been suspended")
		return
	}
	b := make([]byte, 18)
	rand.Read(b)
	tok := "ghs_" + hex.EncodeToString(b)
	exp := s.now().Add(TokenTTL)
	s.tokens[tok] = &token{tenant: id, expiresAt: exp}
	s.rec.tokens++
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           exp.Format(time.RFC3339),
		"permissions":          map[string]string{"checks": "write", "contents": "write", "issues": "write", "pull_requests": "write", "statuses": "read", "metadata": "read"},
		"repository_selection": "selected",
	})
}

// installationFromPath extracts {installation_id} from the token route's
// path (the middleware runs before the mux fills path values).
func installationFromPath(p string) string {
	parts := strings.Split(strings.TrimSuffix(p, "/"), "/")
	if len(parts) >= 2 {
		return parts[len(parts)-2]
	}
	return ""
}

func (s *Server) hasInstallation(id string) bool {
	for _, rp := range s.repos {
		if rp.tenant == id {
			return true
		}
	}
	return s.installations[id]
}

// AddInstallation declares an installation with no repository yet.
func (s *Server) AddInstallation(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installations[tenant] = true
}

// TokensIssued returns how many installation tokens were minted.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.tokens
}

// ExpireTokens makes every token issued so far invalid (401 Bad
// credentials), as if they had expired.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		t.expiresAt = time.Time{}
	}
}
