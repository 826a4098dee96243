//! schemathesis against GET /v1/openapi.json with a real token: see test-support/fuzz.
