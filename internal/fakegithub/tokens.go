package fakegithub

// RevokeTokens revokes every installation token minted so far for
// installation tenant, as GitHub does when an App's token is revoked or
// its installation's credentials change: requests that present one are
// answered 401 {"message": "Bad credentials", "documentation_url": ...}
// (authenticate finds no such token), while new tokens can be minted. It
// returns how many were revoked.
func (s *Server) RevokeTokens(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for tok, t := range s.tokens {
		if t.tenant == tenant {
			delete(s.tokens, tok)
			n++
		}
	}
	return n
}
