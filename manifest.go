// Package mergegate holds what belongs to the repository as a whole: the
// GitHub App manifest (app.yml), embedded so that the binary's set-up page
// offers exactly the permissions and events the file lists. The program is
// cmd/mergegate; its parts are the packages below this one.
package mergegate

import _ "embed"

// AppManifest is app.yml: the GitHub App manifest, as YAML.
//
//go:embed app.yml
var AppManifest []byte
