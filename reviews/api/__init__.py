"""The REST API of review passes (DRF, documented with OpenAPI at /api/schema/)."""
