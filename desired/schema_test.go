// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"testing"

	"github.com/macake/macake/internal/golden"
)

// TestLinksDocumentSchema pins every field of the links document
// (`macake links --json`): a field renamed, added or retyped, here or in
// a type it takes from another package, changes the schema, and with it
// must come a new LinksFormatVersion.
func TestLinksDocumentSchema(t *testing.T) {
	golden.Check(t, "testdata/links.schema", golden.Schema(LinksReport{}), "the links document's wire format, format_version "+LinksFormatVersion)
}
