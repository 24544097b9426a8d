// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"testing"

	"github.com/macake/macake/internal/golden"
)

// TestStatusDocumentSchema pins every field of the status document
// (`macake status --json`, the socket, the page): a field renamed,
// added or retyped, here or in a type the document takes from another
// package, changes the schema, and with it must come a new
// FormatVersion and a line in the docs.
func TestStatusDocumentSchema(t *testing.T) {
	golden.Check(t, "testdata/status.schema", golden.Schema(Status{}), "the status document's wire format, format_version "+FormatVersion)
}
