package verifierv1

import _ "embed"

// openAPI is the OpenAPI (Swagger 2.0) document of the HTTP/JSON routes,
// generated from the .proto files and http.yaml by protoc-gen-openapiv2
// (scripts/generate.sh); the daemon serves it at GET /openapi.json.
//
//go:embed verifier.swagger.json
var openAPI []byte

// OpenAPI returns a copy of the generated OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }
